#!/bin/sh
# Obtain the pinned upstream MPICH source (Debian's mpich_4.0.2.orig.tar.xz), verify its sha256
# and unpack it into the git-ignored build area. Never commits anything; safe to run again.
#
# Usage: maint/get-mpich.sh [--with-mpich-source=PATH] [--build-dir=DIR] [--force]
#   PATH (or $MPICH_SOURCE): the tarball, a directory holding it, or an unpacked MPICH 4.0.2 tree.
#   Without PATH: `apt-get source --download-only mpich=4.0.2-3`; as root this adds a bookworm
#   deb-src entry if the machine has none.
# Result: $BUILD_DIR/mpich-4.0.2 (default BUILD_DIR: <checkout>/_build). Prints that path last.
set -eu

MPICH_VERSION=4.0.2
DEB_VERSION=4.0.2-3
TARBALL=mpich_${MPICH_VERSION}.orig.tar.xz
# From Debian's mpich_4.0.2-3.dsc (Checksums-Sha256), checked against the downloaded file.
TARBALL_SHA256=b27039f964afeb6b8a3e009c56b441cbe368c26d6d6476ad3bb7190996875860
DEBSRC_FILE=/etc/apt/sources.list.d/psmpi-deb-src.sources

TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$TOP/_build}
SOURCE=${MPICH_SOURCE:-}
FORCE=no

die() { echo "get-mpich: error: $*" >&2; exit 1; }
say() { echo "get-mpich: $*" >&2; }

for arg in "$@"; do
    case $arg in
    --with-mpich-source=*) SOURCE=${arg#*=} ;;
    --build-dir=*) BUILD_DIR=${arg#*=} ;;
    --force) FORCE=yes ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
    esac
done

DEST=$BUILD_DIR/mpich-$MPICH_VERSION
STAMP=$DEST/.psmpi-source
DL=$BUILD_DIR/dl

if [ -f "$STAMP" ] && [ $FORCE = no ]; then
    say "using existing $DEST ($(cat "$STAMP"); --force replaces it)"
    echo "$DEST"
    exit 0
fi

verify() { # file -> dies unless the sha256 matches
    command -v sha256sum >/dev/null || die "sha256sum not found (coreutils)"
    sum=$(sha256sum "$1" | cut -d' ' -f1)
    [ "$sum" = "$TARBALL_SHA256" ] ||
        die "$1: sha256 $sum, expected $TARBALL_SHA256 (not Debian's $TARBALL?)"
    say "sha256 ok: $1"
}

# A bookworm deb-src entry so that apt-get source can find mpich (root only).
ensure_deb_src() {
    if grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return 0
    fi
    [ "$(id -u)" = 0 ] ||
        die "no deb-src entry in /etc/apt and not root: add one, or pass --with-mpich-source="
    # the mirror this machine already uses for bookworm (deb822 or one-line format)
    uri=$(awk '/^URIs:/ {u = $2} /^Suites:.*bookworm( |$)/ && u {print u; exit}' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null)
    [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null)
    [ -n "$uri" ] || uri=http://deb.debian.org/debian
    say "adding $DEBSRC_FILE (deb-src bookworm from $uri) and running apt-get update"
    cat >"$DEBSRC_FILE" <<EOS
# Added by psmpi maint/get-mpich.sh to fetch the MPICH $MPICH_VERSION upstream source.
Types: deb-src
URIs: $uri
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
    apt-get update -q >&2 || die "apt-get update failed"
}

fetch_apt() {
    command -v apt-get >/dev/null || die "apt-get not found: pass --with-mpich-source=PATH"
    ensure_deb_src
    mkdir -p "$DL"
    # apt drops root privileges to _apt for downloads; let it write here.
    chmod 0777 "$DL" 2>/dev/null || true
    say "apt-get source --download-only mpich=$DEB_VERSION"
    (cd "$DL" && apt-get source -q --download-only "mpich=$DEB_VERSION" >&2) || {
        # The index may just be stale after adding the entry elsewhere.
        [ "$(id -u)" = 0 ] && apt-get update -q >&2 &&
            (cd "$DL" && apt-get source -q --download-only "mpich=$DEB_VERSION" >&2)
    } || die "apt-get source mpich=$DEB_VERSION failed (is a bookworm deb-src entry configured?)"
    [ -f "$DL/$TARBALL" ] || die "apt-get source did not leave $DL/$TARBALL"
}

unpack_tarball() { # tarball
    verify "$1"
    command -v xz >/dev/null || die "xz not found (apt-get install xz-utils)"
    rm -rf "$DEST" "$DEST.tmp"
    mkdir -p "$DEST.tmp"
    say "unpacking $1"
    tar -xJf "$1" -C "$DEST.tmp"
    [ -d "$DEST.tmp/mpich-$MPICH_VERSION" ] || die "$1 does not contain mpich-$MPICH_VERSION/"
    mv "$DEST.tmp/mpich-$MPICH_VERSION" "$DEST"
    rmdir "$DEST.tmp"
    echo "tarball sha256 $TARBALL_SHA256" >"$STAMP"
}

copy_tree() { # dir: an unpacked tree cannot be hashed like the tarball; check its version
    [ -f "$1/maint/version.m4" ] && [ -f "$1/src/mpid/ch4/ch4_api.txt" ] ||
        die "$1 is neither $TARBALL, a directory with it, nor an MPICH source tree"
    grep -q "MPICH_VERSION_m4],\[$MPICH_VERSION\]" "$1/maint/version.m4" ||
        die "$1 is not MPICH $MPICH_VERSION (see its maint/version.m4)"
    [ "$(cd "$1" && pwd)" != "$(cd "$DEST" 2>/dev/null && pwd)" ] || {
        echo "tree $1 (in place)" >"$STAMP"
        return 0
    }
    say "copying tree $1 (no sha256 check possible for a tree)"
    rm -rf "$DEST"
    mkdir -p "$BUILD_DIR"
    cp -a "$1" "$DEST"
    rm -f "$DEST/.psmpi-patched" # a copy of one of our own trees: patch state starts over
    echo "tree $1" >"$STAMP"
}

mkdir -p "$BUILD_DIR"
if [ -n "$SOURCE" ]; then
    [ -e "$SOURCE" ] || die "MPICH source '$SOURCE' does not exist"
    if [ -f "$SOURCE" ]; then
        unpack_tarball "$SOURCE"
    elif [ -f "$SOURCE/$TARBALL" ]; then
        unpack_tarball "$SOURCE/$TARBALL"
    else
        copy_tree "$SOURCE"
    fi
elif [ -f "$DL/$TARBALL" ]; then
    unpack_tarball "$DL/$TARBALL"
else
    fetch_apt
    unpack_tarball "$DL/$TARBALL"
fi
say "MPICH $MPICH_VERSION source ready in $DEST"
echo "$DEST"
