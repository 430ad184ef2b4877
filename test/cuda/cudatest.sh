# Shared by the test/cuda/*.t scripts (POSIX sh, sourced after test/mpi/mpitest.sh): build the
# fake CUDA driver (fake_cuda.c) as $MPITEST_TMP/fake/libcuda.so.1 and put it first in
# LD_LIBRARY_PATH, so that libpscom (PSP_CUDA=1) and the test programs load it instead of a
# real driver. Test programs are built against it with cudatest_build NAME [FLAGS...].
CUDATEST_SRC=$TOP/test/cuda
CUDATEST_FAKE=$MPITEST_TMP/fake
mkdir -p "$CUDATEST_FAKE"
if ! gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$CUDATEST_FAKE/libcuda.so.1" \
    "$CUDATEST_SRC/fake_cuda.c" -lpthread >"$MPITEST_TMP/fake.err" 2>&1; then
    mpitest_comment "$MPITEST_TMP/fake.err" 20
    tap "not ok" "the fake CUDA driver (test/cuda/fake_cuda.c) compiles"
    mpitest_done
fi
ln -sf libcuda.so.1 "$CUDATEST_FAKE/libcuda.so"
LD_LIBRARY_PATH=$CUDATEST_FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH

cudatest_build() { # NAME [CFLAGS...]: test/cuda/NAME.c with mpicc, linked with the fake driver
    cudatest_name=$1
    shift
    # the flags (libraries too) after the source: the linker takes only libraries needed so far
    if "$MPICC" -Wall -Wextra -O2 -I"$CUDATEST_SRC" -o "$MPITEST_TMP/$cudatest_name" \
        "$CUDATEST_SRC/$cudatest_name.c" "$@" -L"$CUDATEST_FAKE" -lcuda >"$MPITEST_TMP/cc.err" 2>&1; then
        mpitest_comment "$MPITEST_TMP/cc.err" 20
        return 0
    fi
    mpitest_comment "$MPITEST_TMP/cc.err" 20
    tap "not ok" "test/cuda/$cudatest_name.c compiles"
    return 1
}

# NAME [PROGRAM ARGS...]: run $MPITEST_TMP/NAME with PSP_CUDA=1 over each transport alone (shm,
# tcp, ucp over UCX shared memory) with every NP of NPS, then with 8 ranks over the default ones.
# CUDATEST_GENV: more mpiexec -genv arguments; CUDATEST_LABEL: a prefix of the labels. The fake
# driver fails every copy of more than CUDATEST_PAGEABLE_MAX bytes (default 1 KiB; empty: no
# check) the library makes between device memory and host memory that is not page-locked
# (staging is in page-locked buffers; the small collectives' stack buffers hold at most 1 KiB).
cudatest_transports() {
    cudatest_prog=$1
    shift
    for cudatest_t in shm tcp ucp default; do
        case $cudatest_t in
        shm) cudatest_env="-genv PSP_TCP 0 -genv PSP_UCP 0" cudatest_nps=$NPS ;;
        tcp) cudatest_env="-genv PSP_SHM 0 -genv PSP_UCP 0" cudatest_nps=$NPS ;;
        ucp)
            if [ ! -e "$PREFIX/lib/libpscom4ucp.so" ]; then
                tap ok "ucp # SKIP no ucp plugin installed"
                continue
            fi
            cudatest_env="-genv PSP_SHM 0 -genv PSP_TCP 0 -genv UCX_TLS posix,cma,self"
            cudatest_nps=$NPS
            ;;
        default) cudatest_env="" cudatest_nps=8 ;;
        esac
        for np in $cudatest_nps; do
            # shellcheck disable=SC2086 # cudatest_env: words on purpose
            mpitest_job "$cudatest_prog.${CUDATEST_LABEL:-}$cudatest_t.np$np" "$np" -genv PSP_CUDA 1 \
                -genv FAKE_CUDA_PAGEABLE_MAX "${CUDATEST_PAGEABLE_MAX-1024}" $cudatest_env ${CUDATEST_GENV:-} \
                "$MPITEST_TMP/$cudatest_prog" "$@"
            mpitest_merge "${CUDATEST_LABEL:+$CUDATEST_LABEL }$cudatest_t np=$np" "$cudatest_prog"
        done
    done
}
