# shellcheck shell=bash disable=SC2034,SC2054
# lib.sh: shell functions shared by compare.sh and suite.sh (bash; source it, do not run it).
#
# The caller sets ROOT (repository), OUT (build directory for the binaries) and LOGS (one
# stdout/stderr file per run), and TMO (timeout per mpiexec, seconds) before calling the
# functions; OK_LINES (a regex) names the output lines of its programs that are expected.
#
#   bench_clean_env          unset PSP_*, UCX_*, MPIR_CVAR_*, MPICH_*, OMPI_MCA_*, HYDRA_*
#   bench_build M SRC NAME   build SRC with M's mpicc (-O2 -Wall -Wextra) into $OUT/NAME.M,
#                            check with ldd that it loads M's library; 1 (with a note) if not
#   bench_available M        M's mpicc and mpiexec exist (else a note and 1)
#   bench_run M TR TAG NP CHECK BIN ARGS...
#                            one mpiexec under timeout; TR shm|tcp|ucp-tcp|ucp-sm (ucp: all
#                            three over UCX with the same UCX_TLS); CHECK 1: transport checks
#                            (see README.md), 0: none (nothing that slows start-up); output in
#                            $LOGS/TAG.out and .err, seconds of the whole mpiexec in WALL
#   check_idle WHEN          print the CPU use of the whole machine over 1 s (warn above 15%)
#   cacheline_ns             the host's one-way cache-line latency now, in ns (nothing if it
#                            cannot be measured); builds $OUT/cacheline_pp when needed
#   warn MSG                 print a WARNING, count it in WARNS (FAILS counts failed runs)

OURS_PREFIX=${OURS_PREFIX:-$ROOT/install}
declare -A CC=([ours]=$OURS_PREFIX/bin/mpicc [mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
declare -A RUN=([ours]=$OURS_PREFIX/bin/mpiexec [mpich]=mpiexec.mpich [openmpi]=mpiexec.openmpi)
declare -A LIBPAT=([ours]="ch4:pscom" [mpich]="ch4:ucx" [openmpi]="Open MPI")
FAILS=0 WARNS=0 WALL=
OK_LINES=${OK_LINES:-'^(#|mode,)'}
# UCX_TLS of the ucp transports: UCX over its tcp, or over its shared memory (+ cma) only
declare -A UCP_TLS=([ucp-tcp]=tcp,self [ucp-sm]=posix,cma,self)

# Nothing from the caller's environment may tune one MPI and not the others.
bench_clean_env() {
    local v
    for v in $(compgen -e | grep -E '^(PSP_|UCX_|MPIR_CVAR_|MPICH_|OMPI_MCA_|HYDRA_)'); do
        echo "note: unsetting $v=${!v}"
        unset "$v"
    done
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # harmless when not root
}

# CPU busy fraction of the whole machine over 1 s (another job skews everything).
busy() {
    local a b
    read -ra a < <(head -1 /proc/stat)
    sleep 1
    read -ra b < <(head -1 /proc/stat)
    local ta=0 tb=0 i
    for i in 1 2 3 4 5 6 7 8; do ta=$((ta + a[i])); tb=$((tb + b[i])); done
    local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) tot=$((tb - ta))
    echo $(( tot > 0 ? 100 * (tot - idle) / tot : 0 ))
}
check_idle() {
    local b
    b=$(busy)
    if [ "$b" -gt 15 ]; then
        echo "WARNING: machine $b% busy $1; the numbers are not trustworthy. Top processes:"
        ps -eo pcpu,etime,args --sort=-pcpu | head -4 | cut -c1-100 | sed 's/^/    /'
    else
        echo "machine $b% busy $1"
    fi
}

warn() {
    WARNS=$((WARNS + 1))
    echo "WARNING: $*"
}

bench_available() {
    local m=$1
    case $m in ours | mpich | openmpi) ;; *) echo "unknown MPI $m" >&2; return 2 ;; esac
    if ! command -v "${CC[$m]}" >/dev/null 2>&1; then
        echo "note: skipping $m: ${CC[$m]} not found"
        return 1
    fi
    if ! command -v "${RUN[$m]}" >/dev/null 2>&1; then
        echo "note: skipping $m: ${RUN[$m]} not found"
        return 1
    fi
}

bench_build() {
    local m=$1 src=$2 name=$3
    local cc=${CC[$m]} bin=$OUT/$name.$m lib
    if ! "$cc" -O2 -Wall -Wextra -o "$bin" "$src" 2>"$LOGS/build.$name.$m.err"; then
        echo "note: skipping $m: build of $name with $cc failed:"
        sed 's/^/    /' "$LOGS/build.$name.$m.err"
        return 1
    fi
    [ -s "$LOGS/build.$name.$m.err" ] && { echo "warning: $cc:"; sed 's/^/    /' "$LOGS/build.$name.$m.err"; }
    # the binary must load its own library, not another MPI's (LD_LIBRARY_PATH)
    lib=$(ldd "$bin" | awk '/libmpi(ch)?\.so/ {print $3; exit}')
    case $m in
    ours) [[ $lib == "$OURS_PREFIX"/* ]] ;;
    *) [[ -n $lib && $lib != "$OURS_PREFIX"/* ]] ;;
    esac || { echo "note: skipping $m: $bin loads '$lib'"; return 1; }
    echo "built $bin ($cc, loads $lib)"
}

bench_run() {
    local m=$1 tr=$2 tag=$3 np=$4 chk=$5 bin=$6
    shift 6
    local out=$LOGS/$tag.out err=$LOGS/$tag.err
    local -a env=() cmd=()

    case $m in
    ours)
        [ "$chk" = 1 ] && env=(PSP_DEBUG_CONTYPE=1) # one line per connection: "... via shm|tcp"
        [ "$tr" = tcp ] && env+=(PSP_SHM=0 PSP_UCP=0) # ucp (UCX) would win over tcp
        [[ $tr == ucp-* ]] && env+=(PSP_SHM=0 PSP_TCP=0 "UCX_TLS=${UCP_TLS[$tr]}")
        cmd=("${RUN[$m]}" -n "$np")
        ;;
    mpich)
        # UCX lists the transports of each endpoint (ep_cfg lines), one file per process
        [ "$chk" = 1 ] && env=(UCX_LOG_LEVEL=info "UCX_LOG_FILE=$LOGS/$tag.ucx.%p")
        cmd=("${RUN[$m]}" -n "$np")
        # Debian's MPICH is ch4:ucx without shmmod (configure "auto" = none for ucx, see
        # src/mpid/ch4/subconfigure.m4): UCX carries intra-node messages too, with sysv/posix
        # shared memory and cma. So UCX_TLS=tcp,self alone forces tcp; MPIR_CVAR_NOLOCAL=1
        # (MPICH's own switch for inter-node paths) is set as well and changes nothing there.
        [ "$tr" = tcp ] && { env+=(UCX_TLS=tcp,self); cmd+=(-genv MPIR_CVAR_NOLOCAL 1); }
        [[ $tr == ucp-* ]] && env+=("UCX_TLS=${UCP_TLS[$tr]}")
        ;;
    openmpi)
        if [[ $tr == ucp-* ]]; then
            cmd=("${RUN[$m]}" -n "$np" --mca pml ucx --mca osc ucx -x "UCX_TLS=${UCP_TLS[$tr]}")
        else
            cmd=("${RUN[$m]}" -n "$np" --mca pml ob1)
            if [ "$tr" = tcp ]; then cmd+=(--mca btl tcp,self); else cmd+=(--mca btl vader,self); fi
        fi
        [ "$np" -gt "$(nproc)" ] && cmd+=(--oversubscribe)
        ;;
    esac
    local t0 t1
    t0=$(date +%s%N)
    env "${env[@]}" timeout -k 5 "$TMO" "${cmd[@]}" "$bin" "$@" >"$out" 2>"$err"
    local rc=$?
    t1=$(date +%s%N)
    WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    if [ $rc -ne 0 ]; then
        FAILS=$((FAILS + 1))
        echo "FAILED ($([ $rc -ge 124 ] && echo "timeout $TMO s" || echo "rc $rc")): $tag: ${env[*]} ${cmd[*]} $bin $*"
        tail -5 "$err" | sed 's/^/    /'
        return 1
    fi
    # the intended library ran, and used the intended transport
    local lib
    lib=$(grep -m1 -E '^# (mpi_pp|startup):' "$out")
    [[ $lib == *"${LIBPAT[$m]}"* ]] || warn "$tag: expected ${LIBPAT[$m]}: $lib"
    local odd
    case $m in
    ours)
        if [ "$chk" = 1 ]; then
            local want=${tr%%-*} n_ok n_all
            # a rank's connection to itself goes via loop, whatever the transport
            n_all=$(grep 'CONNECT .* via ' "$err" | grep -v -c -E 'CONNECT (r[0-9]+) to \1 .* via loop$')
            n_ok=$(grep -c "CONNECT .* via $want\$" "$err")
            if [ "$n_all" -eq 0 ] || [ "$n_ok" -ne "$n_all" ]; then
                warn "$tag: not all connections via $want:"
                grep 'CONNECT' "$err" | head -5 | sed 's/^/    /'
            fi
        fi
        odd=$(grep -v 'CONNECT .* via ' "$err"; grep -v -E "$OK_LINES" "$out")
        ;;
    mpich)
        if [ "$chk" = 1 ]; then
            # UCX ep_cfg lines name the transports (tl/device) of each endpoint configuration:
            # tcp: only tcp/ and self/; shm: only shared memory ones (sysv, posix, cma, ...)
            local eps allowed=tcp must=tcp
            eps=$(cat "$LOGS/$tag".ucx.* 2>/dev/null | grep 'ep_cfg')
            [ "$tr" = shm ] && { allowed='sysv|posix|cma|knem|xpmem'; must='sysv|posix'; }
            [ "$tr" = ucp-sm ] && { allowed='posix|cma'; must='posix'; }
            if ! grep -q -E "($must)/" <<<"$eps" ||
                sed 's/.*ep_cfg\[[0-9]*\]://' <<<"$eps" | tr ' ()' '\n\n\n' |
                grep '/' | grep -qv -E "^($allowed|self)/"; then
                warn "$tag: UCX endpoints not $tr only:"
                sed 's/^/    /' <<<"${eps:-(no ep_cfg lines from UCX)}" | head -5
            fi
        fi
        odd=$(cat "$err"; grep -v -E "$OK_LINES" "$out")
        ;;
    openmpi)
        odd=$(cat "$err"; grep -v -E "$OK_LINES" "$out")
        ;;
    esac
    [ -n "$odd" ] && { warn "$tag: unexpected output:"; echo "$odd" | head -5 | sed 's/^/    /'; }
    return 0
}

# On virtual machines whose vCPUs sometimes share a core the one-way cache-line latency moves
# 2-5x from run to run (65 vs 250 ns), and every MPI's small-message latency with it: results
# are comparable within one state only.
cacheline_ns() {
    local b=$OUT/cacheline_pp src=$ROOT/test/bench/cacheline_pp.c
    if [ ! -x "$b" ] || [ "$src" -nt "$b" ]; then
        gcc -O2 -o "$b" "$src" 2>/dev/null || return 0
    fi
    "$b" 200000 2>/dev/null | sed -n 's/.*one-way \([0-9.]*\) ns.*/\1/p'
}
