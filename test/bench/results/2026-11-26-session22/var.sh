#!/bin/bash
# usage: var.sh ROUNDS OUT "label:ENV..." ...   (label mpich = Debian's MPICH)
R=$1; OUT=$2; shift 2; cd /work/main; : > $OUT
for r in $(seq $R); do
  cl=$(_build/bench/cacheline_pp 2>&1 | grep -o 'one-way [0-9.]*' | cut -d' ' -f2)
  for v in "$@"; do
    lab=${v%%:*}; envs=${v#*:}
    if [[ "$lab" == mpich* ]]; then
      o=$(env UCX_TLS=posix,cma,self $envs timeout 60 /usr/bin/mpiexec.mpich -n 2 _build/bench/mpi_pp.mpich --mode lat --sizes 0,8,1k --csv --time 0.05 | grep -v '#' | awk -F, 'NR>1{printf "%s ", $4}')
    else
      bin=${BIN:-_build/bench/mpi_pp.ours}; pre=${PRE:-install}
      o=$(env PSP_SHM=0 PSP_TCP=0 UCX_TLS=posix,cma,self $envs timeout 60 $pre/bin/mpiexec -n 2 $bin --mode lat --sizes 0,8,1k --csv --time 0.05 | grep -v '#' | awk -F, 'NR>1{printf "%s ", $4}')
    fi
    echo "$r $lab $cl $o" >> $OUT
  done
done
