/*
 * t_arena.c - shm connections share SysV segments ("arenas" of PSP_SHM_ARENA ring pairs), and a
 * shm offer that does not name a pair offered to us is declined cleanly: the connection comes
 * up on the next transport (tcp) and the process carries on.
 *
 * rank 0: the server (accepts, PSP_DEBUG=2). rank 1: the client (connects; PSP_SHM_ARENA=4).
 * rank 2: a proxy (plain sockets) that relays connections of the client and rewrites the shm
 * offer in their handshake. Every connection carries an eager and a rendezvous message each
 * way, data verified.
 *   part 1: 10 connections straight to the server: all shm, in 3 segments (ceil(10 / 4)) made
 *           by the client, each attached by both. Both sides close them: the two used-up arenas
 *           vanish, the partly used one stays, with the client alone. 3 more connections take
 *           its last 2 pairs and a new arena.
 *   part 2: via the proxy: the offer unchanged (shm, the doorbell relayed), then offers with a
 *           bad pair index, arena size, cookies, shmid, version, length, ring geometry, a
 *           replay of an offer that was taken already, and a copy of the arena in a segment
 *           others may read (mode 0644): all come up via tcp, and the server says why it
 *           declined (one log line each).
 * The proxy knows the handshake frames (src/pscom/core/pscom_precon.c) and the shm offer
 * (shm_offer_t in src/pscom/plugins/shm/shm.c); if it finds no shm offer, part 2 fails.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define PER_ARENA 4
#define NCON1     10 /* part 1: 3 arenas */
#define NCON2     3  /* then: the last 2 pairs of the third, 1 of a fourth */
#define RNDV_LEN  100000
#define EAGER_LEN 300

/* ---- the wire, as the proxy sees it ------------------------------------------------------ */

#define FRAME_MAGIC 0x5053434du
#define F_ARCH_REQ  4
#define F_ARCH_DONE 7
#define F_FAIL      8

typedef struct frame_hdr {
    uint32_t magic;
    uint8_t version;
    uint8_t type;
    uint16_t len;
} frame_hdr_t;

typedef struct shm_offer {
    uint32_t magic;
    uint32_t version;
    int32_t shmid;
    uint32_t index;
    uint32_t npairs;
    uint32_t nslots;
    uint32_t slot_size;
    uint32_t reserved;
    uint64_t arena_cookie;
    uint64_t pair_cookie;
    uint64_t probe;
} shm_offer_t;

/* what the proxy does to the offer of case i */
enum mutation {
    M_NONE,
    M_INDEX_NPAIRS,
    M_INDEX_HUGE,
    M_INDEX_NOT_OFFERED,
    M_NPAIRS_MORE,
    M_NPAIRS_HUGE,
    M_ARENA_COOKIE,
    M_PAIR_COOKIE,
    M_SHMID,
    M_VERSION,
    M_SHORT,
    M_SLOT_SIZE,
    M_REPLAY,
    M_OPEN_SEGMENT,
};

static const struct {
    enum mutation m;
    const char *what;
} cases[] = {
    {M_NONE, "the offer unchanged"},
    {M_INDEX_NPAIRS, "pair index = pairs in the arena"},
    {M_INDEX_HUGE, "pair index 0xffffffff"},
    {M_INDEX_NOT_OFFERED, "pair index of a pair not offered"},
    {M_NPAIRS_MORE, "arena size + 1"},
    {M_NPAIRS_HUGE, "arena size 0xffffffff"},
    {M_ARENA_COOKIE, "wrong arena cookie"},
    {M_PAIR_COOKIE, "wrong pair cookie"},
    {M_SHMID, "shmid -1"},
    {M_VERSION, "offer version + 1"},
    {M_SHORT, "offer 4 bytes short"},
    {M_SLOT_SIZE, "slot size 2^31"},
    {M_REPLAY, "replay of the first (taken) offer"},
    {M_OPEN_SEGMENT, "a segment of the same size that others may read (mode 0644)"},
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* ---- rank 2: the proxy ------------------------------------------------------------------- */

static struct sockaddr_in server_addr;
static shm_offer_t first_offer; /* of case 0, for the replay */
static int offer_pipe = -1;     /* case 0's relay hands its offer to the proxy through it */

/* rewrite an shm offer of payload (name[16] + offer) in place; returns the new length */
static size_t mutate(unsigned char *payload, size_t len, enum mutation m)
{
    shm_offer_t o;
    if (len != 16 + sizeof(o))
        return len;
    memcpy(&o, payload + 16, sizeof(o));
    switch (m) {
    case M_NONE:
        if (offer_pipe >= 0 && write(offer_pipe, &o, sizeof(o)) != (ssize_t)sizeof(o))
            diag("  proxy: cannot pass the offer on");
        break;
    case M_INDEX_NPAIRS:
        o.index = o.npairs;
        break;
    case M_INDEX_HUGE:
        o.index = 0xffffffffu;
        break;
    case M_INDEX_NOT_OFFERED:
        /* the client's current arena: this pair is the last handed out; the next is free */
        o.index = o.index + 1 < o.npairs ? o.index + 1 : 0;
        break;
    case M_NPAIRS_MORE:
        o.npairs++;
        break;
    case M_NPAIRS_HUGE:
        o.npairs = 0xffffffffu;
        break;
    case M_ARENA_COOKIE:
        o.arena_cookie ^= 1;
        break;
    case M_PAIR_COOKIE:
        o.pair_cookie ^= 1;
        break;
    case M_SHMID:
        o.shmid = -1;
        break;
    case M_VERSION:
        o.version++;
        break;
    case M_SHORT:
        return len - 4;
    case M_SLOT_SIZE:
        o.slot_size = 1u << 31;
        break;
    case M_REPLAY:
        o = first_offer;
        break;
    case M_OPEN_SEGMENT: {
        /* a copy of the client's arena in a segment of mode 0644: shm must not take it */
        struct shmid_ds ds;
        int id = shmctl(o.shmid, IPC_STAT, &ds) == 0
                     ? shmget(IPC_PRIVATE, ds.shm_segsz, IPC_CREAT | 0644)
                     : -1;
        void *src = id >= 0 ? shmat(o.shmid, NULL, SHM_RDONLY) : (void *)-1;
        void *dst = src != (void *)-1 ? shmat(id, NULL, 0) : (void *)-1;
        if (dst != (void *)-1) /* stays attached: the segment lives until the proxy exits */
            memcpy(dst, src, ds.shm_segsz);
        if (src != (void *)-1)
            shmdt(src);
        if (id >= 0)
            shmctl(id, IPC_RMID, NULL); /* goes with its last user */
        o.shmid = id;
        break;
    }
    }
    memcpy(payload + 16, &o, sizeof(o));
    return len;
}

/* Relay the client's connection cfd to the server until both sides closed; while the client's
   handshake runs, rewrite its shm offer. Returns 1 if an shm offer was seen, 0 if not, -1 on a
   relay failure. */
static int relay(int cfd, enum mutation m)
{
    unsigned char buf[65536], in[4096];
    size_t ilen = 0;
    int sfd, open_c = 1, open_s = 1, handshake = 1, seen = 0;
    double end = tu_now() + 60;

    sfd = tu_dial(&server_addr);
    if (sfd < 0) {
        close(cfd);
        return -1;
    }
    while ((open_c || open_s) && tu_now() < end) {
        struct pollfd p[2] = {{.fd = open_c ? cfd : -1, .events = POLLIN},
                              {.fd = open_s ? sfd : -1, .events = POLLIN}};
        if (poll(p, 2, 1000) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            int from = i ? sfd : cfd, to = i ? cfd : sfd;
            ssize_t n;
            if (!p[i].revents)
                continue;
            n = read(from, i == 0 && handshake ? in + ilen : buf,
                     i == 0 && handshake ? sizeof(in) - ilen : sizeof(buf));
            if (n <= 0) {
                shutdown(to, SHUT_WR); /* pass the EOF on */
                if (i)
                    open_s = 0;
                else
                    open_c = 0;
                continue;
            }
            if (i || !handshake) {
                tu_send_all(to, buf, (size_t)n);
                continue;
            }
            /* the client's handshake: whole frames, the shm offer rewritten */
            ilen += (size_t)n;
            for (;;) {
                frame_hdr_t h;
                size_t plen;
                if (ilen < sizeof(h))
                    break;
                memcpy(&h, in, sizeof(h));
                if (h.magic != FRAME_MAGIC || sizeof(h) + h.len > sizeof(in)) {
                    handshake = 0; /* not what we know: pass it on as it is */
                    tu_send_all(sfd, in, ilen);
                    ilen = 0;
                    break;
                }
                if (ilen < sizeof(h) + h.len)
                    break;
                plen = h.len;
                if (h.type == F_ARCH_REQ && plen >= 16 && !strcmp((char *)in + sizeof(h), "shm")) {
                    seen = 1;
                    plen = mutate(in + sizeof(h), plen, m);
                }
                frame_hdr_t out = h;
                out.len = (uint16_t)plen;
                tu_send_all(sfd, &out, sizeof(out));
                tu_send_all(sfd, in + sizeof(h), plen);
                memmove(in, in + sizeof(h) + h.len, ilen - sizeof(h) - h.len);
                ilen -= sizeof(h) + h.len;
                if (h.type == F_ARCH_DONE || h.type == F_FAIL) {
                    handshake = 0;
                    if (ilen)
                        tu_send_all(sfd, in, ilen);
                    ilen = 0;
                    break;
                }
            }
        }
    }
    close(cfd);
    close(sfd);
    return open_c || open_s ? -1 : seen;
}

static void proxy(void)
{
    int lport, lfd = tu_listen_local(&lport);
    char port[16];
    char **all;

    snprintf(port, sizeof(port), "%d", lport);
    all = tu_allgather(port);
    if (tu_ep_sockaddr(all[0], &server_addr)) {
        ok(0, "proxy: server endpoint %s parses", all[0]);
        exit(1);
    }
    tu_barrier(); /* part 1 done */

    /* a process per connection: the first one stays open until the replay of its offer */
    pid_t pids[NCASES];
    for (int i = 0; i < NCASES; i++) {
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};
        int p[2] = {-1, -1}, cfd = -1;
        pids[i] = -1;
        if (poll(&pfd, 1, 30000) != 1 || (cfd = accept(lfd, NULL, NULL)) < 0)
            break;
        if (cases[i].m == M_NONE && pipe(p))
            p[0] = p[1] = -1;
        pids[i] = fork();
        if (pids[i] == 0) {
            int rc;
            close(lfd);
            if (p[0] >= 0)
                close(p[0]);
            offer_pipe = p[1];
            rc = relay(cfd, cases[i].m);
            _exit(rc == 1 ? 0 : rc == 0 ? 1 : 2);
        }
        close(cfd);
        if (p[1] >= 0)
            close(p[1]);
        if (p[0] >= 0) {
            struct pollfd q = {.fd = p[0], .events = POLLIN};
            if (poll(&q, 1, 30000) != 1 ||
                read(p[0], &first_offer, sizeof(first_offer)) != (ssize_t)sizeof(first_offer))
                diag("  proxy: no offer from the first connection");
            close(p[0]);
        }
    }
    for (int i = 0; i < NCASES; i++) {
        int st = -1;
        if (pids[i] > 0)
            waitpid(pids[i], &st, 0);
        st = pids[i] > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        ok(st == 0, "proxy: relayed the connection with %s (%s)", cases[i].what,
           st == 0   ? "shm offer seen"
           : st == 1 ? "no shm offer seen"
                     : "relay failed");
    }
    tu_barrier(); /* part 2 done */
    close(lfd);
    tu_strv_free(all);
}

/* ---- rank 0: the server ------------------------------------------------------------------ */

typedef struct server {
    pscom_socket_t *sock;
    pscom_request_t *any;
    int answered;
} server_t;

/* answer every message with one of the same tag, seq and length; close what the peer closed */
static void serve(void *arg)
{
    server_t *s = arg;
    pscom_progress(10);
    if (pscom_req_is_done(s->any)) {
        pscom_request_t *r = s->any;
        if (pscom_req_successful(r)) {
            tu_xh_t xh;
            memcpy(&xh, r->xheader, sizeof(xh));
            pscom_request_t *a = tu_post_send(r->connection, xh.tag, xh.seq, r->data_len, TU_XH);
            pscom_wait(a);
            tu_req_free(a);
            s->answered++;
        }
        tu_req_free(r);
        s->any = tu_post_recv(NULL, s->sock, RNDV_LEN, TU_XH, -1);
    }
    for (int again = 1; again;) {
        again = 0;
        for (pscom_connection_t *c = pscom_get_next_connection(s->sock, NULL); c;
             c = pscom_get_next_connection(s->sock, c))
            if (c->state == PSCOM_CON_STATE_CLOSED || c->state == PSCOM_CON_STATE_ERROR) {
                pscom_close_connection(c);
                again = 1;
                break;
            }
    }
}

static void server(void)
{
    char logname[] = "/tmp/t_arena.log.XXXXXX";
    server_t s = {0};
    char **all;
    int fd = mkstemp(logname);
    close(fd);
    setenv("PSP_DEBUG", "2", 1);
    setenv("PSP_DEBUG_OUT", logname, 1);
    s.sock = tu_open_socket();
    all = tu_allgather(pscom_socket_get_ep_str(s.sock));
    s.any = tu_post_recv(NULL, s.sock, RNDV_LEN, TU_XH, -1);
    tu_barrier_while(serve, &s); /* part 1 done */
    tu_barrier_while(serve, &s); /* part 2 done */
    if (!pscom_cancel_recv(s.any))
        pscom_wait(s.any);
    tu_req_free(s.any);
    is(s.answered, 2 * (NCON1 + NCON2 + NCASES + 1), "server: answered every message");
    pscom_close_socket(s.sock);
    pscom_cleanup();

    FILE *f = fopen(logname, "r");
    char *log = calloc(1, 1 << 20);
    size_t n = f ? fread(log, 1, (1 << 20) - 1, f) : 0;
    if (f)
        fclose(f);
    log[n] = '\0';
    unlink(logname);
    fputs(log, stderr); /* into the test's log */
    int declined = tu_count_lines(log, "declined", "shm");
    int why = 0;
    for (const char *p = log; (p = strstr(p, "shm offer of")); p++)
        why++;
    is(declined, NCASES - 1, "server: declined shm for each bad offer (PSP_DEBUG=2 lines)");
    is(why, NCASES - 1, "server: and said why, once each");
    ok(strstr(log, "pair index out of range") != NULL,
       "server: ... e.g. 'pair index out of range'");
    ok(strstr(log, "not our user's alone") != NULL,
       "server: ... and 'the segment is not our user's alone' for a segment of mode 0644");
    free(log);
    tu_strv_free(all);
}

/* ---- rank 1: the client ------------------------------------------------------------------ */

/* segments this process created that still exist; *attached: those attached by 2 processes */
static int my_segments(int *attached)
{
    FILE *f = fopen("/proc/sysvipc/shm", "r");
    char line[512];
    int n = 0;
    *attached = 0;
    while (f && fgets(line, sizeof(line), f)) {
        long long key, id, perms, size, cpid, lpid, nattch;
        if (sscanf(line, "%lld %lld %llo %lld %lld %lld %lld", &key, &id, &perms, &size, &cpid,
                   &lpid, &nattch) == 7 &&
            cpid == getpid()) {
            n++;
            *attached += nattch == 2;
        }
    }
    if (f)
        fclose(f);
    return n;
}

/* wait (making progress) until my_segments() is n with `attached` of them shared */
static int wait_segments(int n, int attached)
{
    int got, att;
    double end = tu_now() + 10;
    while (((got = my_segments(&att)) != n || att != attached) && tu_now() < end)
        pscom_progress(10);
    if (got != n || att != attached)
        diag("  segments: %d (%d attached by both), want %d (%d)", got, att, n, attached);
    return got == n && att == attached;
}

static uint64_t seq;

/* an eager and a rendezvous message there and back; 1 if all arrived intact */
static int exchange(pscom_connection_t *con)
{
    int good = 1;
    for (int k = 0; k < 2; k++) {
        size_t len = k ? RNDV_LEN : EAGER_LEN;
        uint64_t q = seq++;
        pscom_request_t *r = tu_post_recv(con, NULL, len, TU_XH, 7);
        pscom_request_t *s = tu_post_send(con, 7, q, len, TU_XH);
        pscom_wait(s);
        pscom_wait(r);
        good &= pscom_req_successful(s) && tu_recv_good(r, 7, 0, (long long)q, len, TU_XH);
        tu_req_free(s);
        tu_req_free(r);
    }
    return good;
}

static pscom_connection_t *connect_to(pscom_socket_t *sock, const char *ep)
{
    pscom_connection_t *con = pscom_open_connection(sock);
    if (pscom_connect(con, ep, PSCOM_CON_FLAG_DIRECT) != PSCOM_SUCCESS) {
        ok(0, "client connects to %s", ep);
        exit(1);
    }
    return con;
}

static int all_via(pscom_connection_t **cons, int n, const char *transport)
{
    int good = 1;
    for (int i = 0; i < n; i++)
        if (strcmp(cons[i]->transport, transport)) {
            diag("  connection %d uses %s", i, cons[i]->transport);
            good = 0;
        }
    return good;
}

static void client(void)
{
    char **all, ep[PSCOM_EP_STR_MAX];
    pscom_connection_t *cons[NCON1];
    pscom_socket_t *sock;
    const char *name;
    int good = 1;

    setenv("PSP_SHM_ARENA", "4", 1);
    sock = tu_open_socket();
    all = tu_allgather(pscom_socket_get_ep_str(sock));

    tu_phase("part 1: %d connections", NCON1);
    for (int i = 0; i < NCON1; i++)
        cons[i] = connect_to(sock, all[0]);
    for (int i = 0; i < NCON1; i++)
        good &= exchange(cons[i]);
    ok(good, "%d connections to one peer: eager and rendezvous data intact both ways", NCON1);
    ok(all_via(cons, NCON1, "shm"), "all via shm");
    ok(wait_segments(3, 3), "3 SysV segments (%d pairs each), each attached by both sides",
       PER_ARENA);
    for (int i = 0; i < NCON1; i++)
        pscom_close_connection(cons[i]);
    ok(wait_segments(1, 0), "after closing: the used-up arenas are gone, the third is ours alone");

    tu_phase("part 1: %d more connections", NCON2);
    for (int i = 0; i < NCON2; i++)
        cons[i] = connect_to(sock, all[0]);
    good = 1;
    for (int i = 0; i < NCON2; i++)
        good &= exchange(cons[i]);
    ok(good && all_via(cons, NCON2, "shm"), "%d more connections via shm, data intact", NCON2);
    ok(wait_segments(2, 2), "they use the last 2 pairs of the third arena and a fourth");
    for (int i = 0; i < NCON2; i++)
        pscom_close_connection(cons[i]);
    ok(wait_segments(1, 0), "after closing: the used-up third arena is gone");
    tu_barrier(); /* part 1 done */

    tu_phase("part 2: via the proxy");
    name = strchr(all[0], '@');
    snprintf(ep, sizeof(ep), "127.0.0.1:%s%s", all[2], name ? name : "");
    pscom_connection_t *first = NULL;
    for (int i = 0; i < NCASES; i++) {
        const char *want = cases[i].m == M_NONE ? "shm" : "tcp";
        pscom_connection_t *con = connect_to(sock, ep);
        int intact = exchange(con);
        ok(intact && !strcmp(con->transport, want), "%s: via %s (%s), data intact", cases[i].what,
           want, con->transport);
        if (i == 0)
            first = con; /* open until its offer was replayed */
        else
            pscom_close_connection(con);
    }
    ok(exchange(first), "the first connection via the proxy still works");
    pscom_close_connection(first);
    is(tu_error_count, 0, "client: no connection error");
    tu_barrier(); /* part 2 done */
    pscom_close_socket(sock);
    pscom_cleanup();
    tu_strv_free(all);
}

static int child(void *arg)
{
    (void)arg;
    /* a declined shm offer must fall back to tcp, not to ucp (UCX traffic bypasses the proxy) */
    setenv("PSP_UCP", "0", 1);
    unsetenv("PSP_SHM");
    unsetenv("PSP_TCP");
    if (tu_rank == 0)
        server();
    else if (tu_rank == 1)
        client();
    else
        proxy();
    return 0;
}

int main(void)
{
    tu_run(3, child, NULL, NULL);
    return tap_done();
}
