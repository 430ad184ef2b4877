#!/usr/bin/env bash
# garbage and broken handshakes on a listening port (t_garbage.c); the server runs with and
# without shm (the recorded client always uses tcp)
. "$(dirname "$0")/lib.sh"
run_some "default tcp" t_garbage
tap_done
