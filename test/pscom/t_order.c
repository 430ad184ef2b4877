/*
 * t_order.c - eager/rendezvous interleaving: small (eager) and large (above the forced
 * rendezvous threshold) messages alternate on one connection; receives must see them in send
 * order. Rounds: (a) both directions at once into pre-posted accept-all receives; (b) all
 * messages unexpected, then accept-all receives; (c) unexpected, receives for the large tag
 * posted before those for the small tag; (d) as (c) but posted before the sends; (e) receives
 * on the connection and any-source receives posted alternately; (f) the small messages by
 * pscom_send_now where the transport takes them at once (shm, ucp: most), else by a request;
 * (g) a burst of small ones by pscom_send_now into a peer that reads nothing for a while: the
 * transport fills up (tcp: a write that takes a message in part keeps its rest), the others
 * are queued behind it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define K      200
#define TAG_S  1
#define TAG_L  2
#define MAXLEN (65536 + 8 * K)

#define ROUND_G (6 * K) /* first sequence number of round (g): all small, 3-3.9 KB */
#define G_WAIT  300000  /* us the receiver of round (g) leaves its connection alone */

static size_t msg_len(uint64_t seq)
{
    if (seq >= ROUND_G)
        return 3000 + seq % 901;
    if (seq % 2)
        return 65536 + seq;
    /* round (f): small enough for UCX's short protocol on its shared memory (93 bytes) */
    return seq >= 5 * K ? seq % 8 : 100 + seq % 7;
}

static uint32_t msg_tag(uint64_t seq)
{
    return seq % 2 && seq < ROUND_G ? TAG_L : TAG_S;
}

static void send_all(pscom_connection_t *con, uint64_t base, pscom_request_t **reqs)
{
    for (int i = 0; i < K; i++)
        reqs[i] = tu_post_send(con, msg_tag(base + i), base + i, msg_len(base + i), TU_XH);
}

static int finish_sends(pscom_request_t **reqs)
{
    int good = 1;
    tu_wait_all(reqs, K);
    for (int i = 0; i < K; i++) {
        good &= pscom_req_successful(reqs[i]);
        tu_req_free(reqs[i]);
    }
    return good;
}

/* wait for the receives; reqs[i] must hold message seq[i] */
static int finish_recvs(pscom_request_t **reqs, const uint64_t *seq, int peer)
{
    int bad = 0;
    tu_wait_all(reqs, K);
    for (int i = 0; i < K; i++) {
        if (!tu_recv_good(reqs[i], msg_tag(seq[i]), peer, (long long)seq[i], msg_len(seq[i]),
                          TU_XH) &&
            ++bad <= 5)
            diag("  ^ receive %d, expected seq %llu", i, (unsigned long long)seq[i]);
        tu_req_free(reqs[i]);
    }
    return !bad;
}

static int child(void *arg)
{
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_ONDEMAND);
    int peer = 1 - tu_rank;
    pscom_connection_t *con = cons[peer];
    pscom_request_t *sreq[K], *rreq[K];
    uint64_t seq[K];
    (void)arg;

    /* (a) both directions, pre-posted accept-all receives */
    tu_phase("round a");
    for (int i = 0; i < K; i++) {
        rreq[i] = tu_post_recv(con, NULL, MAXLEN, TU_XH, -1);
        seq[i] = (uint64_t)i;
    }
    tu_barrier();
    send_all(con, 0, sreq);
    ok(finish_recvs(rreq, seq, peer), "(a) pre-posted: %d alternating messages in order", K);
    ok(finish_sends(sreq), "(a) sends successful");

    /* (b)-(d): rank 1 sends, rank 0 receives */
    for (int round = 1; round <= 3; round++) {
        uint64_t base = (uint64_t)round * K;
        tu_phase("round %c", 'a' + round);
        if (tu_rank == 1) {
            if (round == 3)
                tu_barrier(); /* receives are posted */
            send_all(con, base, sreq);
            if (round != 3)
                tu_barrier(); /* all sent */
            ok(finish_sends(sreq), "(%c) sends successful", 'a' + round);
            continue;
        }
        if (round != 3) {
            tu_barrier();
            /* the last message is in: then all are (per-connection order) */
            tu_wait_arrival(con, msg_tag(base + K - 1), (int64_t)(base + K - 1));
        }
        if (round == 1) {
            for (int i = 0; i < K; i++) {
                rreq[i] = tu_post_recv(con, NULL, MAXLEN, TU_XH, -1);
                seq[i] = base + i;
            }
        } else {
            /* large-tag receives first, then the small-tag ones */
            int n = 0;
            for (int i = 1; i < K; i += 2, n++) {
                rreq[n] = tu_post_recv(con, NULL, MAXLEN, TU_XH, TAG_L);
                seq[n] = base + i;
            }
            for (int i = 0; i < K; i += 2, n++) {
                rreq[n] = tu_post_recv(con, NULL, MAXLEN, TU_XH, TAG_S);
                seq[n] = base + i;
            }
            if (round == 3)
                tu_barrier();
        }
        ok(finish_recvs(rreq, seq, peer), "(%c) %s: %d alternating messages, order kept",
           'a' + round,
           round == 1   ? "unexpected, accept-all"
           : round == 2 ? "unexpected, large tag first"
                        : "posted, large tag first",
           K);
    }

    /* (e) receives on the connection and any-source receives, alternately posted: each
       message goes to the earliest posted receive that takes it */
    tu_phase("round e");
    if (tu_rank == 1) {
        tu_barrier(); /* receives are posted */
        send_all(con, 4 * K, sreq);
        ok(finish_sends(sreq), "(e) sends successful");
    } else {
        for (int i = 0; i < K; i++) {
            rreq[i] = tu_post_recv(i % 2 ? NULL : con, sock, MAXLEN, TU_XH, -1);
            seq[i] = 4 * K + (uint64_t)i;
        }
        tu_barrier();
        ok(finish_recvs(rreq, seq, peer),
           "(e) receives on the connection and any-source ones, alternately: posting order");
    }

    /* (f) small messages from pscom_send_now between queued large ones */
    tu_phase("round f");
    if (tu_rank == 1) {
        int now = 0, posted = 0, first = 0;
        tu_barrier(); /* receives are posted */
        for (int i = 0; i < K; i++) {
            uint64_t q = 5 * K + (uint64_t)i;
            if (msg_tag(q) == TAG_S && tu_send_now(con, TAG_S, q, msg_len(q), TU_XH)) {
                first |= i == 0;
                now++;
                continue;
            }
            sreq[posted++] = tu_post_send(con, msg_tag(q), q, msg_len(q), TU_XH);
        }
        int good = 1;
        tu_wait_all(sreq, posted);
        for (int i = 0; i < posted; i++) {
            good &= pscom_req_successful(sreq[i]);
            tu_req_free(sreq[i]);
        }
        ok(good, "(f) queued sends successful (%d of %d small ones sent at once)", now, K / 2);
        const char *t = getenv("T_TRANSPORT");
        /* the first one, with nothing before it (after a large one, UCX may still be busy) */
        if (t && (!strcmp(t, "shm") || !strcmp(t, "ucp")))
            ok(first, "(f) %s takes a small message at once on an idle connection", t);
    } else {
        for (int i = 0; i < K; i++) {
            rreq[i] = tu_post_recv(con, NULL, MAXLEN, TU_XH, -1);
            seq[i] = 5 * K + (uint64_t)i;
        }
        tu_barrier();
        ok(finish_recvs(rreq, seq, peer), "(f) sent at once or queued: %d messages in order", K);
    }

    /* (g) a burst by pscom_send_now while the peer reads nothing: once the transport is full
       pscom_send_now declines (a partly written message counts as sent) and the rest queue */
    tu_phase("round g");
    if (tu_rank == 1) {
        int now = 0, posted = 0;
        tu_barrier();
        for (int i = 0; i < K; i++) {
            uint64_t q = ROUND_G + (uint64_t)i;
            if (tu_send_now(con, TAG_S, q, msg_len(q), TU_XH)) {
                now++;
                continue;
            }
            sreq[posted++] = tu_post_send(con, TAG_S, q, msg_len(q), TU_XH);
        }
        int good = 1;
        tu_wait_all(sreq, posted);
        for (int i = 0; i < posted; i++) {
            good &= pscom_req_successful(sreq[i]);
            tu_req_free(sreq[i]);
        }
        ok(good, "(g) burst into an idle peer: queued sends successful (%d of %d sent at once)",
           now, K);
    } else {
        tu_barrier();
        usleep(G_WAIT);
        for (int i = 0; i < K; i++) {
            rreq[i] = tu_post_recv(con, NULL, MAXLEN, TU_XH, -1);
            seq[i] = ROUND_G + (uint64_t)i;
        }
        ok(finish_recvs(rreq, seq, peer), "(g) burst into an idle peer: %d messages in order", K);
    }

    return tu_finish(sock, cons, eps, con);
}

int main(void)
{
    tu_run(2, child, NULL, NULL);
    return tap_done();
}
