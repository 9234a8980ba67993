//! Work of attaching done on a thread of its own while the caller goes on: the kernel's
//! symbols read and the kernel's BTF parsed (each seconds in a small VM under emulation)
//! while the object loads.

use std::thread::{Scope, ScopedJoinHandle};

/// `f` started on a thread named `name` of `scope`, to be had by [`joined`]; `None` when no
/// thread could be started (the caller then runs it itself).
pub(crate) fn beside<'scope, T: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> Option<ScopedJoinHandle<'scope, T>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn_scoped(scope, f)
        .ok()
}

/// What [`beside`] started, once done, or `f`'s value where it could not start: a panic on
/// the thread goes on here.
pub(crate) fn joined<T>(started: Option<ScopedJoinHandle<'_, T>>, f: impl FnOnce() -> T) -> T {
    match started {
        Some(handle) => handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        None => f(),
    }
}
