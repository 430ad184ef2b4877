#!/bin/sh
# Print the whole PSP_* configuration table, defaults only, in the format of `pscom_info -c -d`:
# "# GROUP" lines, then per variable "NAME = VALUE # default DEFAULT" and its help text.
#
#   maint/env-table.sh [PSCOM_INFO]     (default: build/bin/pscom_info of this checkout)
#
# libpscom's rows (core, and every transport pscom_info can load) come from pscom_info itself,
# run with no PSP_* variable set. Two kinds of rows it cannot show are read from their C tables
# (maint/env-rows.py): the MPI netmod's (groups "mpi" and "mpi-msa", registered with
# pscom_env_register at MPI_Init, so they exist only inside an MPI process) and those of a
# loadable plugin that is not built here (ucp without UCX's headers). This is what
# ps_environment(7) (maint/gen-man.sh) and the documentation test (test/docs) are made from.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
info=${1:-$top/build/bin/pscom_info}
if [ ! -x "$info" ]; then
    echo "env-table: $info not found (make -C src/pscom builds it)" >&2
    exit 1
fi
# shellcheck disable=SC2046 # one -u NAME per PSP_* variable of the environment
lib=$(env $(env | sed -n 's/^\(PSP_[A-Za-z0-9_]*\)=.*/-u \1/p') "$info" -c -d) || {
    echo "env-table: $info -c -d failed" >&2
    exit 1
}
# the table starts at the first group line
printf '%s\n' "$lib" | sed -n '/^# /,$p'
have=$(printf '%s\n' "$lib" | sed -n 's/^\(PSP_[A-Za-z0-9_]*\) .*/\1/p' | tr '\n' ',')
python3 "$top/maint/env-rows.py" --skip "$have" "$top"/src/pscom/plugins/*/*.c \
    "$top"/src/mpid/ch4/netmod/pscom/*.c
