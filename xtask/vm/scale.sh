# tracer at production scale, in the guest: sourced by the suite's scale case and
# bench.sh's scale bench. Results go to the host through `emit`.
#
#   scale_memory HOW          kernel memory of tracer's maps (capture, top, serve)
#   scale_cgroups N NAME ARGS one capture of N cgroups alive at once, each making a known
#                             number of mkdir+rmdir and create+unlink (1 + i mod 7)
#   scale_serve N MAX         the same under `tracer serve --max-cgroups MAX`, scraped once
#   scale_threads NAME N ENTRIES ARGS
#                             N threads with a call in flight at once, `THREADS` holding
#                             ENTRIES (the test knob)
#   scale_threads_pair N      the same with `THREADS` sized as tracer sizes it for the online
#                             CPUs, and with room for the threads but not the CPUs' free lists

cg=/sys/fs/cgroup

# The exporter is asked on loopback, which the guest's init leaves down.
ifconfig lo 127.0.0.1 up 2>/dev/null || ip link set lo up 2>/dev/null

# The memory cgroup tracer runs in: BPF maps are charged to it (Linux >= 5.11).
memcg=$cg/tracer_mem
echo +memory > $cg/cgroup.subtree_control 2>/dev/null
mkdir -p $memcg

# mem_read NAME PID: what the kernel charged so far to tracer's memory cgroup, and the
# memlock of PID's map fds, into /tmp/NAME.mem (memory.stat lines, then `memlock N`).
cat > /tmp/mem_read.sh <<'MEMREAD'
out=/tmp/$1.mem
cat /sys/fs/cgroup/tracer_mem/memory.stat > $out 2>/dev/null
total=0
for f in /proc/$2/fdinfo/*; do
    m=$(sed -n 's/^memlock:[[:space:]]*//p' $f 2>/dev/null)
    [ -n "$m" ] && total=$((total + m))
done
echo "memlock $total" >> $out
echo "possible $(cat /sys/devices/system/cpu/possible)" >> $out
MEMREAD

# scale_memory HOW: tracer's maps' kernel memory under `capture`, `top --frames` and
# `serve`, attached by HOW; with --verbose, tracer's log says what it sized them for.
scale_memory() {
    how=$1
    cat $memcg/memory.stat > /tmp/mem_base_$how.mem 2>/dev/null
    emit mem_base_$how.mem /tmp/mem_base_$how.mem
    # capture: its command runs once recording started, in tracer's cgroup; $PPID is tracer.
    sh -c "echo \$\$ > $memcg/cgroup.procs; exec tracer capture --attach $how --verbose -- sh -c 'sh /tmp/mem_read.sh mem_capture_$how \$PPID'" \
        > /tmp/mem_capture_$how.log 2>&1
    emit mem_capture_$how.mem /tmp/mem_capture_$how.mem
    emit mem_capture_$how.log /tmp/mem_capture_$how.log
    # top: once its first frame is out, and stopped only once read (a top that ended its
    # frames while its fds were read once showed half its maps).
    sh -c "echo \$\$ > $memcg/cgroup.procs; exec tracer top --attach $how --frames 600 --interval 1s --width 120 --height 30 --verbose" \
        > /tmp/mem_top_$how.txt 2> /tmp/mem_top_$how.log &
    p=$!
    i=0
    while [ $i -lt 1200 ] && ! grep -q "refresh 1/600" /tmp/mem_top_$how.txt 2>/dev/null; do sleep 0.1; i=$((i+1)); done
    sh /tmp/mem_read.sh mem_top_$how $p
    kill $p
    wait $p
    emit mem_top_$how.mem /tmp/mem_top_$how.mem
    emit mem_top_$how.log /tmp/mem_top_$how.log
    # serve: once it answers.
    sh -c "echo \$\$ > $memcg/cgroup.procs; exec tracer serve --attach $how --listen 127.0.0.1:29119 --verbose" \
        > /tmp/mem_serve_$how.log 2>&1 &
    p=$!
    i=0
    while [ $i -lt 1200 ] && ! wget -q -O /dev/null http://127.0.0.1:29119/metrics 2>/dev/null; do sleep 0.1; i=$((i+1)); done
    sh /tmp/mem_read.sh mem_serve_$how $p
    kill $p
    wait $p
    emit mem_serve_$how.mem /tmp/mem_serve_$how.mem
    emit mem_serve_$how.log /tmp/mem_serve_$how.log
}

# The workload (`guest-work cgroups`): cgroup i (of N, made beforehand under
# /sys/fs/cgroup/sc) gets a process of its own that makes and removes k = 1 + i mod 7
# directories (k vfs_rmdir, k rmdir(2)) and creates and unlinks k files on tmpfs (k unlink),
# then exits. Every cgroup is alive throughout.

# scale_make N / scale_remove N: the N cgroups and their directories.
scale_make() {
    mkdir -p $cg/sc /tmp/sc
    seq 0 $(($1 - 1)) | sed "s|^|$cg/sc/g|" | xargs mkdir -p
    seq 0 $(($1 - 1)) | sed "s|^|/tmp/sc/g|" | xargs mkdir -p
}
scale_remove() {
    seq 0 $(($1 - 1)) | sed "s|^|$cg/sc/g|" | xargs rmdir 2>/dev/null
    rmdir $cg/sc 2>/dev/null
    rm -rf /tmp/sc
}

# scale_cgroups N NAME TRACER-ARGS...: one capture of the workload over N cgroups.
scale_cgroups() {
    n=$1 name=$2
    shift 2
    scale_make $n
    start=$(date +%s)
    timeout 900 tracer capture "$@" --format json -o /tmp/$name.json -- guest-work cgroups $cg/sc /tmp/sc $n \
        > /tmp/$name.log 2>&1
    echo $? > /tmp/$name.rc
    echo "$(($(date +%s) - start)) s" > /tmp/$name.took
    scale_remove $n
    emit $name.rc /tmp/$name.rc
    emit $name.took /tmp/$name.took
    emit $name.log /tmp/$name.log
    [ -f /tmp/$name.json ] && emit $name.json /tmp/$name.json
}

# largest FILE: each series' largest sample in FILE (`scrape series value` lines), as
# `series value` lines: what the host sums per probe.
largest() {
    awk '{ if (!($2 in m) || $3 + 0 > m[$2] + 0) m[$2] = $3 } END { for (s in m) print s, m[s] }' "$1"
}

# scale_serve N MAX NAME: the workload over N cgroups under `tracer serve --max-cgroups
# MAX`, scraped every second as Prometheus would. A cgroup's label set goes stale once it
# loses its slot (its history stays in the samples already taken), so what is summed is each
# series' largest sample: NAME.max has one `series value` line per series, and `named N`,
# the most workload cgroups one scrape named.
scale_serve() {
    n=$1 max=$2 name=$3
    scale_make $n
    tracer serve --listen 127.0.0.1:29118 --interval 1s --max-cgroups $max > /tmp/$name.log 2>&1 &
    p=$!
    i=0
    while [ $i -lt 1200 ] && ! wget -q -O /dev/null http://127.0.0.1:29118/metrics 2>/dev/null; do sleep 0.1; i=$((i+1)); done
    rm -f /tmp/$name.samples /tmp/$name.stop
    (
        k=0
        while [ ! -e /tmp/$name.stop ]; do
            wget -q -O - http://127.0.0.1:29118/metrics 2>/dev/null \
                | grep -E '^tracer_cgroup_calls_total\{.*probe="(vfs_rmdir|rmdir|unlink)"' \
                | sed "s/^/$k /" >> /tmp/$name.samples
            k=$((k+1))
            sleep 1
        done
    ) &
    scraper=$!
    guest-work cgroups $cg/sc /tmp/sc $n >> /tmp/$name.log 2>&1
    echo "workload exit $?" >> /tmp/$name.log
    # Until the scrapes have seen every call of the workload on each probe (the sum over
    # series of each one's largest sample, as the host judges it), 120 s at most: a refresh
    # over 2,000 cgroups can take seconds with another VM on the host, and a fixed 4 s once
    # left 172 of 7,995 vfs_rmdir calls unscraped. A call filed under a label set that left
    # before any scrape saw it is never seen: the wait runs out and the host's check fails.
    want=$(awk -v n=$n 'BEGIN { for (i = 0; i < n; i++) s += 1 + i % 7; print s }')
    i=0
    while [ $i -lt 120 ] && ! largest /tmp/$name.samples | awk -v w=$want '
        BEGIN { want["vfs_rmdir"]; want["rmdir"]; want["unlink"] }
        { for (p in want) if (index($1, "probe=\"" p "\"") > 0) s[p] += $2 }
        END { for (p in want) if (s[p] < w) exit 1 }'; do
        sleep 1
        i=$((i+1))
    done
    echo "the scrapes saw every call after $i s" >> /tmp/$name.log
    # What tracer reports lost, from one last scrape: NAME.losses, its nonzero loss lines.
    wget -q -O - http://127.0.0.1:29118/metrics 2>/dev/null \
        | grep -E '^tracer_(probe_lost_calls|lost_events)_total\{' | awk '$2 != 0' > /tmp/$name.losses
    touch /tmp/$name.stop
    wait $scraper
    kill $p
    wait $p
    echo "exit $?" >> /tmp/$name.log
    scale_remove $n
    largest /tmp/$name.samples > /tmp/$name.max
    awk '{ if (index($2, "cgroup=\"/sc/") > 0) { split($2, a, "cgroup=\""); split(a[2], c, "\""); k = $1 " " c[1]; if (!(k in seen)) { seen[k] = 1; per[$1]++ } } }
         END { most = 0; for (x in per) if (per[x] > most) most = per[x]; print "named", most }' \
        /tmp/$name.samples >> /tmp/$name.max
    echo "scrapes $(awk '{print $1}' /tmp/$name.samples | sort -u | wc -l)" >> /tmp/$name.max
    emit $name.max /tmp/$name.max
    emit $name.losses /tmp/$name.losses
    emit $name.log /tmp/$name.log
}

# The threads workload: N rmdir(2) of empty directories in DIR, each on a thread of its own,
# wait for DIR's inode lock while an rmdir of DIR/victim (full of negative dentries) prunes
# under it, so that N threads have a call in flight at once. The waiters are forked first
# and held on a FIFO (opened read-write, so that none blocks opening it); once the victim's
# rmdir(1) runs, one line per waiter releases them all.
cat > /tmp/threads_work.sh <<'THREADS'
d=$1 n=$2
rm -f /tmp/threads.fifo
mkfifo /tmp/threads.fifo
j=0
while [ $j -lt $n ]; do (read x <> /tmp/threads.fifo; rmdir $d/e$j) & j=$((j+1)); done
# Until every waiter holds the FIFO open (60 s at most).
i=0
while [ $i -lt 600 ] && [ "$(ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c threads.fifo)" -lt $n ]; do
    sleep 0.1
    i=$((i+1))
done
sh -c "exec rmdir $d/victim" &
r=$!
c=
while [ "$c" != rmdir ]; do read c < /proc/$r/comm || break; done
sleep 0.1
seq $n > /tmp/threads.fifo
wait
THREADS

# scale_threads NAME N ENTRIES TRACER-ARGS...: one capture of the threads workload with
# `THREADS` of ENTRIES entries, on ext2 (which keeps negative dentries: tmpfs drops them).
scale_threads() {
    name=$1 n=$2 entries=$3
    shift 3
    [ -d /mnt/ext2 ] || mount-ext2 > /tmp/ext2.log 2>&1
    d=/mnt/ext2/$name
    mkdir -p $d/victim
    seq 0 $(($n - 1)) | sed "s|^|$d/e|" | xargs mkdir -p
    # 250000 failed lookups (about 18 s): about 0.6 s of pruning under TCG.
    seq 0 249999 | sed "s|^|$d/victim/x|" | xargs ls > /dev/null 2>&1
    TRACER_MAP_ENTRIES=THREADS=$entries timeout 600 tracer capture "$@" --format json \
        -o /tmp/$name.json -- sh /tmp/threads_work.sh $d $n > /tmp/$name.log 2>&1
    echo $? > /tmp/$name.rc
    echo "left $(ls $d | wc -l)" >> /tmp/$name.log
    rm -rf $d
    emit $name.rc /tmp/$name.rc
    emit $name.log /tmp/$name.log
    [ -f /tmp/$name.json ] && emit $name.json /tmp/$name.json
}

# scale_threads_pair N: the threads workload twice under --attach fentry (a kretprobe's
# instances would run out first), `THREADS` holding N + 16 states
# plus 128 per online CPU (the LRU's per-CPU free lists, as tracer sizes it) and then only
# N + 16. threads.sizes says which.
scale_threads_pair() {
    n=$1
    online=$(grep -c ^processor /proc/cpuinfo)
    fit=$(($n + 16 + 128 * $online))
    shrunk=$(($n + 16))
    echo "waiters $n online $online fit $fit shrunk $shrunk" > /tmp/threads.sizes
    emit threads.sizes /tmp/threads.sizes
    scale_threads threads_fit $n $fit --attach fentry --verbose
    scale_threads threads_shrunk $n $shrunk --attach fentry --verbose
}
