#!/usr/bin/env bash
# t_seal (see t_seal.c): a sealed socket refuses connectors without its key (none, a wrong one,
# a replayed handshake) and carries on. The program sets its own transport (tcp).
. "$(dirname "$0")/lib.sh"
run_case seal "" t_seal
tap_done
