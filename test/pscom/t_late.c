/*
 * t_late.c - late receivers: senders stream messages at a process that is not progressing
 * (it sleeps), then the receiver wakes and takes them one by one. Every transport must hold
 * the flood back (flow control) and deliver all of it, in order, once the receiver runs;
 * a sender that waits for room must be woken by the receiver's consumption, not by luck.
 *
 *   t_late pair [tag]   rank 1 sends N messages of each size to rank 0, each send waited for
 *                       before the next (as MPI_Send does)
 *   t_late many [tag]   ranks 1..3 send to rank 0, which receives from any source and checks
 *                       the order per sender
 *
 * Last, the senders flood 1 KiB messages and close their socket at once: the close must wait
 * until the late receiver took them (a transport's queued copies included), not drop them.
 *
 *   t_late later        rank 1 posts LATER_N sends of 1 KiB at once and then one of 8 B with
 *                       another tag; rank 0, late, takes the 8 B one first, then the others
 *                       in order: what went by rendezvous for want of credit must all come,
 *                       in order (late.t checks over tcp that their data was fetched ahead)
 *
 * "tag": the same through pscom_tag_send/pscom_tag_recv (tag matching in the transport; the
 * .t script runs it where ucp is the only transport). Sizes 8 B, 1 KiB, 64 KiB, 1 MiB; the
 * counts keep every size to a few MiB per sender. Every wait is bounded (T_TIMEOUT kills a
 * hung run; tu_phase names the step and PSP_SIGQUIT dumps pscom's state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define SLEEP_US     200000 /* the receiver's lateness: the senders fill their window in far less */
#define SEND_NOW_MAX 8192   /* the MPI netmod's limit for pscom_send_now */

static const struct {
    size_t len;
    int n;
} sizes[] = {{8, 20000}, {1024, 5000}, {64 * 1024, 100}, {1024 * 1024, 8}};
#define NSIZES (int)(sizeof(sizes) / sizeof(sizes[0]))

static int tag_mode, later_mode;
static int nproc;

#define LATER_N 2000

#define CLOSE_N 3000 /* 1 KiB messages before the senders close */

/* a send that fails ends this rank: the parent reports its exit status */
#define fail(...)                                                                                  \
    do {                                                                                           \
        diag(__VA_ARGS__);                                                                         \
        exit(1);                                                                                   \
    } while (0)

/* ---- tag mode: one op per message ---------------------------------------------------------- */

typedef struct op {
    int calls;
    pscom_tag_status_t status;
    pscom_tag_info_t info;
} op_t;

static void on_done(void *user, pscom_tag_status_t status, const pscom_tag_info_t *info)
{
    op_t *o = user;
    o->calls++;
    o->status = status;
    if (info)
        o->info = *info;
}

/* tag: source in bits 32.., sequence below; mask: any source */
#define TAG(src, seq) ((uint64_t)(src) << 32 | (uint32_t)(seq))
#define ANY_SRC       0xffffffffull

static void wait_op(op_t *o)
{
    while (!o->calls)
        pscom_progress(10);
}

/* ---- one message each way ------------------------------------------------------------------ */

static void send_one(pscom_connection_t *con, size_t len, int seq, void *buf)
{
    if (!tag_mode) {
        /* as the MPI netmod sends: small ones by pscom_send_now where the transport takes them */
        if (len <= SEND_NOW_MAX && tu_send_now(con, 7, (uint64_t)seq, len, TU_XH))
            return;
        pscom_request_t *req = tu_post_send(con, 7, (uint64_t)seq, len, TU_XH);
        pscom_wait(req);
        if (!pscom_req_successful(req))
            fail("send %d of %zu B: %s", seq, len, pscom_req_state_str(req->state));
        tu_req_free(req);
        return;
    }
    op_t o = {0};
    tu_fill(buf, len, tu_seed(len, (uint64_t)seq, (uint64_t)tu_rank));
    int rc = pscom_tag_send(con, TAG(tu_rank, seq), buf, len, 0, &o);
    if (rc < 0)
        fail("tag send %d of %zu B: %d", seq, len, rc);
    if (rc == 0)
        wait_op(&o);
    if (rc == 0 && o.status != PSCOM_TAG_DONE)
        fail("tag send %d of %zu B: status %d", seq, len, (int)o.status);
}

/* Receive one message from con (NULL: any source); *src gets the sender. 1 if good. */
static int recv_one(pscom_socket_t *sock, pscom_connection_t *con, int from, size_t len,
                    const int *next_seq, int *src, void *buf)
{
    if (!tag_mode) {
        pscom_request_t *req = tu_post_recv(con, sock, len, TU_XH, -1);
        pscom_wait(req);
        tu_xh_t xh = {0};
        memcpy(&xh, req->xheader, sizeof(xh));
        *src = (int)xh.src;
        int good =
            *src > 0 && *src < nproc && tu_recv_good(req, 7, *src, next_seq[*src], len, TU_XH);
        tu_req_free(req);
        return good;
    }
    op_t o = {0};
    void *h;
    uint64_t mask = con ? ~ANY_SRC : 0; /* one source, any sequence number; or anything */
    if (pscom_tag_recv(sock, TAG(from, 0), mask, buf, len, &o, &h) < 0)
        fail("tag recv");
    wait_op(&o);
    *src = (int)(o.info.tag >> 32);
    int seq = (int)(uint32_t)o.info.tag;
    if (o.status != PSCOM_TAG_DONE || o.info.len != len || *src <= 0 || *src >= nproc ||
        seq != next_seq[*src]) {
        diag("  tag receive: status %d, tag %#llx, %zu B", (int)o.status,
             (unsigned long long)o.info.tag, o.info.len);
        return 0;
    }
    long long bad = tu_verify(buf, len, tu_seed(len, (uint64_t)seq, (uint64_t)*src));
    if (bad >= 0)
        diag("  tag receive from %d seq %d: first bad byte %lld", *src, seq, bad);
    return bad < 0;
}

/* Rank 0: sleep (late), then take n messages of len from every sender, checked. */
static void receive_flood(pscom_socket_t *sock, pscom_connection_t **cons, size_t len, int n,
                          int *next_seq, void *buf, const char *what)
{
    usleep(SLEEP_US); /* late: no progress while the senders flood */
    tu_phase("receiving %d x %zu B from %d sender(s)%s", n, len, nproc - 1, what);
    double t0 = tu_now();
    int bad = 0;
    memset(next_seq, 0, (size_t)nproc * sizeof(int));
    for (int i = 0; i < n * (nproc - 1); i++) {
        int src = -1;
        pscom_connection_t *con = nproc == 2 ? cons[1] : NULL;
        if (!recv_one(sock, con, 1, len, next_seq, &src, buf) && ++bad > 3)
            break;
        if (src > 0 && src < nproc)
            next_seq[src]++;
    }
    ok(!bad, "%d x %zu B from %d late-received sender(s)%s: in order, data verified (%.2f s)", n,
       len, nproc - 1, what, tu_now() - t0);
}

static void later_first(pscom_socket_t *sock, pscom_connection_t **cons)
{
    tu_barrier();
    if (tu_rank == 1) {
        pscom_request_t **reqs = malloc((LATER_N + 1) * sizeof(*reqs));
        if (!reqs)
            fail("malloc");
        tu_phase("posting %d x 1 KiB, then 8 B", LATER_N);
        for (int i = 0; i < LATER_N; i++)
            reqs[i] = tu_post_send(cons[0], 7, (uint64_t)i, 1024, TU_XH);
        reqs[LATER_N] = tu_post_send(cons[0], 8, 0, 8, TU_XH);
        tu_wait_all(reqs, LATER_N + 1);
        for (int i = 0; i <= LATER_N; i++)
            tu_req_free(reqs[i]);
        free(reqs);
        return;
    }
    usleep(SLEEP_US);
    tu_phase("receiving the later message first");
    double t0 = tu_now();
    pscom_request_t *req = tu_post_recv(cons[1], sock, 8, TU_XH, 8);
    pscom_wait(req);
    int good = tu_recv_good(req, 8, 1, 0, 8, TU_XH);
    tu_req_free(req);
    for (int i = 0; i < LATER_N && good; i++) {
        req = tu_post_recv(cons[1], sock, 1024, TU_XH, 7);
        pscom_wait(req);
        good = tu_recv_good(req, 7, 1, i, 1024, TU_XH);
        tu_req_free(req);
    }
    ok(good,
       "the later message first, then %d x 1 KiB posted before it: in order, data verified "
       "(%.2f s)",
       LATER_N, tu_now() - t0);
}

static int child(void *arg)
{
    (void)arg;
    pscom_socket_t *sock = tu_open_socket();
    if (tag_mode &&
        !ok(pscom_socket_tag_matching(sock, on_done, 0) == 1, "pscom_socket_tag_matching: on"))
        return 2;
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_DIRECT);
    void *buf = malloc(sizes[NSIZES - 1].len);
    int *next_seq = calloc((size_t)nproc, sizeof(int));
    if (!buf || !next_seq)
        fail("malloc");

    if (later_mode) {
        later_first(sock, cons);
        is(tu_error_count, 0, "no connection error");
        tu_barrier();
        pscom_close_socket(sock);
        goto out;
    }
    for (int s = 0; s < NSIZES; s++) {
        size_t len = sizes[s].len;
        int n = sizes[s].n;
        tu_barrier();
        if (tu_rank > 0) {
            tu_phase("sending %d x %zu B", n, len);
            for (int i = 0; i < n; i++)
                send_one(cons[0], len, i, buf);
        } else {
            receive_flood(sock, cons, len, n, next_seq, buf, "");
        }
    }
    if (tu_rank == 0)
        for (int r = 1; r < nproc; r++)
            tu_check_transport(cons[r], "a sender's connection");
    is(tu_error_count, 0, "no connection error");

    /* the senders close right after their flood: closing waits for the late receiver */
    tu_barrier();
    if (tu_rank > 0) {
        tu_phase("sending %d x 1 KiB, then closing", CLOSE_N);
        for (int i = 0; i < CLOSE_N; i++)
            send_one(cons[0], 1024, i, buf);
        /* (the other senders, done sooner, may have closed their connections to us) */
        is(TU_CON(cons[0])->errors, 0, "no error on the connection to the receiver");
        pscom_close_socket(sock);
    } else {
        receive_flood(sock, cons, 1024, CLOSE_N, next_seq, buf, ", the senders closing");
        pscom_close_socket(sock);
    }
    tu_barrier();
out:
    free(buf);
    free(next_seq);
    free(cons);
    tu_strv_free(eps);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "pair";
    for (int i = 2; i < argc; i++) {
        tag_mode |= !strcmp(argv[i], "tag");
    }
    later_mode = !strcmp(mode, "later");
    if (!strcmp(mode, "pair") || (later_mode && !tag_mode))
        nproc = 2;
    else if (!strcmp(mode, "many"))
        nproc = 4;
    else {
        fprintf(stderr, "usage: %s pair|many [tag] | later\n", argv[0]);
        return 2;
    }
    tu_run(nproc, child, NULL, NULL);
    return tap_done();
}
