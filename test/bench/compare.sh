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
  -t LIST   transports, comma list of shm,tcp,ucp-tcp,ucp-sm (default shm,tcp)
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
RAW=${CSV%.csv}.raw.csv
LOGS=$OUT/logs
mkdir -p "$OUT" "$LOGS" "$(dirname "$CSV")" || exit 1
rm -f "$LOGS"/*.out "$LOGS"/*.err "$LOGS"/*.ucx.*

# shellcheck disable=SC2034 # used by lib.sh
OK_LINES='^(#|mode,|(lat|bw|allreduce),)' # expected stdout lines of mpi_pp --csv
. "$ROOT/test/bench/lib.sh"
for t in $TRANSPORTS; do
    case $t in shm | tcp | ucp-tcp | ucp-sm) ;; *) echo "compare.sh: unknown transport $t" >&2; exit 2 ;; esac
done
bench_clean_env

for m in $MPIS; do
    case $m in ours | mpich | openmpi) ;; *) echo "compare.sh: unknown MPI $m" >&2; exit 2 ;; esac
done

# ---- build, once per MPI; columns always in the order ours, mpich, openmpi ----
ACTIVE=
for m in ours mpich openmpi; do
    [[ " $MPIS " == *" $m "* ]] || continue
    bench_available "$m" && bench_build "$m" "$SRC" mpi_pp && ACTIVE="$ACTIVE $m"
done
[ -n "$ACTIVE" ] || { echo "compare.sh: no MPI to run" >&2; exit 1; }

# ---- one run: mpi transport rep np mode-args... ; appends to $RAW ----
run_one() {
    local m=$1 tr=$2 rep=$3 np=$4
    shift 4
    local tag=$tr.$m.np$np.$rep
    bench_run "$m" "$tr" "$tag" "$np" 1 "$OUT/mpi_pp.$m" --csv --time "$TIME" "$@" || return
    grep -E '^(lat|bw|allreduce),' "$LOGS/$tag.out" | sed "s/^/$tr,$m,$rep,/" >>"$RAW"
}

# ---- the host's state: one-way cache-line latency before every repetition (lib.sh) ----
HOST=${CSV%.csv}.host.csv
echo "transport,rep,cacheline_ns" >"$HOST"
host_state() { # TRANSPORT REP
    local ns
    ns=$(cacheline_ns)
    [ -z "$ns" ] || echo "$1,$2,$ns" >>"$HOST"
}

# ---- runs, interleaved ----
echo "transport,mpi,rep,mode,size,iters,us,MBps,np" >"$RAW"
echo "mpi_pp: ~$TIME s per size, $REPEATS repeats, interleaved:$ACTIVE; timeout $TMO s per run"
echo "logs: $LOGS; raw: $RAW"
check_idle "before the runs"
T0=$(date +%s)
for tr in $TRANSPORTS; do
    for rep in $(seq "$REPEATS"); do
        host_state "$tr" "$rep"
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
[ -s "$HOST" ] && awk -F, 'NR > 1 { s[$1] = s[$1] " " $3 } END {
    for (t in s) printf "cache-line floor before each repetition, %s (ns one way):%s\n", t, s[t] }' "$HOST"
echo
echo "summary: $CSV; raw runs: $RAW; host state: $HOST; logs: $LOGS"
echo "$FAILS failed runs, $WARNS warnings (transport checks: ours PSP_DEBUG_CONTYPE 'via $TRANSPORTS'," \
    "mpich UCX ep_cfg transports, openmpi by explicit --mca btl); $(($(date +%s) - T0)) s"
[ "$FAILS" -eq 0 ]
