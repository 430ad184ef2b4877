#!/bin/sh
# Hierarchical vs flat collectives on 8 ranks in 2 pretend modules of 2 pretend nodes each
# (ranks 0-3 module 0, 4-7 module 1; PSP_SMP_NODE_ID per block of 2): time per call of
# msa_coll.c and inter-module messages per call from the PSP_DEBUG_STATS statistic
# (xmod_msgs summed over the ranks / calls).
#   test/bench/msa_coll.sh [ITERATIONS_SMALL [ITERATIONS_LARGE]]   (defaults 2000 50)
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PREFIX=${PSMPI_PREFIX:-$TOP/install}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$PREFIX/bin/mpicc" -O2 -o "$TMP/msa_coll" "$TOP/test/bench/msa_coll.c"
NS=${1:-2000} NL=${2:-50}

run() { # COLLOPS COLL BYTES ITERS
    args="$2 $3 $4"
    line="-genv PSP_MSA_AWARENESS 1 -genv PSP_MSA_AWARE_COLLOPS $1 -genv PSP_DEBUG_STATS 1"
    for b in 0:0 0:1 1:2 1:3; do
        line="$line -n 2 -env PSP_MSA_MODULE_ID ${b%%:*} -env PSP_SMP_NODE_ID ${b#*:} $TMP/msa_coll $args :"
    done
    # shellcheck disable=SC2086
    MPIEXEC_TIMEOUT=120 "$PREFIX/bin/mpiexec" ${line%:} >"$TMP/out" 2>"$TMP/err"
    us=$(sed -n 's/.*us_per_call=\([0-9.]*\).*/\1/p' "$TMP/out")
    calls=$(sed -n 's/.* calls=\([0-9]*\) us_per.*/\1/p' "$TMP/out")
    msgs=$(sed -n "s/.* $2 calls=[0-9]* hier=[0-9]* xmod_msgs=\([0-9]*\) xmod_bytes=\([0-9]*\);.*/\1 \2/p" \
        "$TMP/err" | awk -v c="$calls" '{m+=$1; b+=$2} END {printf "%.2f %.0f", m/c, b/c}')
    printf '%-9s %8s %-5s %10s %9s %12s\n' "$2" "$3" "$([ "$1" = 1 ] && echo hier || echo flat)" \
        "$us" "${msgs% *}" "${msgs#* }"
}

printf '%-9s %8s %-5s %10s %9s %12s\n' coll bytes algo us/call xmod/call xmodB/call
for coll in bcast reduce allreduce; do
    for size in 8 1048576; do
        n=$NS
        [ "$size" -gt 8 ] && n=$NL
        run 0 $coll $size $n
        run 1 $coll $size $n
    done
done
