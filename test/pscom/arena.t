#!/usr/bin/env bash
# t_arena (see t_arena.c): many shm connections share SysV segments; malformed shm offers are
# declined and the connection falls back to tcp. The program sets its own transports.
. "$(dirname "$0")/lib.sh"
run_case arena "" t_arena
tap_done
