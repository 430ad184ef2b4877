/*
 * pscom_info - show what libpscom would do here: version, transports in selection order, and
 * (with -c) every PSP_* configuration variable with its current value.
 *
 *   pscom_info            version and transports
 *   pscom_info -c         ... plus all configuration variables and their values
 *   pscom_info -c -d      ... plus the help text of each variable
 *   pscom_info --version  version only
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pscom.h"

static const char *prog = "pscom_info";

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s [-c [-d]] [--version] [-h]\n"
            "Show the libpscom version, the transports in selection order and, with -c, the\n"
            "configuration (PSP_* environment variables).\n"
            "\n"
            "  -c, --config   print every configuration variable with its current value\n"
            "  -d, --doc      with -c: add the help text of each variable (implies -c)\n"
            "      --version  print the library version and exit\n"
            "  -h, --help     show this help and exit\n",
            prog);
}

/* Exit status 2 for usage errors, as most command line tools do. */
static void usage_error(void)
{
    fprintf(stderr, "Try '%s --help' for more information.\n", prog);
    exit(2);
}

/* Rendezvous threshold as the PSP_* size syntax would write it: "inf", "64k", "1000". */
static const char *size_str(size_t n, char *buf, size_t len)
{
    static const char suffix[] = "kMGT";
    int i = -1;

    if (n == SIZE_MAX) {
        snprintf(buf, len, "inf");
        return buf;
    }
    while (n && n % 1024 == 0 && i < 3) {
        n /= 1024;
        i++;
    }
    if (i < 0)
        snprintf(buf, len, "%zu", n);
    else
        snprintf(buf, len, "%zu%c", n, suffix[i]);
    return buf;
}

static void print_plugins(void)
{
    pscom_plugin_info_t info;
    int i;

    printf("transports in selection order:\n");
    printf("  %-8s %8s  %-14s %-9s %10s  %s\n", "name", "priority", "user priority", "available",
           "rendezvous", "status");
    for (i = 0; pscom_plugin_info(i, &info) == 0; i++) {
        char var[32], rdv[32];
        size_t k;

        /* Show the variable that sets the user priority so that users know what to change. */
        snprintf(var, sizeof(var), "PSP_%s=%d", info.name, info.user_prio);
        for (k = 4; var[k] && var[k] != '='; k++) {
            if (var[k] >= 'a' && var[k] <= 'z')
                var[k] = (char)(var[k] - 'a' + 'A');
        }
        printf("  %-8s %8d  %-14s %-9s %10s  %s\n", info.name, info.priority, var,
               info.available ? "yes" : "no", size_str(info.rendezvous, rdv, sizeof(rdv)),
               info.status);
    }
    if (i == 0)
        printf("  (none)\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", no_argument, NULL, 'c'},
        {"doc", no_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int config = 0, doc = 0, version_only = 0;
    pscom_err_t err;
    int c;

    /* getopt's own messages ("unrecognized option '--foo'") are clear; we add the hint. */
    while ((c = getopt_long(argc, argv, "cdh", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config = 1;
            break;
        case 'd':
            config = doc = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            version_only = 1;
            break;
        default:
            usage_error();
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        usage_error();
    }

    /* Initialise first: the plugin list and the configuration table are filled by init. */
    err = pscom_init(PSCOM_VERSION);
    if (err != PSCOM_SUCCESS) {
        fprintf(stderr, "%s: pscom_init(API %d.%d) failed: %s\n", prog, PSCOM_VERSION_MAJOR,
                PSCOM_VERSION_MINOR, pscom_err_str(err));
        return 1;
    }

    if (version_only) {
        printf("%s (libpscom) %s, API %d.%d\n", prog, pscom_version_str(), PSCOM_VERSION_MAJOR,
               PSCOM_VERSION_MINOR);
        return 0;
    }

    printf("libpscom %s (API %d.%d)\n", pscom_version_str(), PSCOM_VERSION_MAJOR,
           PSCOM_VERSION_MINOR);
    /* Plugins before the configuration: loading a plugin registers its variables. */
    print_plugins();
    if (config) {
        printf("\nconfiguration:\n");
        pscom_env_print(stdout, doc);
    }
    fflush(stdout);
    if (ferror(stdout)) {
        fprintf(stderr, "%s: error writing output\n", prog);
        return 1;
    }
    return 0;
}
