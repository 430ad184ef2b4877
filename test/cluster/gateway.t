#!/usr/bin/env bash
# The gateway: one MPI_COMM_WORLD across two networks that do not meet. Nodes 1-2 are on
# network a only, nodes 3-4 on b only, node5 and node6 on both and run psgwd; a rank of a and
# a rank of b talk through a gateway (the gw transport), everything else directly.
#  - psgwd's command line: a missing key, an unsafe key file, the listening line;
#  - the representative test/mpi set (4 nodes x 1 over tcp, 4 x 2 over ucp), every connection's
#    transport checked: "via gw <gateway address>" exactly between a and b;
#  - pscom_pp across the gateway, 0 B to 64 MiB verified byte for byte, with PSP_GW_MTU 4 KiB,
#    the default and 1 MiB;
#  - two gateways (one with --threads 2): pairs spread over both by the documented rule, and
#    both forward (the ranks' PSP_DEBUG_STATS lines per gateway);
#  - a job with another key is refused (psgwd logs it; the job fails, does not hang); garbage
#    on psgwd's port (random bytes, a truncated handshake, a port scan) while a job runs: psgwd
#    logs it, stays up, and the job completes;
#  - psgwd SIGKILLed mid-transfer: the job ends within 30 s naming the gateway, no process is
#    left; psgwd restarted, a new job works; SIGTERM ends psgwd cleanly.
# Jobs start on node5: hydra needs a node that reaches every other (a cluster's management
# network); MPI's traffic never uses that: the ranks' addresses are on a or b. psgwd runs with
# PSP_UCP=0: UCX over TCP cannot tell which of psgwd's two addresses a node reaches, and an
# endpoint to the wrong one may fail only after the handshake (src/gateway/README.md); the
# ranks' own connections use ucp in the ucp layout.
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"
vc_up 6 --nets a,a,b,b,a+b,a+b
vc_build busy
mpitest_build ring || mpitest_done
export VC_HEAD=node5
PSGWD=$PREFIX/bin/psgwd
PP=$PREFIX/bin/pscom_pp
KEY=$MPITEST_TMP/job.key
GW5=10.250.1.5:7000,10.250.2.5:7000
GW6=10.250.1.6:7000,10.250.2.6:7000

# NODE ADDRS [ARGS...]: start psgwd on NODE in the foreground (its pid: gw_pid[NODE])
declare -A gw_pid
gw_start() {
    local node=$1 addrs=$2 out=$MPITEST_TMP/gw.$1.out
    shift 2
    : >"$out"
    "$VC" exec "$node" env PSP_UCP=0 "$PSGWD" --foreground --listen "$addrs" --key "$KEY" \
        --log "$MPITEST_TMP/gw.$node.log" "$@" >"$out" 2>&1 </dev/null &
    for _ in $(seq 50); do
        grep -q " pid [0-9]" "$out" && break
        sleep 0.1
    done
    gw_pid[$node]=$(sed -n 's/.* pid \([0-9]*\).*/\1/p' "$out" | head -1)
    [ -n "${gw_pid[$node]}" ] && grep -q "^$addrs pid" "$out"
}
gw_stop() { # NODE [SIGNAL]: stop psgwd and wait until it is gone
    local p=${gw_pid[$1]:-}
    [ -n "$p" ] || return 0
    kill -"${2:-TERM}" "$p" 2>/dev/null
    for _ in $(seq 50); do
        kill -0 "$p" 2>/dev/null || break
        sleep 0.1
    done
    gw_pid[$1]=""
}
trap 'for n in "${!gw_pid[@]}"; do gw_stop "$n" KILL; done; "$VC" down >/dev/null 2>&1; [ "${MPITEST_KEEP:-0}" = 1 ] || rm -rf "$MPITEST_TMP"' EXIT

# ROUTEFILE LINE...: a route file with the job's key
routes() {
    local f=$1
    shift
    { echo "key $KEY"; printf '%s\n' "$@"; } >"$f"
}

# 1. the command line
"$PSGWD" --listen 127.0.0.1:0 --foreground >"$MPITEST_TMP/nokey" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--key is required" "$MPITEST_TMP/nokey" && st=ok || st="not ok"
tap "$st" "psgwd without --key: exit status $rc, says --key is required"
"$PSGWD" --new-key "$KEY" && echo x >"$MPITEST_TMP/open.key" && chmod 644 "$MPITEST_TMP/open.key"
"$PSGWD" --listen 127.0.0.1:0 --foreground --key "$MPITEST_TMP/open.key" >"$MPITEST_TMP/openkey" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "open.key" "$MPITEST_TMP/openkey" && st=ok || st="not ok"
tap "$st" "psgwd with a key file others can read: exit status $rc, $(head -1 "$MPITEST_TMP/openkey")"
[ "$(stat -c %a "$KEY")" = 600 ] && st=ok || st="not ok"
tap "$st" "psgwd --new-key makes a key file of mode $(stat -c %a "$KEY")"
gw_start node5 "$GW5" && st=ok || st="not ok"
tap "$st" "psgwd on node5: $(head -1 "$MPITEST_TMP/gw.node5.out")"
ROUTE1=$MPITEST_TMP/route1
routes "$ROUTE1" "$GW5 node[12] node[34]"
export PSP_GW_SERVER=$ROUTE1

# "CONNECT r0 to r3 (10.250.2.4:4000, node4 pid 9) from node1 pid 8 via gw 10.250.1.5:7000" and
# a rank's carrier "CONNECT gw to psgwd (...)": between a (nodes 1-2) and b (3-4) gw through
# node5 or node6, otherwise shm within a node, loop to itself, DIRECT between nodes
gw_contype() {
    local direct=$1
    shift
    cat "$@" 2>/dev/null | awk -v direct="$direct" '
        function net(n) { return n ~ /^node[12]$/ ? "a" : n ~ /^node[34]$/ ? "b" : "ab" }
        / CONNECT .* from [^ ]+ pid [0-9]+ via / {
            s = $0; sub(/.* from /, "", s); split(s, f, " ")
            from = f[1]; fpid = f[3]; via = f[5]; gw = f[6]
            match($0, /, [^ ]+ pid [0-9]+\)/)
            split(substr($0, RSTART + 2, RLENGTH - 3), p, " ")
            to = p[1]; tpid = p[3]
            n++
            # carriers to psgwd: tcp (psgwd runs with PSP_UCP=0, see above)
            if ($0 ~ / CONNECT gw to psgwd /) { ex = "tcp"; carriers++ }
            else if (fpid == tpid) ex = "loop"
            else if (from == to) ex = "shm"
            else if (net(from) != net(to) && net(from) != "ab" && net(to) != "ab") ex = "gw"
            else ex = direct
            if (via == "gw") {
                ngw++
                if (gw !~ /^10\.250\.[12]\.[56]:7000$/) { bad++; print "# bad gateway address: " $0 }
                # the gateway address on the network of the node that logs the line
                if (substr(gw, 8, 1) != (net(from) == "a" ? "1" : "2")) { bad++; print "# gateway not on " from "s network: " $0 }
            }
            if (via != ex) { bad++; if (bad <= 3) print "# expected " ex ": " $0 }
        }
        END {
            printf "# %d connections, %d via gw, %d carriers to psgwd, %d not as expected\n", n, ngw, carriers, bad
            exit (bad > 0 || ngw == 0)
        }'
}

# 2. the test/mpi set across the gateway
vc_mpi_set "4 nodes x 1" tcp 4 gw_contype node1:1 node2:1 node3:1 node4:1
vc_mpi_set "4 nodes x 2" ucp 8 gw_contype node1:2 node2:2 node3:2 node4:2

# 3. pscom_pp node1 -> node3 through the gateway, every size verified
pp() { # NAME ENV...: pscom_pp server on node3, client on node1
    local name=$1 out=$MPITEST_TMP/pp.$1
    shift
    env "$@" "$VC" exec node3 "$PP" -s --timeout 120 >"$out.srv" 2>&1 </dev/null &
    local srv=$!
    for _ in $(seq 50); do grep -q "^ep: " "$out.srv" && break; sleep 0.1; done
    local ep
    ep=$(sed -n 's/^ep: //p' "$out.srv")
    env "$@" timeout 300 "$VC" exec node1 "$PP" --lat --verify --loops 2 --maxsize 64M "$ep" \
        >"$out" 2>&1
    pp_rc=$?
    wait $srv
    pp_transport=$(grep -o "via gw [0-9.:]*" "$out" | head -1)
}
for mtu in 4k "" 1M; do
    pp "mtu$mtu" PSP_UCP=0 ${mtu:+PSP_GW_MTU=$mtu} PSP_DEBUG_CONTYPE=1
    out=$MPITEST_TMP/pp.mtu$mtu
    sizes=$(grep -c "^ *[0-9]" "$out")
    [ $pp_rc -eq 0 ] && grep -q "^# errors: 0 seen by the client, 0 by the server" "$out" &&
        [ "$sizes" -ge 27 ] && grep -q "67108864" "$out" && [ -n "$pp_transport" ] && st=ok || st="not ok"
    [ "$st" = ok ] || mpitest_comment "$out" 8
    tap "$st" "pscom_pp node1 -> node3 ${pp_transport:-(no gw line)}, PSP_GW_MTU=${mtu:-default}: $sizes sizes 0 B - 64 MiB verified (status $pp_rc)"
done

# 4. two gateways, one with two worker processes
gw_start node6 "$GW6" --threads 2 && st=ok || st="not ok"
tap "$st" "psgwd --threads 2 on node6: $(head -1 "$MPITEST_TMP/gw.node6.out")"
ROUTE2=$MPITEST_TMP/route2
routes "$ROUTE2" "$GW5 node[12] node[34]" "$GW6 node[12] node[34]"
vc_hosts node1:1 node2:1 node3:1 node4:1
PSP_GW_SERVER=$ROUTE2 PSP_UCP=0 mpitest_job two 4 -genv PSP_DEBUG_STATS 1 -genv PSP_DEBUG_CONTYPE 1 \
    "$MPITEST_TMP/ring"
# (i + j) mod 2 over the node numbers: node1-node3, node2-node4 via node5, node1-node4 and
# node2-node3 via node6
want="node1 node3 5|node1 node4 6|node2 node3 6|node2 node4 5"
ok_pairs=0
IFS='|' read -r -a wants <<<"$want"
for w in "${wants[@]}"; do
    set -- $w
    grep -q "to r[0-9]* ([0-9.:]*, $2 pid [0-9]*) from $1 pid [0-9]* via gw 10\.250\.1\.$3:7000" "$job.err" &&
        ok_pairs=$((ok_pairs + 1))
done
g5=$(grep -c "stats: gw 10\.250\.[12]\.5:7000 sent [1-9]" "$job.err")
g6=$(grep -c "stats: gw 10\.250\.[12]\.6:7000 sent [1-9]" "$job.err")
[ $job_rc -eq 0 ] && [ $ok_pairs -eq 4 ] && [ "$g5" -ge 2 ] && [ "$g6" -ge 2 ] && st=ok || st="not ok"
[ "$st" = ok ] || mpitest_comment "$job.err" 10
tap "$st" "two gateways: $ok_pairs of 4 node pairs on the gateway (i + j) mod 2 names; ranks that sent through node5: $g5, through node6: $g6 (status $job_rc)"

# 5. security: another job's key; garbage on the port while a job runs
OTHER=$MPITEST_TMP/other.key
"$PSGWD" --new-key "$OTHER"
ROUTE_OTHER=$MPITEST_TMP/route.other
{ echo "key $OTHER"; echo "$GW5 node[12] node[34]"; } >"$ROUTE_OTHER"
vc_hosts node1:1 node3:1
refused0=$(grep -c "refused" "$MPITEST_TMP/gw.node5.log")
PSP_GW_SERVER=$ROUTE_OTHER PSP_UCP=0 MPITEST_TIMEOUT=30 mpitest_job otherkey 2 "$MPITEST_TMP/ring"
refused1=$(grep -c "refused" "$MPITEST_TMP/gw.node5.log")
[ $job_rc -ne 0 ] && ! job_timed_out && [ "$refused1" -gt "$refused0" ] &&
    grep -q "key is not one it serves" "$job.err" && st=ok || st="not ok"
[ "$st" = ok ] || mpitest_comment "$job.err" 8
tap "$st" "a job with another key: refused (exit status $job_rc after ${job_time}s, psgwd: $(grep refused "$MPITEST_TMP/gw.node5.log" | tail -1 | cut -d' ' -f3-))"

vc_hosts node1:1 node2:1 node3:1 node4:1
job=$MPITEST_TMP/undisturbed
PSP_UCP=0 "$CLUSTER/mpiexec-vc" -n 4 "$MPITEST_TMP/busy" 8 </dev/null >"$job.out" 2>"$job.err" &
busy=$!
sleep 2
lines0=$(wc -l <"$MPITEST_TMP/gw.node5.log")
"$VC" exec node1 bash -c 'head -c 65536 /dev/urandom >/dev/tcp/10.250.1.5/7000' 2>/dev/null
"$VC" exec node3 bash -c 'printf "MCSP\x53\x01\xff\x00abc" >/dev/tcp/10.250.2.5/7000' 2>/dev/null
for p in 7000 7001 22; do "$VC" exec node2 bash -c "exec 3<>/dev/tcp/10.250.1.5/$p" 2>/dev/null; done
wait $busy
busy_rc=$?
sleep 1
new=$(tail -n +$((lines0 + 1)) "$MPITEST_TMP/gw.node5.log")
echo "$new" | sed 's/^/# psgwd: /'
[ $busy_rc -eq 0 ] && [ "$(grep -c '^ok' "$job.out")" -eq 2 ] && st=ok || st="not ok"
[ "$st" = ok ] || mpitest_comment "$job.err" 8
tap "$st" "a job through node5 while garbage hits psgwd's port: completes (exit status $busy_rc)"
kill -0 "${gw_pid[node5]}" 2>/dev/null && [ "$(echo "$new" | grep -c "closed incoming connection")" -ge 2 ] &&
    st=ok || st="not ok"
tap "$st" "psgwd survives random bytes, a truncated handshake and a port scan, one log line each ($(echo "$new" | grep -c "closed incoming") lines)"

# 6. a gateway killed mid-transfer
job=$MPITEST_TMP/gwkill
t0=$(date +%s%N)
PSP_UCP=0 "$CLUSTER/mpiexec-vc" -n 4 "$MPITEST_TMP/busy" 60 </dev/null >"$job.out" 2>"$job.err" &
busy=$!
for _ in $(seq 150); do [ "$(grep -c '^# rank' "$job.out")" -ge 4 ] && break; sleep 0.1; done
sleep 1
t0=$(date +%s%N)
gw_stop node5 KILL
for _ in $(seq 600); do kill -0 $busy 2>/dev/null || break; sleep 0.1; done
kill -9 $busy 2>/dev/null
wait $busy
busy_rc=$?
secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
left=""
for n in 1 2 3 4; do for p in $("$VC" ps node$n); do left="$left node$n:$p"; done; done
awk -v s="$secs" 'BEGIN { exit !(s <= 30) }' && [ $busy_rc -ne 0 ] && st=ok || st="not ok"
tap "$st" "psgwd on node5 SIGKILLed mid-transfer: the job ends after ${secs}s (<= 30), exit status $busy_rc"
grep -q "lost gateway 10\.250\.[12]\.5:7000" "$job.err" && st=ok || st="not ok"
[ "$st" = ok ] || mpitest_comment "$job.err" 8
tap "$st" "the message names the gateway: $(grep -o "lost gateway [0-9.:]*[^;]*" "$job.err" | head -1)"
[ -z "$left" ] && st=ok || st="not ok"
tap "$st" "no process left on nodes 1-4${left:+: $left}"
for n in 1 2 3 4; do "$VC" kill node$n; done
gw_start node5 "$GW5" && PSP_UCP=0 mpitest_job again 4 "$MPITEST_TMP/ring" && :
[ $job_rc -eq 0 ] && [ "$(grep -c '^ok' "$job.out")" -ge 2 ] && st=ok || st="not ok"
tap "$st" "psgwd restarted: a new job through it works (exit status $job_rc)"

# 7. SIGTERM: a clean end
for n in node5 node6; do
    p=${gw_pid[$n]}
    gw_stop $n TERM
    ! kill -0 "$p" 2>/dev/null && grep -q "SIGTERM: closing" "$MPITEST_TMP/gw.$n.log" && st=ok || st="not ok"
    tap "$st" "SIGTERM ends psgwd on $n: $(grep "SIGTERM" "$MPITEST_TMP/gw.$n.log" | tail -1 | cut -d' ' -f3-)"
done
mpitest_done
