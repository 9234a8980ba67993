# The guest half of `cargo xtask test`, run by /init in the test VM. Every workload
# has counts the kernel's code fixes; the host (xtask/src/vm_tests.rs) asserts them.
#
# Each workload runs twice: once under the kernel's own kprobe events (tracefs), which
# proves the expected counts independently of tracer, then under `tracer capture`.
# Results go to /dev/ttyS1 as `=== FILE name ===` ... `=== END name ===` blocks.

results=/dev/ttyS1
tracing=/sys/kernel/tracing

# emit NAME FILE: send FILE to the host as NAME.
emit() {
    {
        echo "=== FILE $1 ==="
        cat "$2"
        # Keep the end marker on its own line.
        [ -n "$(tail -c1 "$2")" ] && echo
        echo "=== END $1 ==="
    } > "$results"
}

# The workloads, one per capture so counts don't mix.
rmdir_workload='cd /tmp/rmdir && i=0; while [ $i -lt 200 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done'
unlink_workload='cd /mnt/ext2/kept && i=0; while [ $i -lt 100 ]; do rm f$i || exit 1; i=$((i+1)); done'
tmpfs_workload='i=0; while [ $i -lt 50 ]; do mount -t tmpfs none /mnt/t && umount /mnt/t || exit 1; i=$((i+1)); done'

# reference NAME WORKLOAD SYMBOL...: hit counts of kprobe events on SYMBOLs around one
# run of WORKLOAD, as `symbol hits` lines (a symbol this kernel lacks is left out).
reference() {
    name=$1 workload=$2
    shift 2
    for sym in "$@"; do
        echo "p:ref_$sym $sym" >> $tracing/kprobe_events 2>/dev/null
    done
    echo 1 > $tracing/events/kprobes/enable
    sh -c "$workload" > /tmp/$name.ref.log 2>&1
    echo "exit $?" >> /tmp/$name.ref.log
    echo 0 > $tracing/events/kprobes/enable
    sed -n 's/^ *ref_\([^ ]*\) *\([0-9]*\) .*/\1 \2/p' $tracing/kprobe_profile > /tmp/$name.ref
    echo > $tracing/kprobe_events
    emit $name.ref /tmp/$name.ref
    emit $name.ref.log /tmp/$name.ref.log
}

# capture NAME WORKLOAD: one run of WORKLOAD under `tracer capture`. A capture that
# hangs fails its own case (exit 143) instead of the whole VM's timeout.
capture() {
    name=$1 workload=$2
    timeout 300 tracer capture --format json -o /tmp/$name.json -- sh -c "$workload" > /tmp/$name.log 2>&1
    echo $? > /tmp/$name.rc
    emit $name.rc /tmp/$name.rc
    emit $name.log /tmp/$name.log
    [ -f /tmp/$name.json ] && emit $name.json /tmp/$name.json
}

echo "suite: uname"
uname -r > /tmp/uname
emit uname /tmp/uname

echo "suite: rmdir (200 mkdir + rmdir)"
mkdir -p /tmp/rmdir
reference rmdir "$rmdir_workload" vfs_rmdir d_delete
capture rmdir "$rmdir_workload"

echo "suite: unlink (100 unlinks in a kept directory on ext2 over loop)"
# ext2 keeps negative dentries; tmpfs, the root here, drops them at once.
{
    { [ ! -f /lib/modules/loop.ko ] || insmod /lib/modules/loop.ko; } &&
        dd if=/dev/zero of=/tmp/ext2.img bs=1M count=16 2>&1 &&
        mke2fs -F -q /tmp/ext2.img &&
        mkdir -p /mnt/ext2 &&
        mount -o loop /tmp/ext2.img /mnt/ext2 &&
        mkdir -p /mnt/ext2/kept
} > /tmp/ext2.log 2>&1
echo "exit $?" >> /tmp/ext2.log
emit ext2.log /tmp/ext2.log
make_files='cd /mnt/ext2/kept && i=0; while [ $i -lt 100 ]; do touch f$i || exit 1; i=$((i+1)); done'
if sh -c "$make_files"; then
    reference unlink "$unlink_workload" d_delete vfs_unlink
    sh -c "$make_files"
    capture unlink "$unlink_workload"
fi

echo "suite: tmpfs (50 tmpfs mount + umount)"
mkdir -p /mnt/t
reference tmpfs "$tmpfs_workload" unregister_shrinker shrinker_free synchronize_srcu synchronize_rcu_expedited
capture tmpfs "$tmpfs_workload"

echo "suite: done"
