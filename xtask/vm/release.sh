#!/bin/sh
# The release cases' guest half, on Debian 12 booted with systemd (xtask/src/testing/release/):
# the .deb installed with apt and its service run as shipped, then the image run as the
# DaemonSet runs it. Run by release-check.service once the system is up; every file it
# makes goes to the host on the second serial port /release-port names (/dev/ttyS1,
# /dev/ttyAMA1 on arm64; framed as /bin/emit frames them in the suite's VMs), and the host
# judges them. Nothing here decides a verdict.

r=/tmp/r
mkdir -p $r
port=$(cat /release-port)
stty -F $port raw -echo
# The line the host times the boot by, on the console without the journal's prefix.
echo "init: up after $(cut -d' ' -f1 /proc/uptime) s on $(uname -r)" > /dev/console
say() { echo "release: $*"; }
emit() {
    {
        echo "=== FILE $1 ==="
        cat "$2"
        [ -n "$(tail -c1 "$2")" ] && echo
        echo "=== END $1 ==="
    } > $port
}
scrape() { curl -s --max-time 10 http://127.0.0.1:29110/metrics; }
# wait_up FILE: until the service scrapes tracer_source_up 1 (300 s at most); the scrape to FILE.
wait_up() {
    i=0
    while [ $i -lt 600 ]; do
        scrape > "$1" 2>/dev/null && grep -q '^tracer_source_up 1' "$1" && return 0
        sleep 0.5; i=$((i+1))
    done
    return 1
}
# state NAME: the unit's state and main pid, as `key=value` lines.
state() {
    systemctl show tracer.service -p ActiveState -p SubState -p MainPID -p Result -p NRestarts > $r/$1.state
}
# paths: every path of the root file system and /run, but what the system changes by itself.
paths() {
    find / /run -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /root \
        -o -path /var/log -o -path /var/cache -o -path /var/lib/apt -o -path /run/log \
        -o -path /run/systemd/journal -o -path /image -o -path /var/lib/systemd/catalog \) -prune \
        -o -print | grep -v '^/var/lib/dpkg/\(status\|status-old\|available\|lock.*\|triggers/.*\|updates/.*\)$' | sort -u
}

say "before: the BPF programs and links of a system without tracer, its paths"
bpftool prog show > $r/progs_before.txt 2>&1
bpftool link show > $r/links_before.txt 2>&1
paths > $r/paths_before.txt

say "apt-get install ./tracer_*.deb"
start=$(date +%s)
(cd /root && apt-get install -y ./tracer_*.deb) > $r/install.log 2>&1
echo "exit $?" >> $r/install.log
{
    echo "version $(tracer --version | tr '\n' ' ')"
    echo "enabled $(systemctl is-enabled tracer.service)"
    echo "active $(systemctl is-active tracer.service)"
    echo "perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)"
} >> $r/install.log
if wait_up $r/first.metrics; then
    echo "up after $(($(date +%s) - start)) s" >> $r/install.log
fi
state installed
emit install.log $r/install.log
emit installed.state $r/installed.state

say "200 mkdir+rmdir in a cgroup of their own, scraped on loopback"
mkdir -p /sys/fs/cgroup/release-wl /tmp/wl
sh -c 'echo $$ > /sys/fs/cgroup/release-wl/cgroup.procs; cd /tmp/wl && i=0; while [ $i -lt 200 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done'
echo "workload exit $?" > $r/workload.log
# The next refreshes: until the 200 show, 60 s at most.
i=0
while [ $i -lt 120 ]; do
    scrape > $r/workload.metrics
    grep -q '^tracer_cgroup_calls_total{probe="vfs_rmdir",[^}]*cgroup="/release-wl"} 200$' $r/workload.metrics && break
    sleep 0.5; i=$((i+1))
done
bpftool prog show > $r/progs_running.txt 2>&1
bpftool link show > $r/links_running.txt 2>&1
emit workload.log $r/workload.log
emit workload.metrics $r/workload.metrics
emit progs_running.txt $r/progs_running.txt
emit links_running.txt $r/links_running.txt

say "systemd-analyze security tracer.service"
systemd-analyze security --no-pager tracer.service > $r/security.txt 2>&1
emit security.txt $r/security.txt

say "systemctl restart tracer"
state before_restart
systemctl restart tracer.service > $r/restart.log 2>&1
echo "exit $?" >> $r/restart.log
wait_up $r/restart.metrics && echo "up again" >> $r/restart.log
state after_restart
emit restart.log $r/restart.log
emit before_restart.state $r/before_restart.state
emit after_restart.state $r/after_restart.state

say "systemctl kill -s HUP tracer"
state before_hup
systemctl kill -s HUP tracer.service > $r/hup.log 2>&1
echo "exit $?" >> $r/hup.log
sleep 5
scrape > $r/hup.metrics 2>&1
echo "scrape exit $?" >> $r/hup.log
state after_hup
emit hup.log $r/hup.log
emit hup.metrics $r/hup.metrics
emit before_hup.state $r/before_hup.state
emit after_hup.state $r/after_hup.state

say "systemctl stop tracer"
systemctl stop tracer.service > $r/stop.log 2>&1
echo "exit $?" >> $r/stop.log
state stopped
bpftool prog show > $r/progs_after.txt 2>&1
bpftool link show > $r/links_after.txt 2>&1
emit stop.log $r/stop.log
emit stopped.state $r/stopped.state
for f in progs_before links_before progs_after links_after; do emit $f.txt $r/$f.txt; done

say "journalctl -u tracer"
journalctl -u tracer.service -o short-monotonic --no-pager > $r/journal.txt 2>&1
journalctl -u tracer.service -p warning -o short-monotonic --no-pager > $r/journal_warnings.txt 2>&1
emit journal.txt $r/journal.txt
emit journal_warnings.txt $r/journal_warnings.txt

say "apt-get purge tracer"
dpkg -L tracer > $r/package_files.txt 2>&1
apt-get purge -y tracer > $r/purge.log 2>&1
echo "exit $?" >> $r/purge.log
dpkg -s tracer >> $r/purge.log 2>&1
echo "dpkg -s exit $?" >> $r/purge.log
paths > $r/paths_after.txt
# What the package listed that is still there.
while read -r p; do [ -e "$p" ] && [ ! -d "$p" ] && echo "$p"; done < $r/package_files.txt > $r/leftover_files.txt
emit purge.log $r/purge.log
emit package_files.txt $r/package_files.txt
emit leftover_files.txt $r/leftover_files.txt
emit paths_before.txt $r/paths_before.txt
emit paths_after.txt $r/paths_after.txt

# The image, as the DaemonSet runs it: the host unpacked its root file system (umoci) into
# /image/rootfs and wrote the container's command line (the image's entrypoint, then the
# DaemonSet's args, one a line) and the capabilities the DaemonSet adds (/image/caps).
if [ -d /image/rootfs ]; then
    say "the image: one pod laid out as the kubelet lays it out, tracer in a container of the DaemonSet's mounts, arguments and capabilities"
    U=77777777-7777-4777-8777-777777777777 Us=77777777_7777_4777_8777_777777777777
    C=$(printf 'c7%.0s' $(seq 32))
    pod=kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod$Us.slice
    ctr=$pod/cri-containerd-$C.scope
    mkdir -p /var/log/pods/shop_cart-7d9f_$U/cart /var/log/containers
    : > /var/log/pods/shop_cart-7d9f_$U/cart/0.log
    ln -sf ../pods/shop_cart-7d9f_$U/cart/0.log /var/log/containers/cart-7d9f_shop_cart-$C.log
    mkdir -p /sys/fs/cgroup/$ctr /tmp/wl2
    # The container: its own mount, cgroup, network, UTS and IPC namespaces; the host's pid
    # namespace (hostPID: true). Its root is the image's, read-only, with the host paths
    # mounted where the DaemonSet mounts them, read-only too.
    cat > /tmp/container.sh <<'EOF'
set -e
R=/tmp/ctr
mkdir -p $R
mount -t tmpfs -o mode=0755 ctr $R
cp -a /image/rootfs/. $R/
for d in proc sys dev host/sys/fs/cgroup host/var/log/pods host/var/log/containers; do mkdir -p $R/$d; done
mount -t proc proc $R/proc
mount -t sysfs -o ro sysfs $R/sys
mount -t tmpfs -o mode=0755 dev $R/dev
for n in null zero random urandom; do touch $R/dev/$n; mount --bind /dev/$n $R/dev/$n; done
mount -t cgroup2 -o ro cgroup2 $R/sys/fs/cgroup
mount --bind /sys/fs/cgroup $R/host/sys/fs/cgroup
mount -o remount,bind,ro $R/host/sys/fs/cgroup
mount --bind /sys/kernel/tracing $R/sys/kernel/tracing
mount -o remount,bind,ro $R/sys/kernel/tracing
mount --bind /sys/kernel/debug $R/sys/kernel/debug
mount -o remount,bind,ro $R/sys/kernel/debug
mount --bind /var/log/pods $R/host/var/log/pods
mount -o remount,bind,ro $R/host/var/log/pods
mount --bind /var/log/containers $R/host/var/log/containers
mount -o remount,bind,ro $R/host/var/log/containers
mount -o remount,bind,ro $R
ip link set lo up
keep=$(cat /image/caps)
all=$(capsh --decode=$(printf '%x' $(( (1 << ($(cat /proc/sys/kernel/cap_last_cap) + 1)) - 1 ))) | sed 's/.*=//')
drop=$(echo "$all" | tr ',' '\n' | grep -vxF "$(echo "$keep" | tr ',' '\n')" | paste -sd,)
set -- $(cat /image/argv)
entry=$1
shift
# Root with the DaemonSet's capabilities alone (bounding, permitted and effective after
# exec), no privilege escalation (no_new_privs), in the image's root.
exec capsh --drop=$drop --chroot=$R --no-new-privs --shell=$entry -- "$@"
EOF
    # The container's cgroup is the pod container's, made by the runtime before the start.
    sh -c "echo \$\$ > /sys/fs/cgroup/$ctr/cgroup.procs; exec unshare --mount --cgroup --net --uts --ipc --fork --propagation private sh /tmp/container.sh" \
        > $r/image_serve.log 2>&1 &
    i=0
    pid=
    while [ $i -lt 600 ]; do
        pid=$(pgrep -x tracer | head -1)
        [ -n "$pid" ] && nsenter -t "$pid" -n curl -s --max-time 10 http://127.0.0.1:29110/metrics 2>/dev/null | grep -q '^tracer_source_up 1' && break
        sleep 0.5; i=$((i+1))
    done
    {
        echo "pid $pid"
        grep -E '^(Uid|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/$pid/status
        echo "root $(readlink /proc/$pid/root)"
        echo "cgroup $(cat /proc/$pid/cgroup)"
        echo "cmdline $(tr '\0' ' ' < /proc/$pid/cmdline)"
    } > $r/image_proc.txt 2>&1
    # The pod's workload: 200 mkdir+rmdir in the pod's container cgroup.
    sh -c "echo \$\$ > /sys/fs/cgroup/$ctr/cgroup.procs; cd /tmp/wl2 && i=0; while [ \$i -lt 200 ]; do mkdir d\$i && rmdir d\$i || exit 1; i=\$((i+1)); done"
    echo "workload exit $?" >> $r/image_proc.txt
    i=0
    while [ $i -lt 120 ]; do
        nsenter -t "$pid" -n curl -s --max-time 10 http://127.0.0.1:29110/metrics > $r/image.metrics 2>&1
        grep -q '^tracer_cgroup_calls_total{probe="vfs_rmdir",[^}]*cgroup="/'"$ctr"'"} 200$' $r/image.metrics && break
        sleep 0.5; i=$((i+1))
    done
    kill -TERM "$pid"
    wait
    echo "exit $?" >> $r/image_serve.log
    echo "$ctr" > $r/image_cgroup.txt
    emit image_proc.txt $r/image_proc.txt
    emit image.metrics $r/image.metrics
    emit image_serve.log $r/image_serve.log
    emit image_cgroup.txt $r/image_cgroup.txt
fi
say "done"
