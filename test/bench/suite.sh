#!/bin/bash
# suite.sh: the benchmark suite. Builds mpi_pp.c and startup.c with our MPI, Debian's MPICH and
# Open MPI, runs point-to-point (lat, bw, bibw, rate), collectives (2-8 ranks) and job start-up
# (empty program, 2-256 ranks, with peak RSS) over shared memory and over tcp on this machine and,
# as root, between simulated nodes (test/cluster/vcluster), interleaved (A B C B C A C A B), checks
# Alltoall with 256 ranks, and writes medians and ratios ours / best peer as text, CSV and PNG plots, plus
# a description of the machine, into the directory given. See README.md.
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=$ROOT/test/bench
OUT=$ROOT/_build/bench
LOGS=$OUT/logs-suite

QUICK=0
ANALYSE=0
REPEATS=
BIG_REPEATS=
TRANSPORTS=
MPIS="ours mpich openmpi"
PARTS="pt2pt coll startup scale"
TIME=
TMO=
PP_SIZES=
COLL_NPS=
NODE_NPS=
SCALE_NP=
COLL_SIZES=
START_NPS=
RATE_SIZE=8

usage() {
    cat <<EOF
usage: test/bench/suite.sh [options] RESULT_DIR
  -q        quick: 1 repetition, ~0.05 s per size, few sizes and rank counts (a smoke run)
  -r N      repetitions per MPI, interleaved A B C, B C A, C A B (default 3, quick 1)
  -R N      repetitions of runs with 16 and more ranks (default 2, quick 1; at most -r)
  -t LIST   transports, comma list of shm,tcp,ucp-tcp,ucp-sm,nodes-tcp,nodes-ucp (default
            shm,tcp and, as root, nodes-tcp,nodes-ucp: one rank per simulated node)
  -m LIST   MPIs, comma list of ours,mpich,openmpi (default all three)
  -p LIST   parts, comma list of pt2pt,coll,startup,scale (default all four; the nodes-*
            transports run pt2pt and coll, scale runs once, on this machine)
  -s SEC    seconds per measured size, mpi_pp --time (default 0.2, quick 0.05)
  -T SEC    timeout per mpiexec (default 180, quick 90)
  -S LIST   point-to-point sizes (default 0,1,4,16,64,256,1k,4k,16k,64k,256k,1M,4M,16M;
            quick 0,64,4k,256k,16M; bw and bibw leave out 0)
  -c LIST   collectives: rank counts (default 2,4,8; quick 2,4)
  -N LIST   collectives of the nodes-* transports: node counts, one rank each (default 2,4)
  -C LIST   collectives: sizes (default 8,1k,64k; quick 8,64k)
  -n LIST   start-up: rank counts (default 2,4,8,16,32,64,128,256; quick 2,8,64)
  -a N      scale: ranks of the checked Alltoall (default 256, quick 64)
  -A        no runs: summary and plots again from RESULT_DIR/raw.csv
Writes into RESULT_DIR: summary.txt (tables), summary.csv (medians, ratios), raw.csv (every
measurement), machine.txt (lscpu summary, kernel, date, load, MPI versions), log.txt (this
output) and the plots *.png (test/bench/plot.sh). Single runs' output: $LOGS.
Our MPI: \$OURS_PREFIX (default $ROOT/install) bin/mpicc and bin/mpiexec.
EOF
}

while getopts "Aqr:R:t:m:p:s:T:S:c:N:C:n:a:h" o; do
    case $o in
    q) QUICK=1 ;;
    A) ANALYSE=1 ;;
    r) REPEATS=$OPTARG ;;
    R) BIG_REPEATS=$OPTARG ;;
    t) TRANSPORTS=${OPTARG//,/ } ;;
    m) MPIS=${OPTARG//,/ } ;;
    p) PARTS=${OPTARG//,/ } ;;
    s) TIME=$OPTARG ;;
    T) TMO=$OPTARG ;;
    S) PP_SIZES=$OPTARG ;;
    c) COLL_NPS=$OPTARG ;;
    N) NODE_NPS=$OPTARG ;;
    a) SCALE_NP=$OPTARG ;;
    C) COLL_SIZES=$OPTARG ;;
    n) START_NPS=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { usage >&2; exit 2; }
RES=$1

if [ "$QUICK" = 1 ]; then
    : "${REPEATS:=1}" "${BIG_REPEATS:=1}" "${TIME:=0.05}" "${TMO:=90}" "${PP_SIZES:=0,64,4k,256k,16M}"
    : "${COLL_NPS:=2,4}" "${COLL_SIZES:=8,64k}" "${START_NPS:=2,8,64}" "${SCALE_NP:=64}"
else
    : "${REPEATS:=3}" "${BIG_REPEATS:=2}" "${TIME:=0.2}" "${TMO:=180}"
    : "${PP_SIZES:=0,1,4,16,64,256,1k,4k,16k,64k,256k,1M,4M,16M}"
    : "${COLL_NPS:=2,4,8}" "${COLL_SIZES:=8,1k,64k}" "${START_NPS:=2,4,8,16,32,64,128,256}"
    : "${SCALE_NP:=256}"
fi
: "${NODE_NPS:=2,4}"
if [ -z "$TRANSPORTS" ]; then
    TRANSPORTS="shm tcp"
    [ "$(id -u)" = 0 ] && TRANSPORTS="$TRANSPORTS nodes-tcp nodes-ucp"
fi
die() { echo "suite.sh: $*" >&2; exit 2; }
for v in REPEATS BIG_REPEATS TMO; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "bad $v ${!v}"; done
[ "$BIG_REPEATS" -le "$REPEATS" ] || BIG_REPEATS=$REPEATS
[[ $SCALE_NP =~ ^[1-9][0-9]*$ ]] || die "bad rank count $SCALE_NP"
for v in COLL_NPS NODE_NPS START_NPS; do [[ ${!v} =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "bad rank list ${!v}"; done
for t in $TRANSPORTS; do case $t in shm | tcp | ucp-tcp | ucp-sm | nodes-tcp | nodes-ucp) ;; *) die "unknown transport $t" ;; esac; done
for p in $PARTS; do case $p in pt2pt | coll | startup | scale) ;; *) die "unknown part $p" ;; esac; done
BW_SIZES=$(tr , '\n' <<<"$PP_SIZES" | grep -v -x 0 | paste -sd,)

mkdir -p "$OUT" "$LOGS" "$RES" || exit 1
if [ "$ANALYSE" = 1 ]; then
    # -A: only the summary and plots again, from RES/raw.csv
    [ -f "$RES/raw.csv" ] || die "no $RES/raw.csv"
    . "$BENCH/lib.sh"
    RAW=$RES/raw.csv
    ACTIVE=$(for m in ours mpich openmpi; do grep -q "^[a-z]*,$m," "$RAW" && printf " %s" $m; done)
    TRANSPORTS=$(awk -F, 'NR > 1 && !s[$1]++ { printf "%s ", $1 }' "$RAW")
    T0=$(date +%s)
else
    rm -f "$RES"/*.png
    rm -f "$LOGS"/*.out "$LOGS"/*.err "$LOGS"/*.ucx.*
    exec > >(tee "$RES/log.txt") 2>&1

    # expected stdout lines of mpi_pp --csv and startup
    OK_LINES='^(#|mode,|(lat|bw|bibw|rate|barrier|bcast|allreduce|alltoall|allgather|vmhwm_kb),)'
    . "$BENCH/lib.sh"
    bench_clean_env
    trap bench_nodes_down EXIT
    echo "suite.sh $*: $(date -u '+%F %T UTC'), $([ "$QUICK" = 1 ] && echo quick || echo full)"

    # ---- build both programs, once per MPI; columns always in the order ours, mpich, openmpi ----
    for m in $MPIS; do case $m in ours | mpich | openmpi) ;; *) die "unknown MPI $m" ;; esac; done
    ACTIVE=
    for m in ours mpich openmpi; do
        [[ " $MPIS " == *" $m "* ]] || continue
        bench_available "$m" && bench_build "$m" "$BENCH/mpi_pp.c" mpi_pp &&
            bench_build "$m" "$BENCH/startup.c" startup && ACTIVE="$ACTIVE $m"
    done
    [ -n "$ACTIVE" ] || { echo "suite.sh: no MPI to run" >&2; exit 1; }

    # ---- machine description ----
    {
        echo "date: $(date -u '+%F %T UTC')"
        echo "host: $(uname -n); kernel: $(uname -srmv)"
        lscpu | grep -E '^(Architecture|CPU\(s\)|Model name|Thread|Core|Socket|NUMA node\(s\)|CPU max MHz|Hypervisor|Virtualization type|L1d|L2|L3)' |
            sed 's/  */ /g; s/^/lscpu: /'
        echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
        echo "load before: $(uptime | sed 's/.*load average/load average/'); $(busy)% busy over 1 s"
        echo "ours: $OURS_PREFIX, git $(git -C "$ROOT" describe --always --dirty 2>/dev/null)" \
            "(libmpi built $(date -u -r "$OURS_PREFIX/lib/libmpi.so" '+%F %T UTC' 2>/dev/null))"
        for m in mpich openmpi; do
            command -v "${RUN[$m]}" >/dev/null &&
                echo "$m: ${RUN[$m]}: $("${RUN[$m]}" --version 2>&1 | grep -m1 -i -E 'version|mpirun|mpiexec' | tr -s ' \t' '  ')"
        done
        echo "compiler: ${CC[ours]} -O2: $(${CC[ours]} --version 2>/dev/null | head -1)"
        echo "suite: $([ "$QUICK" = 1 ] && echo quick || echo full); repetitions $REPEATS" \
            "($BIG_REPEATS with >= 16 ranks); mpi_pp --time $TIME; parts $PARTS; transports $TRANSPORTS;" \
            "pt2pt sizes $PP_SIZES (rate $RATE_SIZE B, window 64); coll ranks $COLL_NPS sizes" \
            "$COLL_SIZES (nodes-*: nodes $NODE_NPS, one rank each); start-up ranks $START_NPS;" \
            "scale: Alltoall of $SCALE_NP ranks; timeout $TMO s"
    } >"$RES/machine.txt"
    sed 's/^/  /' "$RES/machine.txt"

    # ---- runs; each appends transport,mpi,rep,metric,size,np,value rows to $RAW ----
    RAW=$RES/raw.csv
    echo "transport,mpi,rep,metric,size,np,value" >"$RAW"

    # a run that failed or timed out after some sizes (MPICH over tcp sometimes hangs in
    # MPI_Finalize): each row it printed is a complete measurement; keep them, say so
    keep_partial() {
        local n
        n=$(grep -c -E '^[a-z]+,[0-9]' "$LOGS/$1.out")
        [ "$n" -gt 0 ] || return 1
        echo "    note: keeping the $n measurements that $1 printed before it failed"
    }
    run_pt2pt() { # m tr rep
        local m=$1 tr=$2 rep=$3 tag=$2.pt2pt.$1.$3 ns
        ns=$(cacheline_ns) # the host's state before each run (lib.sh): see host.csv
        [ -z "$ns" ] || echo "$tr,$m,$rep,$ns" >>"$HOST"
        bench_run "$m" "$tr" "$tag" 2 1 "$OUT/mpi_pp.$m" --csv --time "$TIME" \
            --mode lat,bw,bibw,rate --lat-sizes "$PP_SIZES" --bw-sizes "$BW_SIZES" \
            --rate-sizes "$RATE_SIZE" || keep_partial "$tag" || return
        # lat: us; bw, bibw: MB/s; rate: messages per second
        awk -F, -v p="$tr,$m,$rep" '
            $1 == "lat" { print p ",lat," $2 "," $6 "," $4 }
            $1 == "bw" || $1 == "bibw" { print p "," $1 "," $2 "," $6 "," $5 }
            $1 == "rate" && $4 > 0 { printf "%s,rate,%s,%s,%.0f\n", p, $2, $6, 1e6 / $4 }' \
            "$LOGS/$tag.out" >>"$RAW"
    }
    run_coll() { # m tr rep np
        local m=$1 tr=$2 rep=$3 np=$4 tag=$2.coll.$1.np$4.$3
        bench_run "$m" "$tr" "$tag" "$np" 1 "$OUT/mpi_pp.$m" --csv --time "$TIME" \
            --mode coll --coll-sizes "$COLL_SIZES" --rss || keep_partial "$tag" || return
        # collectives: us; rss_coll: the largest VmHWM of a rank at the end, MiB
        awk -F, -v p="$tr,$m,$rep" -v np="$np" '
            /^(barrier|bcast|allreduce|alltoall|allgather),/ { print p "," $1 "," $2 "," $6 "," $4 }
            /^# rss: VmHWM max / { split($0, f, " "); printf "%s,rss_coll,0,%d,%.1f\n", p, np, f[5] / 1024 }' \
            "$LOGS/$tag.out" >>"$RAW"
    }
    run_startup() { # m tr rep np
        local m=$1 tr=$2 rep=$3 np=$4 tag=$2.startup.$1.np$4.$3 n
        bench_run "$m" "$tr" "$tag" "$np" 0 "$OUT/startup.$m" || return
        n=$(grep -c '^vmhwm_kb,' "$LOGS/$tag.out")
        [ "$n" -eq "$np" ] || { warn "$tag: $n of $np ranks reported"; return; }
        # startup: seconds of the whole mpiexec; rss: the largest VmHWM of a rank, MiB
        echo "$tr,$m,$rep,startup,0,$np,$WALL" >>"$RAW"
        awk -F, -v p="$tr,$m,$rep" -v np="$np" '/^vmhwm_kb,/ && $4 > max { max = $4 }
            END { printf "%s,rss,0,%d,%.1f\n", p, np, max / 1024 }' "$LOGS/$tag.out" >>"$RAW"
    }

    # scale: Alltoall of SCALE_NP ranks (oversubscribed), once checked byte by byte (mpi_pp
    # --verify: the errors are the metric), once timed
    run_scale() { # m rep
        local m=$1 rep=$2 tag=shm.scale.$1.np$SCALE_NP.$2 n
        if bench_run "$m" shm "$tag.verify" "$SCALE_NP" 0 "$OUT/mpi_pp.$m" --csv --verify \
            --iters 3 --warmup 1 --mode coll --coll alltoall --coll-sizes 8,1k; then
            n=$(sed -n 's/^# verify: \([0-9]*\) errors$/\1/p' "$LOGS/$tag.verify.out")
            [ -n "$n" ] || { warn "$tag.verify: no verify line"; n=-1; }
            echo "shm,$m,$rep,alltoall_errors,0,$SCALE_NP,$n" >>"$RAW"
        fi
        bench_run "$m" shm "$tag" "$SCALE_NP" 0 "$OUT/mpi_pp.$m" --csv --time "$TIME" \
            --mode coll --coll alltoall --coll-sizes 8,1k || keep_partial "$tag" || return
        awk -F, -v p="shm,$m,$rep" '/^alltoall,/ { print p "," $1 "," $2 "," $6 "," $4 }' \
            "$LOGS/$tag.out" >>"$RAW"
    }

    HOST=$RES/host.csv
    echo "transport,mpi,rep,cacheline_ns" >"$HOST"
    echo "interleaved:$ACTIVE (rotated by one place per repetition); parts: $PARTS; transports: $TRANSPORTS; logs: $LOGS"
    check_idle "before the runs"
    T0=$(date +%s)
    # The MPIs in the order of repetition REP: rotated by one place per repetition, so that each
    # runs first, second and last equally often. A host whose speed drifts over minutes (seen on
    # both host kinds) would otherwise favour whichever MPI always runs in the same place.
    in_turn() {
        local a=($ACTIVE) k i
        k=$((($1 - 1) % ${#a[@]}))
        for ((i = 0; i < ${#a[@]}; i++)); do printf '%s ' "${a[(k + i) % ${#a[@]}]}"; done
    }
    for tr in $TRANSPORTS; do
        nps=$COLL_NPS
        [[ $tr == nodes-* ]] && nps=$NODE_NPS
        if [[ " $PARTS " == *" pt2pt "* ]]; then
            for rep in $(seq "$REPEATS"); do
                for m in $(in_turn "$rep"); do run_pt2pt "$m" "$tr" "$rep"; done
            done
            echo "$tr pt2pt done after $(($(date +%s) - T0)) s"
        fi
        if [[ " $PARTS " == *" coll "* ]]; then
            for np in ${nps//,/ }; do
                for rep in $(seq "$([ "$np" -ge 16 ] && echo "$BIG_REPEATS" || echo "$REPEATS")"); do
                    for m in $(in_turn "$rep"); do run_coll "$m" "$tr" "$rep" "$np"; done
                done
            done
            echo "$tr coll done after $(($(date +%s) - T0)) s"
        fi
        if [[ " $PARTS " == *" startup "* && $tr != nodes-* ]]; then
            for np in ${START_NPS//,/ }; do
                for rep in $(seq "$([ "$np" -ge 16 ] && echo "$BIG_REPEATS" || echo "$REPEATS")"); do
                    for m in $(in_turn "$rep"); do run_startup "$m" "$tr" "$rep" "$np"; done
                done
            done
            echo "$tr startup done after $(($(date +%s) - T0)) s"
        fi
    done
    bench_nodes_down
    if [[ " $PARTS " == *" scale "* ]]; then
        for m in $ACTIVE; do run_scale "$m" 1; done
        echo "scale done after $(($(date +%s) - T0)) s"
    fi
    check_idle "after the runs (our own processes are gone by now)"
    echo "load after: $(uptime | sed 's/.*load average/load average/')" >>"$RES/machine.txt"
fi

# ---- summary: median of the repetitions per MPI, ratio ours / best peer ----
SUM=$RES/summary.csv
awk -F, -v mpis="$ACTIVE" -v transports="$TRANSPORTS" '
BEGIN {
    split("lat bw bibw rate barrier bcast allreduce alltoall allgather rss_coll startup rss alltoall_errors", O, " ")
    for (i in O) ord[O[i]] = i
    split("us MB/s MB/s msg/s us us us us us MiB s MiB count", U, " ")
    nm = split(mpis, M, " ")
    nt = split(transports, T, " ")
    for (i = 1; i <= nt; i++) tord[T[i]] = i
}
function median(s,   v, n, i, j, x) {
    n = split(s, v, " ")
    for (i = 2; i <= n; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
NR == 1 { next }
{
    k = $1 SUBSEP $4 SUBSEP $5 SUBSEP $6
    if (!(k in seen)) { seen[k] = 1; keys[++n] = k }
    vals[k, $2] = vals[k, $2] " " $7
    cnt[k, $2]++
    rep[k, $2, $3] = $7
    if ($3 + 0 > maxrep) maxrep = $3 + 0
}
END {
    for (j = 1; j <= n; j++) {
        split(keys[j], f, SUBSEP)
        tr = f[1]; met = f[2]; size = f[3]; np = f[4]
        unit = U[ord[met]]; hb = unit == "MB/s" || unit == "msg/s"
        line = tr "," met "," size "," np "," unit "," (hb ? "higher" : "lower")
        ours = ""; peer = ""; cnts = ""
        for (i = 1; i <= nm; i++) {
            v = ((keys[j], M[i]) in vals) ? median(vals[keys[j], M[i]]) : ""
            line = line "," v
            cnts = cnts "," ((keys[j], M[i]) in cnt ? cnt[keys[j], M[i]] : 0)
            if (M[i] == "ours") ours = v
            else if (v != "" && (peer == "" || (hb ? v + 0 > peer + 0 : v + 0 < peer + 0))) peer = v
        }
        r = (ours != "" && peer != "" && peer > 0) ? sprintf("%.3f", ours / peer) : ""
        # repetition by repetition (interleaved: A B C of one repetition ran back to back, on
        # the host in the same state as a rule): in how many did ours lose to the better peer?
        lost = 0; cmp = 0
        for (q = 1; q <= maxrep; q++) {
            if (!((keys[j], "ours", q) in rep)) continue
            b = ""
            for (i = 1; i <= nm; i++) {
                if (M[i] == "ours" || !((keys[j], M[i], q) in rep)) continue
                x = rep[keys[j], M[i], q]
                if (b == "" || (hb ? x + 0 > b + 0 : x + 0 < b + 0)) b = x
            }
            if (b == "") continue
            cmp++
            x = rep[keys[j], "ours", q]
            if (hb ? x + 0 < b + 0 : x + 0 > b + 0) lost++
        }
        printf "%d,%d,%d,%d,%s,%s,%s%s\n", tord[tr], ord[met], np, size, line, r,
            cmp ? lost "/" cmp : "", cnts
    }
}' "$RAW" | sort -t, -k1,1n -k2,2n -k3,3n -k4,4n | cut -d, -f5- >"$SUM.tmp"
{
    printf "transport,metric,size,np,unit,better"
    for m in $ACTIVE; do printf ",%s" "$m"; done
    printf ",ours_over_best_peer,ours_lost_reps"
    for m in $ACTIVE; do printf ",n_%s" "$m"; done
    echo
    cat "$SUM.tmp"
} >"$SUM"
rm -f "$SUM.tmp"

# text tables, one per transport
# header: settings, date and load from machine.txt
{
    grep -E '^(date|load before|load after|suite):' "$RES/machine.txt"
    echo "ours/best = ours / best peer: lower is better for us, s, MiB; higher for MB/s, msg/s"
} >"$RES/summary.txt"
awk -F, -v mpis="$ACTIVE" -v reps="$(awk -F, 'NR > 1 && $3 > n { n = $3 } END { print n + 0 }' "$RAW")" \
    -v quick="$(grep -c '^suite: quick' "$RES/machine.txt")" '
function human(s) {
    if (s >= 1048576 && s % 1048576 == 0) return (s / 1048576) " MiB"
    if (s >= 1024 && s % 1024 == 0) return (s / 1024) " KiB"
    return s " B"
}
function fmt(v) { return v == "" ? "-" : v >= 1000 ? sprintf("%.0f", v) : v >= 100 ? sprintf("%.1f", v) : v >= 10 ? sprintf("%.2f", v) : sprintf("%.3f", v) }
BEGIN { nm = split(mpis, M, " ") }
NR == 1 { next }
{
    tr = $1; met = $2; size = $3; np = $4; unit = $5; hb = $6 == "higher"
    if (tr != last_tr) {
        printf "\n== %s: median of up to %d repetition%s%s\n", tr, reps, reps == 1 ? "" : "s", quick ? " (QUICK run)" : ""
        printf "%-28s %-6s", "metric", "unit"
        for (i = 1; i <= nm; i++) printf " %10s", M[i]
        printf " %9s  %s\n", "ours/best", "lost"
        last_tr = tr; last_met = met
    } else if (met != last_met) { print ""; last_met = met }
    name = met (met ~ /^(barrier|startup|rss|rss_coll|alltoall_errors)$/ ? "" : " " human(size)) (np != 2 || met ~ /^(barrier|bcast|allreduce|alltoall|allgather|startup|rss|rss_coll)$/ ? " np " np : "")
    printf "%-28s %-6s", name, unit
    for (i = 1; i <= nm; i++) printf " %10s", fmt($(6 + i))
    r = $(7 + nm); lost = $(8 + nm); split(lost, L, "/")
    # beyond 10 % in the medians and the same in every repetition; in the medians only: mixed
    verdict = r == "" ? "" : (hb ? r >= 1.1 : r <= 0.9) ? (L[1] == 0 ? "better" : "mixed") : (hb ? r <= 0.9 : r >= 1.1) ? (L[1] == L[2] ? "WORSE" : "mixed") : "~"
    printf " %9s  %-4s  %s\n", r == "" ? "-" : sprintf(r < 0.1 ? "%.3f" : "%.2f", r), lost == "" ? "-" : lost, verdict
}' "$SUM" >>"$RES/summary.txt"
# small-message latency per repetition with the host's state before each run (host.csv): on a
# host whose vCPUs move between sharing a core and not, only runs of one state compare
if [ -s "$RES/host.csv" ]; then
    awk -F, -v mpis="$ACTIVE" '
    BEGIN { nm = split(mpis, M, " ") }
    FNR == 1 { next }
    FILENAME ~ /host.csv$/ { fl[$1, $2, $3] = $4; next }
    $4 == "lat" && ($5 == 0 || $5 == 1024) && $6 == 2 {
        k = $1 SUBSEP $5 SUBSEP $3
        if (!(k in seen)) { seen[k] = 1; keys[++n] = k }
        v[k, $2] = $7
    }
    END {
        if (!n) exit
        print "\n== small-message latency per repetition, us (cache-line floor before the run, ns);"
        print "   ours / the best peer whose run found the host in the same state as ours (floor"
        print "   below or above 150 ns)"
        for (j = 1; j <= n; j++) {
            split(keys[j], f, SUBSEP)
            line = sprintf("%-4s lat %-6s rep %s:", f[1], f[2] == 0 ? "0 B" : "1 KiB", f[3])
            ours = ""; oc = ""
            if ((keys[j], "ours") in v) { ours = v[keys[j], "ours"]; oc = fl[f[1], "ours", f[3]] }
            best = ""; bm = ""
            for (i = 1; i <= nm; i++) {
                if (!((keys[j], M[i]) in v)) continue
                x = v[keys[j], M[i]]; c = fl[f[1], M[i], f[3]]
                line = line sprintf("  %s %s (%s)", M[i], x, c == "" ? "?" : int(c + 0.5))
                if (M[i] == "ours" || c == "" || oc == "" || (c + 0 < 150) != (oc + 0 < 150)) continue
                if (best == "" || x + 0 < best + 0) { best = x; bm = M[i] }
            }
            if (ours != "" && best != "") line = line sprintf("  ours/%s %.2f", bm, ours / best)
            print line
        }
    }' "$RES/host.csv" "$RAW" >>"$RES/summary.txt"
fi
echo
cat "$RES/summary.txt"

# ---- plots ----
if command -v gnuplot >/dev/null; then
    "$BENCH/plot.sh" "$RES" || warn "plot.sh failed"
else
    echo "note: no gnuplot, no plots"
fi
echo
echo "results in $RES: $(cd "$RES" && ls | tr '\n' ' ')"
echo "$FAILS failed runs, $WARNS warnings; $(($(date +%s) - T0)) s"
[ "$FAILS" -eq 0 ]
