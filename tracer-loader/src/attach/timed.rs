//! How long each step of attaching took, in the debug log (`RUST_LOG=debug`): where a start
//! is slow (a verifier that explores a program for long, a kernel slow to list its
//! symbols), the log says which step.

/// `f`'s value; how long it took goes to the debug log as `attaching: WHAT took N ms`.
pub(crate) fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let begun = std::time::Instant::now();
    let value = f();
    log::debug!("attaching: {what} took {} ms", begun.elapsed().as_millis());
    value
}
