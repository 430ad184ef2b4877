#!/bin/sh
# floods of unexpected messages (flood.c): a receive for a later message is not held up by
# earlier unexpected ones, and 10^6 small messages at a late receiver from 1 and from 8 senders
# leave its memory bounded by PSP_UNEXPECTED_MAX (here 4 MiB) plus a fixed margin
MPITEST_NPS=${MPITEST_NPS:-2 9}
. "$(dirname "$0")/mpitest.sh"
# 10^6 messages over tcp on a loaded 2-core machine: allow more time
TIMEOUT=${MPITEST_TIMEOUT:-120}
export PSP_UNEXPECTED_MAX=${PSP_UNEXPECTED_MAX:-4M}
mpitest_run flood
