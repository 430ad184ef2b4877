#!/bin/bash
# plot.sh DIR: PNG plots (gnuplot) from DIR/summary.csv, the medians that suite.sh writes:
#   lat_<transport>.png   one-way latency vs message size (0 B is left out: log scale)
#   bw_<transport>.png    bw (solid) and bibw (dashed) MB/s vs message size
#   coll_<transport>.png  one panel per collective: us per call vs ranks, one line per MPI and
#                         size; the last panel: peak RSS of a rank after the collectives
#   startup.png           wall time of mpiexec of an empty program vs ranks, per transport
#   rss.png               peak RSS (VmHWM, largest rank) of the empty program vs ranks
# Colours: ours red, MPICH blue, Open MPI green. Plots without data are not written. A PNG larger
# than 100 KB is reduced to 256 colours where ImageMagick's convert is installed.
set -u
[ $# -eq 1 ] && [ -f "$1/summary.csv" ] || { echo "usage: test/bench/plot.sh DIR (with DIR/summary.csv)" >&2; exit 2; }
DIR=$1
SUM=$DIR/summary.csv
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

# the MPI columns: between "better" and "ours_over_best_peer"
MPIS=$(head -1 "$SUM" | tr , '\n' | awk '/^better$/ { on = 1; next } /^ours_over/ { on = 0 } on' | paste -sd' ')
NM=$(wc -w <<<"$MPIS")
TRS=$(awk -F, 'NR > 1 && !s[$1]++ { printf "%s ", $1 }' "$SUM")

# extract FILE TRANSPORT METRIC XCOL [SIZE]: rows "x value-per-MPI" (- where missing), sorted
extract() {
    awk -F, -v tr="$2" -v met="$3" -v xcol="$4" -v size="${5:-}" -v nm="$NM" '
        NR > 1 && $1 == tr && $2 == met && (size == "" || $3 == size) && $xcol > 0 {
            line = $xcol
            for (i = 1; i <= nm; i++) line = line " " ($(6 + i) == "" ? "-" : $(6 + i))
            print line
        }' "$SUM" | sort -n >"$1"
    [ -s "$1" ]
}

GP=$TMP/plot.gp
cat >"$GP" <<EOF
set terminal pngcairo size 900,600 font "sans,10"
set datafile missing "-"
set grid
set key top left
set offsets graph 0.02, graph 0.02, 0, 0
names = "$MPIS"
col(n) = n eq "ours" ? "#d62728" : n eq "mpich" ? "#1f77b4" : "#2ca02c"
# sizes: binary units, ticks at powers of 4
sizetics = 'set xtics ("1" 1, "4" 4, "16" 16, "64" 64, "256" 256, "1k" 1024, "4k" 4096, "16k" 16384, "64k" 65536, "256k" 262144, "1M" 1048576, "4M" 4194304, "16M" 16777216, "64M" 67108864)'
EOF

plots=0
for tr in $TRS; do
    if extract "$TMP/lat.$tr" "$tr" lat 3; then
        cat >>"$GP" <<EOF
set output "$DIR/lat_$tr.png"
set title "latency, $tr, 2 ranks (ping-pong, round trip / 2; median)"
set logscale xy 2
set logscale y 10
eval sizetics
set xlabel "message size (bytes)"
set ylabel "us (lower is better)"
plot for [i=2:$((NM + 1))] "$TMP/lat.$tr" using 1:i with linespoints lw 2 pt 7 ps 0.7 lc rgb col(word(names, i-1)) title word(names, i-1)
EOF
        plots=$((plots + 1))
    fi
    if extract "$TMP/bw.$tr" "$tr" bw 3; then
        extract "$TMP/bibw.$tr" "$tr" bibw 3 || : >"$TMP/bibw.$tr"
        cat >>"$GP" <<EOF
set output "$DIR/bw_$tr.png"
set title "bandwidth, $tr, 2 ranks (window of 64; solid: bw, dashed: bibw both directions; median)"
set logscale x 2
set logscale y 10
eval sizetics
set xlabel "message size (bytes)"
set ylabel "MB/s (higher is better)"
plot for [i=2:$((NM + 1))] "$TMP/bw.$tr" using 1:i with linespoints lw 2 pt 7 ps 0.7 lc rgb col(word(names, i-1)) title word(names, i-1)." bw", \\
     for [i=2:$((NM + 1))] "$TMP/bibw.$tr" using 1:i with linespoints lw 2 dt 2 pt 6 ps 0.7 lc rgb col(word(names, i-1)) title word(names, i-1)." bibw"
EOF
        plots=$((plots + 1))
    fi
    # collectives: one panel per operation, one line per MPI and size
    panels=
    for op in barrier bcast allreduce alltoall allgather; do
        sizes=$(awk -F, -v tr="$tr" -v op="$op" 'NR > 1 && $1 == tr && $2 == op && !s[$3]++ { print $3 }' "$SUM" | sort -n | paste -sd' ')
        [ -n "$sizes" ] || continue
        cmd=
        dt=1
        for sz in $sizes; do
            extract "$TMP/$op.$sz.$tr" "$tr" "$op" 4 "$sz" || continue
            label=$(awk -v s="$sz" -v op="$op" 'BEGIN { if (op == "barrier") print ""; else if (s >= 1024 && s % 1024 == 0) print " " s / 1024 "k"; else print " " s }')
            cmd="$cmd${cmd:+, }for [i=2:$((NM + 1))] \"$TMP/$op.$sz.$tr\" using 1:i with linespoints lw 2 dt $dt pt $((dt + 5)) ps 0.7 lc rgb col(word(names, i-1)) title word(names, i-1).\"$label\""
            dt=$((dt + 1))
        done
        [ -n "$cmd" ] && panels="$panels
set title \"$op\"
plot $cmd"
    done
    if extract "$TMP/rss_coll.$tr" "$tr" rss_coll 4; then
        panels="$panels
set title \"peak RSS of a rank after the collectives (MiB)\"
set ylabel \"MiB (lower is better)\"
unset logscale y
plot for [i=2:$((NM + 1))] \"$TMP/rss_coll.$tr\" using 1:i with linespoints lw 2 pt 7 ps 0.7 lc rgb col(word(names, i-1)) title word(names, i-1)"
    fi
    if [ -n "$panels" ]; then
        cat >>"$GP" <<EOF
set output "$DIR/coll_$tr.png"
set terminal pngcairo size 1050,700 font "sans,8"
set multiplot layout 2,3 title "collectives, $tr: us per call vs ranks (median; line style = size)"
set xtics autofreq
set format x "%g"
set logscale x 2
set logscale y 10
set xlabel "ranks"
set ylabel "us (lower is better)"
set key top left font ",7"
$panels
unset multiplot
set terminal pngcairo size 900,600 font "sans,10"
set key top left font ",10"
EOF
        plots=$((plots + 1))
    fi
done

# start-up and RSS vs ranks: one line per MPI and transport
for met in startup rss; do
    cmd=
    dt=1
    for tr in $TRS; do
        extract "$TMP/$met.$tr" "$tr" "$met" 4 || continue
        cmd="$cmd${cmd:+, }for [i=2:$((NM + 1))] \"$TMP/$met.$tr\" using 1:i with linespoints lw 2 dt $dt pt $((dt + 5)) ps 0.8 lc rgb col(word(names, i-1)) title word(names, i-1).\" $tr\""
        dt=$((dt + 1))
    done
    [ -n "$cmd" ] || continue
    if [ $met = startup ]; then
        title="job start-up: wall time of mpiexec of an empty MPI program (median)"
        ylabel="s (lower is better)"
    else
        title="peak RSS (VmHWM) of the largest rank, empty MPI program (median)"
        ylabel="MiB (lower is better)"
    fi
    cat >>"$GP" <<EOF
set output "$DIR/$met.png"
set title "$title"
set xtics autofreq
set format x "%g"
set logscale x 2
unset logscale y
set yrange [0:*]
set xlabel "ranks"
set ylabel "$ylabel"
plot $cmd
set autoscale y
EOF
    plots=$((plots + 1))
done

[ "$plots" -gt 0 ] || { echo "plot.sh: nothing to plot in $SUM" >&2; exit 1; }
gnuplot "$GP" || exit 1
# keep the files small enough to commit: above 100 KB, 256 colours (ImageMagick) if available
for f in "$DIR"/*.png; do
    [ "$(stat -c %s "$f")" -gt 100000 ] || continue
    if command -v convert >/dev/null; then
        convert "$f" -colors 256 "PNG8:$f.tmp" && mv "$f.tmp" "$f"
    else
        echo "note: $f is larger than 100 KB"
    fi
done
echo "plots: $(cd "$DIR" && ls ./*.png | sed 's|^\./||' | paste -sd' ')"
