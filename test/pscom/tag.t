#!/usr/bin/env bash
# t_tag (see t_tag.c): tag matching in the transport (ucp, UCX's tag matching), which needs ucp
# as the only transport besides loop. Once over UCX's shared memory transports, once over its
# tcp. Skipped where the ucp plugin is not built or UCX does not work.
. "$(dirname "$0")/lib.sh"
for m in "ucp-sm|posix,cma,self" "ucp-tcp|tcp"; do
    label=${m%%|*}
    envs="PSP_SHM=0 PSP_TCP=0 PSP_UCP_TAG=1 UCX_TLS=${m#*|} T_TRANSPORT=ucp"
    run_case "$label" "$envs" t_tag pair
    run_case "$label" "$envs" t_tag cross
    run_case "$label inline" "$envs" t_tag pair inline
    run_case "$label inline" "$envs" t_tag cross inline
    run_case "$label" "$envs" t_tag env
    run_case "$label" "$envs" t_tag mismatch notag
    run_case "$label" "$envs" t_tag mismatch default
done
tap_done
