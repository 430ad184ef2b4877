#!/usr/bin/env bash
# t_kill under every transport setting (see lib.sh and t_kill.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_kill
tap_done
