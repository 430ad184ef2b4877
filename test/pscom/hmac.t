#!/usr/bin/env bash
# SHA-256, HMAC-SHA-256, random bytes and key files of libpscom (t_hmac.c, pscom_hmac.h)
. "$(dirname "$0")/lib.sh"
run_case hmac "" t_hmac
tap_done
