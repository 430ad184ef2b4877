#!/usr/bin/env bash
# Side-by-side table of MPICH test suite results (maint/mpich-tests.sh), one row per directory.
#
#   maint/mpich-tests-table.sh [RESULT...]    RESULT: ours-default debian-default ours-tcp ...
#                                             (default: every directory under results/)
#
# Reads _build/mpich-tests/results/<RESULT>/summary.txt; of several runs of one directory the
# latest counts. Prints a markdown table: passed / failed / timed out (+ expected failures,
# skipped), "-" where that directory was not run.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base=$top/_build/mpich-tests/results
if [ $# = 0 ]; then
    mapfile -t cols < <(cd "$base" 2>/dev/null && ls -d -- */ 2>/dev/null | sed 's|/$||')
else
    cols=("$@")
fi
[ ${#cols[@]} -gt 0 ] || { echo "mpich-tests-table: no results in $base" >&2; exit 1; }
for c in "${cols[@]}"; do
    [ -r "$base/$c/summary.txt" ] || { echo "mpich-tests-table: no $base/$c/summary.txt" >&2; exit 1; }
done

for c in "${cols[@]}"; do
    # "dir: passed P / failed F / timed out T / expected-fail X[ / skipped S] [time...]"
    sed -n 's|^\([a-z0-9_/]*\): passed \([0-9]*\) / failed \([0-9]*\) / timed out \([0-9]*\) / expected-fail \([0-9]*\)\( / skipped \([0-9]*\)\)\{0,1\} \[\([^]]*\)\].*|\1\t\2\t\3\t\4\t\5\t\7\t\8|p' \
        "$base/$c/summary.txt" | sed "s|^|$c\t|"
done | awk -F'\t' -v cols="${cols[*]}" '
    BEGIN { nc = split(cols, col, " ") }
    {
        if (!($2 in seen)) { seen[$2] = 1; dirs[++nd] = $2 }
        cell = $3 " / " $4 " / " $5
        extra = ""
        if ($6 > 0) extra = extra " +" $6 " xfail"
        if ($7 != "" && $7 > 0) extra = extra ", " $7 " skipped"
        v[$1, $2] = cell extra
        t[$1, $2] = $8
        sub(/:.*/, "", t[$1, $2])
    }
    END {
        printf "| directory |"
        for (i = 1; i <= nc; i++) printf " %s |", col[i]
        printf "\n|---|"
        for (i = 1; i <= nc; i++) printf "---|"
        printf "\n"
        for (d = 1; d <= nd; d++) {
            if (dirs[d] == "overall") continue
            printf "| %s |", dirs[d]
            for (i = 1; i <= nc; i++)
                printf " %s |", ((col[i], dirs[d]) in v) ? v[col[i], dirs[d]] " (" t[col[i], dirs[d]] ")" : "-"
            printf "\n"
        }
        printf "\npassed / failed / timed out per directory (time); the latest run of each directory counts\n"
    }'
