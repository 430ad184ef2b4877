#!/usr/bin/env bash
# CUDA-aware MPI on a real GPU: build test/cuda/gpu_check.cu with nvcc against an installed
# psmpi, run it with 2 ranks on one GPU (PSP_CUDA=1) over shared memory and over tcp: device
# memory exchanged point-to-point, in a collective and by RMA, verified on the device; then
# device-to-device next to host-to-host latency and bandwidth, 8 B .. 64 MiB (TAP, the table as
# comments). Takes a minute or two.
#
#   test/cuda/gpu-check.sh [--prefix DIR] [--no-speed] [--build-only]
#   test/cuda/gpu-check.sh --bundle DIR
#
#   --prefix DIR  the installation to test (default: <checkout>/install)
#   --no-speed    only the correctness checks
#   --build-only  only compile gpu_check.cu (no GPU needed; test/cuda/nvcc.t)
#   --bundle DIR  (on the build machine) copy the installation to DIR, without debug symbols,
#                 together with the shared libraries it needs beyond the C library (hwloc,
#                 ...), for a GPU machine that has the NVIDIA driver and the CUDA toolkit but
#                 none of the build's packages and no network: carry DIR there and run
#                 test/cuda/gpu-check.sh --prefix DIR
#
# Needs: nvcc (found as $NVCC, on PATH, in $CUDA_HOME, /usr/local/cuda*, or the NVIDIA HPC SDK)
# and a GPU the driver sees. Exits 0 when every check passed.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prefix=$top/install speed=1 bundle="" build_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$(cd "${2:?--prefix needs a directory}" && pwd) || exit 2; shift ;;
    --no-speed) speed=0 ;;
    --build-only) build_only=1 ;;
    --bundle) bundle=${2:?--bundle needs a directory}; shift ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

if [ -n "$bundle" ]; then
    [ -x "$prefix/bin/mpiexec" ] || { echo "gpu-check.sh: no installation in $prefix" >&2; exit 2; }
    rm -rf "$bundle"
    mkdir -p "$bundle"
    cp -a "$prefix/bin" "$prefix/include" "$prefix/lib" "$bundle/"
    rm -rf "$bundle/lib/pkgconfig" "$bundle/lib"/*.la "$bundle/include"/*.mod
    # debug symbols make up most of the size; the check needs none
    find "$bundle/bin" "$bundle/lib" -type f \( -name '*.so*' -o -perm -u+x \) \
        -exec strip --strip-debug {} + 2>/dev/null
    mkdir -p "$bundle/lib/deps"
    # every library the programs and libraries need that is not part of libc
    find "$bundle/bin" "$bundle/lib" -maxdepth 1 -type f -exec ldd {} + 2>/dev/null |
        awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
        grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so' |
        grep -v "^$prefix/" | while read -r lib; do cp -L "$lib" "$bundle/lib/deps/"; done
    echo "gpu-check.sh: bundle in $bundle ($(du -sh "$bundle" | cut -f1)); on the GPU machine:"
    echo "    test/cuda/gpu-check.sh --prefix $bundle"
    exit 0
fi

[ -x "$prefix/bin/mpiexec" ] || { echo "1..0 # SKIP no installation in $prefix"; exit 0; }
nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
    for c in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-/nonexistent}/bin/nvcc" \
        /usr/local/cuda/bin/nvcc $(ls -d /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -V -r) \
        $(ls -d /opt/nvidia/hpc_sdk/*/*/cuda/bin/nvcc 2>/dev/null | sort -V -r); do
        [ -n "$c" ] && [ -x "$c" ] && { nvcc=$c; break; }
    done
fi
[ -n "$nvcc" ] || { echo "1..0 # SKIP no nvcc (set NVCC or CUDA_HOME)"; exit 0; }
if [ $build_only = 0 ] && command -v nvidia-smi >/dev/null; then
    if ! nvidia-smi -L >/dev/null 2>&1; then
        echo "1..0 # SKIP nvidia-smi sees no GPU"
        exit 0
    fi
elif [ $build_only = 0 ] && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    echo "1..0 # SKIP no NVIDIA GPU here (no nvidia-smi, no /dev/nvidia*)"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$prefix/lib:$prefix/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "# nvcc: $nvcc ($("$nvcc" --version | tail -n 1))"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/# GPU: /'
if ! "$nvcc" -O2 -I"$prefix/include" -o "$tmp/gpu_check" "$top/test/cuda/gpu_check.cu" \
    -L"$prefix/lib" -lmpi -Xlinker -rpath="$prefix/lib" >"$tmp/cc.log" 2>&1; then
    if grep -qiE 'unsupported (GNU|host compiler|clang) version' "$tmp/cc.log"; then
        echo "1..0 # SKIP this nvcc does not take the host's compiler ($(gcc -dumpversion 2>/dev/null))"
        exit 0
    fi
    sed 's/^/# /' "$tmp/cc.log"
    echo "not ok 1 - gpu_check.cu compiles with nvcc"
    echo "1..1"
    exit 1
fi
if [ $build_only = 1 ]; then
    echo "ok 1 - gpu_check.cu compiles with nvcc and links with $prefix"
    echo "1..1"
    exit 0
fi

status=0 n=0
run() { # LABEL ENV... -- ARGS: one job; its TAP renumbered under LABEL
    label=$1
    shift
    envs=()
    while [ "$1" != -- ]; do envs+=(-genv "${1%%=*}" "${1#*=}"); shift; done
    shift
    timeout -k 5 300 "$prefix/bin/mpiexec" -n 2 -genv PSP_CUDA 1 "${envs[@]}" "$tmp/gpu_check" "$@" \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
    while IFS= read -r l; do
        case $l in
        "ok "* | "not ok "*)
            st=ok
            case $l in "not ok"*) st="not ok" status=1 ;; esac
            n=$((n + 1))
            echo "$st $n - $label: $(echo "$l" | sed 's/^\(not \)\{0,1\}ok [0-9]* - //')"
            ;;
        1..*) ;;
        *) echo "$l" ;;
        esac
    done <"$tmp/out"
    n=$((n + 1))
    if [ $rc -eq 0 ]; then
        echo "ok $n - $label: job exits 0"
    else
        sed 's/^/# /' "$tmp/err" | tail -n 20
        echo "not ok $n - $label: job exit status $rc"
        status=1
    fi
}
args=()
[ $speed = 1 ] || args=(--no-speed)
run "shm" PSP_TCP=0 -- "${args[@]}"
run "tcp" PSP_SHM=0 -- "${args[@]}"
run "shm, PSP_CUDA_ENFORCE_STAGING=1" PSP_TCP=0 PSP_CUDA_ENFORCE_STAGING=1 -- --no-speed
echo "1..$n"
exit $status
