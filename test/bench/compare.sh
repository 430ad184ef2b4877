#!/bin/bash
# compare.sh: run test/bench/mpi_pp.c with our MPI, Debian's MPICH and Open MPI, over shared
# memory and over tcp on this machine, interleaved (A B C A B C), and print one table per
# transport: best of the repeats per MPI and the ratio ours / best peer. See README.md.
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$ROOT/test/bench/mpi_pp.c
OUT=$ROOT/_build/bench

REPEATS=2
NP_AR=          # extra allreduce run with this many ranks (-n)
TRANSPORTS="shm tcp"
MPIS="ours mpich openmpi"
CSV=$OUT/compare.csv
TMO=60          # seconds per mpiexec
TIME=0.3        # mpi_pp --time: seconds per size

usage() {
    cat <<EOF
usage: test/bench/compare.sh [options]
  -r N      repeats per MPI and transport, interleaved A B C A B C (default $REPEATS)
  -n NP     also run allreduce with NP ranks (oversubscribes the 2 cores when NP > 2)
  -t LIST   transports, comma list of shm,tcp (default shm,tcp)
  -m LIST   MPIs, comma list of ours,mpich,openmpi (default all three)
  -o FILE   summary CSV (default _build/bench/compare.csv; raw runs in FILE minus .csv + .raw.csv)
  -T SEC    timeout per mpiexec (default $TMO)
  -s SEC    seconds per measured size, mpi_pp --time (default $TIME)
Our MPI: \$OURS_PREFIX (default $ROOT/install) bin/mpicc and bin/mpiexec.
EOF
}

while getopts "r:n:t:m:o:T:s:h" o; do
    case $o in
    r) REPEATS=$OPTARG ;;
    n) NP_AR=$OPTARG ;;
    t) TRANSPORTS=${OPTARG//,/ } ;;
    m) MPIS=${OPTARG//,/ } ;;
    o) CSV=$OPTARG ;;
    T) TMO=$OPTARG ;;
    s) TIME=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { usage >&2; exit 2; }
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: bad -r $REPEATS" >&2; exit 2; }
[ -z "$NP_AR" ] || [[ $NP_AR =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: bad -n $NP_AR" >&2; exit 2; }
for t in $TRANSPORTS; do
    case $t in shm | tcp) ;; *) echo "compare.sh: unknown transport $t" >&2; exit 2 ;; esac
done
RAW=${CSV%.csv}.raw.csv
LOGS=$OUT/logs
mkdir -p "$OUT" "$LOGS" "$(dirname "$CSV")" || exit 1
rm -f "$LOGS"/*.out "$LOGS"/*.err "$LOGS"/*.ucx.*

# Nothing from the caller's environment may tune one MPI and not the others.
for v in $(compgen -e | grep -E '^(PSP_|UCX_|MPIR_CVAR_|MPICH_|OMPI_MCA_|HYDRA_)'); do
    echo "note: unsetting $v=${!v}"
    unset "$v"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # harmless when not root

OURS_PREFIX=${OURS_PREFIX:-$ROOT/install}
declare -A CC=([ours]=$OURS_PREFIX/bin/mpicc [mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
declare -A RUN=([ours]=$OURS_PREFIX/bin/mpiexec [mpich]=mpiexec.mpich [openmpi]=mpiexec.openmpi)
declare -A LIBPAT=([ours]="ch4:pscom" [mpich]="ch4:ucx" [openmpi]="Open MPI")

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

for m in $MPIS; do
    case $m in ours | mpich | openmpi) ;; *) echo "compare.sh: unknown MPI $m" >&2; exit 2 ;; esac
done

# ---- build, once per MPI; columns always in the order ours, mpich, openmpi ----
ACTIVE=
for m in ours mpich openmpi; do
    [[ " $MPIS " == *" $m "* ]] || continue
    cc=${CC[$m]}
    if ! command -v "$cc" >/dev/null 2>&1; then
        echo "note: skipping $m: $cc not found"
        continue
    fi
    if ! command -v "${RUN[$m]}" >/dev/null 2>&1; then
        echo "note: skipping $m: ${RUN[$m]} not found"
        continue
    fi
    bin=$OUT/mpi_pp.$m
    if ! "$cc" -O2 -Wall -Wextra -o "$bin" "$SRC" 2>"$LOGS/build.$m.err"; then
        echo "note: skipping $m: build with $cc failed:"
        sed 's/^/    /' "$LOGS/build.$m.err"
        continue
    fi
    [ -s "$LOGS/build.$m.err" ] && { echo "warning: $cc:"; sed 's/^/    /' "$LOGS/build.$m.err"; }
    # the binary must load its own library, not another MPI's (LD_LIBRARY_PATH)
    lib=$(ldd "$bin" | awk '/libmpi(ch)?\.so/ {print $3; exit}')
    case $m in
    ours) [[ $lib == "$OURS_PREFIX"/* ]] ;;
    *) [[ -n $lib && $lib != "$OURS_PREFIX"/* ]] ;;
    esac || { echo "note: skipping $m: $bin loads '$lib'"; continue; }
    echo "built $bin ($cc, loads $lib)"
    ACTIVE="$ACTIVE $m"
done
[ -n "$ACTIVE" ] || { echo "compare.sh: no MPI to run" >&2; exit 1; }

# ---- one run: mpi transport rep np mode-args... ; appends to $RAW ----
FAILS=0 WARNS=0
warn() {
    WARNS=$((WARNS + 1))
    echo "WARNING: $*"
}
run_one() {
    local m=$1 tr=$2 rep=$3 np=$4
    shift 4
    local bin=$OUT/mpi_pp.$m tag=$tr.$m.np$np.$rep
    local out=$LOGS/$tag.out err=$LOGS/$tag.err
    local -a env=() cmd=()

    case $m in
    ours)
        env=(PSP_DEBUG_CONTYPE=1) # one line per connection: "... via shm|tcp"
        [ "$tr" = tcp ] && env+=(PSP_SHM=0 PSP_UCP=0) # ucp (UCX) would win over tcp
        cmd=("${RUN[$m]}" -n "$np")
        ;;
    mpich)
        # UCX lists the transports of each endpoint (ep_cfg lines), one file per process
        env=(UCX_LOG_LEVEL=info "UCX_LOG_FILE=$LOGS/$tag.ucx.%p")
        cmd=("${RUN[$m]}" -n "$np")
        # Debian's MPICH is ch4:ucx without shmmod (configure "auto" = none for ucx, see
        # src/mpid/ch4/subconfigure.m4): UCX carries intra-node messages too, with sysv/posix
        # shared memory and cma. So UCX_TLS=tcp,self alone forces tcp; MPIR_CVAR_NOLOCAL=1 is
        # what PEERS.md prescribes and harmless.
        [ "$tr" = tcp ] && { env+=(UCX_TLS=tcp,self); cmd+=(-genv MPIR_CVAR_NOLOCAL 1); }
        ;;
    openmpi)
        cmd=("${RUN[$m]}" -n "$np" --mca pml ob1)
        if [ "$tr" = tcp ]; then cmd+=(--mca btl tcp,self); else cmd+=(--mca btl vader,self); fi
        [ "$np" -gt "$(nproc)" ] && cmd+=(--oversubscribe)
        ;;
    esac
    env "${env[@]}" timeout -k 5 "$TMO" "${cmd[@]}" "$bin" --csv --time "$TIME" "$@" >"$out" 2>"$err"
    local rc=$?
    if [ $rc -ne 0 ]; then
        FAILS=$((FAILS + 1))
        echo "FAILED ($([ $rc -ge 124 ] && echo "timeout $TMO s" || echo "rc $rc")): $tag: ${env[*]} ${cmd[*]} $bin $*"
        tail -5 "$err" | sed 's/^/    /'
        return
    fi
    # the intended library ran, and used the intended transport
    local lib
    lib=$(grep -m1 '^# mpi_pp:' "$out")
    [[ $lib == *"${LIBPAT[$m]}"* ]] || warn "$tag: expected ${LIBPAT[$m]}: $lib"
    local odd
    case $m in
    ours)
        local want=$tr n_ok n_all
        n_all=$(grep -c 'CONNECT .* via ' "$err")
        n_ok=$(grep -c "CONNECT .* via $want\$" "$err")
        if [ "$n_all" -eq 0 ] || [ "$n_ok" -ne "$n_all" ]; then
            warn "$tag: not all connections via $want:"
            grep 'CONNECT' "$err" | sed 's/^/    /'
        fi
        odd=$(grep -v 'CONNECT .* via ' "$err"; grep -v -E '^(#|mode,|(lat|bw|allreduce),)' "$out")
        ;;
    mpich)
        # UCX ep_cfg lines name the transports (tl/device) of each endpoint configuration:
        # tcp: only tcp/ and self/; shm: only shared memory ones (sysv, posix, cma, ...)
        local eps allowed=tcp must=tcp
        eps=$(cat "$LOGS/$tag".ucx.* 2>/dev/null | grep 'ep_cfg')
        [ "$tr" = shm ] && { allowed='sysv|posix|cma|knem|xpmem'; must='sysv|posix'; }
        if ! grep -q -E "($must)/" <<<"$eps" ||
            sed 's/.*ep_cfg\[[0-9]*\]://' <<<"$eps" | tr ' ()' '\n\n\n' |
            grep '/' | grep -qv -E "^($allowed|self)/"; then
            warn "$tag: UCX endpoints not $tr only:"
            sed 's/^/    /' <<<"${eps:-(no ep_cfg lines from UCX)}"
        fi
        odd=$(cat "$err"; grep -v -E '^(#|mode,|(lat|bw|allreduce),)' "$out")
        ;;
    openmpi)
        odd=$(cat "$err"; grep -v -E '^(#|mode,|(lat|bw|allreduce),)' "$out")
        ;;
    esac
    [ -n "$odd" ] && { warn "$tag: unexpected output:"; echo "$odd" | head -5 | sed 's/^/    /'; }
    grep -E '^(lat|bw|allreduce),' "$out" | sed "s/^/$tr,$m,$rep,/" >>"$RAW"
}

# ---- runs, interleaved ----
echo "transport,mpi,rep,mode,size,iters,us,MBps,np" >"$RAW"
echo "mpi_pp: ~$TIME s per size, $REPEATS repeats, interleaved:$ACTIVE; timeout $TMO s per run"
echo "logs: $LOGS; raw: $RAW"
check_idle "before the runs"
T0=$(date +%s)
for tr in $TRANSPORTS; do
    for rep in $(seq "$REPEATS"); do
        for m in $ACTIVE; do
            run_one "$m" "$tr" "$rep" 2 --mode all
        done
        if [ -n "$NP_AR" ] && [ "$NP_AR" != 2 ]; then
            for m in $ACTIVE; do
                run_one "$m" "$tr" "$rep" "$NP_AR" --mode allreduce
            done
        fi
    done
    echo "$tr done after $(($(date +%s) - T0)) s"
done
check_idle "after the runs (our own processes are gone by now)"

# ---- summary: best of the repeats, ratio ours / best peer ----
awk -F, -v mpis="$ACTIVE" -v csv="$CSV" -v transports="$TRANSPORTS" -v nps="2 $NP_AR" '
function human(s) {
    if (s >= 1048576 && s % 1048576 == 0) return (s / 1048576) " MiB"
    if (s >= 1024 && s % 1024 == 0) return (s / 1024) " KiB"
    return s " B"
}
function fmt(v) { return v == "" ? "-" : (v >= 100 ? sprintf("%.0f", v) : sprintf("%.3f", v)) }
NR == 1 { next }
{
    tr = $1; m = $2; mode = $4; size = $5; us = $7; mbs = $8; np = $9
    k = tr SUBSEP mode SUBSEP size SUBSEP np
    if (!(k in seen)) { seen[k] = 1; order[++n] = k }
    v = mode == "bw" ? mbs : us
    kk = k SUBSEP m
    if (!(kk in best) || (mode == "bw" ? v > best[kk] : v < best[kk])) best[kk] = v
}
END {
    nm = split(mpis, M, " ")
    print "transport,metric,size,np,unit,better," mpis_csv(M, nm) ",ours_over_best_peer" > csv
    nt = split(transports, T, " ")
    for (t = 1; t <= nt; t++) {
        printf "\n== %s: best of the repeats; latency and allreduce in us (lower is better), bw in MB/s (higher is better)\n", T[t]
        printf "%-26s", "metric"
        for (i = 1; i <= nm; i++) printf " %10s", M[i]
        printf " %10s\n", "ours/best"
        for (j = 1; j <= n; j++) {
            split(order[j], f, SUBSEP)
            if (f[1] != T[t]) continue
            mode = f[2]; size = f[3]; np = f[4]; hb = mode == "bw"
            name = mode " " human(size) (mode == "allreduce" ? " np " np : "")
            printf "%-26s", name
            line = T[t] "," mode "," size "," np "," (hb ? "MB/s" : "us") "," (hb ? "higher" : "lower")
            peer = ""; ours = ""
            for (i = 1; i <= nm; i++) {
                kk = order[j] SUBSEP M[i]
                v = (kk in best) ? best[kk] : ""
                printf " %10s", fmt(v)
                line = line "," v
                if (M[i] == "ours") ours = v
                else if (v != "" && (peer == "" || (hb ? v > peer : v < peer))) peer = v
            }
            r = (ours != "" && peer != "" && peer > 0) ? ours / peer : ""
            verdict = ""
            if (r != "") verdict = (hb ? r >= 1.1 : r <= 0.9) ? "  better" : (hb ? r <= 0.9 : r >= 1.1) ? "  WORSE" : "  ~"
            printf " %10s%s\n", r == "" ? "-" : sprintf("%.2f", r), verdict
            print line "," (r == "" ? "" : sprintf("%.3f", r)) > csv
        }
    }
}
function mpis_csv(M, nm,   s, i) { s = M[1]; for (i = 2; i <= nm; i++) s = s "," M[i]; return s }
' "$RAW"

# ---- plausibility: does each latency look like its transport? ----
awk -F, 'NR > 1 && $4 == "lat" && $5 == 0 {
    k = $1 "," $2; if (!(k in b) || $7 < b[k]) b[k] = $7 }
END { for (k in b) { split(k, f, ",")
    if (f[1] == "tcp" && b[k] < 1.5) printf "WARNING: %s tcp 0-byte latency %.3f us: too fast for tcp?\n", f[2], b[k]
    if (f[1] == "shm" && b[k] > 3) printf "WARNING: %s shm 0-byte latency %.3f us: slow for shm (busy machine?)\n", f[2], b[k] } }' "$RAW"
echo
echo "summary: $CSV; raw runs: $RAW; logs: $LOGS"
echo "$FAILS failed runs, $WARNS warnings (transport checks: ours PSP_DEBUG_CONTYPE 'via $TRANSPORTS'," \
    "mpich UCX ep_cfg transports, openmpi by explicit --mca btl); $(($(date +%s) - T0)) s"
[ "$FAILS" -eq 0 ]
