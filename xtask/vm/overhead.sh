# The guest half of `cargo xtask bench overhead`, run by /init in the VM with RUNS (timed
# runs per workload and tool) and MODES (kprobe, fentry or both) set. The host
# (xtask/src/bench/overhead.rs) reads what it emits and computes every figure.
#
# Two kinds of measurement, in one boot:
# - cost per call, from the kernel: every program's run_time_ns and run_cnt (bpftool),
#   read before and after each workload while tracer, a bpftrace peer doing the same job,
#   bpftrace's bare count() and empty programs (the floor) are all attached at once, so
#   each program is timed on the same calls. tracer turns the kernel's run-time statistics
#   on (BPF_ENABLE_STATS) for as long as it runs, which is exactly the measuring window; the
#   statistics are the kernel's, so every tool's programs pay them alike there.
# - wall time of each workload untraced, under tracer alone and under the bpftrace peer
#   alone: marks in the ftrace buffer, stamped by the kernel to the microsecond. The
#   statistics are off for all three (tracer capture --no-bpf-stats): on, they add two
#   clock reads and an update to every run of every program, which `serve` and `top` and
#   bpftrace do not pay.

tracing=/sys/kernel/tracing
bpftrace=/usr/bin/bpftrace
bpftool=/usr/sbin/bpftool
stressng=/usr/bin/stress-ng

mark() { echo "$*" > $tracing/trace_marker; }
# step TEXT: progress on the console, with the guest's uptime, so that a run killed by the
# host's timeout says which step it was in.
step() { echo "bench: $(cut -d' ' -f1 /proc/uptime) s: $*"; }
# send FILE...: each file that exists, to the host now (not at the end: a run cut short
# still leaves what it measured).
send() { for f in "$@"; do [ -f $f ] && emit ${f#/tmp/} $f; done; }

uname -r > /tmp/uname
emit uname /tmp/uname
{ $bpftrace --version; $bpftool version | head -1; $stressng --version; } > /tmp/versions 2>&1
emit versions /tmp/versions
# The clocksource (first line): under QEMU's -icount the host counts guest time as
# instructions only where the guest reads the TSC. Then what the kernel said of the TSC.
# The kernel starts on `tsc-early` and moves to `tsc` once it has refined the TSC's
# calibration, a second or two into the boot: waited for (10 s at most).
i=0
while [ $i -lt 100 ] && [ "$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)" = tsc-early ]; do
    sleep 0.1
    i=$((i + 1))
done
{
    cat /sys/devices/system/clocksource/clocksource0/current_clocksource
    dmesg | grep -i -e 'tsc' -e 'clocksource' | tail -8
} > /tmp/clocksource 2>&1
emit clocksource /tmp/clocksource
# How the workloads are timed (the host's report says it): the statistics off for all.
echo "timed-runs bpf-stats off" > /tmp/timing
emit timing /tmp/timing

# The traced functions this kernel has, by exact name (bpftrace fails on a missing one),
# then the syscalls' functions, which tracer traces as functions too (kprobes or fentry on
# `__x64_sys_rmdir`): bpftrace's peers go where tracer's programs go.
$bpftool btf dump file /sys/kernel/btf/vmlinux 2> /dev/null | grep "] FUNC '" > /tmp/btf.all
funcs=$(traced-funcs)
for s in rmdir unlink unlinkat umount; do
    grep -q "] FUNC '__x64_sys_$s'" /tmp/btf.all && funcs="$funcs __x64_sys_$s"
done
lockwait=no
[ -d $tracing/events/lock/contention_begin ] && lockwait=yes
echo funcs $funcs > /tmp/funcs
echo "lockwait $lockwait" >> /tmp/funcs
# BTF ids of the traced functions: how fentry programs are told apart (their links name
# the target by BTF id).
for f in $funcs; do grep "] FUNC '$f'" /tmp/btf.all; done >> /tmp/funcs
rm -f /tmp/btf.all
emit funcs /tmp/funcs

# ext2 over loop: it keeps negative dentries, so d_delete's kept outcome is exercised.
mount-ext2 > /tmp/setup.log 2>&1 || echo "ext2: failed" >> /tmp/setup.log
# No writeback behind a measured run: the kernel's periodic flush of dirty pages (every
# 5 s) ran on the other vCPU during some runs and not others, and spread the unlink
# workload's guest time from 148M to 263M instructions, untraced, within one boot (148.0M
# +-0.5% without it). Each run starts after a `sync` instead (/bin/wl), the unlink
# workload on an ext2 made anew: on one kept for the whole boot each run cost more than
# the last, traced or not (5.10, untraced: 131M, then 263M after a capture's runs, 300M
# after two more), which read as tracer's cost since the untraced runs come first.
echo 0 > /proc/sys/vm/dirty_writeback_centisecs
echo 90 > /proc/sys/vm/dirty_background_ratio
echo 95 > /proc/sys/vm/dirty_ratio
j=0
while [ $j -lt 200 ]; do mkdir -p /mnt/bench/$j; j=$((j + 1)); done
[ -x $stressng ] || echo "stress-ng: absent" >> /tmp/setup.log

# /bin/wl WORKLOAD ROW RUN: one workload, between two marks (w0, w1). The loops use the
# shell's builtins, and batches of 100 names per exec, so the syscalls make up the time.
cat > /bin/wl << 'EOF'
#!/bin/sh
m() { echo "$1 $w.$row $run" > /sys/kernel/tracing/trace_marker; }
w=$1 row=$2 run=$3
sync
names= j=0
while [ $j -lt 100 ]; do names="$names d$j"; j=$((j + 1)); done
case $w in
rmdir)
    # 2,000 mkdir + rmdir.
    mkdir -p /tmp/work && cd /tmp/work || exit 1
    m w0
    b=0
    while [ $b -lt 20 ]; do mkdir $names && rmdir $names || exit 1; b=$((b + 1)); done
    m w1 ;;
unlink)
    # 2,000 creates and unlinks on ext2: each unlink's d_delete keeps a negative dentry.
    umount -d /mnt/ext2 2> /dev/null
    mount-ext2 > /dev/null 2>&1 && grep -q ' /mnt/ext2 ext2 ' /proc/mounts || exit 1
    mkdir -p /mnt/ext2/u && cd /mnt/ext2/u || exit 1
    m w0
    b=0
    while [ $b -lt 20 ]; do
        for n in $names; do : > $n; done
        rm $names || exit 1
        b=$((b + 1))
    done
    m w1 ;;
umount)
    # 200 tmpfs mounted one by one and unmounted by one umount.
    m w0
    j=0
    while [ $j -lt 200 ]; do mount -t tmpfs none /mnt/bench/$j || exit 1; j=$((j + 1)); done
    j=0 all=
    while [ $j -lt 200 ]; do all="$all /mnt/bench/$j"; j=$((j + 1)); done
    umount $all || exit 1
    m w1 ;;
ramfs)
    # stress-ng's ramfs stressor: 2 workers, 40 mount/fill/umount rounds each.
    [ -x /usr/bin/stress-ng ] || exit 3
    cd /tmp || exit 1
    m w0
    /usr/bin/stress-ng --ramfs 2 --ramfs-ops 40 --quiet > /dev/null 2>&1 || exit 1
    m w1 ;;
lock)
    # Two writers creating and removing files in one directory: they contend for its
    # inode lock (and the dcache's spinlocks), and no rmdir is ever in flight.
    mkdir -p /tmp/lk && cd /tmp/lk || exit 1
    m w0
    for k in a b; do
        (
            b=0
            while [ $b -lt 10 ]; do
                for n in $names; do : > $k$n; done
                rm -f $k* || exit 1
                b=$((b + 1))
            done
        ) &
    done
    wait
    m w1 ;;
first)
    # 100 processes of one rmdir each: every traced call is its thread's first and only
    # one, so a run is the whole life of 100 one-call threads.
    mkdir -p /tmp/first && cd /tmp/first || exit 1
    mkdir -p $names || exit 1
    m w0
    for n in $names; do (rmdir $n) || exit 1; done
    m w1 ;;
syscalls)
    # 100,000 reads and 100,000 writes of one byte: syscalls tracer does not trace, which
    # pay only for what tracer's attaching does to every syscall on the host (an enabled
    # syscall tracepoint sends every task's syscalls down the kernel's slow path).
    m w0
    dd if=/dev/zero of=/dev/null bs=1 count=100000 2> /dev/null || exit 1
    m w1 ;;
esac
EOF
chmod 755 /bin/wl

# /bin/incg COMMAND...: COMMAND in a cgroup of its own, made as `tracer capture` makes the
# one it runs its command in, so the untraced and bpftrace runs pay the same cgroup
# accounting as tracer's (on ext2 a child cgroup alone cost the unlink workload +3%).
cat > /bin/incg << 'EOF'
#!/bin/sh
d=/sys/fs/cgroup/bench-$$
mkdir $d && echo $$ > $d/cgroup.procs || exit 1
"$@"
rc=$?
echo $$ > /sys/fs/cgroup/cgroup.procs
rmdir $d
exit $rc
EOF
chmod 755 /bin/incg
workloads="rmdir unlink umount ramfs lock first syscalls"

# /bin/measure MODE RUNS: run inside `tracer capture`; every workload RUNS times, with
# every program's statistics read before the first run and after each. The host takes each
# row's median over the runs: under emulation one run of a row can be inflated many times
# by the host descheduling a virtual CPU inside a program, and a median leaves that out.
cat > /bin/measure << 'EOF'
#!/bin/sh
mode=$1 runs=$2
/usr/sbin/bpftool -j perf > /tmp/perf.$mode.json 2> /dev/null
/usr/sbin/bpftool -j link show > /tmp/link.$mode.json 2> /dev/null
# Every step bounded: a workload that never ends is reported (rc 143) and the next runs.
for w in rmdir unlink umount ramfs lock first; do
    echo "bench: measure $mode $w x $runs"
    timeout 60 /usr/sbin/bpftool -j prog show > /tmp/stats.$mode.$w.0.json
    k=1
    while [ $k -le $runs ]; do
        timeout 300 /bin/wl $w measure $k
        echo "$w $k $?" >> /tmp/measure.$mode.rc
        timeout 60 /usr/sbin/bpftool -j prog show > /tmp/stats.$mode.$w.$k.json
        k=$((k + 1))
    done
done
EOF
chmod 755 /bin/measure

# The bpftrace scripts for MODE: peer (what tracer does), count (a bare count per
# program) and floor (empty programs). Each prints `ready` once its probes are attached.
scripts() {
    mode=$1
    if [ "$mode" = fentry ]; then entry=kfunc ret=kretfunc; else entry=kprobe ret=kretprobe; fi
    for role in peer count floor; do
        # The peer keys its histograms by a probe number, as tracer does (bpftrace 0.17
        # fails to load some programs keyed by the function's name as a string).
        n=0
        {
            echo 'BEGIN { printf("ready\n"); }'
            for f in $funcs; do
                case $role in
                count) echo "$entry:$f { @n = count(); }"
                       echo "$ret:$f { @n = count(); }" ;;
                floor) echo "$entry:$f { }"
                       echo "$ret:$f { }" ;;
                peer)
                    # Start time keyed by thread; latency histogram per (cgroup, probe).
                    extra=
                    if [ $f = d_delete ]; then
                        [ $mode = fentry ] && extra='@dd[tid] = (uint64)args->dentry;' || extra='@dd[tid] = arg0;'
                    fi
                    if [ $f = vfs_rmdir ]; then
                        # The directory's inode registered, as tracer registers its lock.
                        [ $mode = fentry ] && extra='@rk[tid] = (uint64)args->dir; @rl[(uint64)args->dir] = tid;' ||
                            extra='@rk[tid] = arg1; @rl[arg1] = tid;'
                    fi
                    echo "$entry:$f { @s_$f[tid] = nsecs; $extra }"
                    post=
                    if [ $f = d_delete ]; then
                        post='$d = (struct dentry *)@dd[tid]; if ($d->d_inode == 0 && $d->d_hash.pprev != 0 && ($d->d_flags & 0x88) == 0) { @negative[cgroup] = count(); } else { @dropped[cgroup] = count(); } delete(@dd[tid]);'
                    fi
                    if [ $f = vfs_rmdir ]; then
                        post='delete(@rl[@rk[tid]]); delete(@rk[tid]);'
                    fi
                    n=$((n + 1))
                    echo "$ret:$f /@s_$f[tid]/ { @h[cgroup, $n] = hist(nsecs - @s_$f[tid]); delete(@s_$f[tid]); $post }" ;;
                esac
            done
            if [ $lockwait = yes ]; then
                case $role in
                count) echo "tracepoint:lock:contention_begin { @n = count(); }"
                       echo "tracepoint:lock:contention_end { @n = count(); }" ;;
                floor) echo "tracepoint:lock:contention_begin { }"
                       echo "tracepoint:lock:contention_end { }" ;;
                peer)
                    # A wait is timed only on a lock an rmdir registered, as tracer does.
                    echo 'tracepoint:lock:contention_begin /@rl[(uint64)args->lock_addr]/ { @lw[tid] = nsecs; }'
                    echo 'tracepoint:lock:contention_end /@lw[tid]/ { @h[cgroup, 99] = hist(nsecs - @lw[tid]); delete(@lw[tid]); }' ;;
                esac
            fi
        } > /tmp/$role.$mode.bt
    done
}

# start ROLE MODE: bpftrace with that script in the background; waits until it is ready:
# it prints "Attaching N probes..." once compiled, then `ready` from BEGIN once every probe
# is attached. Under emulation compiling alone takes minutes, so the wait is long, but
# bounded. Its pid in /tmp/pid.ROLE.MODE; 0 when it failed to start (the console says how).
start() {
    # Emptied first: the background job opens its output after the fork, and a wait that
    # ran before then would read an earlier start's `ready` and time runs during compiling.
    : > /tmp/$1.$2.out
    $bpftrace /tmp/$1.$2.bt > /tmp/$1.$2.out 2>&1 &
    pid=$!
    k=0
    while ! grep -q '^ready' /tmp/$1.$2.out 2> /dev/null; do
        if ! kill -0 $pid 2> /dev/null; then
            step "bpftrace $1 ($2) exited before it was ready: $(tail -3 /tmp/$1.$2.out)"
            wait $pid 2> /dev/null
            echo 0 > /tmp/pid.$1.$2
            send /tmp/$1.$2.out
            return 1
        fi
        if [ $k -ge 900 ]; then
            step "bpftrace $1 ($2) not ready after 900 s ($(grep -c Attaching /tmp/$1.$2.out) Attaching lines): stopped"
            kill -KILL $pid 2> /dev/null
            wait $pid 2> /dev/null
            echo 0 > /tmp/pid.$1.$2
            send /tmp/$1.$2.out
            return 1
        fi
        sleep 1
        k=$((k + 1))
    done
    step "bpftrace $1 ($2) ready after $k s: $(grep Attaching /tmp/$1.$2.out)"
    echo $pid > /tmp/pid.$1.$2
}

# stop ROLE MODE: SIGINT (bpftrace prints its maps and detaches), SIGKILL after 120 s.
stop() {
    pid=$(cat /tmp/pid.$1.$2)
    [ "$pid" != 0 ] || return 0
    kill -INT $pid
    k=0
    while kill -0 $pid 2> /dev/null && [ $k -lt 120 ]; do sleep 1; k=$((k + 1)); done
    if kill -0 $pid 2> /dev/null; then
        step "bpftrace $1 ($2) still running 120 s after SIGINT: killed"
        kill -KILL $pid
    fi
    wait $pid 2> /dev/null
}

echo mono > $tracing/trace_clock
# The kernel keeps its trace buffer at a page or so per CPU until told a size, and the
# oldest marks are overwritten once it is full: ~300 marks a boot had lost 86 of them.
echo 1024 > $tracing/buffer_size_kb
echo 1 > $tracing/tracing_on
echo > $tracing/trace

# Wall time, untraced: a warm-up pass (run 0, left out by the host), then RUNS passes.
run=0
step "untraced runs"
while [ $run -le "$RUNS" ]; do
    for w in $workloads; do timeout 300 /bin/incg /bin/wl $w none $run || mark "failed $w.none $run"; done
    run=$((run + 1))
done

for mode in $MODES; do
    step "$mode: starting bpftrace (peer, count(), floor)"
    scripts $mode
    send /tmp/peer.$mode.bt
    # The cost per call: everything attached at once, the ids of each tool's programs
    # told apart by listing them after each one starts.
    $bpftool -j prog show > /tmp/ids.$mode.base.json
    for role in peer count floor; do
        start $role $mode
        timeout 60 $bpftool -j prog show > /tmp/ids.$mode.$role.json
    done
    step "$mode: tracer capture around the measured workloads"
    timeout 1800 tracer capture --attach $mode -o /tmp/cap.$mode.json -- /bin/sh /bin/measure $mode "$RUNS" \
        > /tmp/tracer.$mode.out 2> /tmp/tracer.$mode.err
    echo "exit $?" >> /tmp/tracer.$mode.err
    step "$mode: stopping bpftrace"
    for role in peer count floor; do stop $role $mode; done
    send /tmp/ids.$mode.*.json /tmp/stats.$mode.*.json /tmp/perf.$mode.json \
        /tmp/link.$mode.json /tmp/measure.$mode.rc /tmp/tracer.$mode.err /tmp/tracer.$mode.out \
        /tmp/peer.$mode.out /tmp/count.$mode.out /tmp/floor.$mode.out

    # Wall time under tracer alone, then under the bpftrace peer alone, the statistics off
    # for both.
    step "$mode: timed runs under tracer"
    timeout 1800 tracer capture --no-bpf-stats --attach $mode -o /dev/null -- /bin/sh -c "
        run=1
        while [ \$run -le $RUNS ]; do
            for w in $workloads; do timeout 300 /bin/wl \$w tracer-$mode \$run || echo \"failed \$w.tracer-$mode \$run\" > $tracing/trace_marker; done
            run=\$((run + 1))
        done" > /dev/null 2>> /tmp/tracer.$mode.err
    step "$mode: timed runs under the bpftrace peer"
    if start peer $mode; then
        run=1
        while [ $run -le "$RUNS" ]; do
            for w in $workloads; do timeout 300 /bin/incg /bin/wl $w bpftrace-$mode $run || mark "failed $w.bpftrace-$mode $run"; done
            run=$((run + 1))
        done
        stop peer $mode
    fi
    send /tmp/tracer.$mode.err
    cat $tracing/trace > /tmp/trace
    send /tmp/trace
done
emit setup.log /tmp/setup.log
cat $tracing/trace > /tmp/trace
emit trace /tmp/trace
echo "bench: done"
