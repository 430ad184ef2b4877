#!/usr/bin/env bash
# MSA across real nodes: 4 nodes x 2 ranks, the module of a process given by its node (as an
# admin sets PSP_MSA_MODULE_ID per node group), 2 modules (nodes 1-2, 3-4) and 3 modules
# (1-2, 3, 4). MPIX_COMM_TYPE_MODULE, and the hierarchical collectives' inter-module messages
# (PSP_DEBUG_STATS) against what the algorithms must send per call: the module leaders alone
# talk across modules, one message per module but the root's for Bcast and Reduce, and with
# 2 modules 2 per call for Allreduce and Barrier (each leader sends once). Flat collectives
# (PSP_MSA_AWARE_COLLOPS=0) send more across modules.
LOOPS=50
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"
vc_up 4
vc_hosts node1:2 node2:2 node3:2 node4:2
vc_build msa_count

# the module of a node, from VC_MODULES="node1=0 node2=0 ...", then the program
cat >"$MPITEST_TMP/on-module" <<'SH'
#!/bin/sh
for m in $VC_MODULES; do
    [ "${m%%=*}" = "$(hostname)" ] && PSP_MSA_MODULE_ID=${m#*=} && export PSP_MSA_MODULE_ID
done
exec "$@"
SH
chmod +x "$MPITEST_TMP/on-module"

# "psmpi-msa-stats: rank 0 module 0 node -2: barrier calls=51 hier=51 xmod_msgs=51 ...;"
stats() { # COLL FIELD [RANK]: FIELD of COLL, summed over the ranks (or of RANK alone)
    grep "psmpi-msa-stats: rank ${3:-[0-9]*} " "$job.err" | grep -o " $1 calls=[0-9]* hier=[0-9]* xmod_msgs=[0-9]*" |
        grep -o "$2=[0-9]*" | awk -F= '{ s += $2 } END { print s + 0 }'
}

# LABEL MODULES COLLOPS
run() {
    VC_MODULES=$2 mpitest_job "$1" 8 -genv PSP_MSA_AWARENESS 1 -genv PSP_MSA_AWARE_COLLOPS "$3" \
        -genv PSP_DEBUG_STATS 1 -genv VC_MODULES "$2" "$MPITEST_TMP/on-module" \
        "$MPITEST_TMP/msa_count" $LOOPS
    mpitest_merge "$1" msa_count
}

declare -A flat
for layout in "2|node1=0 node2=0 node3=1 node4=1" "3|node1=0 node2=0 node3=1 node4=2"; do
    n=${layout%%|*} mods=${layout#*|}
    run "$n modules flat" "$mods" 0
    for c in barrier bcast reduce allreduce; do flat[$c]=$(stats $c xmod_msgs); done
    run "$n modules hierarchical" "$mods" 1
    grep -q "^ok 1 - MPIX_COMM_TYPE_MODULE: $n modules" "$job.out" && st=ok || st="not ok"
    tap "$st" "$n modules: MPIX_COMM_TYPE_MODULE finds $n modules"
    for c in barrier bcast reduce allreduce; do
        calls=$(stats $c hier 0) x=$(stats $c xmod_msgs)
        case $n.$c in
        *.bcast | *.reduce) want=$((calls * (n - 1))) ;;
        2.*) want=$((calls * 2)) ;;
        *) want="" ;; # 3 leaders: as MPICH's algorithm for 3 has it; fewer than flat
        esac
        if [ -n "$want" ]; then
            [ "${calls:-0}" -ge $LOOPS ] && [ "$x" -eq "$want" ] && st=ok || st="not ok"
            tap "$st" "$n modules: $c: ${calls:-0} hierarchical calls, $x inter-module messages (expected $want; flat: ${flat[$c]})"
        else
            [ "${calls:-0}" -ge $LOOPS ] && [ "$x" -gt 0 ] && [ "$x" -lt "${flat[$c]}" ] && st=ok || st="not ok"
            tap "$st" "$n modules: $c: ${calls:-0} hierarchical calls, $x inter-module messages (fewer than flat: ${flat[$c]})"
        fi
    done
done
mpitest_done
