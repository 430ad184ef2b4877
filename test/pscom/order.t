#!/usr/bin/env bash
# t_order under every transport setting (see lib.sh and t_order.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_order
# shm as on a node with more processes than CPUs: its rings go back to their start once the
# consumer has caught up, messages stay in order across those early wraps
run_case shm-oversub "PSP_TCP=0 PSP_UCP=0 T_TRANSPORT=shm T_OVERSUBSCRIBED=1 PSP_DEBUG_STATS=1" \
    t_order
log=$T_LOGDIR/t_order.shm-oversub.log
rew=$(sed -n 's/.*doorbells [0-9]* rewinds \([0-9]*\).*/\1/p' "$log" | sort -n | tail -1)
tap_ok "$([ "${rew:-0}" -gt 0 ] && echo 0 || echo 1)" \
    "[shm-oversub] a ring went back to its start early (rewinds: ${rew:-none})"
# tcp with socket buffers smaller than round (g)'s burst of ~700 KB (and larger than loopback's
# 64 KiB segments: below that Linux stalls the stream): pscom_send_now must write a message in
# part (the counter PSP_DEBUG_STATS prints), and everything still arrives in order. Without
# flow control: its credit would send the burst's tail by rendezvous before the socket fills
run_case tcp-smallbuf "PSP_SHM=0 PSP_UCP=0 T_TRANSPORT=tcp PSP_TCP_SNDBUF=128k \
PSP_TCP_RCVBUF=128k PSP_DEBUG_STATS=1 PSP_UNEXPECTED_MAX=inf" t_order
short=$(sed -n 's/.*tcp short writes \([0-9]*\).*/\1/p' "$T_LOGDIR/t_order.tcp-smallbuf.log" |
    sort -n | tail -1)
tap_ok "$([ "${short:-0}" -gt 0 ] && echo 0 || echo 1)" \
    "[tcp-smallbuf] a tcp send now wrote a message in part (short writes: ${short:-none})"
# a receive buffer too small for loopback's segments is raised (it stalled the stream) and said
run_case tcp-tinyrcv "PSP_SHM=0 PSP_UCP=0 T_TRANSPORT=tcp PSP_TCP_RCVBUF=8k" t_order
grep -q 'PSP_TCP_RCVBUF=8192 is below' "$T_LOGDIR/t_order.tcp-tinyrcv.log"
tap_ok $? "[tcp-tinyrcv] PSP_TCP_RCVBUF=8k: raised, with a warning"
tap_done
