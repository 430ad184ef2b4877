/*
 * t_tag.c - tag matching in the transport (pscom.h, "Tag matching in the transport"): the ucp
 * plugin hands a socket's tagged messages to UCX's tag matching. The .t script runs this with
 * PSP_SHM=0 PSP_TCP=0 (ucp is the only transport besides loop), under UCX_TLS=posix,cma,self
 * and UCX_TLS=tcp.
 *
 *   pair            two processes in tag mode: sends before an on-demand connection is up and
 *                   a burst of mixed sizes in order (receives posted before and after arrival),
 *                   masked receives, sync sends, truncation, probe/msg_recv, cancel, and each
 *                   process talking to itself through the tag API
 *   cross           three processes send to each other at once on on-demand connections:
 *                   simultaneous connects, sends waiting for the winner, in order per peer
 *   env             pscom_socket_tag_matching says yes only where it may (one rank per setting)
 *   mismatch notag  rank 0 in tag mode, rank 1 with PSP_UCP_TAG=0: connections fail (both
 *                   ways), with one log line from the accepting side; tagged sends fail
 *   mismatch default  the same with rank 1 on the default transports (shm, tcp, ucp)
 *
 * "pair inline" and "cross inline" run the same with PSCOM_TAG_DONE_INLINE: done() then runs
 * inside UCX and must not call pscom, so what a done() would send waits for the next return of
 * pscom_progress (run_thens).
 *
 * Tags: source rank in bits 48.., a kind (step of the test) in bits 32..47, a sequence number
 * below. Every wait is bounded (WAIT_S), so a lost message fails a check instead of hanging.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define WAIT_S 10.0
#define TAG(src, kind, seq)                                                                        \
    ((uint64_t)(src) << 48 | (uint64_t)(kind) << 32 | (uint64_t)(uint32_t)(seq))
#define ALL   (~(uint64_t)0)
#define NOSEQ 0xffffffff00000000ull /* mask: any sequence number of one source and kind */
#define MIB   (1u << 20)

enum { K_BURST = 1, K_REPLY, K_MASK, K_SYNC, K_TRUNC, K_PROBE, K_CANCEL, K_SELF, K_FAIL };

/* ---- operations and their completion ----------------------------------------------------- */

typedef struct op {
    int now;   /* pscom_tag_send returned 1: complete, no done() may follow */
    int calls; /* done() calls */
    pscom_tag_status_t status;
    int has_info;
    pscom_tag_info_t info;
    double when;                /* tu_now() of the (last) done() */
    void (*then)(struct op *o); /* run once by its first done() */
} op_t;

static unsigned tag_flags; /* of pscom_socket_tag_matching: 0 or PSCOM_TAG_DONE_INLINE */
static op_t *then_due;     /* inline: the op whose then() waits for pscom_progress to return */

static void run_then(op_t *o)
{
    void (*fn)(op_t *) = o->then;
    o->then = NULL;
    fn(o);
}

/* the one completion callback of the socket: user is the op */
static void on_done(void *user, pscom_tag_status_t status, const pscom_tag_info_t *info)
{
    op_t *o = user;
    o->calls++;
    o->status = status;
    o->has_info = info != NULL;
    if (info)
        o->info = *info;
    o->when = tu_now();
    if (o->then) {
        if (tag_flags & PSCOM_TAG_DONE_INLINE)
            then_due = o; /* no pscom call from in here */
        else
            run_then(o);
    }
}

/* pscom_progress, then what an inline done() left to do */
static void progress(int timeout_ms)
{
    pscom_progress(timeout_ms);
    if (then_due) {
        op_t *o = then_due;
        then_due = NULL;
        run_then(o);
    }
}

static int op_complete(const op_t *o)
{
    return o->now || o->calls > 0;
}

/* Progress until ops[0..n) are complete, at most WAIT_S: 1 if they are. */
static int wait_ops(op_t *ops, int n)
{
    double end = tu_now() + WAIT_S;
    for (;;) {
        int all = 1;
        for (int i = 0; i < n; i++)
            all &= op_complete(&ops[i]);
        if (all)
            return 1;
        if (tu_now() > end)
            return 0;
        progress(10);
    }
}

/* Progress until a matching message is there (pscom_tag_probe), at most WAIT_S. */
static int wait_probe(pscom_socket_t *sock, uint64_t tag, uint64_t mask, pscom_tag_info_t *info,
                      void **msg)
{
    double end = tu_now() + WAIT_S;
    while (!pscom_tag_probe(sock, tag, mask, info, msg)) {
        if (tu_now() > end)
            return 0;
        progress(10);
    }
    return 1;
}

/* Progress for secs, whatever happens. */
static void progress_for(double secs)
{
    double end = tu_now() + secs;
    while (tu_now() < end)
        progress(5);
}

/* len bytes of the pattern of (len, seq, src); never NULL */
static void *pattern(size_t len, uint64_t seq, int src)
{
    void *b = malloc(len ? len : 1);
    if (!b)
        abort();
    tu_fill(b, len, tu_seed(len, seq, (uint64_t)src));
    return b;
}

static void *zalloc(size_t len)
{
    void *b = calloc(1, len ? len : 1);
    if (!b)
        abort();
    return b;
}

static int send_op(pscom_connection_t *con, uint64_t tag, const void *buf, size_t len, int sync,
                   op_t *o)
{
    int rc = pscom_tag_send(con, tag, buf, len, sync, o);
    o->now = rc == 1;
    return rc;
}

/* A send ended well: at once (rc 1) without done(), or by exactly one done() DONE. */
static int send_good(const op_t *o)
{
    return o->now ? o->calls == 0 : o->calls == 1 && o->status == PSCOM_TAG_DONE && !o->has_info;
}

/* A receive of the tu_fill pattern of message (src, seq) of len bytes ended well. */
static int recv_good(const op_t *o, const void *buf, uint64_t tag, size_t len, uint64_t seq,
                     int src)
{
    long long bad = -1;
    if (o->calls == 1 && o->status == PSCOM_TAG_DONE && o->has_info && o->info.tag == tag &&
        o->info.len == len && (bad = tu_verify(buf, len, tu_seed(len, seq, (uint64_t)src))) < 0)
        return 1;
    diag("  receive of tag %#llx (%zu B): %d done() calls, status %d, info %s tag %#llx len %zu, "
         "first bad byte %lld",
         (unsigned long long)tag, len, o->calls, (int)o->status, o->has_info ? "set" : "NULL",
         (unsigned long long)o->info.tag, o->info.len, bad);
    return 0;
}

static const size_t burst_sizes[] = {0, 8, 1024, 64 * 1024, MIB};
#define NBURST        100
#define BURST_SIZE(i) burst_sizes[(i) % (sizeof(burst_sizes) / sizeof(burst_sizes[0]))]

/* Open a socket (listening) and switch tag matching on; checked. */
static pscom_socket_t *open_tag_socket(void)
{
    pscom_socket_t *sock = tu_open_socket();
    int on = pscom_socket_tag_matching(sock, on_done, tag_flags);
    if (!ok(on == 1 && pscom_socket_tag_on(sock), "pscom_socket_tag_matching: on"))
        exit(2); /* nothing else can work */
    return sock;
}

/* ---- pair: rank 1 sends, rank 0 receives --------------------------------------------------- */

static void burst_recv(pscom_socket_t *sock)
{
    static op_t ops[NBURST];
    void *bufs[NBURST], *h[NBURST];
    int half = NBURST / 2, posted = 1, consistent = 1, good[2] = {1, 1};
    pscom_tag_info_t info;

    /* first half: posted before anything was sent (expected), masked: any seq from rank 1 */
    for (int i = 0; i < half; i++) {
        bufs[i] = zalloc(BURST_SIZE(i));
        posted &= pscom_tag_recv(sock, TAG(1, K_BURST, 0), NOSEQ, bufs[i], BURST_SIZE(i), &ops[i],
                                 &h[i]) == 0 &&
                  h[i] && !ops[i].calls;
    }
    ok(posted, "%d masked receives posted before the sends: pending, with a handle", half);
    tu_barrier(); /* B1: posted */
    tu_phase("burst: expected receives");
    ok(wait_ops(ops, half), "the expected receives complete");

    /* second half: posted once all had arrived (the last one is there) */
    tu_phase("burst: waiting for the last message");
    ok(wait_probe(sock, TAG(1, K_BURST, NBURST - 1), ALL, &info, NULL) &&
           info.tag == TAG(1, K_BURST, NBURST - 1) && info.len == BURST_SIZE(NBURST - 1),
       "the last message of the burst arrives before its receive (probe: tag, %zu B)",
       BURST_SIZE(NBURST - 1));
    for (int i = half; i < NBURST; i++) {
        bufs[i] = zalloc(BURST_SIZE(i));
        if (pscom_tag_recv(sock, TAG(1, K_BURST, 0), NOSEQ, bufs[i], BURST_SIZE(i), &ops[i],
                           &h[i]) != 0)
            posted = 0;
        /* done() before the return <=> no handle */
        consistent &= !h[i] == (ops[i].calls == 1);
    }
    ok(posted, "%d masked receives posted after the arrival", NBURST - half);
    ok(consistent, "a receive completed in the call returns no handle, a pending one does");
    tu_phase("burst: unexpected receives");
    ok(wait_ops(ops + half, NBURST - half), "the unexpected receives complete");
    for (int i = 0; i < NBURST; i++) {
        good[i >= half] &=
            recv_good(&ops[i], bufs[i], TAG(1, K_BURST, i), BURST_SIZE(i), (uint64_t)i, 1);
        free(bufs[i]);
    }
    ok(good[0], "expected: messages 0..%d matched in order, sizes and data right", half - 1);
    ok(good[1], "unexpected: messages %d..%d matched in order, sizes and data right", half,
       NBURST - 1);
}

/* the burst's last message is sent by the done() of its first (a completion that sends on) */
static struct {
    pscom_connection_t *con;
    void *buf;
    op_t *op;
    int rc;
} last;

static void send_last(op_t *first)
{
    (void)first;
    last.rc = send_op(last.con, TAG(1, K_BURST, NBURST - 1), last.buf, BURST_SIZE(NBURST - 1), 0,
                      last.op);
}

static void burst_send(pscom_connection_t *con)
{
    static op_t ops[NBURST];
    void *bufs[NBURST];
    int rc0 = 0, bad = 0, good = 1;
    pscom_con_state_t st0 = PSCOM_CON_STATE_NO_RW;

    tu_barrier(); /* B1: the receiver posted the first half */
    is(con->state, PSCOM_CON_STATE_ONDEMAND,
       "before the first tagged send the connection is on demand");
    tu_phase("burst: sending");
    for (int i = 0; i < NBURST; i++)
        bufs[i] = pattern(BURST_SIZE(i), (uint64_t)i, 1);
    last = (typeof(last)){.con = con, .buf = bufs[NBURST - 1], .op = &ops[NBURST - 1], .rc = -100};
    ops[0].then = send_last;
    for (int i = 0; i < NBURST - 1; i++) {
        int rc = send_op(con, TAG(1, K_BURST, i), bufs[i], BURST_SIZE(i), 0, &ops[i]);
        if (i == 0) {
            rc0 = rc;
            st0 = con->state;
        }
        bad += rc < 0;
    }
    ok(rc0 == 0 && st0 != PSCOM_CON_STATE_RW,
       "the first send waits for the connection (returns %d, state %d)", rc0, (int)st0);
    is(bad, 0, "all %d sends taken", NBURST - 1);
    tu_phase("burst: waiting for the sends");
    ok(wait_ops(ops, NBURST), "all sends complete");
    ok(last.rc >= 0, "the done() of the first send sent the last one (returned %d)", last.rc);
    for (int i = 0; i < NBURST; i++) {
        good &= send_good(&ops[i]);
        free(bufs[i]);
    }
    ok(good, "each send: done() once with DONE and no info, or none if it returned 1");
    ok(con->state == PSCOM_CON_STATE_RW && con->transport && !strcmp(con->transport, "ucp"),
       "the connection is up, over ucp (%s)", con->transport ? con->transport : "(null)");
}

/* The receiver's connection was on demand: the sender's connection took its place. */
static void reply(pscom_socket_t *sock, pscom_connection_t *con)
{
    op_t o = {0};
    void *buf, *h;
    if (tu_rank == 1) {
        buf = zalloc(100);
        is(pscom_tag_recv(sock, TAG(0, K_REPLY, 0), ALL, buf, 100, &o, &h), 0, "receive posted");
        tu_barrier();
        tu_phase("reply: receive");
        ok(wait_ops(&o, 1) && recv_good(&o, buf, TAG(0, K_REPLY, 0), 100, 0, 0),
           "the reply arrives");
    } else {
        buf = pattern(100, 0, 0);
        tu_barrier();
        /* the sender's data goes over UCX, the end of its handshake (ARCH_DONE) over the
           handshake socket: the latter may come a moment after the barrier */
        for (double end = tu_now() + 10; con->state != PSCOM_CON_STATE_RW && tu_now() < end;)
            pscom_progress(1);
        ok(con->state == PSCOM_CON_STATE_RW,
           "the receiver's on-demand connection is up without a send of its own (state %d)",
           (int)con->state);
        int rc = send_op(con, TAG(0, K_REPLY, 0), buf, 100, 0, &o);
        tu_phase("reply: send");
        ok(rc >= 0 && wait_ops(&o, 1) && send_good(&o), "reply sent on it (returned %d)", rc);
    }
    free(buf);
    tu_barrier();
}

/* masked receives take the first message (in send order) that matches */
static void masked(pscom_socket_t *sock, pscom_connection_t *con)
{
    static const uint32_t seqs[] = {0x10, 0x11, 0x20, 0x31, 0x30, 0x41, 0x50};
    enum { N = sizeof(seqs) / sizeof(seqs[0]) };
    op_t ops[N] = {{0}};
    void *bufs[N], *h;
    if (tu_rank == 1) {
        for (int i = 0; i < N; i++)
            bufs[i] = pattern(16, seqs[i], 1);
        for (int i = 0; i < 3; i++)
            send_op(con, TAG(1, K_MASK, seqs[i]), bufs[i], 16, 0, &ops[i]);
        tu_barrier(); /* M1: the first three are sent */
        tu_barrier(); /* M2: the receiver posted the next receives */
        for (int i = 3; i < N; i++)
            send_op(con, TAG(1, K_MASK, seqs[i]), bufs[i], 16, 0, &ops[i]);
        tu_phase("masked: sends");
        int good = wait_ops(ops, N);
        for (int i = 0; i < N; i++) {
            good &= send_good(&ops[i]);
            free(bufs[i]);
        }
        ok(good, "%d sends for the masked receives complete", N);
    } else {
        uint64_t low4 = ~(uint64_t)0xf;
        /* receive i takes message want[i] */
        static const int want[] = {0, 1, 2, 3, 4, 5, 6};
        uint64_t tags[N] = {TAG(1, K_MASK, 0x10),
                            TAG(1, K_MASK, 0x10),
                            TAG(1, K_MASK, 0),
                            TAG(1, K_MASK, 0x30),
                            TAG(1, K_MASK, 0x30),
                            TAG(1, K_MASK, 0x41),
                            0};
        uint64_t masks[N] = {low4, low4, NOSEQ, low4, low4, ALL, 0};
        pscom_tag_info_t info;
        for (int i = 0; i < N; i++)
            bufs[i] = zalloc(16);
        tu_barrier(); /* M1 */
        tu_phase("masked: unexpected");
        ok(wait_probe(sock, TAG(1, K_MASK, 0x20), ALL, &info, NULL), "the first three arrived");
        /* unexpected: 0x1? twice takes 0x10 then 0x11; any seq then takes 0x20 */
        for (int i = 0; i < 3; i++)
            pscom_tag_recv(sock, tags[i], masks[i], bufs[i], 16, &ops[i], &h);
        /* expected: two receives for 0x3?, then one exact, then one of mask 0 (any tag) */
        for (int i = 3; i < N; i++)
            pscom_tag_recv(sock, tags[i], masks[i], bufs[i], 16, &ops[i], &h);
        tu_barrier(); /* M2 */
        tu_phase("masked: receives");
        ok(wait_ops(ops, N), "all masked receives complete");
        int good = 1;
        for (int i = 0; i < N; i++) {
            int m = want[i];
            good &= recv_good(&ops[i], bufs[i], TAG(1, K_MASK, seqs[m]), 16, seqs[m], 1);
            free(bufs[i]);
        }
        ok(good, "masked receives take the first matching message in send order (unexpected "
                 "0x10, 0x11, 0x20; expected 0x31 then 0x30, exact 0x41, mask 0: 0x50)");
    }
    tu_barrier();
}

/* a sync send completes only once a receive matched it */
static void sync_send(pscom_socket_t *sock, pscom_connection_t *con)
{
    op_t o = {0};
    void *buf, *h;
    char t[64];
    char **posted;
    if (tu_rank == 1) {
        buf = pattern(64, 0, 1);
        tu_barrier();
        int rc = send_op(con, TAG(1, K_SYNC, 0), buf, 64, 1, &o);
        is(rc, 0, "a sync send is in flight after the call");
        tu_phase("sync: send");
        ok(wait_ops(&o, 1) && send_good(&o), "the sync send completes");
        posted = tu_allgather("");
        double tpost = strtod(posted[0], NULL);
        if (!ok(o.calls == 1 && o.when >= tpost,
                "its done() ran only after the receiver posted the receive"))
            diag("  done() %.3f s before the receive was posted", tpost - o.when);
    } else {
        pscom_tag_info_t info;
        buf = zalloc(64);
        tu_barrier();
        tu_phase("sync: receiver waits");
        int there = wait_probe(sock, TAG(1, K_SYNC, 0), ALL, &info, NULL);
        progress_for(0.2); /* the sender would see its done() by now */
        ok(there, "the sync message arrived before its receive is posted");
        snprintf(t, sizeof(t), "%.6f", tu_now());
        is(pscom_tag_recv(sock, TAG(1, K_SYNC, 0), ALL, buf, 64, &o, &h), 0, "posted");
        tu_phase("sync: receive");
        ok(wait_ops(&o, 1) && recv_good(&o, buf, TAG(1, K_SYNC, 0), 64, 0, 1),
           "the sync message is received");
        posted = tu_allgather(t);
    }
    tu_strv_free(posted);
    free(buf);
    tu_barrier();
}

/* a receive smaller than the message: TRUNCATED, info->len the whole length */
static void truncation(pscom_socket_t *sock, pscom_connection_t *con)
{
    static const size_t full[] = {1000, MIB, 500}, room[] = {100, 4096, 500};
    for (int late = 0; late < 2; late++) {
        op_t ops[3] = {{0}};
        void *bufs[3], *h;
        const char *how = late ? "unexpected" : "posted";
        uint64_t s0 = late ? 3 : 0;
        if (tu_rank == 1) {
            if (!late)
                tu_barrier(); /* posted */
            for (int i = 0; i < 3; i++) {
                bufs[i] = pattern(full[i], s0 + (uint64_t)i, 1);
                send_op(con, TAG(1, K_TRUNC, s0 + (uint64_t)i), bufs[i], full[i], 0, &ops[i]);
            }
            if (late)
                tu_barrier(); /* sent */
            tu_phase("truncation: sends (%s)", how);
            int done = wait_ops(ops, 3);
            for (int i = 0; i < 3; i++)
                diag("  %s: send of %zu B into a receive of %zu B: %s, status %d", how, full[i],
                     room[i], ops[i].now ? "at once" : "done()", (int)ops[i].status);
            ok(done && ops[0].calls + ops[0].now == 1 && ops[1].calls + ops[1].now == 1 &&
                   send_good(&ops[2]),
               "%s: the sends of the truncated messages complete once", how);
            for (int i = 0; i < 3; i++)
                free(bufs[i]);
        } else {
            if (late) {
                pscom_tag_info_t info;
                tu_barrier(); /* sent */
                tu_phase("truncation: arrival");
                ok(wait_probe(sock, TAG(1, K_TRUNC, s0 + 2), ALL, &info, NULL),
                   "unexpected: the messages arrived");
            }
            for (int i = 0; i < 3; i++) {
                bufs[i] = zalloc(room[i]);
                pscom_tag_recv(sock, TAG(1, K_TRUNC, s0 + (uint64_t)i), ALL, bufs[i], room[i],
                               &ops[i], &h);
            }
            if (!late)
                tu_barrier(); /* posted */
            tu_phase("truncation: receives (%s)", how);
            ok(wait_ops(ops, 3), "%s: the receives complete", how);
            for (int i = 0; i < 2; i++) {
                const op_t *o = &ops[i];
                uint64_t seq = s0 + (uint64_t)i;
                if (!ok(o->calls == 1 && o->status == PSCOM_TAG_TRUNCATED && o->has_info &&
                            o->info.tag == TAG(1, K_TRUNC, seq) && o->info.len == full[i],
                        "%s: %zu B message into %zu B: TRUNCATED, info has the tag and %zu B", how,
                        full[i], room[i], full[i]))
                    diag("  %d done() calls, status %d, info %s, tag %#llx, len %zu", o->calls,
                         (int)o->status, o->has_info ? "set" : "NULL",
                         (unsigned long long)o->info.tag, o->info.len);
                /* what the buffer holds is up to UCX: say it */
                diag("  %s %zu B into %zu B: buffer %s", how, full[i], room[i],
                     tu_verify(bufs[i], room[i], tu_seed(full[i], seq, 1)) < 0
                         ? "holds the first bytes of the message"
                         : "does not hold the message's first bytes");
            }
            ok(recv_good(&ops[2], bufs[2], TAG(1, K_TRUNC, s0 + 2), 500, s0 + 2, 1),
               "%s: the next message is received whole", how);
            for (int i = 0; i < 3; i++)
                free(bufs[i]);
        }
    }
    tu_barrier();
}

/* pscom_tag_probe without and with msg, pscom_tag_msg_recv */
static void probe(pscom_socket_t *sock, pscom_connection_t *con)
{
    static const size_t len[] = {3000, MIB};
    if (tu_rank == 1) {
        op_t ops[2] = {{0}};
        void *bufs[2];
        tu_barrier(); /* P1: the receiver probed for nothing */
        for (int i = 0; i < 2; i++) {
            bufs[i] = pattern(len[i], (uint64_t)i, 1);
            send_op(con, TAG(1, K_PROBE, i), bufs[i], len[i], 0, &ops[i]);
        }
        tu_phase("probe: sends");
        ok(wait_ops(ops, 2) && send_good(&ops[0]) && send_good(&ops[1]),
           "the probed messages are sent");
        free(bufs[0]);
        free(bufs[1]);
    } else {
        pscom_tag_info_t info = {0};
        void *msg = NULL, *buf;
        op_t o = {0};
        ok(!pscom_tag_probe(sock, TAG(1, K_PROBE, 0), ALL, &info, NULL) &&
               !pscom_tag_probe(sock, 0, 0, &info, &msg) && !msg,
           "probe before anything was sent: 0 (exact and any tag)");
        tu_barrier(); /* P1 */
        tu_phase("probe: waiting for message 0");
        ok(wait_probe(sock, TAG(1, K_PROBE, 0), ALL, &info, NULL) &&
               info.tag == TAG(1, K_PROBE, 0) && info.len == len[0],
           "probe without msg finds it, with its tag and length");
        ok(pscom_tag_probe(sock, TAG(1, K_PROBE, 0), ALL, &info, NULL),
           "probe again: it is still there");
        info = (pscom_tag_info_t){0};
        ok(pscom_tag_probe(sock, TAG(1, K_PROBE, 0), NOSEQ, &info, NULL) &&
               info.tag == TAG(1, K_PROBE, 0),
           "a masked probe finds the first one sent");
        ok(pscom_tag_probe(sock, TAG(1, K_PROBE, 0), ALL, &info, &msg) && msg && info.len == len[0],
           "probe with msg takes it");
        ok(!pscom_tag_probe(sock, TAG(1, K_PROBE, 0), ALL, &info, NULL),
           "then probe does not see it any more");
        buf = zalloc(len[0]);
        is(pscom_tag_msg_recv(sock, msg, buf, len[0], &o), 0, "pscom_tag_msg_recv: 0");
        tu_phase("probe: msg_recv 0");
        ok(wait_ops(&o, 1) && recv_good(&o, buf, TAG(1, K_PROBE, 0), len[0], 0, 1),
           "it receives the probed message");
        free(buf);

        /* a rendezvous-sized one */
        msg = NULL;
        o = (op_t){0};
        tu_phase("probe: waiting for message 1");
        ok(wait_probe(sock, TAG(1, K_PROBE, 0), NOSEQ, &info, &msg) && msg &&
               info.tag == TAG(1, K_PROBE, 1) && info.len == len[1],
           "probe with msg takes a 1 MiB message");
        buf = zalloc(len[1]);
        is(msg ? pscom_tag_msg_recv(sock, msg, buf, len[1], &o) : -1, 0, "pscom_tag_msg_recv: 0");
        tu_phase("probe: msg_recv 1");
        ok(wait_ops(&o, 1) && recv_good(&o, buf, TAG(1, K_PROBE, 1), len[1], 1, 1),
           "it receives the 1 MiB message");
        free(buf);
    }
    tu_barrier();
}

/* pscom_tag_cancel of a posted receive */
static void cancel(pscom_socket_t *sock, pscom_connection_t *con)
{
    op_t o = {0}, o2 = {0};
    void *buf, *h = NULL, *h2 = NULL;
    if (tu_rank == 1) {
        buf = pattern(64, 0, 1);
        tu_barrier(); /* C1: the receiver cancelled */
        send_op(con, TAG(1, K_CANCEL, 0), buf, 64, 0, &o);
        tu_phase("cancel: send");
        ok(wait_ops(&o, 1) && send_good(&o), "the message for the cancelled receive is sent");
    } else {
        buf = zalloc(64);
        pscom_tag_recv(sock, TAG(1, K_CANCEL, 0), ALL, buf, 64, &o, &h);
        pscom_tag_recv(sock, TAG(1, K_CANCEL, 0), NOSEQ, buf, 64, &o2, &h2);
        ok(h && h2 && !o.calls && !o2.calls, "two receives posted, pending");
        pscom_tag_cancel(sock, h);
        ok(o.calls == 1 && o.status == PSCOM_TAG_CANCELED,
           "pscom_tag_cancel: done() once with CANCELED before it returns (calls %d, status %d)",
           o.calls, (int)o.status);
        pscom_tag_cancel(sock, h2);
        ok(o2.calls == 1 && o2.status == PSCOM_TAG_CANCELED, "the masked one too");
        pscom_tag_cancel(sock, NULL); /* nothing: must not crash */
        tu_barrier();                 /* C1 */
        o = (op_t){0};
        pscom_tag_recv(sock, TAG(1, K_CANCEL, 0), ALL, buf, 64, &o, &h);
        tu_phase("cancel: receive");
        ok(wait_ops(&o, 1) && recv_good(&o, buf, TAG(1, K_CANCEL, 0), 64, 0, 1),
           "the message the cancelled receives wanted goes to the next receive");
        is(o2.calls, 1, "and the cancelled ones stay cancelled (one done() each)");
    }
    free(buf);
    tu_barrier();
}

/* this process to itself: a connection to its own socket's endpoint, through ucp */
static void self(pscom_socket_t *sock)
{
    static const size_t len[] = {100, MIB, 64};
    int me = tu_rank;
    op_t s[3] = {{0}}, r[3] = {{0}};
    void *sb[3], *rb[3], *h;
    pscom_tag_info_t info;
    pscom_connection_t *c = pscom_open_connection(sock);
    pscom_err_t rc = pscom_connect(c, pscom_socket_get_ep_str(sock), PSCOM_CON_FLAG_DIRECT);
    tu_phase("self");
    ok(rc == PSCOM_SUCCESS && c->transport && !strcmp(c->transport, "ucp"),
       "connect to its own endpoint: %s, over %s (not loop)", pscom_err_str(rc),
       c->transport ? c->transport : "(null)");
    for (int i = 0; i < 3; i++) {
        sb[i] = pattern(len[i], (uint64_t)i, me);
        rb[i] = zalloc(len[i]);
    }
    /* 0: unexpected; 1: 1 MiB, expected; 2: sync, received late */
    send_op(c, TAG(me, K_SELF, 0), sb[0], len[0], 0, &s[0]);
    ok(wait_probe(sock, TAG(me, K_SELF, 0), ALL, &info, NULL) && info.len == len[0],
       "a message to itself arrives (probe)");
    pscom_tag_recv(sock, TAG(me, K_SELF, 0), ALL, rb[0], len[0], &r[0], &h);
    pscom_tag_recv(sock, TAG(me, K_SELF, 1), ALL, rb[1], len[1], &r[1], &h);
    send_op(c, TAG(me, K_SELF, 1), sb[1], len[1], 0, &s[1]);
    is(send_op(c, TAG(me, K_SELF, 2), sb[2], len[2], 1, &s[2]), 0, "sync send to itself");
    ok(wait_probe(sock, TAG(me, K_SELF, 2), ALL, &info, NULL), "it arrives");
    progress_for(0.05);
    ok(!op_complete(&s[2]), "the sync send is not complete before the receive is posted");
    pscom_tag_recv(sock, TAG(me, K_SELF, 2), ALL, rb[2], len[2], &r[2], &h);
    ok(wait_ops(s, 3) && wait_ops(r, 3), "sends and receives to itself complete");
    int good = 1;
    for (int i = 0; i < 3; i++) {
        good &= send_good(&s[i]) &&
                recv_good(&r[i], rb[i], TAG(me, K_SELF, i), len[i], (uint64_t)i, me);
        free(sb[i]);
        free(rb[i]);
    }
    ok(good, "%zu B, 1 MiB and sync %zu B to itself received right", len[0], len[2]);
    tu_barrier();
}

static int pair_child(void *arg)
{
    (void)arg;
    pscom_socket_t *sock = open_tag_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t *con = pscom_open_connection(sock);
    /* on demand both ways: rank 1's first send makes the connection, rank 0's takes it */
    if (pscom_connect(con, eps[1 - tu_rank], PSCOM_CON_FLAG_ONDEMAND) != PSCOM_SUCCESS) {
        ok(0, "pscom_connect on demand");
        return 2;
    }
    tu_barrier();
    if (tu_rank == 0)
        burst_recv(sock);
    else
        burst_send(con);
    tu_barrier();
    reply(sock, con);
    masked(sock, con);
    sync_send(sock, con);
    truncation(sock, con);
    probe(sock, con);
    cancel(sock, con);
    self(sock);
    return tu_finish(sock, NULL, eps, con);
}

/* ---- cross: every rank sends to every other at once, on connections made on demand ------- */

#define NCROSS 20

static int cross_child(void *arg)
{
    (void)arg;
    int n = tu_nranks, me = tu_rank, good = 1, consistent = 1, bad = 0;
    pscom_socket_t *sock = open_tag_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_ONDEMAND);
    op_t *s = calloc((size_t)(n * NCROSS), sizeof(*s)),
         *r = calloc((size_t)(n * NCROSS), sizeof(*r));
    void **sb = calloc((size_t)(n * NCROSS), sizeof(*sb)),
         **rb = calloc((size_t)(n * NCROSS), sizeof(*rb));
    if (!s || !r || !sb || !rb)
        abort();
    tu_barrier();
    /* receives first (masked: any seq from that rank), then all sends at once: each pair of
       ranks connects both ways simultaneously, the sends wait for the winner's connection */
    for (int p = 0; p < n; p++) {
        for (int i = 0; p != me && i < NCROSS; i++) {
            void *h;
            int k = p * NCROSS + i;
            rb[k] = zalloc(BURST_SIZE(i));
            pscom_tag_recv(sock, TAG(p, K_BURST, 0), NOSEQ, rb[k], BURST_SIZE(i), &r[k], &h);
            consistent &= !h == (r[k].calls == 1);
        }
    }
    for (int i = 0; i < NCROSS; i++) {
        for (int p = 0; p < n; p++) {
            int k = p * NCROSS + i;
            if (p == me)
                continue;
            sb[k] = pattern(BURST_SIZE(i), (uint64_t)i, me);
            bad += send_op(cons[p], TAG(me, K_BURST, i), sb[k], BURST_SIZE(i), 0, &s[k]) < 0;
        }
    }
    is(bad, 0, "%d sends to each of %d peers taken", NCROSS, n - 1);
    tu_phase("cross: waiting");
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        ok(wait_ops(&s[p * NCROSS], NCROSS) && wait_ops(&r[p * NCROSS], NCROSS),
           "sends to and receives from rank %d complete", p);
        for (int i = 0; i < NCROSS; i++) {
            int k = p * NCROSS + i;
            good &= send_good(&s[k]) &&
                    recv_good(&r[k], rb[k], TAG(p, K_BURST, i), BURST_SIZE(i), (uint64_t)i, p);
            free(sb[k]);
            free(rb[k]);
        }
        tu_check_transport(cons[p], "the connection");
    }
    ok(consistent, "a receive completed in the call returns no handle, a pending one does");
    ok(good, "from every peer: %d messages of mixed sizes in order, data right", NCROSS);
    is(tu_error_count, 0, "no connection error");
    tu_barrier();
    pscom_close_socket(sock);
    free(cons);
    tu_strv_free(eps);
    free(s);
    free(r);
    free(sb);
    free(rb);
    return 0;
}

/* ---- env: who may match tags ----------------------------------------------------------------- */

static char logbase[] = "/tmp/t_tag.log.XXXXXX";

static void log_to_file(char *name, size_t len, const char *debug)
{
    snprintf(name, len, "%s.r%d", logbase, tu_rank);
    setenv("PSP_DEBUG", debug, 1);
    setenv("PSP_DEBUG_OUT", name, 1);
}

/* the log of this rank (the file removed), also copied into the test's stderr log */
static char *take_log(const char *name)
{
    char *log = tu_slurp(name);
    unlink(name);
    fputs(log, stderr);
    return log;
}

/* The tag API on a socket without tag matching refuses everything. */
static void api_refuses(pscom_socket_t *sock)
{
    pscom_tag_info_t info;
    void *msg = NULL, *h = NULL;
    char buf[8];
    op_t o = {0};
    pscom_connection_t *c = pscom_open_connection(sock);
    ok(!pscom_socket_tag_on(sock) && pscom_tag_send(c, 1, buf, 8, 0, &o) < 0 &&
           pscom_tag_recv(sock, 1, ALL, buf, 8, &o, &h) < 0 &&
           !pscom_tag_probe(sock, 0, 0, &info, &msg) &&
           pscom_tag_msg_recv(sock, buf, buf, 8, &o) < 0 && !o.calls,
       "without tag matching the tag calls refuse (< 0, probe 0) and call no done()");
    pscom_tag_cancel(sock, buf); /* nothing: must not crash */
    pscom_close_connection(c);
}

static int env_child(void *arg)
{
    char logname[sizeof(logbase) + 8];
    pscom_socket_t *sock;
    char *log;
    (void)arg;
    log_to_file(logname, sizeof(logname), "2");
    if (tu_rank == 1) { /* the default transports */
        unsetenv("PSP_SHM");
        unsetenv("PSP_TCP");
    } else if (tu_rank == 2) {
        setenv("PSP_UCP_TAG", "0", 1);
    }
    sock = tu_open_socket();
    if (tu_rank == 0) {
        pscom_socket_t *s2 = tu_open_socket_named("b"), *s3 = tu_open_socket_named("c");
        pscom_connection_t *c3 = pscom_open_connection(s3);
        is(pscom_socket_tag_matching(sock, NULL, 0), 0, "without a done callback: 0");
        is(pscom_socket_tag_matching(s3, on_done, 0), 0, "a socket with a connection already: 0");
        pscom_close_connection(c3);
        pscom_close_socket(s3);
        is(pscom_socket_tag_matching(sock, on_done, 0), 1, "PSP_SHM=0 PSP_TCP=0: 1");
        ok(pscom_socket_tag_on(sock), "pscom_socket_tag_on: 1");
        is(pscom_socket_tag_matching(sock, on_done, 0), 1, "asked again: still 1");
        is(pscom_socket_tag_matching(s2, on_done, 0), 0, "a second socket of the process: 0");
        api_refuses(s2);
        pscom_close_socket(sock);
        is(pscom_socket_tag_matching(s2, on_done, 0), 1, "once the first one is closed: 1");
        pscom_close_socket(s2);
    } else {
        is(pscom_socket_tag_matching(sock, on_done, 0), 0, "%s: 0",
           tu_rank == 1 ? "default transports (shm, tcp on)" : "PSP_UCP_TAG=0");
        api_refuses(sock);
        pscom_close_socket(sock);
    }
    pscom_cleanup();
    log = take_log(logname);
    if (tu_rank == 0) {
        ok(tu_count_lines(log, "matched", "ucp") >= 2 &&
               tu_count_lines(log, "another", "socket") == 1 &&
               tu_count_lines(log, "connections", "already") == 1,
           "PSP_DEBUG=2 logs who matches and why not");
    } else if (tu_rank == 1) {
        ok(tu_count_lines(log, "matched", "enabled") == 1,
           "PSP_DEBUG=2 logs why: more than one transport enabled");
    } else {
        ok(tu_count_lines(log, "matched", "PSP_UCP_TAG") == 1,
           "PSP_DEBUG=2 logs why: PSP_UCP_TAG=0");
    }
    free(log);
    return 0;
}

/* ---- mismatch: one end in tag mode, the other not ------------------------------------------- */

static const char *mismatch_mode;

/* the connection con is settled (up or failed), at most WAIT_S */
static int wait_settled(pscom_connection_t *con)
{
    double end = tu_now() + WAIT_S;
    while (!pscom_con_settled(con) && tu_now() < end)
        pscom_progress(10);
    return pscom_con_settled(con);
}

static int mismatch_child(void *arg)
{
    char logname[sizeof(logbase) + 8];
    int deflt = !strcmp(mismatch_mode, "default");
    pscom_socket_t *sock;
    char **eps, *log, buf[100] = {0};
    (void)arg;
    /* the default level: the line must show without asking for it */
    log_to_file(logname, sizeof(logname), "1");
    if (tu_rank == 1) {
        if (deflt) {
            unsetenv("PSP_SHM");
            unsetenv("PSP_TCP");
        } else {
            setenv("PSP_UCP_TAG", "0", 1);
        }
    }
    sock = tu_open_socket();
    is(pscom_socket_tag_matching(sock, on_done, 0), tu_rank == 0, "tag matching %s",
       tu_rank == 0 ? "on" : "off");
    eps = tu_exchange_eps(sock);
    tu_barrier();

    if (tu_rank == 0) {
        /* 1: tagged sends on an on-demand connection: the connection fails, so do they */
        op_t o[2] = {{0}}, o3 = {0};
        pscom_connection_t *c = pscom_open_connection(sock);
        pscom_connect(c, eps[1], PSCOM_CON_FLAG_ONDEMAND);
        int rc = send_op(c, TAG(0, K_FAIL, 0), buf, sizeof(buf), 0, &o[0]);
        int rc2 = rc == 0 ? send_op(c, TAG(0, K_FAIL, 1), buf, sizeof(buf), 1, &o[1]) : rc;
        tu_phase("mismatch: tagged sends");
        int settled = wait_settled(c);
        if (rc == 0)
            wait_ops(o, rc2 == 0 ? 2 : 1);
        ok(settled && c->state >= PSCOM_CON_STATE_CLOSED,
           "on-demand connection to the peer fails (state %d)", (int)c->state);
        ok(rc < 0 || (o[0].calls == 1 && o[0].status == PSCOM_TAG_FAILED),
           "the tagged send fails (returned %d, done() calls %d, status %d)", rc, o[0].calls,
           (int)o[0].status);
        ok(rc2 < 0 || (o[1].calls == 1 && o[1].status == PSCOM_TAG_FAILED),
           "and the sync one queued behind it (returned %d, done() calls %d, status %d)", rc2,
           o[1].calls, (int)o[1].status);
        int rc3 = send_op(c, TAG(0, K_FAIL, 2), buf, sizeof(buf), 0, &o3);
        ok(rc3 < 0 && !o3.calls, "a send on the failed connection returns %d (< 0)", rc3);
        pscom_close_connection(c);
        tu_barrier(); /* X1 */
        tu_barrier(); /* X2: rank 1 tried */
        /* 3: connecting directly fails too, promptly */
        c = pscom_open_connection(sock);
        double t0 = tu_now();
        pscom_err_t err = pscom_connect(c, eps[1], PSCOM_CON_FLAG_DIRECT);
        ok(err != PSCOM_SUCCESS && tu_now() - t0 < WAIT_S,
           "a direct connect to the peer fails (%s) in %.2f s", pscom_err_str(err), tu_now() - t0);
        pscom_close_connection(c);
    } else {
        tu_barrier(); /* X1: rank 0 tried */
        /* 2: the other way */
        pscom_connection_t *c = pscom_open_connection(sock);
        double t0 = tu_now();
        pscom_err_t err = pscom_connect(c, eps[0], PSCOM_CON_FLAG_DIRECT);
        ok(err != PSCOM_SUCCESS && tu_now() - t0 < WAIT_S,
           "a direct connect to the tag-matching peer fails (%s) in %.2f s", pscom_err_str(err),
           tu_now() - t0);
        pscom_close_connection(c);
        tu_barrier(); /* X2 */
    }
    tu_barrier();
    pscom_close_socket(sock);
    pscom_cleanup();
    tu_strv_free(eps);

    /* the accepting end names the mismatch, once per attempt: rank 1 twice, rank 0 once */
    log = take_log(logname);
    if (tu_rank == 0)
        is(tu_count_lines(log, "matches MPI messages in UCX", "peer does not"), 1,
           "rank 0 logs once that the peer does not match tags in UCX");
    else
        is(tu_count_lines(log, "matches MPI messages in UCX", "this process does not"), 2,
           "rank 1 logs for each of rank 0's attempts that it does not match tags in UCX");
    free(log);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "pair";
    if ((!strcmp(mode, "pair") || !strcmp(mode, "cross")) && argc > 2 && !strcmp(argv[2], "inline"))
        tag_flags = PSCOM_TAG_DONE_INLINE;
    int fd = mkstemp(logbase);
    if (fd >= 0) {
        close(fd);
        unlink(logbase);
    }
    if (!strcmp(mode, "pair")) {
        tu_run(2, pair_child, NULL, NULL);
    } else if (!strcmp(mode, "cross")) {
        tu_run(3, cross_child, NULL, NULL);
    } else if (!strcmp(mode, "env")) {
        tu_run(3, env_child, NULL, NULL);
    } else if (!strcmp(mode, "mismatch") && argc > 2 &&
               (!strcmp(argv[2], "notag") || !strcmp(argv[2], "default"))) {
        mismatch_mode = argv[2];
        tu_run(2, mismatch_child, NULL, NULL);
    } else {
        fprintf(stderr,
                "usage: %s [pair [inline] | cross [inline] | env | mismatch notag|default]\n",
                argv[0]);
        return 2;
    }
    return tap_done();
}
