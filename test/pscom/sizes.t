#!/usr/bin/env bash
# t_sizes under every transport setting (DIRECT connects), and with ONDEMAND connects
. "$(dirname "$0")/lib.sh"
run_matrix t_sizes
run_case shm-oversub "PSP_TCP=0 PSP_UCP=0 T_TRANSPORT=shm T_OVERSUBSCRIBED=1" t_sizes
run_some "default tcp" t_sizes ondemand
tap_done
