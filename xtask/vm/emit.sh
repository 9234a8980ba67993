#!/bin/busybox sh
# emit NAME FILE: send FILE to the host as result file NAME, framed on the results port
# (/dev/ttyS1 on x86, /dev/ttyAMA1 on arm64: named in /etc/results-port) as
# `=== FILE NAME ===` ... `=== END NAME ===`. Installed as /bin/emit.
{
    echo "=== FILE $1 ==="
    cat "$2"
    # Keep the end marker on its own line.
    [ -n "$(tail -c1 "$2")" ] && echo
    echo "=== END $1 ==="
} > "$(cat /etc/results-port)"
