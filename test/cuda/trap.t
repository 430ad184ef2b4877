#!/bin/sh
# The fake CUDA driver traps every CPU access to its device memory, and libpscom's device
# layer (PSP_CUDA) recognises and copies device memory with it; without PSP_CUDA, or with a
# driver that has no device, device memory is not supported and nothing breaks (trap.c).
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cuda/cudatest.sh"
cudatest_build trap -I"$PREFIX/include" -L"$PREFIX/lib" -lpscom || mpitest_done
# each run's TAP, renumbered, under a label
run() { # LABEL EXPECT [ENV...]
    label=$1 expect=$2
    shift 2
    env "$@" "$MPITEST_TMP/trap" "$expect" >"$MPITEST_TMP/trap.out" 2>"$MPITEST_TMP/trap.err"
    rc=$?
    grep -E '^(not )?ok ' "$MPITEST_TMP/trap.out" | while IFS= read -r l; do
        echo "$l" | sed 's/^\(not ok\|ok\) [0-9]* - /\1 /'
    done >"$MPITEST_TMP/trap.lines"
    while IFS= read -r l; do
        st=${l%% *}
        [ "$st" = not ] && st="not ok"
        tap "$st" "$label: ${l#"$st "}"
    done <"$MPITEST_TMP/trap.lines"
    [ $rc -eq 0 ] && tap ok "$label: exits 0" || { mpitest_comment "$MPITEST_TMP/trap.err"; tap "not ok" "$label: exit status $rc"; }
}
run "PSP_CUDA=1" 1 PSP_CUDA=1
run "PSP_CUDA=0" 0 PSP_CUDA=0
# no driver at all: libpscom warns and goes on
printf '#include <pscom.h>\n#include <stdio.h>\nint main(void) { pscom_init(PSCOM_VERSION); printf("%%d\\n", pscom_is_cuda_enabled()); return 0; }\n' >"$MPITEST_TMP/nodrv.c"
gcc -I"$PREFIX/include" -o "$MPITEST_TMP/nodrv" "$MPITEST_TMP/nodrv.c" -L"$PREFIX/lib" -lpscom -Wl,-rpath,"$PREFIX/lib"
out=$(PSP_CUDA=1 PSP_CUDA_LIBRARY=libcuda-missing.so.1 "$MPITEST_TMP/nodrv" 2>"$MPITEST_TMP/nodrv.err")
if [ "$out" = 0 ] && grep -q 'PSP_CUDA=1 but the CUDA driver cannot be loaded' "$MPITEST_TMP/nodrv.err"; then
    tap ok "PSP_CUDA=1 without a driver: one warning, CUDA off, the program runs"
else
    mpitest_comment "$MPITEST_TMP/nodrv.err"
    tap "not ok" "PSP_CUDA=1 without a driver (printed '$out')"
fi
out=$(PSP_CUDA=1 FAKE_CUDA_DEVICES=0 "$MPITEST_TMP/nodrv" 2>"$MPITEST_TMP/nodrv.err")
if [ "$out" = 0 ] && grep -q 'PSP_CUDA=1 but this node has no CUDA device' "$MPITEST_TMP/nodrv.err"; then
    tap ok "PSP_CUDA=1 with a driver but no device: one warning, CUDA off"
else
    mpitest_comment "$MPITEST_TMP/nodrv.err"
    tap "not ok" "PSP_CUDA=1 with a driver but no device (printed '$out')"
fi
mpitest_done
