/*
 * tap.h - minimal TAP producer for the pscom tests (no framework dependency).
 *
 * In a test's main process the lines go to stdout ("ok 3 - text"). In a child started by
 * tu_run() (testutil.h) the same calls send the result to the parent, which numbers and prints
 * it, so only one process writes the TAP stream. The plan ("1..N") is printed at the end by
 * tap_done(), as Test::More's done_testing() does.
 */
#ifndef TAP_H_INCLUDED
#define TAP_H_INCLUDED

#define TAP_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Record one result; returns cond. Use the ok() macro. */
int tap_ok_(int cond, const char *file, int line, const char *fmt, ...) TAP_PRINTF(4, 5);
/* Like ok(got == want), with both values in the diagnostics on failure. */
int tap_is_(long long got, long long want, const char *file, int line, const char *fmt, ...)
    TAP_PRINTF(5, 6);
/* A "# text" comment line. */
void tap_diag(const char *fmt, ...) TAP_PRINTF(1, 2);
/* One skipped test. */
void tap_skip(const char *why, const char *fmt, ...) TAP_PRINTF(2, 3);
/* Print the plan; returns the exit status for main(): 0 if every test passed, else 1. */
int tap_done(void);

#define ok(cond, ...) tap_ok_(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is(got, want, ...)                                                                         \
    tap_is_((long long)(got), (long long)(want), __FILE__, __LINE__, __VA_ARGS__)
#define diag(...) tap_diag(__VA_ARGS__)

#endif /* TAP_H_INCLUDED */
