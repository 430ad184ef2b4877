#!/usr/bin/env bash
# The documentation against the configuration table (maint/env-table.sh: pscom_info -c -d of
# $BUILD, plus the MPI netmod's rows from its source):
#  - every PSP_* named in docs/, the READMEs and the manual page sources is in the table;
#  - every variable of the table has a row in docs/user-guide.md, with the table's default;
#  - ps_environment(7), generated from the table, names every variable and renders cleanly;
#  - pscom_info(1) and pscom_pp(1) document exactly the options of the tools' --help;
#  - relative links in the Markdown files point to files that exist.
# Needs libpscom's tools built (make -C src/pscom; BUILD, default <checkout>/build) and python3.
set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$TOP/build}
INFO=$BUILD/bin/pscom_info
GUIDE=$TOP/docs/user-guide.md

. "$TOP/test/tap.sh"

if [ ! -x "$INFO" ]; then
    echo "1..0 # SKIP $INFO not built (make -C src/pscom)"
    exit 0
fi
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

"$TOP/maint/env-table.sh" "$INFO" >"$TMP/table" 2>"$TMP/table.err"
rc=$?
[ "$rc" = 0 ] && [ ! -s "$TMP/table.err" ]
tap_ok $? "maint/env-table.sh prints the table without complaint"
sed 's/^/# /' "$TMP/table.err"
# NAME DEFAULT per variable ("" for an empty default)
sed -n 's/^\(PSP_[A-Z0-9_]*\) *=.*# default \(.*\)$/\1 \2/p' "$TMP/table" |
    sed 's/, set in environment$//' >"$TMP/defaults"
cut -d' ' -f1 "$TMP/defaults" | sort -u >"$TMP/names"
count=$(wc -l <"$TMP/names")
[ "$count" -ge 40 ]
tap_ok $? "the table has $count variables (core, transports, MPI)"
for v in PSP_DEBUG PSP_SHM PSP_TCP_CONGESTION PSP_UCP_TAG PSP_MPI_SCHED_YIELD PSP_MSA_MODULE_ID; do
    grep -qx "$v" "$TMP/names"
    tap_ok $? "the table has $v"
done

# 1. every PSP_* named in the documentation exists. A name that ends in "_" is a pattern
# (PSP_<NAME>, PSP_MSA_*): some variable must start with it.
files=$(cd "$TOP" && {
    ls docs/*.md docs/man/*.in 2>/dev/null
    if git -C "$TOP" rev-parse >/dev/null 2>&1; then
        git -C "$TOP" ls-files '*README.md'
    else
        find . -name README.md -not -path './_build*' -not -path './install/*' | sed 's,^\./,,'
    fi
} | sort -u)
for f in $files; do
    [ -f "$TOP/$f" ] || continue
    unknown=
    for name in $(grep -o 'PSP_[A-Z0-9_]*' "$TOP/$f" | sort -u); do
        case $name in
        PSP_) continue ;;
        *_) grep -q "^$name" "$TMP/names" || unknown="$unknown ${name}*" ;;
        *) grep -qx "$name" "$TMP/names" || unknown="$unknown $name" ;;
        esac
    done
    [ -z "$unknown" ]
    tap_ok $? "$f: every PSP_* it names is in the table${unknown:+; not in the table:$unknown}"
done

# 2. every variable has a row "| `PSP_X` | `default` | ..." in the user guide, with the default
missing='' wrong=''
while read -r v d; do
    row=$(grep -m1 "^| \`$v\` |" "$GUIDE")
    if [ -z "$row" ]; then
        missing="$missing $v"
        continue
    fi
    doc=$(awk -F'|' '{ print $3 }' <<<"$row" | sed 's/^ *//; s/ *$//; s/^`//; s/`$//')
    [ "$d" = '""' ] && d="(empty)"
    [ "$doc" = "$d" ] || wrong="$wrong $v (guide $doc, table $d)"
done <"$TMP/defaults"
[ -z "$missing" ]
tap_ok $? "docs/user-guide.md has a row for every variable of the table${missing:+; missing:$missing}"
[ -z "$wrong" ]
tap_ok $? "docs/user-guide.md gives each variable the table's default${wrong:+; differ:$wrong}"

# 3. the manual pages
if "$TOP/maint/gen-man.sh" -i "$INFO" "$TMP/man" >"$TMP/man.err" 2>&1; then
    tap_ok 0 "maint/gen-man.sh writes the manual pages"
else
    tap_ok 1 "maint/gen-man.sh writes the manual pages"
    sed 's/^/# /' "$TMP/man.err"
fi
absent=
while read -r v; do
    grep -qx "\.B $v" "$TMP/man/ps_environment.7" 2>/dev/null || absent="$absent $v"
done <"$TMP/names"
[ -z "$absent" ]
tap_ok $? "ps_environment.7 has an entry for every variable${absent:+; missing:$absent}"
for page in ps_environment.7 pscom_info.1 pscom_pp.1; do
    if ! command -v groff >/dev/null 2>&1; then
        tap_skip "$page renders without warnings" "groff not installed"
        continue
    fi
    warn=$(groff -man -ww -z -Tutf8 "$TMP/man/$page" 2>&1)
    [ -z "$warn" ] && [ -s "$TMP/man/$page" ]
    tap_ok $? "$page renders without warnings"
    [ -z "$warn" ] || sed 's/^/# /' <<<"$warn"
done

# the options of a tool's --help and of its page, as "-c" and "--config" words
options() { grep -o -- '\(^\|[ ,[(/]\)--*[a-z][a-z-]*' | sed 's/^[ ,[(/]//' | sort -u; }
for tool in pscom_info pscom_pp; do
    "$BUILD/bin/$tool" --help 2>&1 | options >"$TMP/$tool.help"
    sed 's/\\-/-/g; s/\\f[BIRP]//g' "$TOP/docs/man/$tool.1.in" | grep -v '^\.\\"' | options \
        >"$TMP/$tool.page"
    only_help=$(comm -23 "$TMP/$tool.help" "$TMP/$tool.page" | tr '\n' ' ')
    only_page=$(comm -13 "$TMP/$tool.help" "$TMP/$tool.page" | tr '\n' ' ')
    [ -s "$TMP/$tool.help" ] && [ -z "$only_help" ]
    tap_ok $? "$tool.1 documents every option of $tool --help${only_help:+; missing: $only_help}"
    [ -z "$only_page" ]
    tap_ok $? "$tool.1 names no option $tool lacks${only_page:+; unknown: $only_page}"
done

# 4. relative links of the Markdown files
broken=
for f in $files; do
    case $f in *.md) ;; *) continue ;; esac
    dir=$(dirname "$TOP/$f")
    for link in $(grep -o '](\([^)#][^)]*\))' "$TOP/$f" | sed 's/^](//; s/)$//; s/#.*//'); do
        case $link in http:* | https:* | mailto:*) continue ;; esac
        [ -e "$dir/$link" ] || broken="$broken $f:$link"
    done
done
[ -z "$broken" ]
tap_ok $? "relative links in the Markdown files resolve${broken:+; broken:$broken}"

tap_done
