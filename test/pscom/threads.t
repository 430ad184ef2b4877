#!/usr/bin/env bash
# t_threads under every transport setting (see lib.sh and t_threads.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_threads
tap_done
