#!/usr/bin/env bash
# t_loop: a process connected to itself uses the loop transport; with PSP_LOOP=0 the next one
. "$(dirname "$0")/lib.sh"
run_case loop "T_TRANSPORT=loop" t_loop
run_case loop-off-shm "PSP_LOOP=0 T_TRANSPORT=shm" t_loop
run_case loop-off-tcp "PSP_LOOP=0 PSP_SHM=0 PSP_UCP=0 T_TRANSPORT=tcp" t_loop
run_case loop-asked-shm-off "PSP_SHM=0 PSP_UCP=0 T_TRANSPORT=loop" t_loop
tap_done
