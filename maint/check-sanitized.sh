#!/usr/bin/env bash
# The libpscom tests and the MPI tests with libpscom and libmpi (MPICH with the netmod) built
# with AddressSanitizer + UndefinedBehaviorSanitizer. Outside CI: the sanitized libmpi is a
# second compile of all of MPICH's own objects (~25 min on 2 cores the first time, ccache
# keeps later runs short), since the netmod's inline functions are compiled into most of them.
#
#   maint/check-sanitized.sh [TEST.t...]     (default: test/pscom/ and test/mpi/)
#
# Needs the normal build first (maint/build.sh). What it does:
#  - build-asan/: libpscom, its plugins, psgwd and the test/pscom programs with
#    SANITIZE=address,undefined (as maint/check.sh does);
#  - _build/mpich-build-asan/: a copy of _build/mpich-build without libmpi's objects, whose
#    libmpi is rebuilt with -fsanitize=address,undefined (the copy's other parts, hydra and the
#    bundled yaksa, hwloc, json-c, are the normal build's);
#  - build-asan/mpi/lib: libmpi.so.12 from there and build-asan's libpscom with its plugins;
#  - test/mpi runs against install/ with MPITEST_MPIEXEC=build-asan/mpi/mpiexec, which gives
#    the ranks (not mpiexec itself) that library path and the sanitizer runtimes in LD_PRELOAD
#    (the test programs are not instrumented; the runtime must come first).
# A sanitizer report fails the rank (UBSan does not recover; leaks are checked at exit) and so
# the test. MPITEST_SANITIZED=1 tells the tests: figures that ASan's shadow memory and
# quarantine change (peak RSS) are not asserted.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)
san=address,undefined
asan=$top/build-asan
mpich=$top/_build/mpich-build
copy=$top/_build/mpich-build-asan

[ -x "$top/install/bin/mpiexec" ] && [ -f "$mpich/Makefile" ] || {
    echo "check-sanitized.sh: build and install the MPI first (maint/build.sh)" >&2
    exit 1
}
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(test/pscom/ test/mpi/)

echo "== libpscom, psgwd and the libpscom tests with SANITIZE=$san (build-asan/)"
make -s -C src/pscom -j"$jobs" BUILD="$asan" SANITIZE=$san
make -s -C src/gateway BUILD="$asan" SANITIZE=$san
make -s -C test/pscom -j"$jobs" BUILD="$asan" SANITIZE=$san

echo "== libmpi with -fsanitize=$san (_build/mpich-build-asan)"
# libmpi's objects stay the copy's own: the sanitized ones are rebuilt only when their sources
# change, as in any build tree
rsync -a --exclude='lib_libmpi_la-*.lo' --exclude='lib_libmpi_la-*.o' \
    --exclude='/lib/libmpi.la' --exclude='/lib/.libs/libmpi.*' "$mpich/" "$copy/"
mk_var() { sed -n "s/^$1 = *//p" "$copy/Makefile" | head -n 1; }
sanflags="-fsanitize=$san -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
nice make -s -C "$copy" -j"$jobs" lib/libmpi.la \
    CFLAGS="$(mk_var CFLAGS) -g $sanflags" \
    LDFLAGS="$(mk_var LDFLAGS) -fsanitize=$san" LIBS="$(mk_var LIBS) -lasan -lubsan"

lib=$asan/mpi/lib
mkdir -p "$lib"
ln -sf "$copy/lib/.libs/libmpi.so.12" "$lib/libmpi.so.12"
for f in "$asan"/lib/libpscom*; do ln -sf "$f" "$lib/"; done
nm -D "$lib/libmpi.so.12" | grep __asan_report >/dev/null || {
    echo "check-sanitized.sh: $lib/libmpi.so.12 is not instrumented" >&2
    exit 1
}

preload="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
# HWLOC_COMPONENTS=-pci: hwloc's PCI plugin (libpciaccess) leaks 1 KiB per process, and hwloc
# unloads it before LeakSanitizer looks, so the report cannot even name it (<unknown module>)
cat >"$asan/mpi/mpiexec" <<EOF
#!/bin/sh
# mpiexec whose ranks run with the sanitized libmpi and libpscom (maint/check-sanitized.sh)
exec "$top/install/bin/mpiexec" -genv LD_LIBRARY_PATH "$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
    -genv LD_PRELOAD "$preload" \\
    -genv HWLOC_COMPONENTS -pci \\
    -genv ASAN_OPTIONS "\${ASAN_OPTIONS:-detect_leaks=1}" \\
    -genv LSAN_OPTIONS "suppressions=$top/maint/lsan.supp:print_suppressions=0" \\
    -genv UBSAN_OPTIONS "print_stacktrace=1:halt_on_error=1" "\$@"
EOF
chmod +x "$asan/mpi/mpiexec"

status=0
pscom_tests=() mpi_tests=()
for t in "${tests[@]}"; do
    case $t in
    test/pscom*) pscom_tests+=("$t") ;;
    *) mpi_tests+=("$t") ;;
    esac
done
if [ ${#pscom_tests[@]} -gt 0 ]; then
    echo "== libpscom tests under AddressSanitizer + UBSan (build-asan/)"
    BUILD="$asan" ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} prove "${pscom_tests[@]}" || status=1
fi
# test/mpi/scale.t without leak checking: LeakSanitizer's own thread tracer crashes ("Tracer
# caught signal 11") in ranks that map the UCX shared memory of 63 and more peers (ucp-sm, 64
# and 128 ranks); AddressSanitizer and UBSan still watch them
expand() { for t in "$@"; do if [ -d "$t" ]; then ls "$t"/*.t; else echo "$t"; fi; done; }
mapfile -t mpi_tests < <(expand ${mpi_tests[@]+"${mpi_tests[@]}"})
mpi_run() { # prove the given tests with the sanitized ranks
    PSMPI_PREFIX="$top/install" MPITEST_MPIEXEC="$asan/mpi/mpiexec" MPITEST_SANITIZED=1 \
        MPITEST_TIMEOUT=${MPITEST_TIMEOUT:-90} prove "$@" || status=1
}
leaky=() others=()
for t in ${mpi_tests[@]+"${mpi_tests[@]}"}; do
    case $t in */scale.t) leaky+=("$t") ;; *) others+=("$t") ;; esac
done
if [ ${#others[@]} -gt 0 ]; then
    echo "== MPI tests with libmpi and libpscom under AddressSanitizer + UBSan"
    mpi_run "${others[@]}"
fi
if [ ${#leaky[@]} -gt 0 ]; then
    echo "== ... and without LeakSanitizer (its tracer fails with 64 ranks over ucp-sm)"
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} mpi_run "${leaky[@]}"
fi
exit $status
