/*
 * testutil.c - TAP output and the shared helpers of the pscom tests (see testutil.h).
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- TAP ----------------------------------------------------------------------------------- */

int tu_rank = -1;
int tu_nranks = 0;

static int tap_count;
static int tap_fail;
static int up_fd = -1; /* child: records to the parent */
static FILE *down_f;   /* child: answers of collectives */

static void die(const char *what)
{
    fprintf(stderr, "testutil: %s: %s\n", what, strerror(errno));
    fflush(stderr);
    _exit(99);
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("write to the test parent");
        buf += n;
        len -= (size_t)n;
    }
}

/* child: one record "<type><text>\n", newlines in text replaced */
static void send_record(char type, const char *text)
{
    size_t len = strlen(text);
    char *line = malloc(len + 3);
    if (!line)
        die("malloc");
    line[0] = type;
    for (size_t i = 0; i < len; i++)
        line[i + 1] = text[i] == '\n' ? ' ' : text[i];
    line[len + 1] = '\n';
    line[len + 2] = 0;
    write_all(up_fd, line, len + 2);
    free(line);
}

static void print_result(int cond, const char *prefix, const char *text)
{
    tap_count++;
    if (!cond)
        tap_fail++;
    printf("%s %d - %s%s\n", cond ? "ok" : "not ok", tap_count, prefix, text);
    fflush(stdout);
}

static void print_diag(const char *prefix, const char *text)
{
    /* one "# " line per line of text */
    for (;;) {
        const char *nl = strchr(text, '\n');
        int len = nl ? (int)(nl - text) : (int)strlen(text);
        printf("# %s%.*s\n", prefix, len, text);
        if (!nl || !nl[1])
            break;
        text = nl + 1;
    }
    fflush(stdout);
}

static void vresult(int cond, const char *fmt, va_list ap)
{
    char text[1024];
    vsnprintf(text, sizeof(text), fmt, ap);
    if (up_fd >= 0) {
        tap_count++;
        if (!cond)
            tap_fail++;
        send_record(cond ? 'Y' : 'N', text);
    } else {
        print_result(cond, "", text);
    }
}

void tap_diag(const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (up_fd >= 0)
        send_record('D', text);
    else
        print_diag("", text);
}

int tap_ok_(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vresult(cond, fmt, ap);
    va_end(ap);
    if (!cond)
        tap_diag("  failed at %s:%d", file, line);
    return cond;
}

int tap_is_(long long got, long long want, const char *file, int line, const char *fmt, ...)
{
    int cond = got == want;
    va_list ap;
    va_start(ap, fmt);
    vresult(cond, fmt, ap);
    va_end(ap);
    if (!cond)
        tap_diag("  failed at %s:%d: got %lld, expected %lld", file, line, got, want);
    return cond;
}

void tap_skip(const char *why, const char *fmt, ...)
{
    char text[1024];
    size_t len;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    len = strlen(text);
    snprintf(text + len, sizeof(text) - len, " # SKIP %s", why);
    if (up_fd >= 0) {
        tap_count++;
        send_record('Y', text);
    } else {
        print_result(1, "", text);
    }
}

int tap_done(void)
{
    printf("1..%d\n", tap_count);
    fflush(stdout);
    return tap_fail ? 1 : 0;
}

/* ---- process groups ------------------------------------------------------------------------ */

typedef struct child {
    pid_t pid;
    int up;    /* parent reads records */
    int down;  /* parent writes answers */
    char *buf; /* partial record */
    size_t len, cap;
    int eof;
    int waiting;   /* in a collective */
    char *contrib; /* its contribution */
    char phase[256];
    int status;
} child_t;

static long tu_env_long(const char *name, long deflt)
{
    const char *s = getenv(name);
    char *end;
    long v;
    if (!s || !*s)
        return deflt;
    v = strtol(s, &end, 0);
    return *end ? deflt : v;
}

double tu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void handle_record(child_t *c, int rank, char *line)
{
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "[r%d] ", rank);
    switch (line[0]) {
    case 'Y':
    case 'N':
        print_result(line[0] == 'Y', prefix, line + 1);
        break;
    case 'D':
        print_diag(prefix, line + 1);
        break;
    case 'P':
        snprintf(c->phase, sizeof(c->phase), "%s", line + 1);
        break;
    case 'C':
        free(c->contrib);
        c->contrib = strdup(line + 1);
        c->waiting = 1;
        break;
    default:
        print_result(0, prefix, "malformed record from child");
    }
}

static void read_child(child_t *c, int rank)
{
    char chunk[4096];
    ssize_t n = read(c->up, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
        return;
    if (n <= 0) {
        c->eof = 1;
        c->waiting = 0;
        close(c->up);
        return;
    }
    if (c->len + (size_t)n + 1 > c->cap) {
        c->cap = (c->len + (size_t)n + 1) * 2;
        c->buf = realloc(c->buf, c->cap);
        if (!c->buf)
            die("realloc");
    }
    memcpy(c->buf + c->len, chunk, (size_t)n);
    c->len += (size_t)n;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        size_t used;
        if (!nl)
            break;
        *nl = 0;
        handle_record(c, rank, c->buf);
        used = (size_t)(nl - c->buf) + 1;
        memmove(c->buf, nl + 1, c->len - used);
        c->len -= used;
    }
}

/* Answer a collective once every live child has joined it. */
static void maybe_answer(child_t *ch, int n)
{
    int alive = 0, waiting = 0;
    size_t size = 1;
    char *answer, *p;
    for (int i = 0; i < n; i++) {
        alive += !ch[i].eof;
        waiting += !ch[i].eof && ch[i].waiting;
        size += (ch[i].waiting && !ch[i].eof ? strlen(ch[i].contrib) : 0) + 2;
    }
    if (!alive || waiting != alive)
        return;
    answer = p = malloc(size);
    if (!answer)
        die("malloc");
    for (int i = 0; i < n; i++) {
        const char *s = ch[i].waiting && !ch[i].eof ? ch[i].contrib : "";
        p += sprintf(p, "=%s\n", s);
    }
    for (int i = 0; i < n; i++) {
        if (ch[i].eof)
            continue;
        ch[i].waiting = 0;
        /* a child that died meanwhile gives EPIPE; its EOF is seen later */
        for (size_t off = 0, len = strlen(answer); off < len;) {
            ssize_t w = write(ch[i].down, answer + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    }
    free(answer);
}

static const char *status_str(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "status 0x%x", status);
    return buf;
}

void tu_run(int n, tu_child_fn fn, void *arg, const int *expect_sig)
{
    child_t *ch = calloc((size_t)n, sizeof(*ch));
    pid_t *pids = calloc((size_t)n, sizeof(*pids));
    pid_t parent = getpid();
    double timeout = (double)tu_env_long("T_TIMEOUT", 45);
    double deadline;
    int timed_out = 0;

    if (!ch || !pids)
        die("calloc");
    signal(SIGPIPE, SIG_IGN);
    tu_hygiene_begin();

    for (int r = 0; r < n; r++) {
        int up[2], down[2];
        if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
            die("pipe2");
        fflush(stdout);
        fflush(stderr);
        ch[r].pid = fork();
        if (ch[r].pid < 0)
            die("fork");
        if (ch[r].pid == 0) {
            int rc;
            signal(SIGPIPE, SIG_DFL);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(98);
            for (int i = 0; i < r; i++) {
                close(ch[i].up);
                close(ch[i].down);
            }
            close(up[0]);
            close(down[1]);
            up_fd = up[1];
            down_f = fdopen(down[0], "r");
            if (!down_f)
                die("fdopen");
            dup2(2, 1); /* stdout carries TAP: only the parent writes it */
            tu_rank = r;
            tu_nranks = n;
            tap_count = tap_fail = 0;
            rc = fn(arg);
            fflush(stdout);
            fflush(stderr);
            exit(rc);
        }
        close(up[1]);
        close(down[0]);
        ch[r].up = up[0];
        ch[r].down = down[1];
        pids[r] = ch[r].pid;
        snprintf(ch[r].phase, sizeof(ch[r].phase), "start");
    }

    deadline = tu_now() + timeout;
    for (;;) {
        struct pollfd *pfd = calloc((size_t)n, sizeof(*pfd));
        int *idx = calloc((size_t)n, sizeof(*idx));
        int np = 0, rc;
        double left = deadline - tu_now();
        for (int r = 0; r < n; r++) {
            if (ch[r].eof)
                continue;
            pfd[np].fd = ch[r].up;
            pfd[np].events = POLLIN;
            idx[np++] = r;
        }
        if (!np) {
            free(pfd);
            free(idx);
            break;
        }
        if (left <= 0) {
            timed_out = 1;
            free(pfd);
            free(idx);
            break;
        }
        rc = poll(pfd, (nfds_t)np, left > 1000 ? 1000000 : (int)(left * 1000) + 1);
        if (rc < 0 && errno != EINTR)
            die("poll");
        for (int i = 0; rc > 0 && i < np; i++)
            if (pfd[i].revents)
                read_child(&ch[idx[i]], idx[i]);
        maybe_answer(ch, n);
        free(pfd);
        free(idx);
    }

    if (timed_out) {
        int quit = getenv("PSP_SIGQUIT") != NULL;
        print_result(0, "", "all ranks finished within T_TIMEOUT");
        for (int r = 0; r < n; r++) {
            if (ch[r].eof)
                continue;
            printf("# rank %d (pid %d) still running after %.0f s; it was at: %s\n", r,
                   (int)ch[r].pid, timeout, ch[r].phase);
            if (quit)
                kill(ch[r].pid, SIGQUIT); /* pscom dumps its state to stderr */
        }
        fflush(stdout);
        if (quit)
            sleep(2);
        for (int r = 0; r < n; r++)
            if (!ch[r].eof)
                kill(ch[r].pid, SIGKILL);
    }

    for (int r = 0; r < n; r++) {
        char buf[128];
        int want = expect_sig ? expect_sig[r] : 0;
        while (waitpid(ch[r].pid, &ch[r].status, 0) < 0 && errno == EINTR)
            ;
        if (!ch[r].eof)
            close(ch[r].up);
        close(ch[r].down);
        if (want) {
            if (!ok(WIFSIGNALED(ch[r].status) && WTERMSIG(ch[r].status) == want,
                    "[r%d] died of signal %d as planned", r, want))
                diag("  rank %d: %s", r, status_str(ch[r].status, buf, sizeof(buf)));
        } else {
            if (!ok(WIFEXITED(ch[r].status) && WEXITSTATUS(ch[r].status) == 0,
                    "[r%d] exited with status 0", r))
                diag("  rank %d: %s; last phase: %s", r, status_str(ch[r].status, buf, sizeof(buf)),
                     ch[r].phase);
        }
        free(ch[r].buf);
        free(ch[r].contrib);
    }
    tu_hygiene_check(pids, n);
    free(ch);
    free(pids);
}

/* set once this process uses pscom: waiting in a collective then keeps pscom progressing */
static int pscom_active;

static void progress_idle(void *arg)
{
    (void)arg;
    pscom_progress(1);
}

static char **collective(const char *s, void (*idle)(void *), void *arg)
{
    char **v;
    if (up_fd < 0) {
        fprintf(stderr, "testutil: collective outside tu_run()\n");
        exit(97);
    }
    send_record('C', s);
    if (!idle && pscom_active)
        idle = progress_idle;
    while (idle) {
        struct pollfd pfd = {.fd = fileno(down_f), .events = POLLIN};
        if (poll(&pfd, 1, 0) > 0)
            break;
        idle(arg);
    }
    v = calloc((size_t)tu_nranks + 1, sizeof(*v));
    if (!v)
        die("calloc");
    for (int i = 0; i < tu_nranks; i++) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t len = getline(&line, &cap, down_f);
        if (len < 2 || line[0] != '=')
            die("lost the test parent");
        line[len - 1] = 0;
        memmove(line, line + 1, (size_t)len - 1);
        v[i] = line;
    }
    return v;
}

char **tu_allgather(const char *s)
{
    return collective(s, NULL, NULL);
}

void tu_strv_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

void tu_barrier(void)
{
    tu_strv_free(collective("", NULL, NULL));
}

void tu_barrier_while(void (*idle)(void *), void *arg)
{
    tu_strv_free(collective("", idle, arg));
}

void tu_phase(const char *fmt, ...)
{
    if (up_fd < 0)
        return; /* not a child of tu_run: nobody to tell */
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    send_record('P', text);
}

/* ---- environment ---------------------------------------------------------------------------- */

static const char *tu_expect_transport(void)
{
    const char *t = getenv("T_TRANSPORT");
    return t && *t ? t : NULL;
}

size_t tu_rndv_threshold(void)
{
    long v = tu_env_long("T_RNDV", 0);
    return v > 0 ? (size_t)v : 0;
}

/* ---- pscom setup ---------------------------------------------------------------------------- */

int tu_accept_count;
int tu_error_count;

static void tu_con_accept(pscom_connection_t *con)
{
    TU_CON(con)->accepted++;
    tu_accept_count++;
}

static void tu_con_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    TU_CON(con)->errors++;
    TU_CON(con)->last_op = op;
    TU_CON(con)->last_err = err;
    tu_error_count++;
}

static void tu_socket_ops(pscom_socket_t *sock)
{
    sock->ops.con_accept = tu_con_accept;
    sock->ops.con_error = tu_con_error;
}

pscom_socket_t *tu_open_socket_named(const char *suffix)
{
    pscom_socket_t *sock;
    char name[PSCOM_NAME_MAX];
    pscom_err_t rc = pscom_init(PSCOM_VERSION);

    if (rc != PSCOM_SUCCESS) {
        ok(0, "pscom_init: %s", pscom_err_str(rc));
        exit(2);
    }
    pscom_active = 1;
    /* as the MPI netmod says it: transports then take the protocols of a crowded node */
    if (tu_env_long("T_OVERSUBSCRIBED", 0))
        pscom_set_oversubscribed(1);
    sock = pscom_open_socket(0, sizeof(tu_con_data_t));
    if (!sock) {
        ok(0, "pscom_open_socket");
        exit(2);
    }
    tu_socket_ops(sock);
    snprintf(name, sizeof(name), "r%d%s", tu_rank < 0 ? 0 : tu_rank, suffix);
    pscom_socket_set_name(sock, name);
    rc = pscom_listen(sock, PSCOM_ANYPORT);
    if (rc != PSCOM_SUCCESS || !pscom_socket_get_ep_str(sock)) {
        ok(0, "pscom_listen: %s", pscom_err_str(rc));
        exit(2);
    }
    return sock;
}

pscom_socket_t *tu_open_socket(void)
{
    return tu_open_socket_named("");
}

char **tu_exchange_eps(pscom_socket_t *sock)
{
    return tu_allgather(pscom_socket_get_ep_str(sock));
}

pscom_connection_t **tu_connect_all(pscom_socket_t *sock, char **eps, int flags)
{
    pscom_connection_t **cons = calloc((size_t)tu_nranks, sizeof(*cons));
    if (!cons)
        die("calloc");
    tu_phase("connecting to all (flags %d)", flags);
    for (int i = 1; i < tu_nranks; i++) {
        int p = (tu_rank + i) % tu_nranks;
        pscom_err_t rc;
        if (!eps[p][0])
            continue;
        cons[p] = pscom_open_connection(sock);
        rc = pscom_connect(cons[p], eps[p], flags);
        if (rc != PSCOM_SUCCESS) {
            ok(0, "pscom_connect to rank %d (%s): %s", p, eps[p], pscom_err_str(rc));
            exit(2);
        }
    }
    return cons;
}

void tu_check_transport(pscom_connection_t *con, const char *what)
{
    const char *want = tu_expect_transport();
    if (!want) {
        tap_skip("T_TRANSPORT not set", "%s uses transport %s", what, con->transport);
        return;
    }
    if (!ok(con->transport && strcmp(con->transport, want) == 0, "%s uses transport %s", what,
            want))
        diag("  it uses %s (%s)", con->transport ? con->transport : "(null)", pscom_con_str(con));
}

/* ---- requests ------------------------------------------------------------------------------- */

static void tu_io_done(pscom_request_t *req)
{
    TU_REQ(req)->io_done_calls++;
}

int tu_accept_tag(pscom_request_t *req, pscom_connection_t *con, pscom_header_net_t *header)
{
    tu_xh_t xh;
    tu_req_user_t *u = TU_REQ(req);
    (void)con;
    if (u->want_tag < 0 && u->want_seq < 0)
        return 1;
    if (header->xheader_len < sizeof(xh))
        return 0;
    memcpy(&xh, pscom_header_xheader(header), sizeof(xh));
    return (u->want_tag < 0 || xh.tag == (uint64_t)u->want_tag) &&
           (u->want_seq < 0 || xh.seq == (uint64_t)u->want_seq);
}

void tu_wait_arrival(pscom_connection_t *con, int64_t tag, int64_t seq)
{
    pscom_request_t *probe = tu_req(TU_XH);
    probe->connection = con;
    probe->ops.recv_accept = tu_accept_tag;
    TU_REQ(probe)->want_tag = tag;
    TU_REQ(probe)->want_seq = seq;
    while (!pscom_iprobe(probe))
        pscom_progress(10);
    tu_req_free(probe);
}

pscom_request_t *tu_req(size_t max_xheader)
{
    pscom_request_t *req = pscom_request_create(max_xheader, sizeof(tu_req_user_t));
    if (!req)
        die("pscom_request_create");
    TU_REQ(req)->want_tag = -1;
    TU_REQ(req)->want_seq = -1;
    req->ops.io_done = tu_io_done;
    return req;
}

void tu_req_free(pscom_request_t *req)
{
    if (!req)
        return;
    free(TU_REQ(req)->owned);
    pscom_request_free(req);
}

pscom_request_t *tu_post_send(pscom_connection_t *con, uint32_t tag, uint64_t seq, size_t len,
                              size_t xh_len)
{
    pscom_request_t *req = tu_req(xh_len);
    tu_xh_t xh = {.tag = tag, .src = (uint32_t)tu_rank, .seq = seq};
    size_t head = xh_len >= TU_XH ? TU_XH : 0;
    void *buf = malloc(len ? len : 1);
    if (!buf)
        die("malloc");
    memcpy(req->xheader, &xh, head);
    tu_fill((char *)req->xheader + head, xh_len - head, tu_seed(xh_len, seq, ~xh.src));
    req->xheader_len = xh_len;
    tu_fill(buf, len, tu_seed(len, seq, xh.src));
    req->data = buf;
    req->data_len = len;
    req->connection = con;
    TU_REQ(req)->owned = buf;
    pscom_post_send(req);
    return req;
}

int tu_send_now(pscom_connection_t *con, uint32_t tag, uint64_t seq, size_t len, size_t xh_len)
{
    unsigned char xhb[PSCOM_XHEADER_MAX];
    tu_xh_t xh = {.tag = tag, .src = (uint32_t)tu_rank, .seq = seq};
    size_t head = xh_len >= TU_XH ? TU_XH : 0;
    void *buf = malloc(len ? len : 1);
    if (!buf || xh_len > sizeof(xhb))
        die("tu_send_now");
    memcpy(xhb, &xh, head);
    tu_fill(xhb + head, xh_len - head, tu_seed(xh_len, seq, ~xh.src));
    tu_fill(buf, len, tu_seed(len, seq, xh.src));
    int sent = pscom_send_now(con, xhb, xh_len, buf, len);
    free(buf);
    return sent;
}

pscom_request_t *tu_post_recv(pscom_connection_t *con, pscom_socket_t *sock, size_t len,
                              size_t max_xh, int64_t want_tag)
{
    pscom_request_t *req = tu_req(max_xh);
    void *buf = malloc(len ? len : 1);
    if (!buf)
        die("malloc");
    req->data = buf;
    req->data_len = len;
    req->connection = con;
    req->socket = con ? NULL : sock;
    TU_REQ(req)->owned = buf;
    TU_REQ(req)->want_tag = want_tag;
    req->ops.recv_accept = want_tag >= 0 ? tu_accept_tag : NULL;
    pscom_post_recv(req);
    return req;
}

int tu_recv_good(pscom_request_t *req, long tag, long src, long long seq, size_t len, size_t xh_len)
{
    int good = 1;
    long long bad;
    tu_xh_t xh = {.tag = (uint32_t)tag, .src = (uint32_t)src, .seq = (uint64_t)seq};
    size_t head = xh_len >= TU_XH ? TU_XH : 0;

    if (!pscom_req_successful(req)) {
        diag("  request state %s", pscom_req_state_str(req->state));
        good = 0;
    }
    if (TU_REQ(req)->io_done_calls != 1) {
        diag("  io_done called %d times", TU_REQ(req)->io_done_calls);
        good = 0;
    }
    if (req->xheader != pscom_header_xheader(&req->header)) {
        diag("  req->xheader is not pscom_header_xheader(&req->header)");
        good = 0;
    }
    if (req->xheader_len != xh_len || req->header.xheader_len != xh_len) {
        diag("  xheader_len %zu (header: %u), expected %zu", req->xheader_len,
             (unsigned)req->header.xheader_len, xh_len);
        return 0;
    }
    if (req->data_len != len || req->header.data_len != len) {
        diag("  data_len %zu (header: %llu), expected %zu", req->data_len,
             (unsigned long long)req->header.data_len, len);
        good = 0;
    }
    if (head) {
        memcpy(&xh, req->xheader, sizeof(xh));
        if ((tag >= 0 && xh.tag != (uint32_t)tag) || (src >= 0 && xh.src != (uint32_t)src) ||
            (seq >= 0 && xh.seq != (uint64_t)seq)) {
            diag("  got tag %u src %u seq %llu, expected tag %ld src %ld seq %lld", xh.tag, xh.src,
                 (unsigned long long)xh.seq, tag, src, seq);
            good = 0;
        }
    }
    bad = tu_verify((char *)req->xheader + head, xh_len - head, tu_seed(xh_len, xh.seq, ~xh.src));
    if (bad >= 0) {
        diag("  xheader differs at byte %lld of %zu", bad + (long long)head, xh_len);
        good = 0;
    }
    bad = tu_verify(req->data, len < req->data_len ? len : req->data_len,
                    tu_seed(len, xh.seq, xh.src));
    if (bad >= 0) {
        diag("  data differs at byte %lld of %zu", bad, len);
        good = 0;
    }
    return good;
}

static pscom_request_t **tu_req_list(pscom_request_t **reqs, size_t n)
{
    pscom_request_t **list = calloc(n + 1, sizeof(*list));
    if (!list)
        die("calloc");
    memcpy(list, reqs, n * sizeof(*list));
    return list;
}

void tu_wait_all(pscom_request_t **reqs, size_t n)
{
    pscom_request_t **list = tu_req_list(reqs, n);
    pscom_wait_all(list);
    free(list);
}

/* ---- data patterns -------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t tu_seed(uint64_t len, uint64_t seq, uint64_t src)
{
    return mix64(len * 0x9e3779b97f4a7c15ULL ^ mix64(seq + 0x632be59bd9b4e019ULL) ^ (src << 48));
}

/* word i of the pattern: cheap, distinct per position and seed */
static inline uint64_t pattern_word(uint64_t seed, uint64_t i)
{
    return mix64(seed + i * 0x9e3779b97f4a7c15ULL);
}

void tu_fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = pattern_word(seed, i / 8);
        memcpy(p + i, &w, 8);
    }
    if (i < len) {
        uint64_t w = pattern_word(seed, i / 8);
        memcpy(p + i, &w, len - i);
    }
}

long long tu_verify(const void *buf, size_t len, uint64_t seed)
{
    const unsigned char *p = buf;
    size_t i = 0;
    for (; i < len; i += 8) {
        uint64_t w = pattern_word(seed, i / 8);
        size_t n = len - i < 8 ? len - i : 8;
        if (memcmp(p + i, &w, n)) {
            const unsigned char *wb = (const unsigned char *)&w;
            for (size_t k = 0; k < n; k++)
                if (p[i + k] != wb[k])
                    return (long long)(i + k);
        }
    }
    return -1;
}

/* ---- resources ------------------------------------------------------------------------------ */

int tu_count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

int tu_ep_addr(const char *ep, char *ip, size_t iplen, int *port)
{
    const char *at = strchr(ep, '@');
    const char *end = at ? at : ep + strlen(ep);
    const char *colon = NULL;
    char *e;
    long p;
    for (const char *s = ep; s < end; s++)
        if (*s == ':')
            colon = s;
    if (!colon || (size_t)(colon - ep) >= iplen)
        return -1;
    memcpy(ip, ep, (size_t)(colon - ep));
    ip[colon - ep] = 0;
    p = strtol(colon + 1, &e, 10);
    if (e != end || p <= 0 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

int tu_ep_sockaddr(const char *ep, struct sockaddr_in *sa)
{
    char ip[64];
    int port;
    if (tu_ep_addr(ep, ip, sizeof(ip), &port))
        return -1;
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

int tu_listen_local(int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4) ||
        getsockname(fd, (struct sockaddr *)&sa, &sl)) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

int tu_dial(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (const struct sockaddr *)sa, sizeof(*sa))) {
        int err = errno;
        close(fd);
        errno = err;
        fd = -1;
    }
    return fd;
}

int tu_send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int cap_saved = -1;
static FILE *cap_file;

void tu_capture_begin(void)
{
    fflush(stderr);
    cap_file = tmpfile();
    if (!cap_file)
        die("tmpfile");
    cap_saved = dup(2);
    dup2(fileno(cap_file), 2);
}

char *tu_capture_end(void)
{
    long len;
    char *text;
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    cap_saved = -1;
    len = lseek(fileno(cap_file), 0, SEEK_END);
    text = calloc((size_t)len + 1, 1);
    if (!text)
        die("calloc");
    if (len > 0 && pread(fileno(cap_file), text, (size_t)len, 0) != len)
        die("pread");
    fclose(cap_file);
    cap_file = NULL;
    return text;
}

static int word_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* does line[0..len) contain word, not as part of a longer word? */
static int has_word(const char *line, size_t len, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = line; (p = memmem(p, len - (size_t)(p - line), word, wl)); p++) {
        if ((p == line || !word_char(p[-1])) && (p + wl == line + len || !word_char(p[wl])))
            return 1;
    }
    return 0;
}

char *tu_slurp(const char *path)
{
    char *text = calloc(1, 1 << 20);
    if (!text)
        die("calloc");
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(text, 1, (1 << 20) - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    return text;
}

int tu_count_lines(const char *text, const char *word, const char *also)
{
    int n = 0;
    while (text && *text) {
        const char *nl = strchr(text, '\n');
        size_t len = nl ? (size_t)(nl - text) : strlen(text);
        if (has_word(text, len, word) && (!also || has_word(text, len, also)))
            n++;
        text += len + (nl ? 1 : 0);
    }
    return n;
}

static char **shm_before;

static char **list_dev_shm(void)
{
    size_t n = 0, cap = 16;
    char **v = calloc(cap, sizeof(*v));
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n + 2 > cap) {
            cap *= 2;
            v = realloc(v, cap * sizeof(*v));
        }
        v[n++] = strdup(e->d_name);
        v[n] = NULL;
    }
    if (d)
        closedir(d);
    return v;
}

/* Files of other MPIs that may run beside the tests (benchmarks against Debian's MPICH and
   Open MPI): libpscom itself never creates anything in /dev/shm. */
static int foreign_shm_file(const char *name)
{
    static const char *const prefixes[] = {"mpich_shar_tmp", "vader_segment", "ucx_", "sem.mpich",
                                           "ompi",           "openmpi",       "psm2", NULL};
    for (const char *const *p = prefixes; *p; p++)
        if (!strncmp(name, *p, strlen(*p)))
            return 1;
    return 0;
}

void tu_hygiene_begin(void)
{
    tu_strv_free(shm_before);
    shm_before = list_dev_shm();
}

void tu_hygiene_check(const pid_t *pids, int n)
{
    char **now = list_dev_shm();
    int added = 0, left = 0;
    FILE *f;
    char line[512];

    for (char **p = now; *p; p++) {
        int known = foreign_shm_file(*p);
        for (char **q = shm_before; q && *q && !known; q++)
            known = !strcmp(*p, *q);
        if (!known) {
            if (!added++)
                diag("  new in /dev/shm:");
            diag("    %s", *p);
        }
    }
    ok(added == 0, "no new files in /dev/shm");
    tu_strv_free(now);

    f = fopen("/proc/sysvipc/shm", "r");
    if (!f) {
        tap_skip("no /proc/sysvipc/shm", "no SysV shm segment left by the test's processes");
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        long long key, id, perms, size, cpid, lpid, nattch;
        if (sscanf(line, "%lld %lld %llo %lld %lld %lld %lld", &key, &id, &perms, &size, &cpid,
                   &lpid, &nattch) != 7)
            continue; /* header */
        for (int i = 0; i < n; i++) {
            if (pids[i] == (pid_t)cpid) {
                diag("  left: shmid %lld size %lld created by pid %lld, nattch %lld", id, size,
                     cpid, nattch);
                left++;
            }
        }
    }
    fclose(f);
    ok(left == 0, "no SysV shm segment left by the test's processes");
}

static void (*pair_body)(pscom_socket_t *sock, pscom_connection_t *con);

static int pair_child(void *arg)
{
    (void)arg;
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_DIRECT);
    pscom_connection_t *con = cons[1 - tu_rank];
    pair_body(sock, con);
    return tu_finish(sock, cons, eps, con);
}

void tu_run_pair(void (*body)(pscom_socket_t *sock, pscom_connection_t *con))
{
    pair_body = body;
    tu_run(2, pair_child, NULL, NULL);
}

int tu_finish(pscom_socket_t *sock, pscom_connection_t **cons, char **eps, pscom_connection_t *con)
{
    tu_check_transport(con, "the connection");
    is(tu_error_count, 0, "no connection error");
    tu_barrier();
    pscom_close_socket(sock);
    free(cons);
    tu_strv_free(eps);
    return 0;
}
