/*
 * psnamd - a software Network Attached Memory: serves memory regions over pscom (tcp, ucp, ...)
 * to the nam windows of MPI jobs and to the psnam tool.
 *
 *   psnamd --listen ADDR:PORT --memory SIZE [--backing DIR] [--foreground] [--log FILE]
 *
 * The daemon: options, start-up, the progress loop. What it serves (regions, clients and their
 * requests) is psnamd_serve.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "pscom.h"
#include "psnamd_serve.h"

static struct {
    char listen[64];
    uint64_t memory;
    const char *backing;
    int foreground;
    const char *log;
} opt;

static volatile sig_atomic_t stop_signal;

#define SPIN_NS  2000000ull /* poll this long after the last request before blocking */
#define YIELD_NS 20000ull   /* and from this long on, yield between the polls */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- main ---- */

static uint64_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    uint64_t mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1ull << 30;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1ull << 40;
        end++;
        break;
    }
    if (end == s || *end || !v || v > UINT64_MAX / mul)
        return 0;
    return v * mul;
}

static void usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: psnamd --listen ADDR:PORT --memory SIZE[k|M|G|T] [--backing DIR]\n"
            "              [--foreground] [--log FILE]\n");
    exit(rc);
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            usage(0);
        else if (!strcmp(a, "--foreground"))
            opt.foreground = 1;
        else if (v && !strcmp(a, "--listen") && ++i)
            snprintf(opt.listen, sizeof(opt.listen), "%s", v);
        else if (v && !strcmp(a, "--memory") && ++i) {
            if (!(opt.memory = parse_size(v))) {
                fprintf(stderr, "psnamd: --memory %s: not a size (e.g. 512M, 4G)\n", v);
                exit(2);
            }
        } else if (v && !strcmp(a, "--backing") && ++i)
            opt.backing = v;
        else if (v && !strcmp(a, "--log") && ++i)
            opt.log = v;
        else {
            fprintf(stderr, "psnamd: unknown or incomplete option %s\n", a);
            usage(2);
        }
    }
    if (!opt.listen[0] || !opt.memory)
        usage(2);
}

static void on_signal(int sig)
{
    stop_signal = sig;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    if (opt.log) {
        int fd = open(opt.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0) {
            fprintf(stderr, "psnamd: --log %s: %s\n", opt.log, strerror(errno));
            return 1;
        }
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    setvbuf(stderr, NULL, _IOLBF, 0);
    psnamd_serve_init(opt.memory, opt.backing);
    /* into the background before pscom starts (its threads and descriptors stay with the
       process that uses them); the parent prints where the daemon listens, then leaves */
    int ready[2] = {-1, -1};
    if (!opt.foreground) {
        if (pipe(ready) != 0)
            return 1;
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid > 0) {
            close(ready[1]);
            char line[128] = "";
            ssize_t n = read(ready[0], line, sizeof(line) - 1);
            if (n <= 0) {
                fprintf(stderr, "psnamd: the daemon did not start (see %s)\n",
                        opt.log ? opt.log : "its log: use --log FILE");
                return 1;
            }
            printf("%s pid %d\n", line, (int)pid);
            return 0;
        }
        close(ready[0]);
        setsid();
        int null = open("/dev/null", O_RDWR);
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        if (!opt.log)
            dup2(null, STDERR_FILENO);
        close(null);
    }
    if (pscom_init(PSCOM_VERSION) != PSCOM_SUCCESS) {
        psnamd_log("pscom_init failed");
        return 1;
    }
    pscom_socket_t *s = psnamd_serve_socket();
    pscom_socket_set_name(s, "psnamd");
    if (pscom_listen_addr(s, opt.listen) != PSCOM_SUCCESS) {
        psnamd_log("cannot listen on %s: %s", opt.listen, strerror(errno));
        return 1;
    }
    const char *ep = pscom_socket_get_ep_str(s);
    int eplen = (int)strcspn(ep, "@");
    if (ready[1] >= 0) {
        if (write(ready[1], ep, (size_t)eplen) != eplen)
            return 1;
        close(ready[1]);
    } else {
        printf("%.*s pid %d\n", eplen, ep, (int)getpid());
        fflush(stdout);
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    psnamd_log("listening on %.*s, --memory %llu bytes (%llu in use)%s%s", eplen, ep,
               (unsigned long long)opt.memory, (unsigned long long)psnamd_serve_used(),
               opt.backing ? ", --backing " : "", opt.backing ? opt.backing : "");
    /* poll while requests come (a client waits for each answer: sleeping between them would
       add the wake-up to every round trip), block once idle for a while; in between yield
       the CPU to whoever wants it (the kernel's network work for a stream of large puts) */
    uint64_t idle_since = now_ns();
    while (!stop_signal) {
        if (pscom_progress(0)) {
            idle_since = now_ns();
        } else {
            uint64_t idle = now_ns() - idle_since;
            if (idle > SPIN_NS) {
                if (pscom_progress(200))
                    idle_since = now_ns();
            } else if (idle > YIELD_NS) {
                sched_yield();
            }
        }
        psnamd_serve_poll();
    }
    psnamd_serve_end(stop_signal == SIGTERM ? "SIGTERM" : "signal");
    pscom_close_socket(NULL);
    pscom_cleanup();
    return 0;
}
