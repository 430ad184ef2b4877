#!/usr/bin/env bash
# t_probe under every transport setting (see lib.sh and t_probe.c)
. "$(dirname "$0")/lib.sh"
run_matrix t_probe
tap_done
