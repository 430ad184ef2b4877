#!/bin/sh
# Drop-in: a program compiled and linked by Debian's mpicc.mpich (package libmpich-dev) runs
# unchanged with our mpiexec and our library through LD_LIBRARY_PATH=<prefix>/lib, with 1, 2,
# 4 and 8 ranks; dropin.c checks that the library really is ours and that it communicates.
# The same for a Fortran program built by Debian's mpifort.mpich, when our Fortran bindings are
# installed.
. "$(dirname "$0")/mpitest.sh"
DEBCC=${MPICC_MPICH:-mpicc.mpich}
if ! command -v "$DEBCC" >/dev/null 2>&1; then
    echo "1..0 # SKIP $DEBCC not installed (apt-get install libmpich-dev, see maint/install-deps.sh)"
    exit 0
fi
bin=$MPITEST_TMP/dropin
if ! "$DEBCC" -Wall -Wextra -O2 -o "$bin" "$TOP/test/mpi/dropin.c" >"$MPITEST_TMP/cc.err" 2>&1; then
    mpitest_comment "$MPITEST_TMP/cc.err" 20
    tap "not ok" "dropin.c compiles with $DEBCC"
    mpitest_done
fi
# Debian's programs need libmpich.so.12 (Debian's SONAME), not libmpi.so.12
needed=$(readelf -d "$bin" 2>/dev/null | sed -n 's/.*NEEDED.*\[\(libmpi[^]]*\)\].*/\1/p')
echo "# $DEBCC linked against: ${needed:-?}"

save=${LD_LIBRARY_PATH:-}
LD_LIBRARY_PATH=$PREFIX/lib${save:+:$save}
export LD_LIBRARY_PATH
for np in $NPS; do
    mpitest_job "dropin.np$np" "$np" "$bin" "$PREFIX/lib"
    mpitest_merge "np=$np" dropin
done

# Without $PREFIX/lib/$needed the loader takes Debian's own library. Then tell apart a missing
# file name from an ABI problem: run once more through a symlink to our libmpi.so.12.
if [ -n "$needed" ] && [ ! -e "$PREFIX/lib/$needed" ]; then
    echo "# $PREFIX/lib has no $needed: the loader finds Debian's (fix: install a symlink"
    echo "# $needed -> libmpi.so.12); ABI check through such a symlink in a temporary directory:"
    mkdir -p "$MPITEST_TMP/shim"
    ln -s "$PREFIX/lib/libmpi.so.12" "$MPITEST_TMP/shim/$needed"
    LD_LIBRARY_PATH=$MPITEST_TMP/shim:$PREFIX/lib${save:+:$save}
    mpitest_job "dropin.shim" 2 "$bin" "$PREFIX/lib"
    mpitest_merge "np=2 via $needed -> libmpi.so.12" dropin
fi

# Fortran: Debian's mpifort.mpich links -lmpichfort -lmpich; make install provides
# libmpichfort.so.12 -> libmpifort.so.12 when our Fortran bindings are built. fortran_mpi.f90
# (use mpi, compiled against Debian's module) checks that the library is ch4:pscom.
DEBFC=${MPIFORT_MPICH:-mpifort.mpich}
if ! command -v "$DEBFC" >/dev/null 2>&1; then
    echo "# Fortran drop-in not tested: no $DEBFC (libmpich-dev)"
elif [ ! -e "$PREFIX/lib/libmpifort.so.12" ]; then
    echo "# Fortran drop-in not tested: no $PREFIX/lib/libmpifort.so.12 (built with --disable-fortran)"
else
    mkdir -p "$MPITEST_TMP/fmod"
    if mpitest_build_with "$DEBFC" dropin_f fortran_mpi.f90 -O2 -J "$MPITEST_TMP/fmod"; then
        # which libmpichfort.so.12 the loader picks for Debian's program
        lib=$(ldd "$MPITEST_TMP/dropin_f" 2>/dev/null | sed -n 's/^[[:space:]]*libmpichfort\.so\.12 => \([^ ]*\).*/\1/p')
        if [ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$(readlink -f "$PREFIX/lib/libmpifort.so.12")" ]; then
            tap "ok" "Fortran: $DEBFC's program loads libmpichfort.so.12 from $PREFIX/lib"
        else
            tap "not ok" "Fortran: $DEBFC's program loads libmpichfort.so.12 from $PREFIX/lib (got: ${lib:-none})"
        fi
        for np in $NPS; do
            mpitest_job "dropin_f.np$np" "$np" "$MPITEST_TMP/dropin_f"
            mpitest_merge "Fortran np=$np" "dropin_f (fortran_mpi.f90 by $DEBFC)"
        done
    fi
fi
mpitest_done
