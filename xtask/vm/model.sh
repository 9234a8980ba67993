# The guest half of `cargo xtask bench model-fit`: pairs of captures that differ in size and
# in parallelism, so the host can calibrate the model on the first of each pair and predict
# the second. RUNS (set by the host on the first line of /cmd.sh) pairs of each.
#
#   seqN  50 tmpfs unmounted one after the other       -> parN  4 tasks x 100 at once
#   negaN rmdir of a directory with 5,000 negatives     -> negbN 50,000, 3 readers of the parent

# capture NAME WORKLOAD: one run of WORKLOAD under `tracer capture`, sent to the host.
capture() {
    timeout 600 tracer capture --format json -o /tmp/$1.json -- sh -c "$2" > /tmp/$1.log 2>&1
    echo $? > /tmp/$1.rc
    emit $1.rc /tmp/$1.rc
    emit $1.log /tmp/$1.log
    [ -f /tmp/$1.json ] && emit $1.json /tmp/$1.json
    rm -f /tmp/$1.json
}

# mounts DIR N: N tmpfs mounted at DIR/0 .. DIR/N-1.
mounts() {
    i=0
    while [ $i -lt $2 ]; do mkdir -p $1/$i && mount -t tmpfs none $1/$i; i=$((i+1)); done
}

# negatives DIR N: DIR made and filled with N negative dentries by failed lookups.
negatives() {
    mkdir -p $1
    i=0
    while [ $i -lt $2 ]; do [ -e $1/x$i ]; i=$((i+1)); done
}

uname -r > /tmp/uname
emit uname /tmp/uname
grep -c ^processor /proc/cpuinfo > /tmp/cpus
emit cpus /tmp/cpus

mount-ext2 > /tmp/ext2.log 2>&1
echo "exit $?" >> /tmp/ext2.log
emit ext2.log /tmp/ext2.log

r=1
while [ $r -le $RUNS ]; do
    echo "model-fit: run $r of $RUNS"
    mounts /mnt/s$r 50
    capture seq$r "i=0; while [ \$i -lt 50 ]; do umount /mnt/s$r/\$i || exit 1; i=\$((i+1)); done"
    for t in 0 1 2 3; do mounts /mnt/p$r/$t 100; done
    capture par$r "for t in 0 1 2 3; do (i=0; while [ \$i -lt 100 ]; do umount /mnt/p$r/\$t/\$i || exit 1; i=\$((i+1)); done) & done; wait"
    if [ -d /mnt/ext2 ]; then
        negatives /mnt/ext2/a$r 5000
        capture nega$r "rmdir /mnt/ext2/a$r"
        negatives /mnt/ext2/b$r 50000
        rm -f /tmp/stop
        capture negb$r "for k in 1 2 3; do (while [ ! -e /tmp/stop ]; do ls /mnt/ext2 > /dev/null; done) & done; sleep 0.3; rmdir /mnt/ext2/b$r; rc=\$?; touch /tmp/stop; wait; exit \$rc"
    fi
    r=$((r+1))
done
