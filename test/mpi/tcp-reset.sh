#!/bin/sh
# tcp-reset.sh PID...: reset one established TCP connection of these processes, as a broken
# link or a middlebox would (ss -K: the kernel aborts the socket and sends the peer a RST).
# Prints "LOCAL PEER pid PID" of the connection it reset; exit 1 when it found none it could
# reset (not root, a kernel without CONFIG_INET_DIAG_DESTROY). mixed.t, maint/longjob.sh.
pids=" $* "
ss -tnpH state established 2>/dev/null | {
    while read -r _ _ local peer users; do
        pid=$(printf '%s\n' "$users" | sed -n 's/.*pid=\([0-9]*\),.*/\1/p')
        case $pids in *" $pid "*) ;; *) continue ;; esac
        ss -K src "${local%:*}" sport = ":${local##*:}" dst "${peer%:*}" dport = ":${peer##*:}" \
            2>/dev/null | grep -q ESTAB || continue
        echo "$local $peer pid $pid"
        exit 0
    done
    exit 1
}
