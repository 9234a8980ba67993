#!/bin/busybox sh
# PID 1 of the test VM (an initramfs, no disk). It mounts what tracer needs, runs
# /cmd.sh, and reports its exit status on the second serial port (/dev/ttyS1 on x86,
# /dev/ttyAMA1 on arm64: named in /etc/results-port), which the host reads as the results
# file: kernel messages never mix in there. QEMU exits 0 even after a guest panic, so the
# host trusts only this explicit end marker.
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
mount -t cgroup2 cgroup2 /sys/fs/cgroup
results=$(cat /etc/results-port)
# Raw: no \n -> \r\n, no echo, so files arrive byte for byte.
stty -F $results raw -echo
echo "init: up after $(cut -d' ' -f1 /proc/uptime) s on $(uname -r)"
cd /root
sh /cmd.sh
rc=$?
# The redirect's close waits until the UART has sent everything, so the marker is out
# before the power goes.
echo "=== EXIT $rc ===" > $results
poweroff -f
