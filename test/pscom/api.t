#!/usr/bin/env bash
# single-process API unit tests (t_api.c)
. "$(dirname "$0")/lib.sh"
run_case api "" t_api
tap_done
