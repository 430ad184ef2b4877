#!/bin/sh
# Install the Debian 12 packages needed to build and test psmpi (MPICH 4.0.2 + ch4:pscom).
# Run as root. Packages already present are left alone, so running it again is cheap.
# Usage: maint/install-deps.sh [--slurm] [--peers]
#   --slurm   also Slurm and munge (test/cluster/slurm, test/cluster/slurm.t: a real Slurm on the
#             simulated cluster) and PMIx (libpmix-dev: Slurm's srun --mpi=pmix needs its
#             library, an MPICH configured --with-pmix its headers)
#   --peers   also what test/bench needs: the MPIs it compares with, Debian's MPICH
#             (mpiexec.mpich) and Open MPI (mpicc.openmpi, mpiexec.openmpi), and gnuplot and
#             ImageMagick for its plots
#   (--fortran is still accepted and does nothing: gfortran is always installed now, since the
#   Fortran bindings are built by default)
set -eu

PKGS="gcc g++ make autoconf automake libtool pkg-config python3 perl patch xz-utils file \
ca-certificates ccache libhwloc-dev"
# build: MPICH's Fortran bindings (mpifort, the mpi and mpi_f08 modules) are on by default;
# ./configure --disable-fortran builds without them
PKGS="$PKGS gfortran"
# test only: test/mpi/dropin.t builds a program with Debian's mpicc.mpich and runs it on our
# library (drop-in); it skips when this is missing
PKGS="$PKGS libmpich-dev"
# test only: test/mpi/modulefile.t loads the environment module that make install writes
# (share/modulefiles/psmpi/VERSION) with Environment Modules; it skips when this is missing
PKGS="$PKGS environment-modules"
# build: UCX headers and libraries for libpscom's ucp transport plugin (libpscom4ucp.so);
# src/pscom/Makefile skips the plugin when they are missing
PKGS="$PKGS libucx-dev"
# test only: test/cluster's simulated nodes are joined with ip (bridges, veth pairs); their
# tests skip without it
PKGS="$PKGS iproute2"
# test only: the libFuzzer targets of test/fuzz (maint/fuzz.sh, test/fuzz/corpus.t) are built
# with clang and its libFuzzer; test/fuzz skips without them
PKGS="$PKGS clang libfuzzer-14-dev"
# maintenance only: maint/check-sanitized.sh keeps its copy of MPICH's build tree with rsync
PKGS="$PKGS rsync"
for arg in "$@"; do
    case $arg in
    --fortran) ;; # compatibility: gfortran is in PKGS anyway
    # test only: test/cluster/slurm.t skips without them
    --slurm) PKGS="$PKGS slurm-wlm munge libpmix-dev" ;;
    # benchmarks only: test/bench skips a peer that is missing
    --peers) PKGS="$PKGS mpich openmpi-bin libopenmpi-dev gnuplot-nox imagemagick" ;;
    *) echo "install-deps: unknown argument '$arg'" >&2; exit 1 ;;
    esac
done

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages:$missing" >&2
    echo "install-deps: run as root, or: sudo apt-get install$missing" >&2
    exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# Another apt run (e.g. unattended upgrades) may hold the lock: wait for it, do not fail.
apt-get -o DPkg::Lock::Timeout=600 update -q
# shellcheck disable=SC2086
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $missing
