#!/usr/bin/env bash
# Run MPICH's own test suite (test/mpi of the unpacked MPICH source) against an installed MPI.
#
#   maint/mpich-tests.sh [options] [DIR...]     DIR: pt2pt coll rma threads/pt2pt ... (default: all)
#     --mpi=ours        install/ (default)
#     --mpi=debian      Debian's MPICH (mpicc.mpich, mpiexec.mpich), for comparison
#     --mpi=PREFIX      any MPI with PREFIX/bin/{mpicc,mpiexec}
#     --variant=default|tcp|cliques|ucp
#                       tcp: PSP_SHM=0 PSP_UCP=0 (Debian: UCX_TLS=tcp,self);
#                       cliques: MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_NUM_CLIQUES=2 (inter-node paths)
#     --maxnp=N         most ranks per test (default 8; a test asking for more runs with N)
#     --timeout=S       per-test limit (default $MPITEST_TIMEOUT or 180; testlist timeLimit= wins)
#     --lists=L         testlists (default testlist,testlist.dtp,testlist.cvar; testlist = quick)
#     --xfail=FILE|none expected failures (default maint/mpich-tests.xfail for --mpi=ours, else none)
#     --reconfigure     configure the test suite again
#     --mpiexec=PATH    run the tests with PATH instead of the MPI's mpiexec (takes mpiexec's
#                       arguments; e.g. test/cluster/mpiexec-vc, across simulated nodes);
#                       results in results/<mpi>-<variant>[-quick]-<name of PATH>/
#     --quick[=FILE]    only the tests in FILE (default maint/mpich-tests.quick: the fast,
#                       representative subset that maint/check.sh runs); builds only their
#                       programs; results in results/<mpi>-<variant>-quick/
#
# The environment passes through (PSP_SHM=0 maint/mpich-tests.sh pt2pt runs over tcp).
# Test build tree: _build/mpich-tests/<mpi>/; results: _build/mpich-tests/results/<mpi>-<variant>/
# (<dir>.tap, <dir>.log = runtests' output, <dir>.junit.xml with each run's args; summary.txt, appended
# to by every run).
# Exit status 0 when nothing failed or timed out (expected failures do not count).
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=${MPICH_SRC:-$top/_build/mpich-4.0.2}/test/mpi
jobs=$(nproc 2>/dev/null || echo 2)

mpi=ours variant=default maxnp=8 timeout=${MPITEST_TIMEOUT:-180}
lists=testlist,testlist.dtp,testlist.cvar xfail='' reconfigure=0 quick= runexec=
dirs=()
for arg; do
    case $arg in
        --mpi=*) mpi=${arg#*=} ;;
        --variant=*) variant=${arg#*=} ;;
        --maxnp=*) maxnp=${arg#*=} ;;
        --timeout=*) timeout=${arg#*=} ;;
        --lists=*) lists=${arg#*=} ;;
        --xfail=*) xfail=${arg#*=} ;;
        --reconfigure) reconfigure=1 ;;
        --mpiexec=*) runexec=${arg#*=} ;;
        --quick) quick=$top/maint/mpich-tests.quick ;;
        --quick=*) quick=${arg#*=} ;;
        -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "mpich-tests: unknown option $arg (--help)" >&2; exit 2 ;;
        *) dirs+=("${arg%/}") ;;
    esac
done

case $mpi in
    ours)
        name=ours prefix=$top/install
        mpicc=$prefix/bin/mpicc mpiexec=$prefix/bin/mpiexec
        mpifort=$prefix/bin/mpifort mpicxx=$prefix/bin/mpicxx
        : "${xfail:=$top/maint/mpich-tests.xfail}" ;;
    debian)
        # Debian names its wrappers *.mpich, so --with-mpi=/usr alone would find no mpicc;
        # the test suite's configure takes MPICC/MPIEXEC/... from the environment instead
        name=debian prefix=/usr
        mpicc=/usr/bin/mpicc.mpich mpiexec=/usr/bin/mpiexec.mpich
        mpifort=/usr/bin/mpifort.mpich mpicxx=/usr/bin/mpicxx.mpich ;;
    /*)
        prefix=${mpi%/} name=$(printf '%s' "${prefix#/}" | tr -c 'A-Za-z0-9._-' '_')
        mpicc=$prefix/bin/mpicc mpiexec=$prefix/bin/mpiexec
        mpifort=$prefix/bin/mpifort mpicxx=$prefix/bin/mpicxx ;;
    *) echo "mpich-tests: --mpi=ours|debian|/absolute/prefix" >&2; exit 2 ;;
esac
[ "$xfail" = none ] && xfail=

venv=()
case $variant in
    default) ;;
    tcp) if [ "$mpi" = debian ]; then venv=('UCX_TLS=tcp,self'); else venv=(PSP_SHM=0 PSP_UCP=0); fi ;;
    cliques) venv=(MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_NUM_CLIQUES=2) ;;
    # UCX alone, over its shared memory: ours then matches in UCX (PSP_UCP_TAG)
    ucp) if [ "$mpi" = debian ]; then venv=('UCX_TLS=posix,cma,self'); else venv=(PSP_SHM=0 PSP_TCP=0 'UCX_TLS=posix,cma,self'); fi ;;
    *) echo "mpich-tests: --variant=default|tcp|cliques|ucp" >&2; exit 2 ;;
esac

for f in "$mpicc" "$mpiexec"; do
    [ -x "$f" ] || { echo "mpich-tests: $f is missing" >&2; exit 1; }
done
[ -x "$src/configure" ] || { echo "mpich-tests: no MPICH test suite at $src (maint/get-mpich.sh)" >&2; exit 1; }
command -v perl >/dev/null || { echo "mpich-tests: runtests needs perl" >&2; exit 1; }
if [ -n "$xfail" ] && [ ! -r "$xfail" ]; then echo "mpich-tests: cannot read $xfail" >&2; exit 1; fi

bdir=$top/_build/mpich-tests/$name
res=$top/_build/mpich-tests/results/$name-$variant${quick:+-quick}${runexec:+-$(basename "$runexec")}
if [ -n "$quick" ]; then
    [ -r "$quick" ] || { echo "mpich-tests: cannot read $quick" >&2; exit 2; }
    lists=testlist.quick
fi

# --- configure (once per MPI) -------------------------------------------------------------
# Languages and ROMIO are switched on only where this MPI has them, and recorded in
# $bdir/features, so that a directory needing them is reported as skipped, not as failures.
has() { # has LANG-TEST-FILE-SUFFIX COMPILER SOURCE
    local t
    t=$(mktemp -d) || return 1
    printf '%s\n' "$3" >"$t/t.$1"
    "$2" -o "$t/t" "$t/t.$1" >/dev/null 2>&1
    local rc=$?
    rm -rf "$t"
    return $rc
}
configure() {
    local romio=no fortran=no f08=no cxx=no args=()
    has c "$mpicc" '#include <mpi.h>
int main(void) { MPI_File f; return MPI_File_open(MPI_COMM_WORLD, "x", 0, MPI_INFO_NULL, &f); }' && romio=yes
    [ -x "$mpifort" ] && has f90 "$mpifort" '      program t
      use mpi
      integer ierr
      call mpi_init(ierr)
      end' && fortran=yes
    [ $fortran = yes ] && has f90 "$mpifort" '      program t
      use mpi_f08
      call mpi_init()
      end' && f08=yes
    [ -x "$mpicxx" ] && has cxx "$mpicxx" '#include <mpi.h>
int main() { MPI::Init(); return 0; }' && cxx=yes
    [ $romio = yes ] || args+=(--disable-romio)
    [ $fortran = yes ] || args+=(--disable-fortran)
    [ $cxx = yes ] || args+=(--disable-cxx)
    echo "mpich-tests: configuring MPICH's test suite for $mpicc in $bdir (romio=$romio fortran=$fortran f08=$f08 cxx=$cxx)"
    rm -rf "$bdir" && mkdir -p "$bdir" || return 1
    # --enable-threads=multiple: else threads/ is left out of the top-level testlist.
    # --disable-maintainer-mode: when MPICH's tree is regenerated (./autogen.sh reruns MPICH's
    # autogen), make would rerun autotools and config.status here, which rewrites every
    # testlist while runtests reads one (the rest of that list is then silently not run)
    if ! (cd "$bdir" && MPICC=$mpicc MPIEXEC=$mpiexec MPIF77=$mpifort MPIFC=$mpifort MPICXX=$mpicxx \
            "$src/configure" --with-mpi="$prefix" --enable-threads=multiple --disable-ft-tests \
            --disable-maintainer-mode "${args[@]}") >"$bdir/configure.log" 2>&1; then
        echo "mpich-tests: configure failed, see $bdir/configure.log" >&2
        return 1
    fi
    # The suite's configure enables f08/ (and util/libmtest_f08) only when run from within MPICH's
    # own configure (FROM_MPICH=yes; its configure.ac: "FIXME if $FROM_MPICH is no, we should test
    # build an MPI F08 program"). Standalone, f08/ is left out and its programs fail to link
    # (undefined mtest_init_). We did test-build one above: switch the conditional on.
    if [ $f08 = yes ]; then
        if ! (cd "$bdir" && sed -i -e 's/^S\["HAS_F08_TRUE"\]="#"$/S["HAS_F08_TRUE"]=""/' \
                -e 's/^S\["HAS_F08_FALSE"\]=""$/S["HAS_F08_FALSE"]="#"/' \
                -e 's/^S\["f08dir"\]="#"$/S["f08dir"]="f08"/' config.status &&
                ./config.status) >>"$bdir/configure.log" 2>&1; then
            echo "mpich-tests: config.status for f08 failed, see $bdir/configure.log" >&2
            return 1
        fi
    fi
    printf 'romio=%s\nfortran=%s\nf08=%s\ncxx=%s\nmpicc=%s\nversion=3\n' $romio $fortran $f08 $cxx "$mpicc" >"$bdir/features"
}
# version=2: configured with --disable-maintainer-mode; 3: f08/ switched on where it works
if [ $reconfigure = 1 ] || [ ! -f "$bdir/features" ] || ! grep -qx "mpicc=$mpicc" "$bdir/features" ||
    ! grep -qx version=3 "$bdir/features"; then
    configure || exit 1
fi
feature() { sed -n "s/^$1=//p" "$bdir/features"; }

# quick: "<dir> <testlist line>" lines; the directories in the file's order (or those named,
# if they are in it), each with its lines as testlist.quick
quick_lines() { sed 's/#.*//; /^[[:space:]]*$/d' "$quick" | awk -v d="$1" '$1 == d { $1 = ""; sub(/^ /, ""); print }'; }
if [ -n "$quick" ]; then
    mapfile -t qdirs < <(sed 's/#.*//; /^[[:space:]]*$/d' "$quick" | awk '!seen[$1]++ { print $1 }')
    if [ ${#dirs[@]} = 0 ]; then
        dirs=("${qdirs[@]}")
    else
        for d in "${dirs[@]}"; do
            printf '%s\n' "${qdirs[@]}" | grep -qxF "$d" || { echo "mpich-tests: $d has no tests in $quick" >&2; exit 2; }
        done
    fi
fi
if [ ${#dirs[@]} = 0 ]; then
    # every directory the top-level testlist enables (configure comments the others out)
    mapfile -t dirs < <(sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$bdir/testlist")
fi

# --- xfail list -> "dir/test np<TAB>reason" ----------------------------------------------
mkdir -p "$res"
# the hard backstop: hydra ends a test at MPIEXEC_TIMEOUT (runtests sets it per test);
# an mpiexec still there 60 s later is killed with its process group
cat >"$res/mpiexec-backstop" <<EOF
#!/bin/sh
exec timeout -k 10 \$(( \${MPIEXEC_TIMEOUT:-$timeout} + 60 )) '${runexec:-$mpiexec}' "\$@"
EOF
chmod +x "$res/mpiexec-backstop"
xf=$res/xfail.keys
: >"$xf"
if [ -n "$xfail" ]; then
    sed -n 's/^[[:space:]]*\([^#[:space:]]\{1,\}\)[[:space:]]\{1,\}\([0-9]\{1,\}\)[[:space:]]*#\{0,1\}[[:space:]]*\(.*\)$/\1 \2\t\3/p' \
        "$xfail" >"$xf"
fi

# --- post-processing of one directory's TAP ------------------------------------------------
# Marks listed failures as TODO, listed passes as XPASS, and a failure that ran into its time
# limit (runtests' own rule: within 10 s of it) as timed out; a hang is never an expected
# failure. Prints the counts line and the names of the tests behind each count.
classify() { # classify RAW.tap OUT.tap DIRNAME
    awk -F'\t' -v out="$2" -v dir="$3" -v xf="$xf" '
    BEGIN { while ((getline l < xf) > 0) { split(l, a, "\t"); reason[a[1]] = a[2] } }
    # first pass: the time limit and any timeout message of every failed run (by ordinal)
    FNR == NR {
        if ($0 ~ /^(not )?ok [0-9]* ?- /) cur++
        else if ($0 ~ /^  Timeout: /) { l = $0; sub(/^  Timeout: /, "", l); limit[cur] = l + 0 }
        else if ($0 ~ /^## .*(TIMED OUT|timed out|Timeout expired)/) { tmsg[cur] = 1 }
        next
    }
    {
        line = $0
        # runtests 4.0.2 leaves the test number out ("ok  - ./dir/test np"): count them
        if (line ~ /^(not )?ok [0-9]* ?- /) {
            nok = (line ~ /^not /); num++
            rest = line; sub(/^(not )?ok [0-9]* ?- /, "", rest)
            split(rest, w, " "); name = w[1]; np = w[2]; sub(/^\.\//, "", name)
            t = line; if (!sub(/.*# time=/, "", t)) t = 0; t += 0
            key = name " " np
            # a program that did not build has no np in its line: take its listed entry, if any
            if (np !~ /^[0-9]+$/) for (k in reason) if (index(k, name " ") == 1) key = k
            if (line ~ /# SKIP/) { skip++ }
            else if (!nok) {
                if (key in reason) {
                    xpass++; xpl = xpl "  XPASS   " key ": listed in the xfail list, passes now: remove it from the list\n"
                    sub(/ # time=/, " # TODO XPASS: listed as expected failure (" reason[key] "), passes now # time=", line)
                } else pass++
            } else if ((num in limit && limit[num] > 0 && t + 10 >= limit[num]) || num in tmsg) {
                tout++; tol = tol sprintf("  TIMEOUT %s (%.0f s, limit %s s)\n", key, t, limit[num])
                line = line "\n## TIMED OUT after " int(t) " s (limit " limit[num] " s)"
            } else if (key in reason) {
                xfl++; sub(/ # time=/, " # TODO " reason[key] " # time=", line)
            } else { fail++; fl = fl "  FAIL    " key "\n" }
        }
        print line > out
    }
    END {
        printf "%s: passed %d / failed %d / timed out %d / expected-fail %d", dir, pass, fail, tout, xfl
        if (skip) printf " / skipped %d", skip
        if (xpass) printf " / XPASS %d", xpass
        printf "\n%s%s%s", fl, tol, xpl
    }' "$1" "$1"
}

# --- run ------------------------------------------------------------------------------------
summary=$res/summary.txt
{
    echo "== MPICH test suite: ${runexec:-$mpiexec}, variant $variant${venv[*]:+ (${venv[*]})}, maxnp $maxnp, timeout ${timeout}s, lists $lists, $(date -u '+%F %T UTC')"
    [ -n "$xfail" ] && echo "   expected failures: $xfail"
    # an MPI reinstalled during a run makes its results a mix: say which library was tested
    for lib in "$prefix"/lib/libmpi.so.12 "$prefix"/lib/x86_64-linux-gnu/libmpich.so.12; do
        [ -e "$lib" ] && echo "   $(readlink -f "$lib") of $(date -u -r "$lib" '+%F %T UTC')"
    done
} | tee -a "$summary"
# a library overwritten under running tests crashes them (SIGBUS, segfaults in ld.so)
libstamp() {
    stat -L -c %Y "$prefix"/lib/libmpi.so.12 "$prefix"/lib/libpscom.so.1 "$prefix"/lib/libpscom4*.so \
        "$prefix"/lib/x86_64-linux-gnu/libmpich.so.12 2>/dev/null
}
stamp=$(libstamp)
totals=(0 0 0 0 0 0)
status=0
for d in "${dirs[@]}"; do
    skip=
    case $d in
        io|io/*) [ "$(feature romio)" = yes ] || skip="needs ROMIO (MPI-IO), which this MPI lacks: MPI_File_open does not link" ;;
        f77*|f90*) [ "$(feature fortran)" = yes ] || skip="needs Fortran, which this MPI lacks (no working $mpifort)" ;;
        f08*) [ "$(feature f08)" = yes ] || skip="needs the mpi_f08 module, which this MPI lacks (no working $mpifort with use mpi_f08)" ;;
        cxx*) [ "$(feature cxx)" = yes ] || skip="needs the C++ bindings, which this MPI lacks (no working $mpicxx)" ;;
    esac
    [ -z "$skip" ] && [ ! -d "$bdir/$d" ] && skip="no such directory in the test suite"
    if [ -n "$skip" ]; then
        echo "$d: skipped: $skip" | tee -a "$summary"
        continue
    fi
    base=$(printf '%s' "$d" | tr / _)
    start=$(date +%s)
    # build the directory's programs in parallel first (runtests would build them one by one);
    # a program that does not build is reported by runtests as a failed test
    if [ -n "$quick" ]; then
        quick_lines "$d" >"$bdir/$d/testlist.quick"
        # shellcheck disable=SC2046 # program names, one word each
        make -k -C "$bdir/$d" -j"$jobs" $(awk '{ print $1 }' "$bdir/$d/testlist.quick" | sort -u) \
            >"$res/$base.build.log" 2>&1
    else
        make -k -C "$bdir/$d" -j"$jobs" >"$res/$base.build.log" 2>&1
    fi
    built=$(date +%s)
    # stdin from /dev/null: hydra forwards stdin, and the backstop's timeout runs mpiexec in the
    # background process group (a terminal would stop it)
    (cd "$bdir" && env "${venv[@]}" MPITEST_TIMEOUT="$timeout" MPITEST_STOPTEST="$res/.stoptest" \
        ./runtests -srcdir="$src" -tests="$lists" -testdirs="$d" -mpiexec="$res/mpiexec-backstop" \
        -maxnp="$maxnp" -showprogress -tapfile="$res/$base.raw.tap" -junitfile="$res/$base.junit.xml") \
        </dev/null >"$res/$base.log" 2>&1
    end=$(date +%s)
    # a test program left running (its working directory is in the test tree) is reported
    # and killed: it would slow down or disturb the tests after it
    left=
    for p in /proc/[0-9]*; do
        case $(readlink "$p/cwd" 2>/dev/null) in "$bdir"/*) left="$left ${p#/proc/}" ;; esac
    done
    if [ ! -s "$res/$base.raw.tap" ]; then
        echo "  runtests wrote no TAP: see $res/$base.log" | tee -a "$summary"
        : >"$res/$base.raw.tap"
        status=1
    fi
    line=$(classify "$res/$base.raw.tap" "$res/$base.tap" "$d")
    counts=$(printf '%s\n' "$line" | head -n1)
    printf '%s [%dm%02ds: build %ds, run %ds]\n' "$counts" $(((end - start) / 60)) $(((end - start) % 60)) \
        $((built - start)) $((end - built)) | tee -a "$summary"
    printf '%s\n' "$line" | tail -n +2 | sed '/^$/d' | tee -a "$summary"
    grep -h 'Terminating test' "$res/$base.log" | sed 's/^/  runtests: /' | tee -a "$summary"
    if [ -n "$left" ]; then
        echo "  LEFT BEHIND: processes$left ($(ps -o comm= -p "${left# }" 2>/dev/null | sort -u | tr '\n' ' ')); killed" | tee -a "$summary"
        # shellcheck disable=SC2086
        kill -9 $left 2>/dev/null
        status=1
    fi
    if [ "$(libstamp)" != "$stamp" ]; then
        echo "  WARNING: the MPI was reinstalled during this directory: crashes may come from that, results mix two builds" | tee -a "$summary"
        stamp=$(libstamp)
    fi
    read -r -a n < <(printf '%s\n' "$counts" | sed 's/.*passed \([0-9]*\) \/ failed \([0-9]*\) \/ timed out \([0-9]*\) \/ expected-fail \([0-9]*\).*/\1 \2 \3 \4/')
    for i in 0 1 2 3; do totals[i]=$((totals[i] + n[i])); done
    [ "${n[1]}" = 0 ] && [ "${n[2]}" = 0 ] || status=1
done
echo "overall: passed ${totals[0]} / failed ${totals[1]} / timed out ${totals[2]} / expected-fail ${totals[3]}  (details: $res)" |
    tee -a "$summary"
exit $status
