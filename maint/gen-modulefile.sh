#!/bin/sh
# Write the environment module of an installation: a Tcl modulefile for Environment Modules
# and Lmod that puts PREFIX's programs, libraries, manual pages and pkg-config files first.
#
#   maint/gen-modulefile.sh PREFIX VERSION OUT
#
# `make install` writes $(prefix)/share/modulefiles/psmpi/$(VERSION) with it; then
#   module use $(prefix)/share/modulefiles && module load psmpi
# makes plain mpicc, mpiexec and `man ps_environment` ours (test/mpi/modulefile.t).
set -eu
if [ $# != 3 ]; then
    echo "usage: maint/gen-modulefile.sh PREFIX VERSION OUT" >&2
    exit 2
fi
prefix=$1 version=$2 out=$3
case $prefix in
/*) ;;
*) echo "gen-modulefile: PREFIX must be an absolute path: $prefix" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$out")"
cat >"$out" <<EOF
#%Module1.0
## psmpi $version: MPICH 4.0.2 with the ch4 netmod pscom over libpscom.
## Written by make install (maint/gen-modulefile.sh) for the installation in $prefix.

proc ModulesHelp { } {
    puts stderr "psmpi $version (MPICH 4.0.2, ch4:pscom) in $prefix:"
    puts stderr "mpicc, mpicxx, mpifort, mpiexec; man ps_environment for the PSP_* variables."
}
module-whatis "psmpi $version: MPI (MPICH 4.0.2 ABI, ch4:pscom over libpscom)"

# one MPI at a time: Lmod and Environment Modules 5 know families, older versions conflicts
if {[info commands family] eq "family"} {
    family mpi
}
conflict mpi mpich openmpi

set prefix "$prefix"
prepend-path PATH            \$prefix/bin
prepend-path LD_LIBRARY_PATH \$prefix/lib
prepend-path PKG_CONFIG_PATH \$prefix/lib/pkgconfig
# MANPATH: an empty element stands for man's own search path, which a MANPATH of our
# directory alone would hide (system pages such as ls(1) would be gone)
if {![info exists ::env(MANPATH)] || \$::env(MANPATH) eq ""} {
    append-path MANPATH {}
}
prepend-path MANPATH         \$prefix/share/man
setenv PSMPI_PREFIX \$prefix
EOF
