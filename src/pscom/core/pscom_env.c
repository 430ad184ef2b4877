/*
 * Configuration as data: every PSP_* variable is a row {name, default, help, type, target}.
 * The same rows drive parsing, pscom_info -c [-d] and PSP_DEBUG_PARAM logging.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "pscom_priv.h"

#define MAX_TABLES 32

static struct {
    const char *group;
    const pscom_env_row_t *table;
} tables[MAX_TABLES];
static int n_tables;

int pscom_env_is_set(const char *name)
{
    return getenv(name) != NULL;
}

/* "64k", "1M", "2G", "inf" -> bytes */
static int parse_size(const char *s, size_t *out)
{
    if (!strcasecmp(s, "inf") || !strcasecmp(s, "infinity")) {
        *out = SIZE_MAX;
        return 0;
    }
    while (isspace((unsigned char)*s))
        s++;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *s == '-' || *s == '+')
        return -1;
    unsigned long long mul = 1;
    switch (tolower((unsigned char)*end)) {
    case 'k':
        mul = 1ULL << 10;
        end++;
        break;
    case 'm':
        mul = 1ULL << 20;
        end++;
        break;
    case 'g':
        mul = 1ULL << 30;
        end++;
        break;
    case 't':
        mul = 1ULL << 40;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'b' || *end == 'B' || ((*end == 'i') && (end[1] == 'B' || end[1] == 'b')))
        end += (*end == 'i') ? 2 : 1;
    if (*end != '\0')
        return -1;
    if (v > SIZE_MAX / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int parse_long(const char *s, long *out)
{
    errno = 0;
    char *end;
    long v = strtol(s, &end, 0);
    if (errno || end == s)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"1", "yes", "y", "on", "true", "enable", NULL};
    static const char *no[] = {"0", "no", "n", "off", "false", "disable", NULL};
    for (int i = 0; yes[i]; i++)
        if (!strcasecmp(s, yes[i]))
            return *out = 1, 0;
    for (int i = 0; no[i]; i++)
        if (!strcasecmp(s, no[i]))
            return *out = 0, 0;
    return -1;
}

static const char *type_name(pscom_env_type_t t)
{
    switch (t) {
    case PSCOM_ENV_INT:
        return "an integer";
    case PSCOM_ENV_UINT:
        return "a non-negative integer";
    case PSCOM_ENV_SIZE:
        return "a size (e.g. 4096, 64k, 1M, inf)";
    case PSCOM_ENV_SIZE_OPT:
        return "a size (e.g. 4096, 64k, 1M, inf) or empty";
    case PSCOM_ENV_BOOL:
        return "a boolean (0/1, yes/no, on/off)";
    case PSCOM_ENV_STR:
        return "a string";
    }
    return "?";
}

/* Parse text into the row's target. Returns 0, -1 if malformed, -2 if out of range. */
static int set_value(const pscom_env_row_t *row, const char *text)
{
    long l;
    switch (row->type) {
    case PSCOM_ENV_INT:
    case PSCOM_ENV_UINT:
        if (parse_long(text, &l))
            return -1;
        if (row->type == PSCOM_ENV_UINT && (l < 0 || l > (long)UINT_MAX))
            return -2;
        if (row->type == PSCOM_ENV_INT && (l < INT_MIN || l > INT_MAX))
            return -2;
        if (row->min < row->max && (l < row->min || l > row->max))
            return -2;
        if (row->type == PSCOM_ENV_INT)
            *(int *)row->target = (int)l;
        else
            *(unsigned *)row->target = (unsigned)l;
        return 0;
    case PSCOM_ENV_SIZE:
        return parse_size(text, (size_t *)row->target);
    case PSCOM_ENV_SIZE_OPT: {
        pscom_env_size_opt_t *o = row->target;
        o->set = 0;
        if (!*text)
            return 0; /* empty: no value */
        if (parse_size(text, &o->value))
            return -1;
        o->set = 1;
        return 0;
    }
    case PSCOM_ENV_BOOL:
        return parse_bool(text, (int *)row->target);
    case PSCOM_ENV_STR:
        *(const char **)row->target = text;
        return 0;
    }
    return -1;
}

static void format_size(size_t v, char *buf, size_t len)
{
    if (v == SIZE_MAX)
        snprintf(buf, len, "inf");
    else
        snprintf(buf, len, "%zu", v);
}

static void format_value(const pscom_env_row_t *row, char *buf, size_t len)
{
    switch (row->type) {
    case PSCOM_ENV_INT:
        snprintf(buf, len, "%d", *(int *)row->target);
        break;
    case PSCOM_ENV_UINT:
        snprintf(buf, len, "%u", *(unsigned *)row->target);
        break;
    case PSCOM_ENV_BOOL:
        snprintf(buf, len, "%d", *(int *)row->target);
        break;
    case PSCOM_ENV_SIZE:
        format_size(*(size_t *)row->target, buf, len);
        break;
    case PSCOM_ENV_SIZE_OPT: {
        const pscom_env_size_opt_t *o = row->target;
        if (o->set)
            format_size(o->value, buf, len);
        else
            buf[0] = '\0';
        break;
    }
    case PSCOM_ENV_STR: {
        const char *s = *(const char **)row->target;
        snprintf(buf, len, "%s", s ? s : "");
        break;
    }
    }
}

void pscom_env_parse_table(const pscom_env_row_t *table)
{
    for (const pscom_env_row_t *row = table; row->name; row++) {
        if (set_value(row, row->deflt ? row->deflt : "") != 0)
            pscom_fatal("internal: default '%s' of %s does not parse", row->deflt, row->name);
        const char *val = getenv(row->name);
        if (!val)
            continue;
        int err = set_value(row, val);
        if (err == -1) {
            set_value(row, row->deflt);
            pscom_log(1, "warning: %s='%s' is not %s; using the default '%s'", row->name, val,
                      type_name(row->type), row->deflt);
        } else if (err) {
            set_value(row, row->deflt);
            if (row->min < row->max)
                pscom_log(1, "warning: %s='%s' is out of range [%d, %d]; using the default '%s'",
                          row->name, val, row->min, row->max, row->deflt);
            else
                pscom_log(1, "warning: %s='%s' is out of range; using the default '%s'", row->name,
                          val, row->deflt);
        }
    }
}

static void log_params(const char *group, const pscom_env_row_t *table)
{
    for (const pscom_env_row_t *row = table; row->name; row++) {
        int set = pscom_env_is_set(row->name);
        if (pscom_config.debug_param >= 2 || (pscom_config.debug_param >= 1 && set)) {
            char val[128];
            format_value(row, val, sizeof(val));
            pscom_log(0, "%s %s = %s (%s)", group, row->name, val, set ? "environment" : "default");
        }
    }
}

PSCOM_API void pscom_env_register(const char *group, const pscom_env_row_t *table)
{
    pscom_lock();
    for (int i = 0; i < n_tables; i++)
        if (tables[i].table == table) {
            pscom_unlock();
            return;
        }
    if (n_tables == MAX_TABLES)
        pscom_fatal("too many configuration tables");
    tables[n_tables].group = group;
    tables[n_tables].table = table;
    n_tables++;
    pscom_env_parse_table(table);
    log_params(group, table);
    pscom_unlock();
}

PSCOM_API int pscom_env_get(const char *name, char *buf, size_t len)
{
    int found = -1;
    pscom_lock();
    for (int t = 0; t < n_tables && found; t++)
        for (const pscom_env_row_t *row = tables[t].table; row->name && found; row++)
            if (!strcmp(row->name, name)) {
                format_value(row, buf, len);
                found = 0;
            }
    pscom_unlock();
    return found;
}

PSCOM_API void pscom_env_print(FILE *out, int with_help)
{
    pscom_lock();
    pscom_plugins_activate_all(); /* a deferred plugin's rows exist once it is loaded */
    for (int t = 0; t < n_tables; t++) {
        if (t == 0 || strcmp(tables[t].group, tables[t - 1].group))
            fprintf(out, "# %s\n", tables[t].group);
        for (const pscom_env_row_t *row = tables[t].table; row->name; row++) {
            char val[128];
            format_value(row, val, sizeof(val));
            fprintf(out, "%-28s = %-12s # default %s%s\n", row->name, val,
                    row->deflt && *row->deflt ? row->deflt : "\"\"",
                    pscom_env_is_set(row->name) ? ", set in environment" : "");
            if (with_help && row->help)
                fprintf(out, "    %s\n", row->help);
        }
    }
    pscom_unlock();
}
