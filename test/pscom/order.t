#!/usr/bin/env bash
# t_order under every transport setting (see lib.sh and t_order.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_order
tap_done
