#!/usr/bin/env bash
# Speed through the gateway, on the simulated cluster (test/cluster/vcluster, root only):
#   node1 on networks a and c, node2 on b and c, node3 (psgwd) on a and b
#   (a: 10.250.1.0/24, c: 10.250.2.0/24, b: 10.250.3.0/24, in order of appearance).
# node1 and node2 have a direct link (c) for the comparison; through the gateway they talk over
# a and b (PSP_NETWORK picks the addresses, the route file sends the pair through node3).
# Prints one table (markdown) of pscom_pp latency and streaming bandwidth:
#   direct node1-node2 (c), one hop node1-node3 (a), node1 -> tcp_relay -> node2 (pscom's tcp
#   through a plain read/write relay on node3: the floor of any forwarding process on this
#   machine), and node1 -> psgwd -> node2 with the given PSP_GW_MTU x PSP_GW_TOKENS settings;
#   each row the median of ROUNDS interleaved runs.
#   test/bench/gateway.sh [ROUNDS] [MTU:TOKENS ...]     (default 3, "256k:16 16k:16 64k:16 1M:16 256k:4 256k:64 256k:0")
# Transport between nodes: tcp (PSP_UCP=0), as the gateway's carriers over veth (UCX over tcp
# cannot tell which of psgwd's two addresses a node reaches; see src/gateway/README.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
shift || true
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(256k:16 16k:16 64k:16 1M:16 256k:4 256k:64 256k:0)
prefix=${PSMPI_PREFIX:-$top/install}
VC=$top/test/cluster/vcluster
export VCLUSTER=gwbench
tmp=$(mktemp -d /tmp/gwbench.XXXXXX)
trap '"$VC" down >/dev/null 2>&1; pkill -f "psgwd.*10.250.1.3:7100" 2>/dev/null; [ "${KEEP:-0}" = 1 ] || rm -rf "$tmp"' EXIT
"$VC" up 3 --nets a+c,b+c,a+b >/dev/null
"$prefix/bin/psgwd" --new-key "$tmp/key"
"$VC" exec node3 env PSP_UCP=0 "$prefix/bin/psgwd" --listen 10.250.1.3:7100,10.250.3.3:7100 \
    --key "$tmp/key" --log "$tmp/gw.log" >/dev/null
printf 'key %s\n10.250.1.3:7100,10.250.3.3:7100 node1 node2\n' "$tmp/key" >"$tmp/route"
gcc -O2 -o "$tmp/tcp_relay" "$top/test/bench/tcp_relay.c"

# NAME SERVER-NODE CLIENT-NODE ENV...: pscom_pp latency (0 B, 8 B, 1 KiB) and bandwidth (1, 4 MiB)
run() {
    local name=$1 srv=$2 cli=$3 out=$tmp/$1.$round
    shift 3
    env PSP_UCP=0 "$@" "$VC" exec "$srv" "$prefix/bin/pscom_pp" -s --timeout 60 >"$out.srv" 2>&1 &
    local pid=$!
    for _ in $(seq 50); do grep -q "^ep: " "$out.srv" && break; sleep 0.1; done
    local ep relay=""
    ep=$(sed -n 's/^ep: //p' "$out.srv")
    if [ "$name" = relay ]; then # the same, through tcp_relay on node3
        "$VC" exec node3 "$tmp/tcp_relay" 10.250.1.3:7200 "${ep%@*}" >/dev/null &
        relay=$!
        sleep 0.3
        ep=10.250.1.3:7200@${ep#*@}
    fi
    env PSP_UCP=0 "$@" "$VC" exec "$cli" "$prefix/bin/pscom_pp" --both --sizes 0,8,1k,1M,4M \
        --csv "$ep" >"$out" 2>&1 || true
    wait $pid || true
    [ -z "$relay" ] || { pkill -f "tcp_relay 10.250.1.3:7200" || true; wait $relay || true; }
}

for ((round = 1; round <= rounds; round++)); do
    run direct node2 node1 PSP_NETWORK=10.250.2.0/24
    run hop node3 node1 PSP_NETWORK=10.250.1.0/24
    run relay node2 node1 PSP_NETWORK=10.250.3.0/24,10.250.1.0/24
    for s in "${settings[@]}"; do
        run "gw-${s/:/-}" node2 node1 PSP_NETWORK=10.250.1.0/24,10.250.3.0/24 \
            PSP_GW_SERVER="$tmp/route" PSP_GW_MTU="${s%%:*}" PSP_GW_TOKENS="${s##*:}"
    done
done

# median over the rounds of a CSV field (5: us, 6: MB/s) of the MODE,SIZE rows of pscom_pp --csv
# (mode,transport,size,loops,usec,mb_per_s)
median() { # NAME MODE SIZE FIELD
    for ((round = 1; round <= rounds; round++)); do
        awk -F, -v m="$2" -v s="$3" -v f="$4" '$1 == m && $3 == s { print $f }' "$tmp/$1.$round"
    done | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.1f", v[int((NR + 1) / 2)] }'
}

echo "| path | transport | lat 0 B us | lat 8 B us | lat 1 KiB us | bw 1 MiB MB/s | bw 4 MiB MB/s |"
echo "|---|---|---|---|---|---|---|"
for name in direct hop relay "${settings[@]/#/gw-}"; do
    name=${name/:/-}
    tr=$(awk -F, '$1 == "lat" { print $2; exit }' "$tmp/$name.1" 2>/dev/null)
    case $name in
    direct) label="node1-node2 direct (net c)" ;;
    hop) label="node1-node3, one hop (net a)" ;;
    relay) label="node1 -> tcp_relay -> node2 (floor)" ;;
    *) s=${name#gw-}; label="node1 -> psgwd -> node2, MTU ${s%-*} tokens ${s#*-}" ;;
    esac
    echo "| $label | $tr | $(median "$name" lat 0 5) | $(median "$name" lat 8 5) | $(median "$name" lat 1024 5) | $(median "$name" bw 1048576 6) | $(median "$name" bw 4194304 6) |"
done
echo
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; rounds: $rounds"
