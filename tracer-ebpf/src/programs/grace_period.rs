//! The grace-period waits: `synchronize_rcu` and `synchronize_srcu`, and their expedited
//! forms. While userspace attaches, their entries and returns are counted in `SETTLE`
//! (`crate::record::settle`), so it can tell when the waits its attaching caused are over.

use tracer_common::Probe;

function_probe!(
    Probe::SynchronizeSrcu,
    1,
    synchronize_srcu_entry,
    synchronize_srcu_exit,
    synchronize_srcu_fentry,
    synchronize_srcu_fexit
);
function_probe!(
    Probe::SynchronizeSrcuExpedited,
    1,
    synchronize_srcu_expedited_entry,
    synchronize_srcu_expedited_exit,
    synchronize_srcu_expedited_fentry,
    synchronize_srcu_expedited_fexit
);
function_probe!(
    Probe::SynchronizeRcu,
    0,
    synchronize_rcu_entry,
    synchronize_rcu_exit,
    synchronize_rcu_fentry,
    synchronize_rcu_fexit
);
function_probe!(
    Probe::SynchronizeRcuExpedited,
    0,
    synchronize_rcu_expedited_entry,
    synchronize_rcu_expedited_exit,
    synchronize_rcu_expedited_fentry,
    synchronize_rcu_expedited_fexit
);
