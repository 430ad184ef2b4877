#!/bin/bash
R=$1; OUT=$2; cd /work/main; : > $OUT
for r in $(seq $R); do
  cl=$(_build/bench/cacheline_pp 2>&1 | grep -o 'one-way [0-9.]*' | cut -d' ' -f2)
  o=$(env PSP_SHM=0 PSP_TCP=0 UCX_TLS=posix,cma,self timeout 60 install/bin/mpiexec -n 2 _build/bench/mpi_pp.ours --mode lat --sizes 0,8,1k --csv --time 0.05 | grep -v '#' | awk -F, 'NR>1{printf "%s ", $4}')
  echo "$r ours $cl $o" >> $OUT
  o=$(env PSP_SHM=0 PSP_TCP=0 UCX_TLS=posix,cma,self timeout 60 /tmp/wt/install/bin/mpiexec -n 2 /tmp/mpi_pp.old --mode lat --sizes 0,8,1k --csv --time 0.05 | grep -v '#' | awk -F, 'NR>1{printf "%s ", $4}')
  echo "$r old $cl $o" >> $OUT
  o=$(UCX_TLS=posix,cma,self timeout 60 /usr/bin/mpiexec.mpich -n 2 _build/bench/mpi_pp.mpich --mode lat --sizes 0,8,1k --csv --time 0.05 | grep -v '#' | awk -F, 'NR>1{printf "%s ", $4}')
  echo "$r mpich $cl $o" >> $OUT
done
