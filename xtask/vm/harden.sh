# The guest half of the hardening cases (xtask/src/testing/suite/harden.rs), run after
# suite.sh in the same boot: what each signal leaves behind of `tracer capture`, `tracer
# top --frames` and `tracer serve`, and tracer run as a user with only the capabilities
# it needs. The host judges the lines and files sent back through `emit`.

tracing=/sys/kernel/tracing
cg=/sys/fs/cgroup
setpriv=/usr/bin/setpriv
ip link set lo up 2>/dev/null
chmod 1777 /tmp
: > /tmp/signals

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
base=$(objects)
echo "stats_base=$(stats) base=$base kprobe_events=$(events $tracing/kprobe_events) uprobe_events=$(events $tracing/uprobe_events)" > /tmp/signals.base

# sigcase NAME SIG READY TRACER-ARGS...: run tracer in the foreground (a background job of
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

say "signals (INT, TERM, HUP, KILL) to capture, top --frames and serve"
t0=$(cut -d' ' -f1 /proc/uptime)
for how in kprobe fentry; do
    # fentry: SIGKILL alone (the other signals take the same path out as under kprobe).
    sigs="INT TERM HUP KILL"
    [ $how = fentry ] && sigs=KILL
    for sig in $sigs; do
        sigcase capture_${how}_$sig $sig '[ -e /tmp/h.ready ]' \
            capture --attach $how -- sh -c 'touch /tmp/h.ready; exec sleep 60'
        stale=$(ls -d $cg/tracer-capture-* 2>/dev/null | head -n 1)
        if [ $sig = KILL ] && [ -n "$stale" ]; then
            # The command outlives a killed tracer, in its cgroup: the next run says so and
            # leaves the cgroup; once the command is gone, the run after removes it.
            tracer capture --attach $how -- true > /dev/null 2> /tmp/stale_busy_$how.err
            kill $(cat $stale/cgroup.procs) 2>/dev/null
            sleep 0.3
            tracer capture --attach $how -- true > /dev/null 2> /tmp/stale_clean_$how.err
            echo "stale_$how $(leftovers)" >> /tmp/signals
            emit stale_busy_$how.err /tmp/stale_busy_$how.err
            emit stale_clean_$how.err /tmp/stale_clean_$how.err
        fi
        sigcase top_${how}_$sig $sig 'grep -q "refresh 1/" /tmp/top_'${how}_$sig'.out' \
            top --attach $how --frames 1000 --interval 1s --view probes
        # SIGKILL after a minute of serving (kprobe): no statistics switch held meanwhile either.
        served='wget -q -O /dev/null http://127.0.0.1:29110/metrics 2>/dev/null'
        [ $sig = KILL ] && [ $how = kprobe ] && served="$served && sleep 60"
        sigcase serve_${how}_$sig $sig "$served" \
            serve --attach $how --interval 1s
    done
done
# The next run attaches normally: exact counts of 20 mkdir + rmdir.
mkdir -p /tmp/next
timeout 150 tracer capture --attach kprobe --format json -o /tmp/signals_next.json -- \
    sh -c 'cd /tmp/next && i=0; while [ $i -lt 20 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done' \
    > /tmp/signals_next.log 2>&1
echo "exit $?" >> /tmp/signals_next.log
echo "seconds $(cut -d' ' -f1 /proc/uptime) $t0" >> /tmp/signals.base
emit signals.base /tmp/signals.base
emit signals /tmp/signals
for f in /tmp/capture_*_*.err /tmp/top_*_*.err /tmp/serve_*_*.err; do
    [ -s "$f" ] && emit "${f#/tmp/}" "$f"
done
emit signals_next.log /tmp/signals_next.log
[ -f /tmp/signals_next.json ] && emit signals_next.json /tmp/signals_next.json

say "least privilege (user 65534 with only the capabilities named)"
t0=$(cut -d' ' -f1 /proc/uptime)
# asuser CAPS ARGS...: tracer as user 65534 with only CAPS (e.g. +bpf,+perfmon), ambient so
# they survive the exec; "" for none.
asuser() {
    caps=$1
    shift
    if [ -n "$caps" ]; then
        $setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=$caps --ambient-caps=$caps tracer "$@"
    else
        $setpriv --reuid=65534 --regid=65534 --clear-groups tracer "$@"
    fi
}
three=+bpf,+perfmon,+dac_read_search
# Debian's kernels default to kernel.perf_event_paranoid=3, where perf_event_open (kprobes
# and tracepoints) was refused to this user even with CAP_PERFMON (seen on 6.12): 2, the
# upstream default, lets CAP_PERFMON open them.
echo "perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid), set to 2" > /tmp/lp.paranoid
echo 2 > /proc/sys/kernel/perf_event_paranoid
if [ -x $setpriv ]; then
    asuser "" capture -d 1s > /dev/null 2> /tmp/lp_none_capture.err
    echo "exit $?" >> /tmp/lp_none_capture.err
    asuser "" serve > /dev/null 2> /tmp/lp_none_serve.err
    echo "exit $?" >> /tmp/lp_none_serve.err
    # Without CAP_DAC_READ_SEARCH: tracefs (root's, 0700) cannot be read.
    asuser +bpf,+perfmon capture -- true > /dev/null 2> /tmp/lp_two.err
    echo "exit $?" >> /tmp/lp_two.err
    # In the root cgroup, which user 65534 cannot write: the command shares the host's.
    asuser $three capture -- true > /dev/null 2> /tmp/lp_nodeleg.err
    echo "exit $?" >> /tmp/lp_nodeleg.err
    # A cgroup delegated to the user, as systemd delegates one (Delegate=yes): tracer's
    # cgroup, under which it makes the command's.
    mkdir -p $cg/lp /tmp/lp
    chown 65534:65534 $cg/lp $cg/lp/cgroup.procs $cg/lp/cgroup.threads $cg/lp/cgroup.subtree_control /tmp/lp
    for how in kprobe fentry; do
        sh -c "echo \$\$ > $cg/lp/cgroup.procs; exec $setpriv --reuid=65534 --regid=65534 --clear-groups \
            --inh-caps=$three --ambient-caps=$three tracer capture --attach $how --format json \
            -o /tmp/lp/cap_$how.json -- sh -c 'cd /tmp/lp && i=0; while [ \$i -lt 50 ]; do mkdir d\$i && rmdir d\$i || exit 1; i=\$((i+1)); done'" \
            > /tmp/lp_capture_$how.log 2>&1
        echo "exit $?" >> /tmp/lp_capture_$how.log
        emit lp_capture_$how.log /tmp/lp_capture_$how.log
        [ -f /tmp/lp/cap_$how.json ] && emit lp_capture_$how.json /tmp/lp/cap_$how.json
    done
    # serve as the same user: scraped after 30 mkdir + rmdir in a cgroup it made, then
    # every thread's capability sets.
    sh -c "echo \$\$ > $cg/lp/cgroup.procs; exec $setpriv --reuid=65534 --regid=65534 --clear-groups \
        --inh-caps=$three --ambient-caps=$three tracer serve --interval 1s" > /dev/null 2> /tmp/lp_serve.err &
    srv=$!
    i=0
    while [ $i -lt 1200 ] && ! wget -q -O /dev/null http://127.0.0.1:29110/metrics 2>/dev/null; do sleep 0.1; i=$((i+1)); done
    # The workload as the same user, moved (by root) into /lp first: a user may move a
    # process only between cgroups whose common ancestor's cgroup.procs it can write.
    cat > /tmp/lp_wl.sh <<'WL'
mkdir /sys/fs/cgroup/lp/wl && echo $$ > /sys/fs/cgroup/lp/wl/cgroup.procs && cd /tmp/lp || exit 1
i=0; while [ $i -lt 30 ]; do mkdir w$i && rmdir w$i || exit 1; i=$((i+1)); done
WL
    sh -c "echo \$\$ > $cg/lp/cgroup.procs; exec $setpriv --reuid=65534 --regid=65534 --clear-groups sh /tmp/lp_wl.sh" \
        >> /tmp/lp_serve.err 2>&1
    sleep 3
    wget -q -O /tmp/lp_serve.metrics http://127.0.0.1:29110/metrics
    for t in /proc/$srv/task/*; do
        grep -E '^Cap(Eff|Prm|Inh|Amb)' $t/status | tr '\n' ' '
        echo
    done > /tmp/lp_serve.caps
    kill -TERM $srv
    wait $srv
    echo "exit $?" >> /tmp/lp_serve.err
    rmdir $cg/lp/wl 2>/dev/null
    for f in lp.paranoid lp_none_capture.err lp_none_serve.err lp_two.err lp_nodeleg.err lp_serve.err lp_serve.metrics lp_serve.caps; do
        emit $f /tmp/$f
    done
fi
echo "seconds $(cut -d' ' -f1 /proc/uptime) $t0" > /tmp/lp.seconds
emit lp.seconds /tmp/lp.seconds

# tracer serve as deploy/systemd/tracer.service runs it: the sysctl file of
# deploy/systemd applied to Debian's default, a user of its own (a uid of systemd's
# DynamicUser= range, no groups), the unit's ambient capabilities and bounding set (the
# host wrote them to /deploy.caps from the unit), no_new_privs, RLIMIT_MEMLOCK unlimited,
# and the unit's command line. 200 mkdir+rmdir in a cgroup made after it started must be
# counted exactly in a scrape.
if [ -x $setpriv ] && [ -f /deploy.caps ] && [ -f /99-tracer.conf ]; then
    say "serve as deploy/systemd/tracer.service runs it"
    echo 3 > /proc/sys/kernel/perf_event_paranoid
    sysctl -p /99-tracer.conf > /dev/null 2>&1
    echo "perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid) after 99-tracer.conf" > /tmp/deploy.paranoid
    caps=$(cat /deploy.caps)
    (
        ulimit -l unlimited
        exec $setpriv --reuid=61234 --regid=61234 --clear-groups --no-new-privs \
            --bounding-set=-all,$caps --inh-caps=$caps --ambient-caps=$caps tracer serve
    ) > /dev/null 2> /tmp/deploy_serve.err &
    srv=$!
    i=0
    while [ $i -lt 1200 ] && ! wget -q -O - http://127.0.0.1:29110/metrics 2>/dev/null | grep -q '^tracer_source_up 1'; do
        sleep 0.1; i=$((i+1))
    done
    mkdir -p $cg/deploy/wl /tmp/deploy
    sh -c "echo \$\$ > $cg/deploy/wl/cgroup.procs; cd /tmp/deploy && i=0; while [ \$i -lt 200 ]; do mkdir d\$i && rmdir d\$i || exit 1; i=\$((i+1)); done" \
        >> /tmp/deploy_serve.err 2>&1
    sleep 3
    wget -q -O /tmp/deploy_serve.metrics http://127.0.0.1:29110/metrics
    grep -E '^(Uid|Gid|Groups|NoNewPrivs|CapBnd)' /proc/$srv/status > /tmp/deploy_serve.status
    kill -TERM $srv
    wait $srv
    echo "exit $?" >> /tmp/deploy_serve.err
    rmdir $cg/deploy/wl $cg/deploy 2>/dev/null
    for f in deploy.paranoid deploy_serve.err deploy_serve.metrics deploy_serve.status; do
        emit $f /tmp/$f
    done
fi
say "done"
