#!/usr/bin/env bash
# t_late (see t_late.c): floods at a receiver that sleeps, one-to-one and 3-to-one, under every
# transport setting; then through the transport's tag matching where ucp is the only transport
. "$(dirname "$0")/lib.sh"
run_matrix t_late pair
run_matrix t_late many
run_matrix t_late later
# over tcp (no single-copy pull) the messages that went by rendezvous for want of credit are
# fetched ahead as receives free credit, instead of a round trip each when taken
run_case tcp-fc "PSP_SHM=0 PSP_UCP=0 T_TRANSPORT=tcp PSP_UNEXPECTED_MAX=64k PSP_DEBUG_STATS=1" \
    t_late later
ahead=$(sed -n 's/.*<PSP:r0>.*fetched ahead \([0-9]*\).*/\1/p' "$T_LOGDIR/t_late.later.tcp-fc.log")
tap_ok "$([ "${ahead:-0}" -gt 0 ] && echo 0 || echo 1)" \
    "[tcp-fc] the receiver fetched parked messages ahead (${ahead:-none})"
run_case shm-oversub "PSP_TCP=0 PSP_UCP=0 T_TRANSPORT=shm T_OVERSUBSCRIBED=1" t_late pair
run_case shm-oversub "PSP_TCP=0 PSP_UCP=0 T_TRANSPORT=shm T_OVERSUBSCRIBED=1" t_late many
for m in "ucp-sm|posix,cma,self" "ucp-tcp|tcp"; do
    envs="PSP_SHM=0 PSP_TCP=0 PSP_UCP_TAG=1 UCX_TLS=${m#*|} T_TRANSPORT=ucp"
    run_case "${m%%|*} tag" "$envs" t_late pair tag
    run_case "${m%%|*} tag" "$envs" t_late many tag
done
tap_done
