/*
 * psgwd - the gateway daemon: forwards pscom connections between ranks whose networks do not
 * meet (src/pscom/plugins/gw, protocol in gw_proto.h). A pscom program: the connections to the
 * ranks ("carriers") take pscom's transports (tcp, ucp) like any other.
 *
 *   psgwd --listen ADDR:PORT[,ADDR:PORT] --key FILE [--key FILE...] [--threads N]
 *         [--foreground] [--log FILE]
 *   psgwd --new-key FILE
 *
 * Only ranks that prove a job key given with --key are served (challenge-response, gw_proto.h),
 * and a tunnel only joins ranks of the same key. --threads N runs N worker processes that share
 * the listening ports (SO_REUSEPORT); a rank's carrier and its tunnels stay in one worker.
 *
 * The daemon: options, keys, workers, the progress loop. What it forwards, and how: the
 * forwarder, psgwd_fwd.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include "gw_proto.h"
#include "pscom.h"
#include "psgwd_fwd.h"

#define LISTEN_MAX  4
#define WORKERS_MAX 64

static struct {
    char listen[LISTEN_MAX][64];
    int n_listen;
    const char *key_files[PSGWD_KEYS_MAX];
    int n_keys;
    int threads, foreground;
    const char *log;
} opt = {.threads = 1};

static volatile sig_atomic_t stop_signal;

/* ---- start-up ---- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: psgwd --listen ADDR:PORT[,ADDR:PORT] --key FILE [--key FILE...]\n"
            "             [--threads N] [--foreground] [--log FILE]\n"
            "       psgwd --new-key FILE\n"
            "Forwards pscom connections between ranks of jobs that present one of the keys.\n");
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--foreground")) {
            opt.foreground = 1;
        } else if (!v) {
            fprintf(stderr, "psgwd: %s needs a value\n", a);
            exit(2);
        } else if (!strcmp(a, "--new-key")) {
            char why[256];
            if (pscom_key_create(v, why, sizeof(why)) != 0) {
                fprintf(stderr, "psgwd: --new-key %s: %s\n", v, why);
                exit(1);
            }
            exit(0);
        } else if (!strcmp(a, "--listen")) {
            char list[512], *save = NULL;
            snprintf(list, sizeof(list), "%s", v);
            for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                if (opt.n_listen == LISTEN_MAX) {
                    fprintf(stderr, "psgwd: at most %d listen addresses\n", LISTEN_MAX);
                    exit(2);
                }
                snprintf(opt.listen[opt.n_listen++], sizeof(opt.listen[0]), "%s", w);
            }
            i++;
        } else if (!strcmp(a, "--key")) {
            if (opt.n_keys == PSGWD_KEYS_MAX) {
                fprintf(stderr, "psgwd: at most %d keys\n", PSGWD_KEYS_MAX);
                exit(2);
            }
            opt.key_files[opt.n_keys++] = v;
            i++;
        } else if (!strcmp(a, "--threads")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > WORKERS_MAX) {
                fprintf(stderr, "psgwd: --threads %s: want 1..%d\n", v, WORKERS_MAX);
                exit(2);
            }
            opt.threads = (int)n;
            i++;
        } else if (!strcmp(a, "--log")) {
            opt.log = v;
            i++;
        } else {
            fprintf(stderr, "psgwd: unknown option %s\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (!opt.n_listen || !opt.n_keys) {
        fprintf(stderr, "psgwd: %s\n",
                !opt.n_listen ? "--listen is required"
                              : "--key is required (psgwd --new-key FILE "
                                "makes one)");
        usage(stderr);
        exit(2);
    }
    for (int k = 0; k < opt.n_keys; k++) {
        char why[256];
        uint8_t key[GW_KEY_MAX];
        size_t len;
        if (pscom_key_load(opt.key_files[k], key, sizeof(key), &len, why, sizeof(why)) != 0) {
            fprintf(stderr, "psgwd: --key %s: %s\n", opt.key_files[k], why);
            exit(1);
        }
        psgwd_key_add(key, len);
    }
}

/* "ip:port" with port 0 taken by several workers: reserve one port for all of them */
static void reserve_ports(void)
{
    for (int i = 0; i < opt.n_listen; i++) {
        char ip[64];
        snprintf(ip, sizeof(ip), "%s", opt.listen[i]);
        char *colon = strrchr(ip, ':');
        struct sockaddr_in sa = {.sin_family = AF_INET};
        if (!colon || inet_pton(AF_INET, (*colon = '\0', ip), &sa.sin_addr) != 1) {
            fprintf(stderr, "psgwd: --listen %s: want ADDR:PORT\n", opt.listen[i]);
            exit(2);
        }
        if (atoi(colon + 1) != 0 || opt.threads == 1)
            continue;
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        socklen_t sl = sizeof(sa);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
            fprintf(stderr, "psgwd: --listen %s: %s\n", opt.listen[i], strerror(errno));
            exit(1);
        }
        snprintf(opt.listen[i], sizeof(opt.listen[i]), "%s:%d", ip, ntohs(sa.sin_port));
        /* fd stays open (not listening): the port stays ours */
    }
}

static void on_signal(int sig)
{
    stop_signal = sig;
}

/* One worker: pscom, the listeners, the forwarding loop. Writes its endpoints to ready. */
static int worker(int ready_fd)
{
    if (pscom_init(PSCOM_VERSION) != PSCOM_SUCCESS) {
        psgwd_log("pscom_init failed");
        return 1;
    }
    char eps[LISTEN_MAX * 64] = "";
    for (int i = 0; i < opt.n_listen; i++) {
        pscom_socket_t *s = psgwd_socket();
        pscom_socket_set_name(s, "psgwd");
        if (pscom_listen_addr(s, opt.listen[i]) != PSCOM_SUCCESS) {
            psgwd_log("cannot listen on %s: %s", opt.listen[i], strerror(errno));
            return 1;
        }
        const char *ep = pscom_socket_get_ep_str(s);
        snprintf(eps + strlen(eps), sizeof(eps) - strlen(eps), "%s%.*s", i ? "," : "",
                 (int)strcspn(ep, "@"), ep);
    }
    if (psgwd_start(eps) != 0) {
        psgwd_log("out of memory");
        return 1;
    }
    if (ready_fd >= 0) {
        if (write(ready_fd, eps, strlen(eps) + 1) < 0)
            return 1;
        close(ready_fd);
    } else { /* in the foreground: the line a script waits for */
        printf("%s pid %d\n", eps, (int)getpid());
        fflush(stdout);
    }
    psgwd_log("listening on %s, %d job key%s", eps, opt.n_keys, opt.n_keys > 1 ? "s" : "");
    while (!stop_signal) {
        pscom_progress(200);
        psgwd_poll();
    }
    psgwd_stop(stop_signal == SIGTERM ? "SIGTERM" : "signal");
    pscom_close_socket(NULL);
    pscom_cleanup();
    return 0;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    if (opt.log) {
        int fd = open(opt.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0) {
            fprintf(stderr, "psgwd: --log %s: %s\n", opt.log, strerror(errno));
            return 1;
        }
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    setvbuf(stderr, NULL, _IOLBF, 0);
    reserve_ports();
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return 1;
    if (!opt.foreground) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid > 0) { /* report where the daemon listens, then leave it */
            close(pipefd[1]);
            char eps[LISTEN_MAX * 64] = "";
            ssize_t n = read(pipefd[0], eps, sizeof(eps) - 1);
            if (n <= 0) {
                fprintf(stderr, "psgwd: the daemon did not start (see %s)\n",
                        opt.log ? opt.log : "its log: use --log FILE");
                return 1;
            }
            printf("%s pid %d\n", eps, (int)pid);
            return 0;
        }
        setsid();
        int null = open("/dev/null", O_RDWR);
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        if (!opt.log)
            dup2(null, STDERR_FILENO);
        close(null);
    }
    close(pipefd[0]);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (opt.threads == 1)
        return worker(opt.foreground ? -1 : pipefd[1]);
    /* N workers sharing the ports; this process waits for them and passes signals on */
    pid_t pids[WORKERS_MAX];
    int ready[2];
    if (pipe(ready) != 0)
        return 1;
    for (int w = 0; w < opt.threads; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            close(ready[0]);
            close(pipefd[1]);
            if (opt.foreground)
                dup2(STDERR_FILENO, STDOUT_FILENO); /* one line from the parent, not N */
            return worker(ready[1]);
        }
    }
    close(ready[1]);
    char eps[LISTEN_MAX * 64] = "";
    int listening = 0;
    for (int w = 0; w < opt.threads; w++) { /* each worker writes its line once listening */
        char tmp[LISTEN_MAX * 64];
        size_t got = 0;
        while (got < sizeof(tmp) - 1) {
            ssize_t n = read(ready[0], tmp + got, 1);
            if (n <= 0 || tmp[got] == '\0')
                break;
            got++;
        }
        tmp[got] = '\0';
        if (got) {
            listening++;
            snprintf(eps, sizeof(eps), "%s", tmp);
        }
    }
    if (listening < opt.threads) {
        fprintf(stderr, "psgwd: %d of %d workers failed to start (see the log)\n",
                opt.threads - listening, opt.threads);
        for (int w = 0; w < opt.threads; w++)
            kill(pids[w], SIGTERM);
        return 1;
    }
    if (!opt.foreground) {
        if (write(pipefd[1], eps, strlen(eps) + 1) < 0)
            return 1;
    } else {
        printf("%s pid %d (%d workers)\n", eps, (int)getpid(), opt.threads);
        fflush(stdout);
    }
    close(pipefd[1]);
    int status = 0, alive = opt.threads;
    while (alive) {
        pid_t p = waitpid(-1, &status, 0);
        if (p < 0 && errno == EINTR) {
            if (stop_signal)
                for (int w = 0; w < opt.threads; w++)
                    kill(pids[w], SIGTERM);
            continue;
        }
        if (p < 0)
            break;
        alive--;
    }
    return 0;
}
