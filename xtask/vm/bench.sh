# The guest half of `cargo xtask bench startup|overhead`, run by /init in the VM with
# MODE (startup or overhead) and RUNS set. The host (xtask/src/bench/startup.rs) computes the
# medians and ratios.
#
# Timing: every instant is a line written to the ftrace buffer's trace_marker, which the
# kernel stamps with CLOCK_MONOTONIC to the microsecond. The outer marks are written by
# this shell's builtin echo, so taking a time costs no fork (busybox's date has no %N and
# /proc/uptime ticks in 10 ms). The buffer goes back to the host whole, as the file
# `trace`; each run also leaves an `rc ROW RUN STATUS` mark.
#
# Run 0 of every row is a warm-up the host leaves out (first exec of each binary, first
# BTF parse). Rows are interleaved and their order rotates from run to run, so a row
# never always follows the same one (a detach's deferred work lands on whoever is next).

tracing=/sys/kernel/tracing

mark() { echo "$*" > $tracing/trace_marker; }

# rotate N WORD...: the words rotated left by N.
rotate() {
    n=$1
    shift
    k=0
    while [ $k -lt $n ]; do
        set -- "$@" "$1"
        shift
        k=$((k + 1))
    done
    echo "$@"
}

# A command the traced tools run: its first act, a mark, is the moment the tool has its
# probes attached and running (both tools start the command only after attaching).
cat > /bin/mark << 'EOF'
#!/bin/sh
echo "$*" > /sys/kernel/tracing/trace_marker
EOF
chmod 755 /bin/mark

# The overhead workload: 2,000 mkdir + 2,000 rmdir, in batches of 100 names per exec so
# the syscalls, not fork and exec, make up the time; then 200 tmpfs mounted (not timed)
# and unmounted by a single umount (timed: namespace_unlock, the RCU wait and the
# superblock teardown are the traced paths).
cat > /bin/work << 'EOF'
#!/bin/sh
m() { echo "$1 $row $run" > /sys/kernel/tracing/trace_marker; }
row=$1 run=$2
names= mounts= j=0
while [ $j -lt 100 ]; do names="$names d$j"; j=$((j + 1)); done
j=0
while [ $j -lt 200 ]; do mounts="$mounts /mnt/bench/$j"; j=$((j + 1)); done
mkdir -p /tmp/work && cd /tmp/work || exit 1
m rmdir0
b=0
while [ $b -lt 20 ]; do
    mkdir $names && rmdir $names || exit 1
    b=$((b + 1))
done
m rmdir1
for d in $mounts; do mount -t tmpfs none $d || exit 1; done
m umount0
umount $mounts || exit 1
m umount1
EOF
chmod 755 /bin/work

uname -r > /tmp/uname
emit uname /tmp/uname

# The functions tracer probes, by the exact names this kernel has.
funcs=$(traced-funcs)
echo $funcs > /tmp/funcs
emit funcs /tmp/funcs
# The same list for `tracer capture --probes`.
probes=$(echo $funcs | tr ' ' ',')

# bpftrace counting entries and returns of each function: one kprobe and one kretprobe
# program per function, as tracer has.
for f in $funcs; do
    echo "kprobe:$f { @entries[probe] = count(); }"
    echo "kretprobe:$f { @returns[probe] = count(); }"
done > /tmp/bench.bt
# The host's bpftrace, at the host's path (init's PATH is /bin alone).
bpftrace=/usr/bin/bpftrace
{ $bpftrace --version || ls -l /usr/bin /lib64 /lib/x86_64-linux-gnu; } > /tmp/bpftrace.version 2>&1
emit bpftrace.version /tmp/bpftrace.version

echo mono > $tracing/trace_clock
echo 1 > $tracing/tracing_on
echo > $tracing/trace

# one ROW RUN: run ROW's tool once around its trivial command (startup) or around the
# workload (overhead); the last run's output and stderr go back as ROW.out and ROW.err.
# The scripts run as `/bin/sh SCRIPT` for every row: bpftrace -c takes only an ELF file.
one() {
    row=$1 run=$2
    case $MODE in
        startup) cmd="/bin/sh /bin/mark attached $row $run" ;;
        *) cmd="/bin/sh /bin/work $row $run" ;;
    esac
    mark "start $row $run"
    case $row in
        none) timeout 600 $cmd ;;
        tracer-kprobe) timeout 600 tracer capture --attach kprobe -o /dev/null -- $cmd ;;
        tracer-kprobe-same) timeout 600 tracer capture --attach kprobe --probes $probes -o /dev/null -- $cmd ;;
        tracer-auto) timeout 600 tracer capture --attach auto -o /dev/null -- $cmd ;;
        bpftrace) timeout 600 $bpftrace /tmp/bench.bt -c "$cmd" ;;
    esac > /tmp/$row.out 2> /tmp/$row.err
    rc=$?
    mark "end $row $run"
    mark "rc $row $run $rc"
    [ $rc -eq 0 ] || cat /tmp/$row.out >> /tmp/$row.err
}

case $MODE in
    startup) rows="none tracer-kprobe tracer-kprobe-same tracer-auto bpftrace" ;;
    *)
        rows="none tracer-kprobe tracer-auto bpftrace"
        j=0
        while [ $j -lt 200 ]; do mkdir -p /mnt/bench/$j; j=$((j + 1)); done
        ;;
esac
nrows=$(echo $rows | wc -w)

run=0
while [ $run -le "$RUNS" ]; do
    echo "bench: $MODE run $run of $RUNS"
    for row in $(rotate $((run % nrows)) $rows); do
        one $row $run
    done
    run=$((run + 1))
done

for row in $rows; do
    emit $row.err /tmp/$row.err
    emit $row.out /tmp/$row.out
done
cat $tracing/trace > /tmp/trace
emit trace /tmp/trace
echo "bench: done"
