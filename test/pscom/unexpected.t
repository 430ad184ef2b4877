#!/usr/bin/env bash
# t_unexpected under every transport setting (see lib.sh and t_unexpected.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_unexpected
tap_done
