#!/usr/bin/env bash
# t_many under every transport setting (see lib.sh and t_many.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_many
tap_done
