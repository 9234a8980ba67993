#![no_std]
// Lets the workspace treat this crate as a library; the programs are the binary (main.rs).
