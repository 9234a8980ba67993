#!/bin/busybox sh
# traced-funcs: the functions tracer probes, one per line, by the exact names this kernel
# has (bpftrace attaches by name and fails outright on a missing one): shrinker_free
# replaced unregister_shrinker in 6.7. Installed as /bin/traced-funcs.
for f in vfs_rmdir d_delete shrink_dcache_parent namespace_unlock deactivate_locked_super \
    synchronize_rcu synchronize_rcu_expedited synchronize_srcu synchronize_srcu_expedited \
    unregister_shrinker shrinker_free; do
    if grep -q " [tT] $f\$" /proc/kallsyms; then echo $f; fi
done
