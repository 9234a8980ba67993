# The guest half of `cargo xtask bench soak` (xtask/src/bench/soak.rs): `tracer serve`
# (scraped from the host through the forwarded port) and `tracer top --frames` run while
# short-lived cgroups are made and removed, each one mounting a tmpfs, creating,
# unlinking and removing a directory in it, and unmounting it. The kernel's own kprobe
# events count the same functions over the same run. SOAK_MINUTES and SOAK_CGROUPS are
# set by the host before this text.

cg=/sys/fs/cgroup
tracing=/sys/kernel/tracing
net-up > /tmp/net.log 2>&1 || { cat /tmp/net.log; exit 1; }
rmdir_sym=vfs_rmdir
if [ "$(grep -c ' vfs_rmdir\.part\.[0-9]*$' /proc/kallsyms)" = 1 ]; then
    rmdir_sym=$(sed -n 's/.* \(vfs_rmdir\.part\.[0-9]*\)$/\1/p' /proc/kallsyms)
fi
teardown=unregister_shrinker
grep -q ' shrinker_free$' /proc/kallsyms && teardown=shrinker_free

# now_s: $now, whole seconds since boot (no command substitution: no fork).
now_s() {
    read -r up _ < /proc/uptime
    now=${up%.*}
}
# sample MINUTE: one line of what the guest sees: cgroups made so far, the two tracers'
# resident memory, and the entries of every BPF map (all of them are tracer's).
sample() {
    done=0
    for w in 0 1; do
        [ -f /tmp/soak.done$w ] && done=$((done + $(cat /tmp/soak.done$w)))
    done
    entries=0 by_map=
    # "ID: TYPE  name NAME  flags ...": the id and the name of each map.
    for idname in $(/usr/sbin/bpftool map list 2>/dev/null | sed -n 's/^\([0-9][0-9]*\): .* name \([^ ]*\) .*/\1:\2/p'); do
        id=${idname%%:*}
        n=$(/usr/sbin/bpftool map dump id $id 2>/dev/null | sed -n 's/^Found \([0-9]*\) element.*/\1/p')
        entries=$((entries + ${n:-0}))
        [ "${n:-0}" -gt 0 ] && by_map="$by_map ${idname#*:}=$n"
    done
    echo "minute=$1$by_map" >> /tmp/soak.maps
    # rss PID FIELD: VmRSS (all resident), RssAnon (the heap's share: the binary's pages
    # are RssFile).
    rss() { sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" /proc/$1/status 2>/dev/null; }
    echo "minute=$1 cgroups_made=$done serve_rss_kib=$(rss $srv VmRSS) serve_anon_kib=$(rss $srv RssAnon) top_rss_kib=$(rss $top VmRSS) map_entries=$entries maps=$(/usr/sbin/bpftool map list 2>/dev/null | grep -c '^[0-9]')" | tee -a /tmp/soak.samples
}

tracer serve --listen 0.0.0.0:29110 --interval 1s > /tmp/soak_serve.log 2>&1 &
srv=$!
i=0
while [ $i -lt 1200 ] && ! wget -q -O /dev/null http://127.0.0.1:29110/metrics 2>/dev/null; do sleep 0.1; i=$((i+1)); done
# Beside it, top's text frames (the last few kept: a frame is 40 lines).
tracer top --frames 100000 --interval 1s --view probes,cgroups --width 120 --height 40 2> /tmp/soak_top.err |
    tail -n 200 > /tmp/soak_top.txt &
i=0
while [ $i -lt 1200 ] && ! pidof tracer | grep -q ' '; do sleep 0.1; i=$((i+1)); done
top=$(pidof tracer | tr ' ' '\n' | grep -v "^$srv\$" | head -n 1)
sleep 3

# The kernel's own counts of the functions compared.
for sym in $rmdir_sym namespace_unlock deactivate_locked_super $teardown; do
    echo "p:ref_${sym%%.*} $sym" >> $tracing/kprobe_events
done
echo 1 > $tracing/events/kprobes/enable

now_s
start=$now
end=$((start + SOAK_MINUTES * 60))
: > /tmp/soak.samples
: > /tmp/soak.maps
sample 0
# Two workers (the guest has 2 CPUs), each QUOTA cgroups paced evenly over the run, each
# cycle: mkdir, a child moved in that mounts, creates, unlinks, rmdirs and unmounts, rmdir.
# One compiled program does the cycles: a shell forking a command per step made at most 6
# cgroups a second under TCG.
half=$((SOAK_CGROUPS / 2))
: > /tmp/soak.churn
soak-churn 0 $half $((end - start)) >> /tmp/soak.churn 2>&1 &
w0=$!
soak-churn 1 $((SOAK_CGROUPS - half)) $((end - start)) >> /tmp/soak.churn 2>&1 &
w1=$!
m=1
while [ $m -le "$SOAK_MINUTES" ]; do
    now_s
    while [ "$now" -lt $((start + m * 60)) ]; do sleep 1; now_s; done
    sample $m
    m=$((m + 1))
done
wait $w0
wait $w1
echo 0 > $tracing/events/kprobes/enable
sed -n 's/^ *ref_\([^ ]*\) *\([0-9]*\) .*/\1 \2/p' $tracing/kprobe_profile > /tmp/soak.ref
echo > $tracing/kprobe_events
# Two refreshes, so the last calls reach /metrics.
sleep 3
wget -q -O /tmp/soak.final http://127.0.0.1:29110/metrics
# The host scrapes for the run's length from its first scrape: keep serving past it.
sleep 15
kill $top $srv
wait $srv
echo "exit $?" >> /tmp/soak_serve.log
wait
emit soak.samples /tmp/soak.samples
emit soak.churn /tmp/soak.churn
emit soak.maps /tmp/soak.maps
emit soak.ref /tmp/soak.ref
emit soak.final /tmp/soak.final
emit soak_serve.log /tmp/soak_serve.log
emit soak_top.txt /tmp/soak_top.txt
emit soak_top.err /tmp/soak_top.err
[ -s /tmp/soak.fail ] && emit soak.fail /tmp/soak.fail
exit 0
