#!/usr/bin/env bash
# t_kill under every transport setting (see lib.sh and t_kill.c), and once more over UCX's tcp
# with its endpoints in peer failure mode (PSP_UCP_PEER_FAILURE=1: UCX's own detection, not
# only the handshake socket)
. "$(dirname "$0")/lib.sh"
run_matrix t_kill
run_case ucp-tcp-peer "PSP_SHM=0 PSP_TCP=0 UCX_TLS=tcp PSP_UCP_PEER_FAILURE=1 T_TRANSPORT=ucp" t_kill
tap_done
