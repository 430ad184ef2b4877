#!/usr/bin/env bash
# t_fallback (see t_fallback.c): ucp fails for a peer, the connection comes up on tcp and
# PSP_DEBUG=2 says why, once. Skipped where the ucp plugin is not built or UCX does not work.
. "$(dirname "$0")/lib.sh"
for m in unreachable noinit; do
    if why=$(transport_unavailable "PSP_SHM=0 T_TRANSPORT=ucp"); then
        tap_skip "[$m] t_fallback $m" "$why"
    else
        run_case "$m" "" t_fallback "$m"
    fi
done
tap_done
