#!/usr/bin/env bash
# t_split under every transport setting (see lib.sh and t_split.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_split
tap_done
