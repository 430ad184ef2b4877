#!/usr/bin/env bash
# t_conn under every transport setting (see lib.sh and t_conn.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_conn
tap_done
