# The start of the guest half of the hardening cases, run after the suite's script in the
# 6.12 boot (or alone, by `cargo xtask harden-vm`): what their workloads share. The script
# is this, then each case's workload in turn (xtask/src/testing/suite/cases/signals.rs and
# privilege.rs: a case's workload and its judge in one place): what each signal leaves
# behind of `tracer capture`, `tracer top --frames` and `tracer serve`, and tracer run as a
# user with only the capabilities it needs. The host judges the lines and files sent back
# through `emit`.

tracing=/sys/kernel/tracing
cg=/sys/fs/cgroup
setpriv=/usr/bin/setpriv
ip link set lo up 2>/dev/null
chmod 1777 /tmp

# objects: the BPF programs, links and maps bpftool lists, as "P,L,M".
objects() {
    p=$(/usr/sbin/bpftool prog list 2>/dev/null | grep -c '^[0-9][0-9]*: ')
    l=$(/usr/sbin/bpftool link list 2>/dev/null | grep -c '^[0-9][0-9]*: ')
    m=$(/usr/sbin/bpftool map list 2>/dev/null | grep -c '^[0-9][0-9]*: ')
    echo "$p,$l,$m"
}
# events FILE: lines in a tracefs probe-events file (0 when the kernel has none).
events() {
    if [ -f "$1" ]; then grep -c . "$1"; else echo 0; fi
}
# stats: the kernel.bpf_stats_enabled sysctl and the BPF_ENABLE_STATS fds any process
# holds (each keeps run-time statistics on for every BPF program of the host), as "S,F".
stats() {
    echo "$(cat /proc/sys/kernel/bpf_stats_enabled),$(ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c 'anon_inode:bpf-stats')"
}
# leftovers: what a tracer could leave, as key=value words.
leftovers() {
    echo "after=$(objects) stats=$(stats) kprobe_events=$(events $tracing/kprobe_events)" \
        "uprobe_events=$(events $tracing/uprobe_events)" \
        "cgroups=$(ls -d $cg/tracer-capture-* 2>/dev/null | sed 's|.*/||' | tr '\n' ',')"
}

# sigcase NAME SIG READY TRACER-ARGS...: (after `base=$(objects)`) run tracer in the foreground (a background job of
# a script would ignore SIGINT); once READY (a shell test) holds, a helper counts the BPF
# objects and the statistics switches, and sends SIG. Then wait up to 10 s for the kernel
# to free what tracer held, and record its exit status and what is left.
sigcase() {
    name=$1 sig=$2 ready=$3
    shift 3
    rm -f /tmp/h.pid /tmp/h.ready /tmp/h.during /tmp/h.stats
    (
        i=0
        while [ $i -lt 1200 ] && ! { [ -s /tmp/h.pid ] && eval "$ready"; }; do sleep 0.1; i=$((i+1)); done
        objects > /tmp/h.during
        stats > /tmp/h.stats
        kill -$sig "$(cat /tmp/h.pid)"
    ) &
    helper=$!
    timeout 120 sh -c 'echo $$ > /tmp/h.pid; exec "$@"' sh tracer "$@" > /tmp/$name.out 2> /tmp/$name.err
    rc=$?
    wait $helper
    i=0
    while [ $i -lt 100 ] && [ "$(objects)" != "$base" ]; do sleep 0.1; i=$((i+1)); done
    echo "$name $sig rc=$rc pid=$(cat /tmp/h.pid) during=$(cat /tmp/h.during) stats_during=$(cat /tmp/h.stats) $(leftovers)" >> /tmp/signals
}

# say TEXT: a section's heading on the console, with the guest's uptime (where the
# minutes go).
say() { echo "harden: [$(cut -d' ' -f1 /proc/uptime) s] $*"; }
