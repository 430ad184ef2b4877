#!/bin/sh
# MSA extensions with 8 ranks in 2 or 3 pretend modules (PSP_MSA_MODULE_ID per MPMD block) of
# 2 pretend nodes each (PSP_SMP_NODE_ID / PSP_MSA_NODE_ID per block): split types, MPI_INFO_ENV,
# mpi-ext.h, and the hierarchical collectives (PSP_MSA_AWARE_COLLOPS=1) against results
# computed from every rank's input, for contiguous and interleaved module layouts; the
# PSP_DEBUG_STATS line shows whether the hierarchy ran. PSP_SMP_NODE_ID=-1 makes every process a
# node of its own. PSP_MSA_AWARENESS=0 puts every rank in
# module 0; a bad PSP_MSA_MODULE_ID fails the job with a message naming it. (msa.c)
. "$(dirname "$0")/mpitest.sh"
mpitest_build msa || mpitest_done
prog=$MPITEST_TMP/msa

# BLOCK...: "n:module:node" per block -> mpiexec's MPMD arguments for prog ARGS ($msa_args)
blocks() {
    sep=""
    for b in "$@"; do
        n=${b%%:*} rest=${b#*:}
        printf '%s-n %s -env PSP_MSA_MODULE_ID %s -env %s %s %s %s' "$sep" "$n" "${rest%%:*}" \
            "${node_var:-PSP_SMP_NODE_ID}" "${rest#*:}" "$prog" "$msa_args"
        sep=" : "
    done
}

# contiguous, uneven: module 0 = ranks 0-2 (nodes 0: 0-1, 1: 2), module 1 = ranks 3-7
L2C="2:0:0 1:0:1 3:1:2 2:1:3"
# interleaved, 3 modules: 0,1,5 in module 0 (nodes 0, 1); 2,6,7 in module 1 (nodes 2, 3);
# 3,4 in module 2 (nodes 4, 5)
L3I="2:0:0 1:1:2 1:2:4 1:2:5 1:0:1 2:1:3"
# contiguous, 3 modules: 0-2 (nodes 0: 0-1, 1: 2), 3-5 (nodes 2: 3, 3: 4-5), 6-7 (nodes 4, 5)
L3C="2:0:0 1:0:1 1:1:2 2:1:3 1:2:4 1:2:5"

# LABEL ENV... -- BLOCKS...: one 8-rank job; ENV are -genv NAME VALUE pairs
msa_job() {
    label=$1
    shift
    genv=""
    while [ "$1" != -- ]; do
        genv="$genv -genv $1 $2"
        shift 2
    done
    shift
    # shellcheck disable=SC2046,SC2086 # word splitting builds the mpiexec line
    mpitest_job "$label" - $genv $(blocks "$@")
}

stats_hier() { # COLL: sum of "COLL calls=.. hier=N" over the ranks' PSP_DEBUG_STATS lines
    sed -n "s/.* $1 calls=[0-9]* hier=\([0-9]*\) .*/\1/p" "$job.err" | awk '{s+=$1} END {print s+0}'
}
stats_xmod() { # COLL: inter-module messages of COLL over all ranks
    sed -n "s/.* $1 calls=[0-9]* hier=[0-9]* xmod_msgs=\([0-9]*\) .*/\1/p" "$job.err" |
        awk '{s+=$1} END {print s+0}'
}

# 1. split types and MPI_INFO_ENV: 2 and 3 modules, contiguous and interleaved
msa_args=split
msa_job split.2c PSP_MSA_AWARENESS 1 -- $L2C
mpitest_merge "2 modules contiguous" msa
msa_job split.3i PSP_MSA_AWARENESS 1 -- $L3I
mpitest_merge "3 modules interleaved" msa
node_var=PSP_MSA_NODE_ID
msa_job split.msanode PSP_MSA_AWARENESS 1 -- $L3I
mpitest_merge "3 modules, PSP_MSA_NODE_ID" msa
node_var=PSP_SMP_NODE_ID
msa_job split.off PSP_MSA_AWARENESS 0 -- $L3I
mpitest_merge "PSP_MSA_AWARENESS=0 (module 0 everywhere)" msa
mpitest_job split.own 4 -genv PSP_SMP_NODE_ID -1 "$prog" split
mpitest_merge "PSP_SMP_NODE_ID=-1 (a node per process)" msa

# 2. collectives: hierarchical where the layout allows, and flat, against the reference
msa_args=coll
for l in 2c:"$L2C" 3c:"$L3C" 3i:"$L3I"; do
    name=${l%%:*}
    # shellcheck disable=SC2086
    msa_job "coll.$name" PSP_MSA_AWARENESS 1 PSP_MSA_AWARE_COLLOPS 1 PSP_DEBUG_STATS 1 -- ${l#*:}
    mpitest_merge "coll $name hierarchical" msa
    hb=$(stats_hier bcast) hr=$(stats_hier reduce) ha=$(stats_hier allreduce) hs=$(stats_hier scan)
    echo "# coll $name: hierarchical calls summed over ranks: bcast $hb reduce $hr allreduce $ha scan $hs"
    case $name in
    *c) [ "$hb" -gt 0 ] && [ "$hr" -gt 0 ] && [ "$ha" -gt 0 ] && [ "$hs" -gt 0 ] ;;
    *i) [ "$hb" -gt 0 ] && [ "$hr" -gt 0 ] && [ "$hs" -eq 0 ] ;; # interleaved: scan is flat
    esac && st=ok || st="not ok"
    tap "$st" "coll $name: PSP_DEBUG_STATS shows the hierarchical algorithms where they apply"
done
msa_job coll.flat PSP_MSA_AWARENESS 1 PSP_MSA_AWARE_COLLOPS 0 PSP_DEBUG_STATS 1 -- $L2C
mpitest_merge "coll 2c flat" msa
[ "$(stats_hier bcast)" -eq 0 ] && [ "$(stats_xmod bcast)" -gt 0 ] && st=ok || st="not ok"
tap "$st" "coll 2c flat: no hierarchical call, inter-module messages counted"

# 3. a bad module id: MPI_Init fails and says which variable
mpitest_job bad 2 -genv PSP_MSA_AWARENESS 1 -genv PSP_MSA_MODULE_ID x1 "$prog" split
if [ "$job_rc" -ne 0 ] && ! job_timed_out && grep -q "PSP_MSA_MODULE_ID='x1'" "$job.err" &&
    [ -z "$job_left" ]; then
    tap ok "PSP_MSA_MODULE_ID=x1: the job fails at once (status $job_rc), naming the variable"
else
    mpitest_comment "$job.err" 8
    tap "not ok" "PSP_MSA_MODULE_ID=x1: the job fails naming the variable (rc $job_rc)"
fi
mpitest_done
