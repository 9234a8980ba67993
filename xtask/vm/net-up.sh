#!/bin/busybox sh
# net-up: load the virtio network modules (in the order the host listed) and bring up
# eth0 as 10.0.2.15, QEMU user networking's guest address. Installed as /bin/net-up
# when the VM has a forwarded port.
while read -r m; do
    insmod "/lib/modules/net/$m" || exit 1
done < /lib/modules/net/order
ip link set lo up
ip link set eth0 up || exit 1
ip addr add 10.0.2.15/24 dev eth0
