#!/bin/sh
# The environment module that make install writes (share/modulefiles/psmpi/VERSION): loaded
# with Environment Modules (Debian's environment-modules), it puts the installation first in
# PATH, LD_LIBRARY_PATH, MANPATH and PKG_CONFIG_PATH; then plain `mpicc` and `mpiexec` (found
# through PATH, not by their path) build and run ring.c with 2 ranks, and unloading takes it
# all away again. Skips without the modulefile or without environment-modules.
#   PSMPI_MODULEPATH  where psmpi/VERSION is (default: PREFIX/share/modulefiles), e.g. one that
#                     maint/gen-modulefile.sh wrote for an installation made before it existed
#   MODULES_INIT      the module system's init script (default Environment Modules'
#                     /usr/share/modules/init/sh; maint/check.sh also runs it with Lmod's
#                     /usr/share/lmod/lmod/init/sh)
. "$(dirname "$0")/mpitest.sh"
MODULES_INIT=${MODULES_INIT:-/usr/share/modules/init/sh}
moddir=${PSMPI_MODULEPATH:-$PREFIX/share/modulefiles}
if [ ! -d "$moddir/psmpi" ]; then
    echo "1..0 # SKIP no modulefile in $moddir (make install writes it)"
    exit 0
fi
if [ ! -r "$MODULES_INIT" ]; then
    echo "1..0 # SKIP environment-modules not installed (no $MODULES_INIT; apt-get install environment-modules, see maint/install-deps.sh)"
    exit 0
fi

# start from an environment without any MPI of ours in it
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$PREFIX/bin" | paste -sd: -)
unset LOADEDMODULES _LMFILES_ MODULEPATH PSMPI_PREFIX PSMPI_MODULEPATH
export PATH
# shellcheck disable=SC1090 # Environment Modules' shell init
. "$MODULES_INIT" >"$MPITEST_TMP/init.out" 2>&1
if ! command -v module >/dev/null 2>&1; then
    mpitest_comment "$MPITEST_TMP/init.out"
    tap "not ok" "$MODULES_INIT defines the module command"
    mpitest_done
fi

module use "$moddir" >"$MPITEST_TMP/use.out" 2>&1
if module load psmpi >"$MPITEST_TMP/load.out" 2>&1 && module list 2>&1 | grep -q 'psmpi/'; then
    tap "ok" "module load psmpi ($(ls "$moddir/psmpi" | tr '\n' ' ')from $moddir)"
else
    mpitest_comment "$MPITEST_TMP/load.out"
    tap "not ok" "module load psmpi (from $moddir)"
    mpitest_done
fi

check_path() { # VAR DIR: DIR is the first element of $VAR
    mpitest_v=
    eval "mpitest_v=\${$1:-}"
    if [ "${mpitest_v%%:*}" = "$2" ]; then
        tap "ok" "$1 starts with $2"
    else
        tap "not ok" "$1 starts with $2 (is: $mpitest_v)"
    fi
}
check_path PATH "$PREFIX/bin"
check_path LD_LIBRARY_PATH "$PREFIX/lib"
check_path MANPATH "$PREFIX/share/man"
check_path PKG_CONFIG_PATH "$PREFIX/lib/pkgconfig"
for t in mpicc mpiexec pscom_info; do
    found=$(command -v $t)
    if [ "$found" = "$PREFIX/bin/$t" ]; then
        tap "ok" "plain $t is $PREFIX/bin/$t"
    else
        tap "not ok" "plain $t is $PREFIX/bin/$t (found: ${found:-nothing})"
    fi
done
if command -v man >/dev/null 2>&1 && [ -f "$PREFIX/share/man/man7/ps_environment.7" ]; then
    page=$(man -w ps_environment 2>/dev/null)
    if [ "$page" = "$PREFIX/share/man/man7/ps_environment.7" ]; then
        tap "ok" "man finds ps_environment(7) in $PREFIX/share/man"
    else
        tap "not ok" "man finds ps_environment(7) in $PREFIX/share/man (found: ${page:-nothing})"
    fi
else
    tap "ok" "man finds ps_environment(7) # SKIP no man, or no ps_environment.7 installed"
fi
if command -v pkg-config >/dev/null 2>&1; then
    if pkg-config --exists mpich; then
        tap "ok" "pkg-config finds mpich ($(pkg-config --modversion mpich))"
    else
        tap "not ok" "pkg-config finds mpich"
    fi
else
    tap "ok" "pkg-config finds mpich # SKIP pkg-config not installed"
fi

# plain mpicc and mpiexec, as a user would call them after module load
# shellcheck disable=SC2034 # read by mpitest_job
MPIEXEC=mpiexec
if mpitest_build_with mpicc ring ring.c -Wall -Wextra -O2; then
    mpitest_job ring.np2 2 "$MPITEST_TMP/ring"
    mpitest_merge "np=2" "ring (plain mpicc, mpiexec)"
fi

module unload psmpi >"$MPITEST_TMP/unload.out" 2>&1
case ":$PATH:${LD_LIBRARY_PATH:-}:${MANPATH:-}:${PKG_CONFIG_PATH:-}:" in
*":$PREFIX/"*)
    tap "not ok" "module unload psmpi removes $PREFIX from the paths"
    ;;
*) tap "ok" "module unload psmpi removes $PREFIX from the paths" ;;
esac
mpitest_done
