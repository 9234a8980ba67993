# The start of the guest half of `cargo xtask test`: what the suite's cases share. The
# script the test VM runs is this, then each case's workload in turn, each after its
# heading (xtask/src/testing/suite/cases/: a case's workload and its judge in one place).
# Every workload has counts the kernel's code fixes; the host asserts them.
#
# Most workloads run under the kernel's own kprobe events (tracefs), which proves the
# expected counts independently of tracer, then under `tracer capture --attach kprobe`
# and `--attach fentry` (files NAME_kprobe, NAME_fentry), and under bpftrace.
# Results go to the host through `emit` (/bin/emit: framed blocks on the second serial port).

tracing=/sys/kernel/tracing
# Where vfs_rmdir's calls arrive, as tracer chooses: its split-off body where the compiler
# made one (Debian's 5.10: do_rmdir calls vfs_rmdir.part.0 directly), else vfs_rmdir.
rmdir_sym=vfs_rmdir
if [ "$(grep -c ' vfs_rmdir\.part\.[0-9]*$' /proc/kallsyms)" = 1 ]; then
    rmdir_sym=$(sed -n 's/.* \(vfs_rmdir\.part\.[0-9]*\)$/\1/p' /proc/kallsyms)
fi

# The prefix of this architecture's syscall wrappers, as kprobes see them. arm64 has no
# rmdir(2), unlink(2) or mkdir(2), only unlinkat(2) and mkdirat(2); its kernel builds
# __arm64_sys_rmdir all the same, and nothing calls it.
case $(uname -m) in
aarch64) sys=__arm64_sys_ ;;
*) sys=__x64_sys_ ;;
esac

# The workloads run again under bpftrace, one per capture so counts don't mix.
rmdir_workload='cd /tmp/rmdir && i=0; while [ $i -lt 200 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done'
unlink_workload='cd /mnt/ext2/kept && i=0; while [ $i -lt 100 ]; do rm f$i || exit 1; i=$((i+1)); done'
tmpfs_workload='i=0; while [ $i -lt 50 ]; do mount -t tmpfs none /mnt/t && umount /mnt/t || exit 1; i=$((i+1)); done'
# The 100 files the unlink workload removes.
make_files='cd /mnt/ext2/kept && i=0; while [ $i -lt 100 ]; do touch f$i || exit 1; i=$((i+1)); done'
# Each watch is removed only once inotifywait says it is set up: a fixed 0.3 s once killed
# a starved VM's inotifywait before it had added its watch, and that run's reference counted
# 8 reaper runs, not 10. After each watch is gone, a second for the kernel worker that frees
# its connector (and waits for SRCU) to run before the next is queued: were two queued
# before it ran, one run would free both and the runs counted would differ between runs.
srcu_workload='i=0; while [ $i -lt 5 ]; do rm -f /tmp/iw.err; /usr/bin/inotifywait -e delete /tmp/watched > /dev/null 2> /tmp/iw.err & p=$!; j=0; while [ $j -lt 600 ] && ! grep -q established /tmp/iw.err 2>/dev/null; do sleep 0.1; j=$((j+1)); done; kill $p; wait $p; sleep 1; i=$((i+1)); done; exit 0'

# half.sh CGROUP DIR N: N mkdir + rmdir in /tmp/DIR, from cgroup /CGROUP (the loop moves
# itself there before its first mkdir).
half='echo $$ > /sys/fs/cgroup/$1/cgroup.procs && cd /tmp/$2 && i=0; while [ $i -lt $3 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done'
echo "$half" > /tmp/half.sh

# hex H: a container id of 64 hex digits, H (8 digits) eight times.
hex() { echo "$1$1$1$1$1$1$1$1"; }

# reference NAME WORKLOAD SYMBOL...: hit counts of kprobe events on SYMBOLs around one
# run of WORKLOAD, as `symbol hits` lines (a symbol this kernel lacks is left out).
reference() {
    name=$1 workload=$2
    shift 2
    for sym in "$@"; do
        # Events are named by the function, without a clone's suffix.
        echo "p:ref_${sym%%.*} $sym" >> $tracing/kprobe_events 2>/dev/null
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

# capture NAME WORKLOAD [TRACER-ARGS...]: one run of WORKLOAD under `tracer capture`. A
# capture that hangs fails its own case (exit 143) instead of the whole VM's timeout.
capture() {
    name=$1 workload=$2
    shift 2
    timeout 300 tracer capture "$@" --format json -o /tmp/$name.json -- sh -c "$workload" > /tmp/$name.log 2>&1
    echo $? > /tmp/$name.rc
    emit $name.rc /tmp/$name.rc
    emit $name.log /tmp/$name.log
    [ -f /tmp/$name.json ] && emit $name.json /tmp/$name.json
}

# bt NAME WORKLOAD PROGRAM: bpftrace's maps after one run of WORKLOAD.
bt() {
    echo "$2" > /tmp/$1.sh
    timeout 300 /usr/bin/bpftrace -e "$3" -c "sh /tmp/$1.sh" > /tmp/$1.bt 2>&1
    echo "exit $?" >> /tmp/$1.bt
    emit $1.bt /tmp/$1.bt
}

# wait_for FILE TEXT: until TEXT shows in FILE, 120 s at most.
wait_for() {
    i=0
    while [ $i -lt 1200 ] && ! grep -q "$2" "$1" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
}

# say TEXT: a case's heading on the console, with the guest's uptime (where the minutes go).
say() { echo "suite: [$(cut -d' ' -f1 /proc/uptime) s] $*"; }
