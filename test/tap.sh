# tap.sh - sourced by bash test scripts (test/pscom/lib.sh, test/docs): numbered TAP results, the
# plan at the end, and failures echoed to stderr, which is what prove shows of a failed test.

_n=0
_failed=0

# tap_ok STATUS TEXT: one result of this script (STATUS 0 = ok)
tap_ok() {
    _n=$((_n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $_n - $2"
    else
        echo "not ok $_n - $2"
        # prove shows a test's stderr, not its TAP: a CI log then still says what failed
        echo "${0##*/}: not ok $_n - $2" >&2
        _failed=$((_failed + 1))
    fi
}

tap_diag() {
    sed 's/^/# /'
}

# to_both: lines to stdout (the TAP) and stderr (what prove shows of a failed test)
to_both() {
    local l
    while IFS= read -r l; do
        printf '%s\n' "$l"
        printf '%s\n' "$l" >&2
    done
}

# tap_skip TEXT WHY: one skipped result
tap_skip() {
    _n=$((_n + 1))
    echo "ok $_n - $1 # SKIP $2"
}

# tap_done: print the plan; exit status for prove
tap_done() {
    echo "1..$_n"
    [ "$_failed" = 0 ]
    exit
}
