#!/usr/bin/env bash
# t_tcpcc (see t_tcpcc.c): PSP_TCP_CONGESTION sets the congestion control of tcp connections
. "$(dirname "$0")/lib.sh"
for m in default reno list system bogus; do
    run_case "$m" "" t_tcpcc "$m"
done
tap_done
