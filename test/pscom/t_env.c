/*
 * t_env.c - unit tests of configuration parsing: pscom_env_register() with rows of every type,
 * good and malformed values (one warning naming variable and value, default kept),
 * PSP_DEBUG_PARAM logging, pscom_env_print(), and the rendezvous thresholds and priorities
 * that PSP_RENDEZVOUS, PSP_<ARCH>_RENDEZVOUS and PSP_<ARCH> give each plugin.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* ---- pscom_env_register in this process ------------------------------------------------------ */

enum { MAXROWS = 64 };

typedef struct env_case {
    const char *name;
    pscom_env_type_t type;
    const char *deflt;
    int min, max;
    const char *value; /* NULL: leave unset */
    int bad;           /* expect one warning and the default */
    long long want;    /* INT/UINT/SIZE/SIZE_OPT/BOOL: expected value */
    const char *want_str;
} env_case_t;

#define SZMAX ((long long)-1) /* SIZE_MAX as stored in long long */
#define NOVAL ((long long)-2) /* a SIZE_OPT row without a value */

static const env_case_t cases[] = {
    {"PSPT_INT_OK", PSCOM_ENV_INT, "7", 0, 100, "42", 0, 42, NULL},
    {"PSPT_INT_HEX", PSCOM_ENV_INT, "7", 0, 100, "0x10", 0, 16, NULL},
    {"PSPT_INT_NEG", PSCOM_ENV_INT, "7", -10, 10, "-3", 0, -3, NULL},
    {"PSPT_INT_UNSET", PSCOM_ENV_INT, "7", 0, 100, NULL, 0, 7, NULL},
    {"PSPT_INT_ABC", PSCOM_ENV_INT, "7", 0, 100, "abc", 1, 7, NULL},
    {"PSPT_INT_TRAIL", PSCOM_ENV_INT, "7", 0, 100, "12abc", 1, 7, NULL},
    {"PSPT_INT_HIGH", PSCOM_ENV_INT, "7", 0, 100, "101", 1, 7, NULL},
    {"PSPT_INT_LOW", PSCOM_ENV_INT, "7", 0, 100, "-1", 1, 7, NULL},
    {"PSPT_INT_NORANGE", PSCOM_ENV_INT, "7", 0, 0, "123456", 0, 123456, NULL},
    {"PSPT_INT_HUGE", PSCOM_ENV_INT, "7", 0, 0, "99999999999999999999", 1, 7, NULL},
    {"PSPT_INT_BIG", PSCOM_ENV_INT, "7", 0, 0, "4294967296", 1, 7, NULL},
    {"PSPT_UINT_OK", PSCOM_ENV_UINT, "3", 0, 0, "4000000000", 0, 4000000000LL, NULL},
    {"PSPT_UINT_NEG", PSCOM_ENV_UINT, "3", 0, 0, "-1", 1, 3, NULL},
    {"PSPT_UINT_BIG", PSCOM_ENV_UINT, "3", 0, 0, "4294967296", 1, 3, NULL},
    {"PSPT_SIZE_PLAIN", PSCOM_ENV_SIZE, "1k", 0, 0, "4096", 0, 4096, NULL},
    {"PSPT_SIZE_DEFLT", PSCOM_ENV_SIZE, "1k", 0, 0, NULL, 0, 1024, NULL},
    {"PSPT_SIZE_KLOW", PSCOM_ENV_SIZE, "1k", 0, 0, "64k", 0, 65536, NULL},
    {"PSPT_SIZE_KUP", PSCOM_ENV_SIZE, "1k", 0, 0, "64K", 0, 65536, NULL},
    {"PSPT_SIZE_M", PSCOM_ENV_SIZE, "1k", 0, 0, "1M", 0, 1048576, NULL},
    {"PSPT_SIZE_G", PSCOM_ENV_SIZE, "1k", 0, 0, "2G", 0, 2147483648LL, NULL},
    {"PSPT_SIZE_INF", PSCOM_ENV_SIZE, "1k", 0, 0, "inf", 0, SZMAX, NULL},
    {"PSPT_SIZE_ZERO", PSCOM_ENV_SIZE, "1k", 0, 0, "0", 0, 0, NULL},
    {"PSPT_SIZE_BADSUF", PSCOM_ENV_SIZE, "1k", 0, 0, "12q", 1, 1024, NULL},
    {"PSPT_SIZE_NEG", PSCOM_ENV_SIZE, "1k", 0, 0, "-5", 1, 1024, NULL},
    {"PSPT_SIZE_SPNEG", PSCOM_ENV_SIZE, "1k", 0, 0, " -5", 1, 1024, NULL},
    {"PSPT_SIZE_WORD", PSCOM_ENV_SIZE, "1k", 0, 0, "big", 1, 1024, NULL},
    {"PSPT_SIZE_FRAC", PSCOM_ENV_SIZE, "1k", 0, 0, "1.5M", 1, 1024, NULL},
    {"PSPT_SIZE_OVERFLOW", PSCOM_ENV_SIZE, "1k", 0, 0, "99999999999999999999", 1, 1024, NULL},
    {"PSPT_SIZE_OVERMUL", PSCOM_ENV_SIZE, "1k", 0, 0, "17179869184G", 1, 1024, NULL},
    {"PSPT_OPT_UNSET", PSCOM_ENV_SIZE_OPT, "", 0, 0, NULL, 0, NOVAL, NULL},
    {"PSPT_OPT_EMPTY", PSCOM_ENV_SIZE_OPT, "", 0, 0, "", 0, NOVAL, NULL},
    {"PSPT_OPT_SET", PSCOM_ENV_SIZE_OPT, "", 0, 0, "64k", 0, 65536, NULL},
    {"PSPT_OPT_ZERO", PSCOM_ENV_SIZE_OPT, "", 0, 0, "0", 0, 0, NULL},
    {"PSPT_OPT_INF", PSCOM_ENV_SIZE_OPT, "", 0, 0, "inf", 0, SZMAX, NULL},
    {"PSPT_OPT_BAD", PSCOM_ENV_SIZE_OPT, "", 0, 0, "12q", 1, NOVAL, NULL},
    {"PSPT_OPT_DEFLT", PSCOM_ENV_SIZE_OPT, "1M", 0, 0, NULL, 0, 1048576, NULL},
    {"PSPT_BOOL_YES", PSCOM_ENV_BOOL, "0", 0, 0, "yes", 0, 1, NULL},
    {"PSPT_BOOL_ONWORD", PSCOM_ENV_BOOL, "0", 0, 0, "on", 0, 1, NULL},
    {"PSPT_BOOL_TRUE", PSCOM_ENV_BOOL, "0", 0, 0, "true", 0, 1, NULL},
    {"PSPT_BOOL_DIGIT", PSCOM_ENV_BOOL, "0", 0, 0, "1", 0, 1, NULL},
    {"PSPT_BOOL_NO", PSCOM_ENV_BOOL, "1", 0, 0, "no", 0, 0, NULL},
    {"PSPT_BOOL_OFF", PSCOM_ENV_BOOL, "1", 0, 0, "off", 0, 0, NULL},
    {"PSPT_BOOL_FALSE", PSCOM_ENV_BOOL, "1", 0, 0, "false", 0, 0, NULL},
    {"PSPT_BOOL_ZERO", PSCOM_ENV_BOOL, "1", 0, 0, "0", 0, 0, NULL},
    {"PSPT_BOOL_MAYBE", PSCOM_ENV_BOOL, "1", 0, 0, "maybe", 1, 1, NULL},
    {"PSPT_BOOL_TWO", PSCOM_ENV_BOOL, "0", 0, 0, "2", 1, 0, NULL},
    {"PSPT_STR_SET", PSCOM_ENV_STR, "dflt", 0, 0, "hello world", 0, 0, "hello world"},
    {"PSPT_STR_UNSET", PSCOM_ENV_STR, "dflt", 0, 0, NULL, 0, 0, "dflt"},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* targets, one per row */
static union {
    int i;
    unsigned u;
    size_t z;
    pscom_env_size_opt_t o;
    const char *s;
} targets[NCASES];
static pscom_env_row_t rows[NCASES + 1];

static long long target_value(size_t i)
{
    switch (cases[i].type) {
    case PSCOM_ENV_INT:
    case PSCOM_ENV_BOOL:
        return targets[i].i;
    case PSCOM_ENV_UINT:
        return targets[i].u;
    case PSCOM_ENV_SIZE:
        return targets[i].z == SIZE_MAX ? SZMAX : (long long)targets[i].z;
    case PSCOM_ENV_SIZE_OPT:
        if (!targets[i].o.set)
            return NOVAL;
        return targets[i].o.value == SIZE_MAX ? SZMAX : (long long)targets[i].o.value;
    case PSCOM_ENV_STR:
        break;
    }
    return 0;
}

static void test_register(void)
{
    char *log, *printed, *printed_help;
    size_t plen = 0, hlen = 0;
    FILE *f;

    for (size_t i = 0; i < NCASES; i++) {
        const env_case_t *c = &cases[i];
        rows[i] = (pscom_env_row_t){
            c->name, c->deflt, "help text of a test row", c->type, &targets[i], c->min, c->max};
        if (c->value)
            setenv(c->name, c->value, 1);
        else
            unsetenv(c->name);
    }
    /* PSP_DEBUG_PARAM=1 was set before pscom_init (main): variables set are logged */
    tu_capture_begin();
    pscom_env_register("pscom-test", rows);
    log = tu_capture_end();

    for (size_t i = 0; i < NCASES; i++) {
        const env_case_t *c = &cases[i];
        int lines = tu_count_lines(log, c->name, NULL);
        if (c->type == PSCOM_ENV_STR) {
            ok(targets[i].s && !strcmp(targets[i].s, c->want_str), "%s=%s%s%s gives \"%s\"",
               c->name, c->value ? "\"" : "(unset)", c->value ? c->value : "", c->value ? "\"" : "",
               c->want_str);
        } else if (!is(target_value(i), c->want, "%s=%s%s%s gives %lld%s", c->name,
                       c->value ? "\"" : "(unset)", c->value ? c->value : "", c->value ? "\"" : "",
                       c->want, c->bad ? " (the default)" : "")) {
            diag("  log: %s", log);
        }
        if (c->bad) {
            /* one warning naming variable and value (the PSP_DEBUG_PARAM=1 line that logs
               the value in use names the default, not the bad value) */
            if (!is(tu_count_lines(log, c->name, c->value), 1,
                    "%s=\"%s\": one warning naming variable and value", c->name, c->value))
                diag("  log: %s", log);
        }
        if (c->value)
            ok(lines >= 1 + c->bad && lines <= 2 + c->bad,
               "%s: PSP_DEBUG_PARAM=1 logs the variable set (%d lines)", c->name, lines);
        else
            is(lines, 0, "%s: not logged while unset (PSP_DEBUG_PARAM=1)", c->name);
    }
    free(log);

    /* pscom_env_register keeps the table: printing lists every row with its value */
    f = open_memstream(&printed, &plen);
    pscom_env_print(f, 0);
    fclose(f);
    f = open_memstream(&printed_help, &hlen);
    pscom_env_print(f, 1);
    fclose(f);
    {
        int all = 1;
        for (size_t i = 0; i < NCASES; i++)
            if (tu_count_lines(printed, cases[i].name, NULL) != 1) {
                diag("  %s is not on one line of pscom_env_print()", cases[i].name);
                all = 0;
            }
        ok(all, "pscom_env_print lists every registered row once");
        ok(tu_count_lines(printed, "PSPT_SIZE_M", "1048576") +
                   tu_count_lines(printed, "PSPT_SIZE_M", "1M") ==
               1,
           "pscom_env_print shows the value in use");
        ok(tu_count_lines(printed, "PSPT_INT_HIGH", "101") == 0,
           "pscom_env_print shows the default, not a rejected value");
        ok(tu_count_lines(printed, "PSP_DEBUG", NULL) >= 1 &&
               tu_count_lines(printed, "PSP_SHM", NULL) >= 1 &&
               tu_count_lines(printed, "PSP_TCP", NULL) >= 1 &&
               tu_count_lines(printed, "PSP_RENDEZVOUS", NULL) >= 1 &&
               tu_count_lines(printed, "PSP_SHM_RENDEZVOUS", NULL) >= 1 &&
               tu_count_lines(printed, "PSP_TCP_RENDEZVOUS", NULL) >= 1,
           "pscom_env_print lists the library's own rows");
        ok(!strstr(printed, "help text of a test row") &&
               strstr(printed_help, "help text of a test row"),
           "help text only with with_help");
    }
    char v[32] = "";
    ok(pscom_env_get("PSPT_BOOL_YES", v, sizeof(v)) == 0 && !strcmp(v, "1"),
       "pscom_env_get: a boolean set to 'yes' reads 1 (got '%s')", v);
    ok(pscom_env_get("PSPT_SIZE_M", v, sizeof(v)) == 0 && !strcmp(v, "1048576"),
       "pscom_env_get: the value in use (got '%s')", v);
    ok(pscom_env_get("PSP_DEBUG", v, sizeof(v)) == 0, "pscom_env_get: the library's own rows");
    ok(pscom_env_get("PSPT_NO_SUCH_ROW", v, sizeof(v)) == -1, "pscom_env_get: -1 for a name no "
                                                              "table has");
    free(printed);
    free(printed_help);
}

/* ---- plugin thresholds and priorities, one fresh process per environment ------------------ */

typedef struct plugin_case {
    const char *env[4];              /* "NAME=value" */
    size_t shm_rndv, tcp_rndv;       /* 0: not checked */
    int shm_prio, tcp_prio;          /* -1: not checked */
    int tcp_first;                   /* tcp precedes shm in selection order */
    const char *warn_var, *warn_val; /* one warning expected */
} plugin_case_t;

static const plugin_case_t pcases[] = {
    {{"PSP_RENDEZVOUS=64k"}, 65536, 65536, -1, -1, 0, NULL, NULL},
    {{"PSP_RENDEZVOUS=64k", "PSP_SHM_RENDEZVOUS=8k"}, 8192, 65536, -1, -1, 0, NULL, NULL},
    {{"PSP_RENDEZVOUS=inf"}, SIZE_MAX, SIZE_MAX, -1, -1, 0, NULL, NULL},
    /* empty: no value, the transports' own thresholds */
    {{"PSP_RENDEZVOUS="}, 8192, 1048576, -1, -1, 0, NULL, NULL},
    {{"PSP_TCP_RENDEZVOUS=1M", "PSP_SHM_RENDEZVOUS=4096"}, 4096, 1048576, -1, -1, 0, NULL, NULL},
    {{"PSP_SHM=0"}, 0, 0, 0, -1, 0, NULL, NULL},
    {{"PSP_TCP=0"}, 0, 0, -1, 0, 0, NULL, NULL},
    {{"PSP_TCP=1000"}, 0, 0, -1, 1000, 1, NULL, NULL},
    {{"PSP_RENDEZVOUS=lots"}, 8192, 1048576, -1, -1, 0, "PSP_RENDEZVOUS", "lots"},
    {{"PSP_SHM_RENDEZVOUS=-1"}, 0, 0, -1, -1, 0, "PSP_SHM_RENDEZVOUS", "-1"},
    {{"PSP_DEBUG=abc"}, 0, 0, -1, -1, 0, "PSP_DEBUG", "abc"},
    {{"PSP_DEBUG=77"}, 0, 0, -1, -1, 0, "PSP_DEBUG", "77"},
    {{"PSP_SHM=maybe"}, 0, 0, -1, -1, 0, "PSP_SHM", "maybe"},
};

static int plugin_child(void *arg)
{
    const plugin_case_t *c = arg;
    char label[256] = "";
    pscom_plugin_info_t info, shm = {.priority = 0}, tcp = {.priority = 0};
    int ishm = -1, itcp = -1;
    char *log;
    pscom_err_t rc;

    for (int i = 0; i < 4 && c->env[i]; i++) {
        char *kv = strdup(c->env[i]);
        char *eq = strchr(kv, '=');
        *eq = 0;
        setenv(kv, eq + 1, 1);
        snprintf(label + strlen(label), sizeof(label) - strlen(label), "%s%s", i ? " " : "",
                 c->env[i]);
        free(kv);
    }
    unsetenv("PSP_DEBUG_PARAM");
    tu_capture_begin();
    rc = pscom_init(PSCOM_VERSION);
    for (int i = 0; i < 64 && pscom_plugin_info(i, &info) == 0; i++) {
        if (!strcmp(info.name, "shm")) {
            shm = info;
            ishm = i;
        }
        if (!strcmp(info.name, "tcp")) {
            tcp = info;
            itcp = i;
        }
    }
    log = tu_capture_end();
    is(rc, PSCOM_SUCCESS, "%s: pscom_init", label);
    if (!ok(ishm >= 0 && itcp >= 0, "%s: shm and tcp listed", label)) {
        free(log);
        return 0;
    }
    if (c->shm_rndv)
        ok(shm.rendezvous == c->shm_rndv, "%s: shm rendezvous %zu (is %zu)", label, c->shm_rndv,
           shm.rendezvous);
    if (c->tcp_rndv)
        ok(tcp.rendezvous == c->tcp_rndv, "%s: tcp rendezvous %zu (is %zu)", label, c->tcp_rndv,
           tcp.rendezvous);
    if (c->shm_prio >= 0)
        is(shm.user_prio, c->shm_prio, "%s: shm user_prio", label);
    if (c->tcp_prio >= 0)
        is(tcp.user_prio, c->tcp_prio, "%s: tcp user_prio", label);
    if (c->tcp_first)
        ok(itcp < ishm, "%s: tcp comes before shm", label);
    if (c->warn_var) {
        int warn = tu_count_lines(log, c->warn_var, c->warn_val);
        if (!is(warn, 1, "%s: exactly one warning names %s and '%s'", label, c->warn_var,
                c->warn_val))
            diag("  log: %s", log);
    } else {
        if (!ok(!*log, "%s: no warning", label))
            diag("  log: %s", log);
    }
    free(log);
    return 0;
}

int main(void)
{
    pid_t me = getpid();

    for (size_t i = 0; i < sizeof(pcases) / sizeof(pcases[0]); i++)
        tu_run(1, plugin_child, (void *)&pcases[i], NULL);

    tu_hygiene_begin();
    setenv("PSP_DEBUG_PARAM", "1", 1);
    if (!is(pscom_init(PSCOM_VERSION), PSCOM_SUCCESS, "pscom_init"))
        return tap_done();
    test_register();
    pscom_cleanup();
    tu_hygiene_check(&me, 1);
    return tap_done();
}
