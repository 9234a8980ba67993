# The guest half of `cargo xtask test`, run by /init in the test VM. Every workload
# has counts the kernel's code fixes; the host (xtask/src/testing/suite/) asserts them.
#
# Each workload runs under the kernel's own kprobe events (tracefs), which proves the
# expected counts independently of tracer, then under `tracer capture --attach kprobe`
# and `--attach fentry` (files NAME_kprobe, NAME_fentry), and under bpftrace.
# Results go to the host through `emit` (/bin/emit: framed blocks on /dev/ttyS1).

tracing=/sys/kernel/tracing
# Where vfs_rmdir's calls arrive, as tracer chooses: its split-off body where the compiler
# made one (Debian's 5.10: do_rmdir calls vfs_rmdir.part.0 directly), else vfs_rmdir.
rmdir_sym=vfs_rmdir
if [ "$(grep -c ' vfs_rmdir\.part\.[0-9]*$' /proc/kallsyms)" = 1 ]; then
    rmdir_sym=$(sed -n 's/.* \(vfs_rmdir\.part\.[0-9]*\)$/\1/p' /proc/kallsyms)
fi

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

# wait_for FILE TEXT: until TEXT shows in FILE, 120 s at most.
wait_for() {
    i=0
    while [ $i -lt 1200 ] && ! grep -q "$2" "$1" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
}

# The cases of what tracer does with the maps once read (names, `top`, `serve` and
# Prometheus) run on one kernel, 6.12: their kernel side is the reading every kernel's
# captures and the memory cases' `top` and `serve` do, and they cost minutes per boot.
sinks=no
case $(uname -r) in 6.12.*) sinks=yes ;; esac

# say TEXT: a section's heading on the console, with the guest's uptime (where the
# minutes go).
say() { echo "suite: [$(cut -d' ' -f1 /proc/uptime) s] $*"; }

say "uname"
uname -r > /tmp/uname
emit uname /tmp/uname

say "rmdir (200 mkdir + rmdir)"
mkdir -p /tmp/rmdir
reference rmdir "$rmdir_workload" $rmdir_sym d_delete
for how in kprobe fentry; do
    capture rmdir_$how "$rmdir_workload" --attach $how
done

say "unlink (100 unlinks in a kept directory on ext2 over loop)"
# ext2 keeps negative dentries; tmpfs, the root here, drops them at once.
{ mount-ext2 && mkdir -p /mnt/ext2/kept; } > /tmp/ext2.log 2>&1
echo "exit $?" >> /tmp/ext2.log
emit ext2.log /tmp/ext2.log
make_files='cd /mnt/ext2/kept && i=0; while [ $i -lt 100 ]; do touch f$i || exit 1; i=$((i+1)); done'
if sh -c "$make_files"; then
    reference unlink "$unlink_workload" d_delete vfs_unlink
    for how in kprobe fentry; do
        sh -c "$make_files"
        capture unlink_$how "$unlink_workload" --attach $how
    done
fi

say "tmpfs (50 tmpfs mount + umount)"
mkdir -p /mnt/t
reference tmpfs "$tmpfs_workload" unregister_shrinker shrinker_free synchronize_srcu synchronize_rcu_expedited
for how in kprobe fentry; do
    capture tmpfs_$how "$tmpfs_workload" --attach $how
done

say "dentries on tmpfs (100 unlinks: tmpfs drops every negative dentry)"
mkdir -p /tmp/kept
for how in kprobe fentry; do
    sh -c 'cd /tmp/kept && i=0; while [ $i -lt 100 ]; do touch f$i || exit 1; i=$((i+1)); done'
    capture unlink_tmpfs_$how 'cd /tmp/kept && i=0; while [ $i -lt 100 ]; do rm f$i || exit 1; i=$((i+1)); done' --attach $how
done

say "rm -r by unlinkat (GNU rm: 10 directories of 3 files under one, each removed by one unlinkat)"
# busybox removes with unlink(2) and rmdir(2); GNU rm (as `rm -rf` on most hosts) removes
# every entry by unlinkat(2), AT_REMOVEDIR for a directory: 30 files and 11 directories.
for how in kprobe fentry; do
    i=0
    while [ $i -lt 10 ]; do
        mkdir -p /tmp/ua_$how/d$i && touch /tmp/ua_$how/d$i/f0 /tmp/ua_$how/d$i/f1 /tmp/ua_$how/d$i/f2
        i=$((i+1))
    done
    capture unlinkat_$how "/bin/gnu-rm -r /tmp/ua_$how" --attach $how
done

say "concurrency (37, 53 and 71 mkdir + rmdir at once on 2 CPUs, each in a cgroup of its own)"
# Each loop moves itself into its cgroup before its first mkdir.
half='echo $$ > /sys/fs/cgroup/$1/cgroup.procs && cd /tmp/$2 && i=0; while [ $i -lt $3 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done'
echo "$half" > /tmp/half.sh
for n in 37 53 71; do mkdir -p /sys/fs/cgroup/c$n /tmp/c$n; done
conc='sh /tmp/half.sh c37 c37 37 & a=$!; sh /tmp/half.sh c53 c53 53 & b=$!; sh /tmp/half.sh c71 c71 71 & c=$!; wait $a && wait $b && wait $c'
# --verbose: the log names the programs the kernel skipped, if any.
for how in kprobe fentry; do
    capture conc_$how "$conc" --attach $how --verbose
done
capture conc_auto "$conc" --verbose

say "an idle command (sleep 4): attaching records no grace-period wait"
for how in kprobe fentry; do
    capture idle_$how 'sleep 4' --attach $how
done

say "the kernel programs' own voice: RMDIR_LOCKS of 1 entry, 20 mkdir + rmdir, --verbose"
# Each rmdir registers its parent's lock, and its victim's finds the one slot taken.
mkdir -p /tmp/voice
export TRACER_MAP_ENTRIES=RMDIR_LOCKS=1
capture voice 'cd /tmp/voice && i=0; while [ $i -lt 20 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done' --verbose
unset TRACER_MAP_ENTRIES

say "the kernel programs' own voice: COUNTERS of 1 entry, 20 unlinks on ext2 then 30 on tmpfs, --verbose"
# The ext2 unlinks' negative dentries take the one entry (the workload's cgroup, negative);
# the tmpfs unlinks' dropped dentries find the map full.
voice_files='i=0; while [ $i -lt 20 ]; do touch /mnt/ext2/kept/v$i || exit 1; i=$((i+1)); done; i=0; while [ $i -lt 30 ]; do touch /tmp/vc/v$i || exit 1; i=$((i+1)); done'
voice_unlinks='i=0; while [ $i -lt 20 ]; do rm /mnt/ext2/kept/v$i || exit 1; i=$((i+1)); done; i=0; while [ $i -lt 30 ]; do rm /tmp/vc/v$i || exit 1; i=$((i+1)); done'
mkdir -p /tmp/vc
for how in kprobe fentry; do
    if [ -d /mnt/ext2/kept ] && sh -c "$voice_files"; then
        export TRACER_MAP_ENTRIES=COUNTERS=1
        capture voice_counters_$how "$voice_unlinks" --attach $how --verbose
        unset TRACER_MAP_ENTRIES
    fi
done

say "inode-lock waits: 4 lookups block on the parent's lock while rmdir prunes"
# lockwait.sh DIR N: rmdir DIR/victim (full of negative dentries) from cgroup /lk_rm, and
# once it holds DIR's lock, N lookups of new names in DIR from cgroup /lk_wait: each must
# wait for that lock until the rmdir is done (a lookup that misses the dcache takes it).
cat > /tmp/lockwait.sh <<'LOCKWAIT'
sh -c "echo \$\$ > /sys/fs/cgroup/lk_rm/cgroup.procs; exec rmdir $1/victim" &
r=$!
# Start the lookups once rmdir(1) runs (its exec renamed the task) and has had 0.1 s to
# reach rmdir(2) and take the lock: a fixed delay from the fork left some runs only 50 ms
# of the hold to wait through when the pruning was quick.
c=
while [ "$c" != rmdir ]; do read c < /proc/$r/comm || break; done
sleep 0.1
echo $$ > /sys/fs/cgroup/lk_wait/cgroup.procs
j=0
while [ $j -lt $2 ]; do [ -e $1/y$j ] & j=$((j+1)); done
wait $r
rc=$?
wait
exit $rc
LOCKWAIT
mkdir -p /sys/fs/cgroup/lk_rm /sys/fs/cgroup/lk_wait
if [ -d /mnt/ext2 ]; then
    for how in kprobe fentry; do
        d=/mnt/ext2/lk_$how
        mkdir -p $d/victim
        # 250000 failed lookups (about 18 s): about 0.6 s of pruning under TCG.
        seq 0 249999 | sed "s|^|$d/victim/x|" | xargs ls > /dev/null 2>&1
        capture lockwait_$how "sh /tmp/lockwait.sh $d 4" --attach $how
    done
fi

say "SRCU: removing inotify watches (fsnotify marks wait for SRCU when destroyed)"
mkdir -p /tmp/watched
# Each watch is removed only once inotifywait says it is set up: a fixed 0.3 s once killed
# a starved VM's inotifywait before it had added its watch, and that run's reference counted
# 8 reaper runs, not 10. After each watch is gone, a second for the kernel worker that frees
# its connector (and waits for SRCU) to run before the next is queued: were two queued
# before it ran, one run would free both and the runs counted would differ between runs.
srcu_workload='i=0; while [ $i -lt 5 ]; do rm -f /tmp/iw.err; /usr/bin/inotifywait -e delete /tmp/watched > /dev/null 2> /tmp/iw.err & p=$!; j=0; while [ $j -lt 600 ] && ! grep -q established /tmp/iw.err 2>/dev/null; do sleep 0.1; j=$((j+1)); done; kill $p; wait $p; sleep 1; i=$((i+1)); done; exit 0'
if [ -x /usr/bin/inotifywait ]; then
    reference srcu "$srcu_workload" synchronize_srcu fsnotify_mark_destroy_workfn fsnotify_connector_destroy_workfn
    for how in kprobe fentry; do
        capture srcu_$how "$srcu_workload" --attach $how
    done
    # The same with the first 5 reaper waits' returns skipped (test knob), then the writeback
    # of a file on ext2 for the kernel's workers to take other work.
    for how in kprobe fentry; do
        export TRACER_TEST_MISS_RETURNS=synchronize_srcu:5
        capture srcu_heal_$how "${srcu_workload%exit 0}"'k=0; while [ $k -lt 3 ]; do echo $k > /mnt/ext2/wq; sync; k=$((k+1)); done; exit 0' --attach $how
        unset TRACER_TEST_MISS_RETURNS
    done
fi

say "cgroup tracepoint layout"
emit cgroup_format $tracing/events/cgroup/cgroup_mkdir/format

say "cgroups made and removed during a capture (30, 40, 50 mkdir + rmdir), kprobe and fentry"
mkdir -p /tmp/cca /tmp/ccb /tmp/ccc
# Each cgroup is made, used by one shell, and removed once that shell has exited.
churn='for spec in a:30 b:40 c:50; do n=${spec%%:*}; k=${spec#*:}; mkdir /sys/fs/cgroup/churn_$n && sh /tmp/half.sh churn_$n cc$n $k && rmdir /sys/fs/cgroup/churn_$n || exit 1; done'
for how in kprobe fentry; do
    capture churn_$how "$churn" --attach $how
done

say "missed returns: 5 of 10 vfs_rmdir returns skipped (test knob), unlinks on the same thread after each"
# busybox `rm -r` removes its arguments in turn on one thread: a directory by rmdir(2), a
# file by unlink(2).
heal_args=
i=0; while [ $i -lt 10 ]; do heal_args="$heal_args d$i f$i"; i=$((i+1)); done
for how in kprobe fentry; do
    mkdir -p /tmp/heal_$how
    (cd /tmp/heal_$how && for a in $heal_args; do case $a in d*) mkdir $a;; *) : > $a;; esac; done)
    export TRACER_TEST_MISS_RETURNS=vfs_rmdir:5
    capture heal_$how "cd /tmp/heal_$how && rm -r $heal_args" --attach $how
    unset TRACER_TEST_MISS_RETURNS
done

say "missed returns at a thread's exit: 10 rmdirs by a process each, 5 of their vfs_rmdir returns skipped (test knob)"
# A subshell per rmdir, so each call's thread exits after it, making no other syscall.
for how in kprobe fentry; do
    mkdir -p /tmp/heal_exit_$how
    i=0; while [ $i -lt 10 ]; do mkdir /tmp/heal_exit_$how/d$i; i=$((i+1)); done
    export TRACER_TEST_MISS_RETURNS=vfs_rmdir:5
    capture heal_exit_$how "cd /tmp/heal_exit_$how && for d in d*; do (rmdir \$d); done" --attach $how
    unset TRACER_TEST_MISS_RETURNS
done

say "missed returns before task work: 10 umounts of tmpfs, 5 namespace_unlock returns skipped (test knob), with and without the umount(2) probe"
# A superblock is torn down (deactivate_locked_super) as task work on the way back from
# umount(2), after namespace_unlock has returned: no syscall entry comes between a missed
# return and it. Mounted before the capture, so that only the umounts call namespace_unlock.
for how in kprobe fentry; do
    i=0; while [ $i -lt 10 ]; do mkdir -p /mnt/h$i && mount -t tmpfs none /mnt/h$i; i=$((i+1)); done
    export TRACER_TEST_MISS_RETURNS=namespace_unlock:5
    capture heal_umount_$how 'i=0; while [ $i -lt 10 ]; do umount /mnt/h$i || exit 1; i=$((i+1)); done' --attach $how
    # Again without the umount(2) probe, whose return discards what is left in flight: the
    # teardown's entry must find the stale frame gone from the stack, as a kernel thread's
    # call must, with no syscall to reset it.
    i=0; while [ $i -lt 10 ]; do mount -t tmpfs none /mnt/h$i; i=$((i+1)); done
    capture heal_stack_$how 'i=0; while [ $i -lt 10 ]; do umount /mnt/h$i || exit 1; i=$((i+1)); done' --attach $how \
        --probes namespace_unlock,synchronize_rcu_expedited,deactivate_locked_super,unregister_shrinker,shrinker_free
    unset TRACER_TEST_MISS_RETURNS
done

# Userspace behaviour over the same maps every kernel's captures read: on the sinks' kernel.
if [ "$sinks" = yes ]; then
    say "names (cgroups laid out as each runtime lays them out, named after they are made)"
    # The ids and UIDs are xtask/src/testing/suite/checks.rs's (`names`). Each cgroup gets
    # its own count of mkdir + rmdir; the kubelet's links and pod directories and the OCI
    # bundles appear only after every cgroup is made and used, under a root of their own.
    nr=/tmp/names-root
    hex() { echo "$1$1$1$1$1$1$1$1"; }
    C1=$(hex c1c1c1c1) C2=$(hex c2c2c2c2) C3=$(hex c3c3c3c3) P1=$(hex a0a0a0a0) C4=$(hex d4d4d4d4) C5=$(hex e5e5e5e5)
    U1=11111111-1111-4111-8111-111111111111 U1s=11111111_1111_4111_8111_111111111111
    U2=22222222-2222-4222-8222-222222222222
    U3=33333333-3333-4333-8333-333333333333 U3s=33333333_3333_4333_8333_333333333333
    pod1=kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$U1s.slice
    names_cgroups="$pod1/cri-containerd-$C1.scope:11 kubepods/besteffort/pod$U2/$C2:12 kubepods.slice/kubepods-pod$U3s.slice/crio-$C3.scope:13 $pod1/cri-containerd-$P1.scope:14 system.slice/docker-$C4.scope:15 machine.slice/libpod-$C5.scope:16 system.slice/names-test.service:17 names-plain:18"
    mkdir -p /tmp/namesw
    rm -rf $nr
    cat > /tmp/names.sh <<NAMES
for spec in $names_cgroups; do mkdir -p /sys/fs/cgroup/\${spec%:*} || exit 1; done
for spec in $names_cgroups; do sh /tmp/half.sh \${spec%:*} namesw \${spec##*:} || exit 1; done
sleep 1
mkdir -p $nr/var/log/containers $nr/var/log/pods/shop_cart-7d9f_$U1/cart $nr/var/log/pods/blog_web-0_$U2/nginx
ln -s ../pods/shop_cart-7d9f_$U1/cart/0.log $nr/var/log/containers/cart-7d9f_shop_cart-$C1.log
ln -s ../pods/blog_web-0_$U2/nginx/0.log $nr/var/log/containers/web-0_blog_nginx-$C2.log
b=$nr/run/containerd/io.containerd.runtime.v2.task/k8s.io/$P1
mkdir -p \$b
echo '{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-name":"cart-7d9f","io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.sandbox-uid":"$U1"}}' > \$b/config.json
b=$nr/run/containers/storage/overlay-containers/$C3/userdata
mkdir -p \$b
echo '{"ociVersion":"1.2.0","annotations":{"io.kubernetes.pod.name":"db-0","io.kubernetes.pod.namespace":"ops","io.kubernetes.pod.uid":"$U3","io.kubernetes.container.name":"postgres","io.kubernetes.cri-o.ContainerType":"container"}}' > \$b/config.json
sleep 1
NAMES
    capture names "sh /tmp/names.sh" --names-root $nr
    tracer report /tmp/names.json > /tmp/names.txt 2>&1
    emit names.txt /tmp/names.txt
    for spec in $names_cgroups; do rmdir /sys/fs/cgroup/${spec%:*}; done
    # The same workload again, its cgroups and names made anew, under `tracer top --frames` and
    # `tracer serve` at once. A cgroup's names are looked up 0, 1, 3, 7, 15 and 31 refreshes
    # after it is made: 36 refreshes see names made up to 31 s after their cgroups (on a loaded
    # host, 6.12's were first found at the 15th).
    rm -rf $nr
    ifconfig lo 127.0.0.1 up 2>/dev/null || ip link set lo up 2>/dev/null
    tracer serve --listen 127.0.0.1:29111 --interval 1s --names-root $nr > /tmp/names_serve.log 2>&1 &
    srv=$!
    i=0
    while [ $i -lt 1200 ] && ! wget -q -O /dev/null http://127.0.0.1:29111/metrics 2>/dev/null; do
        sleep 0.1; i=$((i+1))
    done
    # Once serve answers: top's refreshes all come after the workload starts, as counted above.
    timeout 200 tracer top --frames 36 --interval 1s --view cgroups --width 160 --height 40 \
        --names-root $nr > /tmp/names_top.txt 2> /tmp/names_top.err &
    top=$!
    wait_for /tmp/names_top.txt "refresh 1/36"
    sh /tmp/names.sh >> /tmp/names_top.err 2>&1
    echo "workload exit $?" >> /tmp/names_top.err
    wait $top
    echo "exit $?" >> /tmp/names_top.err
    wget -q -O /tmp/names_serve.metrics http://127.0.0.1:29111/metrics
    kill $srv
    wait $srv
    echo "exit $?" >> /tmp/names_serve.log
    emit names_top.txt /tmp/names_top.txt
    emit names_top.err /tmp/names_top.err
    [ -f /tmp/names_serve.metrics ] && emit names_serve.metrics /tmp/names_serve.metrics
    emit names_serve.log /tmp/names_serve.log
    for spec in $names_cgroups; do rmdir /sys/fs/cgroup/${spec%:*}; done
    for d in $pod1 kubepods.slice/kubepods-burstable.slice kubepods.slice/kubepods-pod$U3s.slice kubepods.slice kubepods/besteffort/pod$U2 kubepods/besteffort kubepods system.slice machine.slice; do
        rmdir /sys/fs/cgroup/$d
    done
    rm -rf $nr /tmp/namesw
fi

say "slow calls: rmdir of 20000 negative dentries over --slow 5ms; 1 ns over a tight loop"
if [ -d /mnt/ext2 ]; then
    for how in kprobe fentry; do
        mkdir -p /mnt/ext2/slow_$how
        sh -c "i=0; while [ \$i -lt 20000 ]; do [ -e /mnt/ext2/slow_$how/x\$i ]; i=\$((i+1)); done"
        # The rmdir process's pid is the shell's: it execs.
        capture slow_$how "echo \$\$ > /tmp/slow_$how.pid; exec rmdir /mnt/ext2/slow_$how" --attach $how --slow 5ms
        emit slow_$how.pid /tmp/slow_$how.pid
    done
fi
mkdir -p /tmp/tight
for how in kprobe fentry; do
    capture tight_$how 'cd /tmp/tight && i=0; while [ $i -lt 400 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done' --attach $how --slow 1ns
done
# The same with the host busy making the same calls in a cgroup of its own.
mkdir -p /tmp/busy /sys/fs/cgroup/busy
for how in kprobe fentry; do
    # Not `mkdir && rmdir`: a kill between the two would leave the directory, and every
    # later mkdir fail with no rmdir after it.
    sh -c 'echo $$ > /sys/fs/cgroup/busy/cgroup.procs; while :; do mkdir /tmp/busy/d; rmdir /tmp/busy/d; done 2>/dev/null' &
    busy=$!
    capture tight_busy_$how 'cd /tmp/tight && i=0; while [ $i -lt 300 ]; do mkdir b$i && rmdir b$i || exit 1; i=$((i+1)); done' --attach $how --slow 1ns
    kill $busy; wait $busy 2>/dev/null
done
rmdir /sys/fs/cgroup/busy 2>/dev/null

say "umount of 300 tmpfs, and the capture file re-rendered"
for how in kprobe fentry; do
    i=0; while [ $i -lt 300 ]; do mkdir -p /mnt/s/$i && mount -t tmpfs none /mnt/s/$i; i=$((i+1)); done
    capture umount300_$how 'i=0; while [ $i -lt 300 ]; do umount /mnt/s/$i || exit 1; i=$((i+1)); done' --attach $how
done
if tracer report --format json -o /tmp/umount300.rt.json /tmp/umount300_fentry.json > /tmp/rt.log 2>&1; then
    emit umount300.rt.json /tmp/umount300.rt.json
else
    emit umount300.rt.log /tmp/rt.log
fi

say "negative dentries (20000 failed lookups), then rmdir while ls reads the parent"
if [ -d /mnt/ext2 ]; then
    mkdir -p /mnt/ext2/es
    # `[ -e ]` is a shell builtin: 20000 lookups without 20000 forks.
    sh -c 'i=0; while [ $i -lt 20000 ]; do [ -e /mnt/ext2/es/n$i ]; i=$((i+1)); done'
    capture negdentry '(while [ ! -e /tmp/stop ]; do ls /mnt/ext2 > /dev/null; done) & sleep 0.3; rmdir /mnt/ext2/es; rc=$?; touch /tmp/stop; wait; exit $rc'
fi

# The same workloads under bpftrace, in the same boot: its counts must equal tracer's.
teardown=unregister_shrinker
grep -q ' shrinker_free$' /proc/kallsyms && teardown=shrinker_free
# bt NAME WORKLOAD PROGRAM: bpftrace's maps after one run of WORKLOAD.
bt() {
    echo "$2" > /tmp/$1.sh
    timeout 300 /usr/bin/bpftrace -e "$3" -c "sh /tmp/$1.sh" > /tmp/$1.bt 2>&1
    echo "exit $?" >> /tmp/$1.bt
    emit $1.bt /tmp/$1.bt
}
if [ -x /usr/bin/bpftrace ]; then
    say "bpftrace on the same workloads"
    bt rmdir "$rmdir_workload" "kprobe:$rmdir_sym { @vfs_rmdir = count(); } kprobe:d_delete { @d_delete = count(); }"
    if [ -d /mnt/ext2/kept ]; then
        sh -c "$make_files"
        bt unlink "$unlink_workload" 'kprobe:d_delete { @d_delete = count(); }'
    fi
    bt tmpfs "$tmpfs_workload" "kprobe:$teardown { @$teardown = count(); } kprobe:synchronize_rcu_expedited { @synchronize_rcu_expedited = count(); }"
    if [ -x /usr/bin/inotifywait ]; then
        bt srcu "$srcu_workload" 'kprobe:synchronize_srcu { @synchronize_srcu = count(); } kprobe:fsnotify_mark_destroy_workfn { @fsnotify_mark_destroy_workfn = count(); } kprobe:fsnotify_connector_destroy_workfn { @fsnotify_connector_destroy_workfn = count(); }'
    fi
fi

say "calibration captures (umount of 50 and 150 tmpfs; rmdir of 5000 and 20000 negatives)"
for n in 50 150; do
    i=0; while [ $i -lt $n ]; do mkdir -p /mnt/c$n/$i && mount -t tmpfs none /mnt/c$n/$i; i=$((i+1)); done
    capture um$n "i=0; while [ \$i -lt $n ]; do umount /mnt/c$n/\$i || exit 1; i=\$((i+1)); done"
done
if [ -d /mnt/ext2 ]; then
    for n in 5000 20000; do
        mkdir -p /mnt/ext2/n$n
        sh -c "i=0; while [ \$i -lt $n ]; do [ -e /mnt/ext2/n$n/x\$i ]; i=\$((i+1)); done"
        capture neg$n "rmdir /mnt/ext2/n$n"
    done
fi

# Userspace behaviour over the same maps every kernel's captures read: on the sinks' kernel.
if [ "$sinks" = yes ]; then
    say "live views: tracer top --frames and tracer serve while workloads run in cgroups of their own"
    for how in kprobe fentry; do
        cg=top_$how
        mkdir -p /sys/fs/cgroup/$cg /tmp/$cg
        # The slow rmdir's directory: 20000 negative dentries, made before top starts.
        if [ -d /mnt/ext2 ]; then
            mkdir -p /mnt/ext2/$cg
            sh -c "i=0; while [ \$i -lt 20000 ]; do [ -e /mnt/ext2/$cg/x\$i ]; i=\$((i+1)); done"
        fi
        timeout 200 tracer top --attach $how --frames 8 --interval 1s --view cgroups,slow \
            --width 160 --height 40 --slow 5ms > /tmp/$cg.txt 2> /tmp/$cg.err &
        top=$!
        # Workloads start once the probes are attached and the first refresh is out.
        wait_for /tmp/$cg.txt "refresh 1/8"
        sh /tmp/half.sh $cg $cg 77 >> /tmp/$cg.err 2>&1
        if [ -d /mnt/ext2/$cg ]; then
            sh -c "echo \$\$ > /sys/fs/cgroup/$cg/cgroup.procs; echo \$\$ > /tmp/$cg.pid; exec rmdir /mnt/ext2/$cg"
        fi
        wait $top
        echo "exit $?" >> /tmp/$cg.err
        emit $cg.txt /tmp/$cg.txt
        emit $cg.err /tmp/$cg.err
        [ -f /tmp/$cg.pid ] && emit $cg.pid /tmp/$cg.pid
    done

    # tracer serve, scraped by a Prometheus on the host through the forwarded port.
    if net-up > /tmp/net.log 2>&1; then
        mkdir -p /sys/fs/cgroup/serve_wl /tmp/serve_wl
        # A pod's container, named by the kubelet's link only after its calls (the names case's
        # hex and ids; checked in xtask/src/testing/suite/live.rs).
        snr=/tmp/serve-names C6=$(hex f6f6f6f6)
        spod=kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod66666666_6666_4666_8666_666666666666.slice/cri-containerd-$C6.scope
        mkdir -p $snr /tmp/serve_pod
        tracer serve --listen 0.0.0.0:29110 --interval 1s --names-root $snr > /tmp/serve.log 2>&1 &
        srv=$!
        i=0
        while [ $i -lt 1200 ] && ! wget -q -O /tmp/serve.first http://127.0.0.1:29110/metrics 2>/dev/null; do
            sleep 0.1; i=$((i+1))
        done
        # Under a capture too, whose fine buckets give tracer's own p99 of the same calls (the
        # workload moves itself from the capture's cgroup into /serve_wl).
        tracer capture --format json -o /tmp/serve_wl.json -- sh /tmp/half.sh serve_wl serve_wl 120 \
            > /tmp/serve_cap.log 2>&1
        mkdir -p /sys/fs/cgroup/$spod && sh /tmp/half.sh $spod serve_pod 5
        mkdir -p $snr/var/log/containers
        ln -s ../pods/live_api-0_66666666-6666-4666-8666-666666666666/api/0.log $snr/var/log/containers/api-0_live_api-$C6.log
        # Looked up 1, 2 and 4 refreshes after the cgroup was made.
        sleep 5
        # Two refreshes for the counts to reach /metrics, then time for Prometheus to scrape.
        sleep 3
        wget -q -O /tmp/serve.metrics http://127.0.0.1:29110/metrics
        sleep 5
        kill $srv
        wait $srv
        echo "exit $?" >> /tmp/serve.log
        emit serve.metrics /tmp/serve.metrics
        emit serve.log /tmp/serve.log
        emit serve_cap.log /tmp/serve_cap.log
        [ -f /tmp/serve_wl.json ] && emit serve_wl.json /tmp/serve_wl.json
    else
        emit net.log /tmp/net.log
    fi
fi

# tracer serve under cgroup churn, scraped every second by the host's Prometheus (6.12
# and 7.3: the newest kernels, default attach). Two slots and a hold of 3 s; each phase
# starts 6 s (two holds) after the last, so which cgroup holds which slot is fixed, as
# xtask/src/testing/suite/churn.rs (`PHASES`) says: /sch_a, /sch_b and /sch_c take turns
# (the third of the first phase finds both slots held, so `other`), /sch_b is removed and
# made again twice, and each cgroup removal is a vfs_rmdir of this shell's, in /.
case $(uname -r) in
6.12.* | 7.3.*)
    # The network is up if the live views' serve brought it up (6.12), else brought up here.
    if ip addr show dev eth0 2> /dev/null | grep -q 10.0.2.15 || net-up > /tmp/net.log 2>&1; then
        say "serve under cgroup churn: --max-cgroups 2 --hold 3s --probes vfs_rmdir,rmdir, evictions, removals past the hold, a path made again"
        mkdir -p /tmp/sch /sys/fs/cgroup/sch_a /sys/fs/cgroup/sch_b /sys/fs/cgroup/sch_c
        # vfs_rmdir and rmdir(2) alone: a call of any probe makes its cgroup busy, and the
        # root's kernel threads call others (grace-period waits, d_delete) when no phase says.
        tracer serve --listen 0.0.0.0:29110 --interval 1s --max-cgroups 2 --hold 3s --probes vfs_rmdir,rmdir > /tmp/sch.log 2>&1 &
        srv=$!
        i=0
        # Up, and with its first refresh out: what tells this tracer's samples from the
        # other serve's on the host.
        while [ $i -lt 1200 ] && ! { wget -q -O /tmp/sch.first http://127.0.0.1:29110/metrics &&
            sed -n 's/^process_start_time_seconds //p' /tmp/sch.first | grep . > /tmp/sch.start; } 2> /dev/null; do
            sleep 0.1; i=$((i+1))
        done
        # The kernel's own count, from after Prometheus' first scrapes of this tracer (no
        # rmdir in between) to after its last calls were scraped.
        sleep 3
        echo 'p:ref_vfs_rmdir vfs_rmdir' >> $tracing/kprobe_events
        echo 1 > $tracing/events/kprobes/enable
        # Each phase's guest uptime in the log, for when one took longer than the hold.
        sch_at() { echo "phase $1 at $(cut -d' ' -f1 /proc/uptime) s"; }
        {
            sch_at 1 && sh /tmp/half.sh sch_a sch 11 && sh /tmp/half.sh sch_b sch 12 && sh /tmp/half.sh sch_c sch 13 &&
            sch_at 1-end && sleep 6 && sch_at 2 && sh /tmp/half.sh sch_c sch 14 &&
            sleep 6 && sch_at 3 && rmdir /sys/fs/cgroup/sch_b &&
            sleep 6 && sch_at 4 && mkdir /sys/fs/cgroup/sch_b && sh /tmp/half.sh sch_b sch 15 &&
            sleep 6 && sch_at 5 && rmdir /sys/fs/cgroup/sch_b &&
            sleep 6 && sch_at 6 && mkdir /sys/fs/cgroup/sch_b && sh /tmp/half.sh sch_b sch 16 &&
            sch_at 6-end
        } > /tmp/sch.phases 2>&1
        echo "exit $?" >> /tmp/sch.phases
        # Two refreshes for the last calls to reach /metrics, then scrapes.
        sleep 4
        echo 0 > $tracing/events/kprobes/enable
        sed -n 's/^ *ref_\([^ ]*\) *\([0-9]*\) .*/\1 \2/p' $tracing/kprobe_profile > /tmp/sch.ref
        echo > $tracing/kprobe_events
        kill $srv
        wait $srv
        echo "exit $?" >> /tmp/sch.log
        rmdir /sys/fs/cgroup/sch_a /sys/fs/cgroup/sch_b /sys/fs/cgroup/sch_c
        for f in sch.start sch.ref sch.phases sch.log; do emit $f /tmp/$f; done
    else
        emit net.log /tmp/net.log
    fi
    ;;
esac

say "scale: the maps' kernel memory at $(cat /sys/devices/system/cpu/possible) possible CPUs, calls past the maps' capacity, many cgroups"
. /scale.sh
for how in kprobe fentry; do
    scale_memory $how
    # HIST shrunk by the test knob: most calls find it full.
    export TRACER_MAP_ENTRIES=HIST=32
    scale_cgroups 50 overflow_$how --attach $how
    unset TRACER_MAP_ENTRIES
done
# 2000 cgroups alive at once take minutes under TCG: on one kernel (the boot that runs
# longest anyway, beside two other kernels' in turn). `cargo xtask bench scale` runs them
# on every kernel.
case $(uname -r) in
6.12.*)
    for how in kprobe fentry; do
        scale_cgroups 2000 scale_$how --attach $how
    done
    scale_serve 2000 100 scale_serve
    ;;
esac

say "done"
