#!/usr/bin/env bash
# The project's whole test suite (README's second command, and what CI runs).
#  - builds libpscom and its tests, normally and with AddressSanitizer + UBSan;
#  - runs the TAP tests of test/pscom with prove against both builds;
#  - test/fuzz: the libFuzzer targets of the parsers over their corpus and a short run each
#    (skipped without clang);
#  - test/docs: every PSP_* the documentation names exists, every variable is documented;
#  - with an installed MPI (install/): the netmod warnings check; the MPI tests of test/mpi
#    with the default transports and with tcp only (PSP_SHM=0 PSP_UCP=0), the modulefile with
#    Lmod too where it is installed; CUDA device memory in every kind of call over each
#    transport with a fake CUDA driver (test/cuda); a representative set
#    with PSP_SHM=0, with MPICH's inter-node paths (MPIR_CVAR_NOLOCAL=1 NUM_CLIQUES=2) and,
#    where the ucp plugin is usable, over ucp alone (UCX's tcp, UCX's shared memory, and UCX's
#    shared memory with PSP_UCP_TAG=0); and a fast subset of MPICH's own test suite in the
#    default, tcp and (with ucp) ucp variants;
#  - as root, across the nodes of a simulated cluster (test/cluster: Linux namespaces joined
#    by bridges): the MPI tests on several layouts, MSA, node failures, MPICH's quick subset,
#    and Slurm where it is installed (maint/install-deps.sh --slurm). Skipped otherwise.
# Every test job runs under a timeout; nothing here uses the network beyond loopback and the
# simulated cluster's own namespaces.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)

if ! command -v prove >/dev/null; then
    echo "check.sh: prove (perl) is missing; run maint/install-deps.sh" >&2
    exit 1
fi

build() { # build DIR [SANITIZE]
    local dir=$1 san=${2:-}
    make -s -C src/pscom -j"$jobs" BUILD="$dir" ${san:+SANITIZE=$san}
    make -s -C src/gateway BUILD="$dir" ${san:+SANITIZE=$san} # psgwd: the gw tests' gateway
    make -s -C test/pscom -j"$jobs" BUILD="$dir" ${san:+SANITIZE=$san}
}

build "$top/build"
build "$top/build-asan" address,undefined

status=0
echo "== libpscom tests (build/)"
BUILD="$top/build" prove test/pscom/ || status=1
echo "== libpscom tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
BUILD="$top/build-asan" ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} prove test/pscom/ || status=1
echo "== fuzz targets over their corpus, then 20000 runs each (test/fuzz; maint/fuzz.sh fuzzes longer)"
BUILD="$top/build" prove test/fuzz/ || status=1
echo "== documentation against the configuration table (test/docs)"
BUILD="$top/build" prove test/docs/ || status=1

# MPI tests against the installed MPI (maint/build.sh builds it), over shm and tcp-only
if [ -x "$top/install/bin/mpiexec" ]; then
    # the netmod: -Wall -Wextra clean, and its error messages parse for MPICH's autogen (which
    # a fresh build runs; an incremental one does not)
    if [ -f "$top/_build/mpich-build/Makefile" ]; then
        echo "== netmod warnings and error messages"
        maint/check-netmod-warnings.sh || status=1
    fi
    echo "== MPI tests (install/, test/mpi)"
    PSMPI_PREFIX="$top/install" prove test/mpi/ || status=1
    # the modulefile with Lmod, the other module system sites use, where it is installed
    # (Debian's lmod and environment-modules exclude each other: modulefile.t above then skips)
    if [ -r /usr/share/lmod/lmod/init/sh ]; then
        echo "== the environment module with Lmod (test/mpi/modulefile.t)"
        PSMPI_PREFIX="$top/install" MODULES_INIT=/usr/share/lmod/lmod/init/sh \
            prove test/mpi/modulefile.t || status=1
    fi
    # each test forces shm, tcp and ucp itself
    echo "== CUDA device memory with a fake driver (test/cuda)"
    PSMPI_PREFIX="$top/install" prove test/cuda/ || status=1
    # the ucp plugin (when built) ranks above tcp: switch it off too to force tcp
    echo "== MPI tests with PSP_SHM=0 PSP_UCP=0 (tcp only)"
    PSMPI_PREFIX="$top/install" PSP_SHM=0 PSP_UCP=0 prove test/mpi/ || status=1
    # a representative set under the other transport choices: shm off (ucp if built, else
    # tcp), and ucp alone over UCX's tcp and over UCX's shared memory (when the plugin is there)
    rep="test/mpi/ring.t test/mpi/pt2pt.t test/mpi/late.t test/mpi/coll.t test/mpi/rma.t test/mpi/datatype.t"
    echo "== MPI tests, representative set, with PSP_SHM=0"
    PSMPI_PREFIX="$top/install" MPITEST_NPS="2 4" PSP_SHM=0 prove $rep || status=1
    # shm rings of two 256-byte records (640 bytes), without single copy: every message wraps
    # the ring or goes in pieces, and senders keep finding it full
    echo "== MPI tests over shm with PSP_SHM_SLOTS=2 PSP_SHM_SLOT_SIZE=256 PSP_SHM_CMA=0"
    PSMPI_PREFIX="$top/install" MPITEST_NPS="2 4" PSP_SHM_SLOTS=2 PSP_SHM_SLOT_SIZE=256 \
        PSP_SHM_CMA=0 prove test/mpi/pt2pt.t test/mpi/late.t test/mpi/coll.t test/mpi/flood.t ||
        status=1
    # MPICH's inter-node code paths on one machine: every rank its own node for MPICH, two
    # cliques (pscom still picks shm; the netmod yields on the oversubscribed node all the same)
    echo "== MPI tests, representative set, with MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_NUM_CLIQUES=2"
    PSMPI_PREFIX="$top/install" MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_NUM_CLIQUES=2 prove $rep || status=1
    if "$top/install/bin/pscom_info" 2>/dev/null | grep -qE '^ *ucp +[0-9]+ +[^ ]+ +yes'; then
        # ucp alone: MPI's matching is UCX's (PSP_UCP_TAG=1, the default there); once more
        # with pscom's matching over UCX's active messages
        for tls in tcp posix,cma,self; do
            echo "== MPI tests, representative set, ucp only with UCX_TLS=$tls"
            PSMPI_PREFIX="$top/install" MPITEST_NPS="2 4" PSP_SHM=0 PSP_TCP=0 UCX_TLS=$tls \
                prove $rep || status=1
        done
        echo "== MPI tests, representative set, ucp only with PSP_UCP_TAG=0 UCX_TLS=posix,cma,self"
        PSMPI_PREFIX="$top/install" MPITEST_NPS="2 4" PSP_SHM=0 PSP_TCP=0 PSP_UCP_TAG=0 \
            UCX_TLS=posix,cma,self prove $rep || status=1
    else
        echo "== MPI tests over ucp skipped: pscom_info lists no usable ucp plugin"
    fi
    # MPICH's own test suite, its fast representative subset (maint/mpich-tests.quick; the whole
    # suite, 35-50 minutes per variant here, is `maint/mpich-tests.sh`, docs/developer-guide.md)
    if [ -x "${MPICH_SRC:-$top/_build/mpich-4.0.2}/test/mpi/configure" ]; then
        variants="default tcp"
        "$top/install/bin/pscom_info" 2>/dev/null | grep -qE '^ *ucp +[0-9]+ +[^ ]+ +yes' &&
            variants="$variants ucp"
        for variant in $variants; do
            echo "== MPICH test suite, quick subset, variant $variant"
            maint/mpich-tests.sh --quick --variant=$variant || status=1
        done
    else
        echo "== MPICH test suite skipped: no MPICH source tree in _build (maint/get-mpich.sh)"
    fi
    echo "== MPI across the nodes of a simulated cluster (test/cluster; root only)"
    PSMPI_PREFIX="$top/install" prove test/cluster/ || status=1
else
    echo "== MPI tests skipped: no install/bin/mpiexec (maint/build.sh builds and installs it)"
fi
exit $status
