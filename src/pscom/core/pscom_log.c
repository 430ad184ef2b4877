/* Log lines: "<PSP:r0000003> text" (the socket name, or the pid before a name is set). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wordexp.h>
#include "pscom_priv.h"

int pscom_debug_level = 1;
static FILE *log_out;
static char log_name[PSCOM_NAME_MAX + 16];

void pscom_log_set_name(const char *name)
{
    snprintf(log_name, sizeof(log_name), "%s", name);
}

const char *pscom_log_prefix_name(void)
{
    if (!log_name[0])
        snprintf(log_name, sizeof(log_name), "p%d", (int)getpid());
    return log_name;
}

void pscom_log_init(void)
{
    pscom_debug_level = pscom_config.debug;
    if (pscom_config.debug_out && *pscom_config.debug_out && !log_out) {
        wordexp_t w;
        const char *path = pscom_config.debug_out;
        if (wordexp(path, &w, WRDE_NOCMD) == 0 && w.we_wordc == 1) {
            log_out = fopen(w.we_wordv[0], "a");
            wordfree(&w);
        } else {
            log_out = fopen(path, "a");
        }
        if (!log_out) {
            log_out = stderr;
            pscom_log(1, "warning: PSP_DEBUG_OUT='%s' cannot be opened; logging to stderr", path);
        } else {
            setvbuf(log_out, NULL, _IOLBF, 0);
        }
    }
}

static void vlog(const char *fmt, va_list ap)
{
    FILE *out = log_out ? log_out : stderr;
    char line[1024];
    int n = snprintf(line, sizeof(line), "<PSP:%s> ", pscom_log_prefix_name());
    vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    size_t len = strlen(line);
    line[len] = '\n';
    /* one write per line keeps lines of concurrent ranks from interleaving */
    if (fwrite(line, 1, len + 1, out) != len + 1)
        return;
    fflush(out);
}

void pscom_log(int level, const char *fmt, ...)
{
    (void)level;
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

void pscom_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
    abort();
}

PSCOM_API void pscom_set_debug(int level)
{
    pscom_debug_level = level;
    pscom_config.debug = level;
}
