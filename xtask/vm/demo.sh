# `cargo xtask run` on a host without kprobes: the guest half. Mount 100 tmpfs, then
# trace their umount: each tears down a superblock and its shrinker.
i=0
while [ $i -lt 100 ]; do
    mkdir -p /mnt/t$i && mount -t tmpfs none /mnt/t$i || exit 1
    i=$((i + 1))
done
echo "demo: 100 tmpfs mounted; tracing their umount"
tracer capture -- sh -c 'i=0; while [ $i -lt 100 ]; do umount /mnt/t$i || exit 1; i=$((i + 1)); done'
