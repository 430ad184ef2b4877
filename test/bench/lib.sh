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
#                            three over UCX with the same UCX_TLS), nodes-tcp|nodes-ucp (one
#                            rank on each of NP simulated nodes, see bench_nodes_up); CHECK 1:
#                            transport checks (see README.md), 0: none (nothing that slows
#                            start-up); output in $LOGS/TAG.out and .err, seconds of the whole
#                            mpiexec in WALL
#   bench_nodes_up N         a simulated cluster of N nodes (test/cluster/vcluster, root; name
#                            VCLUSTER, default bench) for the nodes-* transports; 1 (with a
#                            note) if it cannot be made. bench_nodes_down removes it.
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
VC=$ROOT/test/cluster/vcluster
NODES_UP=0

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

# The nodes-* transports run one rank per node of a simulated cluster: every byte between ranks
# crosses a veth pair and a bridge (the kernel's tcp between network namespaces), as between
# the nodes of a cluster; the nodes share this machine's CPUs.
bench_nodes_up() {
    local n=$1 i
    [ "$NODES_UP" -ge "$n" ] && return 0
    [ "$(id -u)" = 0 ] || { echo "note: skipping the nodes-* transports: the simulated cluster needs root"; return 1; }
    export VCLUSTER=${VCLUSTER:-bench}
    "$VC" up "$n" >"$LOGS/vcluster.log" 2>&1 ||
        { echo "note: skipping the nodes-* transports: vcluster up $n failed:"; sed 's/^/    /' "$LOGS/vcluster.log"; return 1; }
    # hydra's host file (ours, MPICH) and Open MPI's, one slot per node
    for ((i = 1; i <= n; i++)); do echo "node$i:1"; done >"$LOGS/nodes.hydra"
    for ((i = 1; i <= n; i++)); do echo "node$i slots=1"; done >"$LOGS/nodes.openmpi"
    NODES_UP=$n
}
bench_nodes_down() {
    [ "$NODES_UP" -gt 0 ] && "$VC" down >/dev/null 2>&1
    NODES_UP=0
}

# launch words for M across the simulated nodes: mpiexec runs on node1 and starts the ranks of
# the other nodes through vcluster-rsh, as through ssh on a real cluster
nodes_launch() {
    local m=$1
    case $m in
    ours | mpich) echo "$VC exec node1 ${RUN[$m]} -launcher rsh -launcher-exec $VC-rsh -f $LOGS/nodes.hydra" ;;
    # each node's orted would bind its rank to core 0, and the simulated nodes share the cores
    openmpi) echo "$VC exec node1 ${RUN[$m]} --mca plm_rsh_agent $VC-rsh --hostfile $LOGS/nodes.openmpi --bind-to none" ;;
    esac
}

bench_run() {
    local m=$1 tr=$2 tag=$3 np=$4 chk=$5 bin=$6
    shift 6
    local -a env=() cmd=() launch

    if [[ $tr == nodes-* ]]; then
        bench_nodes_up "$np" || { FAILS=$((FAILS + 1)); return 1; }
        read -ra launch <<<"$(nodes_launch "$m")"
        case $m in
        ours)
            [ "$chk" = 1 ] && env=(PSP_DEBUG_CONTYPE=1)
            [ "$tr" = nodes-tcp ] && env+=(PSP_UCP=0) # else ucp (UCX over tcp) between nodes
            cmd=("${launch[@]}" -n "$np")
            ;;
        mpich) # ch4:ucx: UCX picks tcp between nodes (the only network there is)
            [ "$chk" = 1 ] && env=(UCX_LOG_LEVEL=info "UCX_LOG_FILE=$LOGS/$tag.ucx.%p")
            cmd=("${launch[@]}" -n "$np")
            ;;
        openmpi)
            cmd=("${launch[@]}" -n "$np")
            # pml ucx only takes high-speed networks unless told that any transport will do
            if [ "$tr" = nodes-ucp ]; then
                cmd+=(--mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
            else
                cmd+=(--mca pml ob1 --mca btl tcp,self)
            fi
            ;;
        esac
        bench_exec "$m" "${tr#nodes-}" "$tag" "$chk" "$bin" "$@"
        return
    fi
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
    bench_exec "$m" "$tr" "$tag" "$chk" "$bin" "$@"
}

# run "${env[@]}" "${cmd[@]}" BIN ARGS of the caller (bench_run) and check what it printed;
# TR names the transport the connections must use (shm, tcp, ucp-*)
bench_exec() {
    local m=$1 tr=$2 tag=$3 chk=$4 bin=$5
    shift 5
    local out=$LOGS/$tag.out err=$LOGS/$tag.err
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
            # the connection of a rank to itself (self/, cma/ within one process) is not checked
            eps=$(cat "$LOGS/$tag".ucx.* 2>/dev/null | grep 'ep_cfg' | grep -v 'tag(self/')
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
        # orterun started through vcluster-rsh cannot make the remote shell's process group
        odd=$(grep -v 'plm:rsh: Warning: setpgid' "$err"; grep -v -E "$OK_LINES" "$out")
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
