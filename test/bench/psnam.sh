#!/usr/bin/env bash
# Speed of PSNAM windows (test/bench/rma_pp.c), 2 ranks, against the references the targets
# name; each figure the median of ROUNDS interleaved runs:
#   one node: an ordinary window (MPI_Win_allocate), an MPI_Win_allocate_shared window, a
#     PSNAM shm window, a PSNAM nam window (psnamd on loopback, the ranks over tcp to it);
#     pscom_pp over tcp (PSP_SHM=0 PSP_UCP=0) on loopback: 8 B ping-pong and 1 MiB streaming;
#   across nodes (simulated cluster, root only): psnamd on node1, the ranks on node2 and node3;
#     pscom_pp tcp node2 -> node1 (the rank's path to psnamd).
#   test/bench/psnam.sh [ROUNDS]      (default 3); markdown to stdout
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
prefix=${PSMPI_PREFIX:-$top/install}
tmp=$(mktemp -d /tmp/psnambench.XXXXXX)
VC=$top/test/cluster/vcluster
export VCLUSTER=psnambench PSP_NAM_KEY=$tmp/key PSP_PSNAM_DIR=$tmp/shm
mkdir -p "$tmp/shm"
cleanup() {
    pkill -f "psnamd --listen 127.0.0.1:7450" 2>/dev/null || true
    "$VC" down >/dev/null 2>&1 || true
    [ "${KEEP:-0}" = 1 ] || rm -rf "$tmp"
}
trap cleanup EXIT
"$prefix/bin/mpicc" -O2 -o "$tmp/rma_pp" "$top/test/bench/rma_pp.c"
"$prefix/bin/psnamd" --listen 127.0.0.1:7450 --memory 1G --log "$tmp/psnamd.log" >/dev/null
export PSP_NAM_SERVER=127.0.0.1:7450
cluster=0
if [ "$(id -u)" = 0 ] && "$VC" up 3 >/dev/null 2>&1; then
    cluster=1
    "$VC" exec node1 "$prefix/bin/psnamd" --listen 10.250.1.1:7450 --memory 1G \
        --log "$tmp/psnamd.vc.log" >/dev/null
    printf 'node2:1\nnode3:1\n' >"$tmp/hosts"
fi

pp() { # OUT CLIENT-PREFIX... : pscom_pp over tcp, server on the first node (or here)
    local out=$1 srv=$2 cli=$3
    env PSP_SHM=0 PSP_UCP=0 $srv "$prefix/bin/pscom_pp" -s --timeout 60 >"$out.srv" 2>&1 &
    local pid=$!
    for _ in $(seq 50); do grep -q "^ep: " "$out.srv" && break; sleep 0.1; done
    env PSP_SHM=0 PSP_UCP=0 $cli "$prefix/bin/pscom_pp" --both --sizes 8,1M --csv \
        "$(sed -n 's/^ep: //p' "$out.srv")" >"$out" 2>&1 || true
    wait $pid || true
}

for ((round = 1; round <= rounds; round++)); do
    for kind in allocate shared psnam-shm psnam-nam; do
        "$prefix/bin/mpiexec" -n 2 "$tmp/rma_pp" "$kind" >"$tmp/$kind.$round" 2>&1
    done
    pp "$tmp/tcp.$round" "" ""
    if [ $cluster = 1 ]; then
        "$VC" exec node2 env PSP_NAM_SERVER=10.250.1.1:7450 PSP_UCP=0 "$prefix/bin/mpiexec" \
            -launcher rsh -launcher-exec "$top/test/cluster/vcluster-rsh" -f "$tmp/hosts" -n 2 \
            "$tmp/rma_pp" psnam-nam >"$tmp/vc-nam.$round" 2>&1
        pp "$tmp/vc-tcp.$round" "$VC exec node1" "$VC exec node2"
    fi
done

median() { # FILE-PREFIX AWK-CONDITION FIELD
    for ((round = 1; round <= rounds; round++)); do
        awk -F, "$2 { print \$$3 }" "$1.$round" 2>/dev/null
    done | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int((NR + 1) / 2)]; else printf "-" }'
}

row() { # LABEL FILE-PREFIX
    local f=$2 cells=""
    for op in put get; do
        for b in 8 65536; do cells="$cells | $(median "$f" "\$2==\"$op\" && \$3==$b" 4)"; done
        for b in 1048576 16777216; do cells="$cells | $(median "$f" "\$2==\"$op\" && \$3==$b" 5)"; done
    done
    echo "| $1$cells | $(median "$f" '$2=="fop"' 4) |"
}

echo "# PSNAM windows: rma_pp, 2 ranks, median of $rounds rounds ($(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs)"
echo
echo "Latency: one operation + MPI_Win_flush (us). Bandwidth: 16 operations + one flush (MB/s)."
echo
echo "| window | put 8 B us | put 64 KiB us | put 1 MiB MB/s | put 16 MiB MB/s | get 8 B us | get 64 KiB us | get 1 MiB MB/s | get 16 MiB MB/s | fetch_and_op us |"
echo "|---|---|---|---|---|---|---|---|---|---|"
row "MPI_Win_allocate (one node)" "$tmp/allocate"
row "MPI_Win_allocate_shared (one node)" "$tmp/shared"
row "PSNAM shm (one node)" "$tmp/psnam-shm"
row "PSNAM nam, psnamd on loopback" "$tmp/psnam-nam"
[ $cluster = 0 ] || row "PSNAM nam, psnamd on node1, ranks on node2, node3" "$tmp/vc-nam"
echo
echo "pscom_pp over tcp (PSP_SHM=0 PSP_UCP=0): the references of the nam targets"
echo
echo "| path | ping-pong 8 B, one way us | round trip us | streaming 1 MiB MB/s |"
echo "|---|---|---|---|"
ref() { # LABEL FILE-PREFIX
    local lat
    lat=$(median "$2" '$1=="lat" && $3==8' 5)
    echo "| $1 | $lat | $(awk -v l="$lat" 'BEGIN { printf "%.2f", 2 * l }') | $(median "$2" '$1=="bw" && $3==1048576' 6) |"
}
ref loopback "$tmp/tcp"
[ $cluster = 0 ] || ref "node2 -> node1" "$tmp/vc-tcp"
