#!/usr/bin/env bash
# t_anysrc: 5 processes all to all under every transport setting, 8 under two of them
. "$(dirname "$0")/lib.sh"
run_matrix t_anysrc 5
run_some "default tcp" t_anysrc 8
tap_done
