#!/usr/bin/env bash
# t_block (blocking waits, 2.5 s each run) under the settings with different wake-up paths
. "$(dirname "$0")/lib.sh"
run_some "default tcp shm-nocma tcp-rndv" t_block
tap_done
