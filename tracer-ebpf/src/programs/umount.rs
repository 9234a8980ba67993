//! What a umount runs that waits for grace periods: the mount namespace's unlock, and the
//! superblock's teardown with its shrinker's (`unregister_shrinker` before Linux 6.7,
//! `shrinker_free` since).

use tracer_common::Probe;

function_probe!(
    Probe::UnregisterShrinker,
    1,
    unregister_shrinker_entry,
    unregister_shrinker_exit,
    unregister_shrinker_fentry,
    unregister_shrinker_fexit
);
function_probe!(
    Probe::ShrinkerFree,
    1,
    shrinker_free_entry,
    shrinker_free_exit,
    shrinker_free_fentry,
    shrinker_free_fexit
);
function_probe!(
    Probe::DeactivateLockedSuper,
    1,
    deactivate_locked_super_entry,
    deactivate_locked_super_exit,
    deactivate_locked_super_fentry,
    deactivate_locked_super_fexit
);
function_probe!(
    Probe::NamespaceUnlock,
    0,
    namespace_unlock_entry,
    namespace_unlock_exit,
    namespace_unlock_fentry,
    namespace_unlock_fexit
);
