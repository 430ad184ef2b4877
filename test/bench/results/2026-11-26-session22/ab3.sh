#!/bin/bash
# ab3.sh ROUNDS OUT LABEL PREFIX BIN: per round ours (install), LABEL (the MPI in PREFIX, mpi_pp
# built with its mpicc as BIN) and Debian's MPICH, 0.05 s per size, over UCX's shared memory.
# This session: ai = /tmp/wt/install /tmp/s22/mpi_pp.ai (the worktree build),
#               new = /tmp/ci/main/install /tmp/s22/mpi_pp.new (a fresh clone's .ci/run build)
R=$1; OUT=$2; LAB=$3; PRE=$4; BIN=$5; cd /work/main; : > $OUT
run() { env PSP_SHM=0 PSP_TCP=0 UCX_TLS=posix,cma,self timeout 60 $1/bin/mpiexec -n 2 $2 --mode lat --sizes 0,8,1k --csv --time 0.05 | grep -v '#' | awk -F, 'NR>1{printf "%s ", $4}'; }
for r in $(seq $R); do
  cl=$(_build/bench/cacheline_pp 2>&1 | grep -o 'one-way [0-9.]*' | cut -d' ' -f2)
  echo "$r ours $cl $(run install _build/bench/mpi_pp.ours)" >> $OUT
  echo "$r $LAB $cl $(run $PRE $BIN)" >> $OUT
  o=$(UCX_TLS=posix,cma,self timeout 60 /usr/bin/mpiexec.mpich -n 2 _build/bench/mpi_pp.mpich --mode lat --sizes 0,8,1k --csv --time 0.05 | grep -v '#' | awk -F, 'NR>1{printf "%s ", $4}')
  echo "$r mpich $cl $o" >> $OUT
done
