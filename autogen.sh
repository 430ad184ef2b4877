#!/bin/sh
# Prepare the tree for ./configure:
#   1. obtain + verify MPICH 4.0.2 (maint/get-mpich.sh) into _build/mpich-4.0.2
#   2. link our netmod src/mpid/ch4/netmod/pscom into that tree
#   3. apply maint/patches/*.patch (once; recorded in a stamp file)
#   4. run MPICH's autogen.sh with the quick flags (skips bundled packages we do not use)
#   5. autoreconf our top level (configure.ac -> configure)
# Usage: ./autogen.sh [--with-mpich-source=PATH] [--force]
#   --force re-runs MPICH's autogen even if nothing changed. MPICH_SOURCE=PATH works as well.
set -eu

TOP=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=${BUILD_DIR:-$TOP/_build}
export BUILD_DIR
FORCE=no
GETARGS=""
for arg in "$@"; do
    case $arg in
    --with-mpich-source=*) GETARGS="$GETARGS $arg" ;;
    --force) FORCE=yes ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "autogen: unknown argument '$arg' (see --help)" >&2; exit 1 ;;
    esac
done

die() { echo "autogen: error: $*" >&2; exit 1; }
for tool in autoconf automake libtoolize python3 perl patch; do
    command -v $tool >/dev/null || die "$tool not found; run maint/install-deps.sh (as root)"
done

# shellcheck disable=SC2086
MPICH=$("$TOP/maint/get-mpich.sh" $GETARGS)
[ -d "$MPICH" ] || die "maint/get-mpich.sh gave no source tree"

# 2. The netmod lives in our tree; MPICH sees it through a symlink so edits need no copy.
NETMOD=$MPICH/src/mpid/ch4/netmod/pscom
if [ -L "$NETMOD" ] || [ ! -e "$NETMOD" ]; then
    ln -sfn "$TOP/src/mpid/ch4/netmod/pscom" "$NETMOD"
else
    die "$NETMOD exists and is not our symlink; remove it or rerun get-mpich with --force"
fi

# 3. Patches, each applied once. A patch already present (e.g. a tree given by the user that
#    has it) is detected with a reverse dry run and only recorded.
STAMP=$MPICH/.psmpi-patched
touch "$STAMP"
changed=no
for p in "$TOP"/maint/patches/*.patch; do
    [ -e "$p" ] || continue
    name=$(basename "$p")
    grep -qxF "$name" "$STAMP" && continue
    if patch -d "$MPICH" -p1 -R --dry-run -s -f <"$p" >/dev/null 2>&1; then
        echo "autogen: $name already applied"
    else
        echo "autogen: applying $name"
        patch -d "$MPICH" -p1 -N -s <"$p" || die "patch $name failed"
    fi
    echo "$name" >>"$STAMP"
    changed=yes
done

# 4. MPICH's autogen regenerates configure/Makefile.in, the ch4 API headers (netmod.h,
#    pscom/func_table.c, pscom/pscom_noinline.h), error strings and cvars. It only needs to run
#    again when patches, the netmod's Makefile.mk/subconfigure.m4/errnames.txt or cvars change.
AUTOGEN_STAMP=$MPICH/.psmpi-autogen
# shellcheck disable=SC2046 # the list of files with cvars is meant to split
inputs=$(cd "$TOP" && cat maint/patches/*.patch src/mpid/ch4/netmod/pscom/Makefile.mk \
    src/mpid/ch4/netmod/pscom/subconfigure.m4 src/mpid/ch4/netmod/pscom/errnames.txt \
    $(grep -l 'BEGIN_MPI_T_CVAR_INFO_BLOCK' src/mpid/ch4/netmod/pscom/*.c 2>/dev/null) |
    sha256sum | cut -d' ' -f1)
if [ $FORCE = yes ] || [ $changed = yes ] || [ "$(cat "$AUTOGEN_STAMP" 2>/dev/null)" != "$inputs" ]; then
    echo "autogen: running MPICH autogen.sh in $MPICH"
    rm -f "$AUTOGEN_STAMP"
    (cd "$MPICH" && ./autogen.sh -without-ucx -without-ofi -without-izem -without-yaksa \
        -without-hydra2 -without-romio -without-hwloc -without-json -without-hydra \
        -without-test) >"$BUILD_DIR/mpich-autogen.log" 2>&1 ||
        die "MPICH autogen failed; see $BUILD_DIR/mpich-autogen.log"
    echo "$inputs" >"$AUTOGEN_STAMP"
else
    echo "autogen: MPICH tree up to date (use --force to rerun its autogen)"
fi

# 5. Our own configure.
(cd "$TOP" && autoreconf -fi) || die "autoreconf of the top level failed"
echo "autogen: done; next: ./configure && make -j$(nproc 2>/dev/null || echo 2) install"
