//! Fidelity tests.
