#!/bin/busybox sh
# mount-ext2: a 16 MiB ext2 over loop at /mnt/ext2. ext2 keeps negative dentries; tmpfs,
# the guest's root, drops them at once. Installed as /bin/mount-ext2.
{ [ ! -f /lib/modules/loop.ko ] || [ -d /sys/module/loop ] || insmod /lib/modules/loop.ko; } &&
    dd if=/dev/zero of=/tmp/ext2.img bs=1M count=16 2>&1 &&
    mke2fs -F -q /tmp/ext2.img &&
    mkdir -p /mnt/ext2 &&
    mount -o loop /tmp/ext2.img /mnt/ext2
