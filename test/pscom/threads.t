#!/usr/bin/env bash
# t_threads under every transport setting (see lib.sh and t_threads.c), and with PSP_SPIN_US=0
# so that every wait blocks at once: one thread sleeps in poll while the others complete its
# requests and must wake it (a missed wakeup shows up as 1 s stalls and the job timeout).
. "$(dirname "$0")/lib.sh"
run_matrix t_threads
run_case block-shm "PSP_SPIN_US=0 PSP_RENDEZVOUS=4096 T_TRANSPORT=shm T_RNDV=4096" t_threads
run_case block-tcp "PSP_SPIN_US=0 PSP_SHM=0 PSP_UCP=0 T_TRANSPORT=tcp" t_threads
tap_done
