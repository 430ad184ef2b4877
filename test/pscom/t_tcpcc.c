/*
 * t_tcpcc.c - PSP_TCP_CONGESTION: the congestion control of tcp connections.
 *
 * Two ranks over tcp (PSP_SHM=0 PSP_UCP=0) exchange a message; each then looks at the TCP
 * sockets it holds connected (its pscom connections: the tests talk through pipes) and reads
 * their TCP_CONGESTION. Modes:
 *   default  unset: cubic, or reno where cubic is not offered or (not root) not allowed
 *   reno     PSP_TCP_CONGESTION=reno
 *   list     PSP_TCP_CONGESTION=bogus,reno: the first name that works, no warning
 *   system   PSP_TCP_CONGESTION= (empty): the system's net.ipv4.tcp_congestion_control
 *   bogus    PSP_TCP_CONGESTION=bogus: one warning per process that names it, the system's
 *            default stays, the messages still go
 */
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

static const char *mode;
static char default_cc[16]; /* what the default list gives here */
static char logbase[] = "/tmp/t_tcpcc.log.XXXXXX";

static void read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f) {
        if (!fgets(buf, (int)len, f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
}

/* Connected TCP sockets of this process: how many, and how many use congestion control cc. */
static void count_sockets(const char *cc, int *n, int *with_cc, char *seen, size_t seen_len)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    *n = *with_cc = 0;
    seen[0] = '\0';
    while (d && (e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        char name[32];
        socklen_t len = sizeof(name);
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        if (e->d_name[0] == '.' || fd == dirfd(d))
            continue;
        if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0 ||
            getpeername(fd, (struct sockaddr *)&peer, &plen) != 0)
            continue; /* not a TCP socket, or not connected (the listener) */
        name[len < sizeof(name) ? len : sizeof(name) - 1] = '\0';
        (*n)++;
        *with_cc += !strcmp(name, cc);
        if (strlen(seen) + strlen(name) + 2 < seen_len) {
            strcat(seen, " ");
            strcat(seen, name);
        }
    }
    if (d)
        closedir(d);
}

static int child(void *arg)
{
    char logname[sizeof(logbase) + 8], system_cc[64], seen[256];
    const char *want;
    int n, with_cc;
    (void)arg;

    snprintf(logname, sizeof(logname), "%s.r%d", logbase, tu_rank);
    setenv("PSP_DEBUG_OUT", logname, 1);
    setenv("PSP_DEBUG", "1", 1);
    setenv("PSP_SHM", "0", 1);
    setenv("PSP_UCP", "0", 1);
    setenv("PSP_TCP", "1", 1);
    read_line("/proc/sys/net/ipv4/tcp_congestion_control", system_cc, sizeof(system_cc));
    if (!strcmp(mode, "default")) {
        unsetenv("PSP_TCP_CONGESTION");
        want = default_cc;
    } else if (!strcmp(mode, "reno")) {
        setenv("PSP_TCP_CONGESTION", "reno", 1);
        want = "reno";
    } else if (!strcmp(mode, "list")) {
        setenv("PSP_TCP_CONGESTION", "bogus,reno", 1);
        want = "reno";
    } else if (!strcmp(mode, "system")) {
        setenv("PSP_TCP_CONGESTION", "", 1);
        want = system_cc;
    } else {
        setenv("PSP_TCP_CONGESTION", "bogus", 1);
        want = system_cc;
    }

    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_DIRECT);
    pscom_connection_t *con = cons[1 - tu_rank];
    pscom_request_t *r = tu_post_recv(con, NULL, 70000, TU_XH, 1);
    pscom_request_t *s = tu_post_send(con, 1, 1, 70000, TU_XH);
    pscom_wait(s);
    pscom_wait(r);
    ok(pscom_req_successful(s) && tu_recv_good(r, 1, 1 - tu_rank, 1, 70000, TU_XH),
       "a message each way over %s", con->transport);
    ok(!strcmp(con->transport, "tcp"), "the connection is tcp (%s)", con->transport);
    tu_req_free(s);
    tu_req_free(r);

    count_sockets(want, &n, &with_cc, seen, sizeof(seen));
    ok(n >= 1 && with_cc == n, "%s: the %d connected TCP socket(s) use %s (seen:%s)", mode, n, want,
       seen);

    tu_barrier();
    pscom_close_socket(sock);
    pscom_cleanup();
    free(cons);
    tu_strv_free(eps);

    char *log = tu_slurp(logname);
    unlink(logname);
    int warnings = tu_count_lines(log, "PSP_TCP_CONGESTION", "bogus");
    if (!strcmp(mode, "bogus"))
        is(warnings, 1, "one warning names PSP_TCP_CONGESTION=bogus");
    else
        is(tu_count_lines(log, "PSP_TCP_CONGESTION", NULL), 0, "no warning");
    fputs(log, stderr);
    free(log);
    return 0;
}

int main(int argc, char **argv)
{
    char avail[512];
    mode = argc > 1 ? argv[1] : "default";
    if (strcmp(mode, "default") && strcmp(mode, "reno") && strcmp(mode, "list") &&
        strcmp(mode, "system") && strcmp(mode, "bogus")) {
        fprintf(stderr, "usage: %s [default|reno|list|system|bogus]\n", argv[0]);
        return 2;
    }
    /* reno is built into every kernel and always allowed; cubic nearly always offered, but a
       user other than root may only pick what tcp_allowed_congestion_control lists */
    char allowed[512];
    read_line("/proc/sys/net/ipv4/tcp_available_congestion_control", avail, sizeof(avail));
    read_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control", allowed, sizeof(allowed));
    int cubic_ok = tu_count_lines(avail, "cubic", NULL) &&
                   (geteuid() == 0 || tu_count_lines(allowed, "cubic", NULL));
    strcpy(default_cc, cubic_ok ? "cubic" : "reno");
    int fd = mkstemp(logbase);
    if (fd >= 0) {
        close(fd);
        unlink(logbase);
    }
    tu_run(2, child, NULL, NULL);
    return tap_done();
}
