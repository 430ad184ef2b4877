/*
 * t_probe.c - probe, iprobe, cancel and truncation between two processes.
 * Rank 1 sends, rank 0 probes and receives; barriers order the steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define XH (TU_XH + 20)

static pscom_request_t *probe_req(pscom_connection_t *con, pscom_socket_t *sock, long tag)
{
    pscom_request_t *p = tu_req(PSCOM_XHEADER_MAX);
    p->connection = con;
    p->socket = con ? NULL : sock;
    p->ops.recv_accept = tu_accept_tag;
    TU_REQ(p)->want_tag = tag;
    return p;
}

/* the fields a successful probe fills */
static int probe_filled(pscom_request_t *p, pscom_connection_t *con, uint32_t tag, uint64_t seq,
                        size_t len)
{
    tu_xh_t xh = {0};
    if (p->xheader_len >= TU_XH)
        memcpy(&xh, p->xheader, TU_XH);
    if (p->connection == con && p->xheader_len == XH && p->header.xheader_len == XH &&
        p->data_len == len && p->header.data_len == len && xh.tag == tag && xh.seq == seq &&
        xh.src == 1)
        return 1;
    diag("  probe: connection %s, xheader_len %zu/%u, data_len %zu/%llu, tag %u seq %llu src %u",
         p->connection == con ? "right" : "wrong", p->xheader_len, (unsigned)p->header.xheader_len,
         p->data_len, (unsigned long long)p->header.data_len, xh.tag, (unsigned long long)xh.seq,
         xh.src);
    return 0;
}

static void receiver(pscom_socket_t *sock, pscom_connection_t *con)
{
    pscom_request_t *p, *r, *r2;
    pscom_connection_t *from;
    char small[16];
    pscom_err_t rc;

    /* iprobe before anything was sent */
    p = probe_req(con, sock, -1);
    is(pscom_iprobe(p), 0, "iprobe on the connection: nothing yet");
    tu_req_free(p);
    p = probe_req(NULL, sock, -1);
    is(pscom_iprobe(p), 0, "iprobe any source: nothing yet");
    tu_req_free(p);
    tu_barrier(); /* 1 */

    /* iprobe until the message is there */
    tu_phase("iprobe for tag 5");
    p = probe_req(con, sock, 5);
    while (!pscom_iprobe(p))
        pscom_progress(10);
    ok(probe_filled(p, con, 5, 1, 3000), "iprobe fills header, xheader, data_len, connection");
    ok(pscom_iprobe(p) == 1 && probe_filled(p, con, 5, 1, 3000),
       "iprobe again: the message is still queued");
    tu_req_free(p);
    p = probe_req(NULL, sock, 5);
    ok(pscom_iprobe(p) == 1 && probe_filled(p, con, 5, 1, 3000),
       "any-source iprobe finds it too and names the connection");
    tu_req_free(p);
    p = probe_req(con, sock, 6);
    is(pscom_iprobe(p), 0, "iprobe with a recv_accept that declines it: 0");
    tu_req_free(p);
    p = tu_req(8); /* room for 8 of the 36 xheader bytes */
    p->connection = con;
    if (ok(pscom_iprobe(p) == 1, "iprobe with room for 8 xheader bytes finds it")) {
        tu_xh_t xh = {0};
        memcpy(&xh, p->xheader, 8);
        ok(xh.tag == 5 && xh.src == 1 && p->header.data_len == 3000,
           "and fills the first 8 bytes and the header");
    }
    tu_req_free(p);
    r = tu_post_recv(con, NULL, 3000, XH, 5);
    pscom_wait(r);
    ok(tu_recv_good(r, 5, 1, 1, 3000, XH), "a receive gets the probed message");
    tu_req_free(r);
    p = probe_req(con, sock, 5);
    is(pscom_iprobe(p), 0, "after the receive iprobe finds nothing");
    tu_req_free(p);

    /* blocking probe: eager and rendezvous size */
    tu_barrier(); /* 2 */
    tu_phase("probe for tag 6");
    p = probe_req(con, sock, 6);
    pscom_probe(p);
    ok(probe_filled(p, con, 6, 2, 100), "pscom_probe returns with the message");
    tu_req_free(p);
    p = probe_req(NULL, sock, 16);
    pscom_probe(p);
    ok(probe_filled(p, con, 16, 3, 1u << 20), "pscom_probe any source, 1 MiB message");
    tu_req_free(p);
    r = tu_post_recv(con, NULL, 1u << 20, XH, 16); /* out of order: by tag */
    r2 = tu_post_recv(con, NULL, 100, XH, 6);
    pscom_wait(r);
    pscom_wait(r2);
    ok(tu_recv_good(r, 16, 1, 3, 1u << 20, XH), "receive the probed 1 MiB message");
    ok(tu_recv_good(r2, 6, 1, 2, 100, XH), "receive the probed 100 B message");
    tu_req_free(r);
    tu_req_free(r2);

    /* cancel */
    tu_phase("cancel");
    r = tu_post_recv(con, NULL, 64, XH, 7);
    r2 = tu_post_recv(NULL, sock, 64, XH, 7);
    is(pscom_cancel_recv(r), 1, "cancel a posted receive: 1");
    ok(pscom_req_is_done(r) && (r->state & PSCOM_REQ_STATE_CANCELED) && !pscom_req_successful(r),
       "it is DONE and CANCELED (%s)", pscom_req_state_str(r->state));
    is(TU_REQ(r)->io_done_calls, 1, "io_done called once");
    is(pscom_cancel_recv(r2), 1, "cancel a posted any-source receive: 1");
    ok(pscom_req_is_done(r2) && (r2->state & PSCOM_REQ_STATE_CANCELED), "it is DONE and CANCELED");
    tu_req_free(r);
    tu_req_free(r2);
    tu_barrier(); /* 3: now the tag 7 message is sent */
    r = tu_post_recv(con, NULL, 64, XH, 7);
    pscom_wait(r);
    ok(tu_recv_good(r, 7, 1, 4, 64, XH), "the message the cancelled receives wanted is not lost");
    is(pscom_cancel_recv(r), 0, "cancel of a completed receive: 0");
    ok(pscom_req_successful(r), "and the receive stays successful");
    tu_req_free(r);

    /* truncation: posted first, then unexpected */
    for (int late = 0; late < 2; late++) {
        uint64_t s = 10 + 3 * (uint64_t)late;
        pscom_request_t *t1, *t2, *t3;
        tu_phase("truncation %d", late);
        if (late) {
            tu_barrier(); /* 4b: sent */
            tu_wait_arrival(con, 10, (int64_t)s + 2);
        }
        t1 = tu_post_recv(con, NULL, 100, XH, 8);  /* 1000 B message */
        t2 = tu_post_recv(con, NULL, 4096, XH, 9); /* 1 MiB message */
        t3 = tu_post_recv(con, NULL, 500, XH, 10); /* fits */
        if (!late)
            tu_barrier(); /* 4a: posted */
        pscom_wait(t1);
        pscom_wait(t2);
        pscom_wait(t3);
        for (int i = 0; i < 2; i++) {
            pscom_request_t *t = i ? t2 : t1;
            size_t full = i ? 1u << 20 : 1000, room = i ? 4096 : 100;
            long long bad = tu_verify(t->data, room, tu_seed(full, s + (uint64_t)i, 1));
            if (!ok(pscom_req_is_done(t) && (t->state & PSCOM_REQ_STATE_TRUNCATED) &&
                        !pscom_req_successful(t) && t->header.data_len == full &&
                        t->data_len <= room && bad < 0,
                    "%s: %zu B message into %zu B: TRUNCATED, first bytes right",
                    late ? "unexpected" : "posted", full, room))
                diag("  state %s, header.data_len %llu, data_len %zu, first bad byte %lld",
                     pscom_req_state_str(t->state), (unsigned long long)t->header.data_len,
                     t->data_len, bad);
        }
        ok(tu_recv_good(t3, 10, 1, (long long)s + 2, 500, XH),
           "%s: the next message is received whole", late ? "unexpected" : "posted");
        tu_req_free(t1);
        tu_req_free(t2);
        tu_req_free(t3);
    }

    /* blocking receive into a too small buffer reports it */
    tu_barrier(); /* 5 */
    rc = pscom_recv(con, NULL, NULL, 0, small, sizeof(small), &from);
    ok(rc != PSCOM_SUCCESS, "pscom_recv of 2000 B into 16 B fails (%s)", pscom_err_str(rc));

    /* an xheader longer than the receive's room */
    r = tu_req(TU_XH);
    r->connection = con;
    r->data = small;
    r->data_len = sizeof(small);
    pscom_post_recv(r);
    pscom_wait(r);
    {
        tu_xh_t xh;
        memcpy(&xh, r->xheader, TU_XH);
        ok(pscom_req_is_done(r) && xh.tag == 12 && xh.seq == 17,
           "100 B xheader into room for %zu: done, the first bytes right", TU_XH);
        diag("  state %s, xheader_len %zu", pscom_req_state_str(r->state), r->xheader_len);
    }
    pscom_request_free(r);
    r = tu_post_recv(con, NULL, 10, XH, -1);
    pscom_wait(r);
    ok(tu_recv_good(r, 13, 1, 18, 10, XH), "the connection still works");
    tu_req_free(r);
}

static void sender(pscom_connection_t *con)
{
    pscom_request_t *reqs[32];
    int n = 0, good = 1;

    tu_barrier(); /* 1 */
    reqs[n++] = tu_post_send(con, 5, 1, 3000, XH);
    tu_barrier(); /* 2 */
    reqs[n++] = tu_post_send(con, 6, 2, 100, XH);
    reqs[n++] = tu_post_send(con, 16, 3, 1u << 20, XH);
    tu_barrier(); /* 3 */
    reqs[n++] = tu_post_send(con, 7, 4, 64, XH);
    for (int late = 0; late < 2; late++) {
        uint64_t s = 10 + 3 * (uint64_t)late;
        if (!late)
            tu_barrier(); /* 4a */
        reqs[n++] = tu_post_send(con, 8, s, 1000, XH);
        reqs[n++] = tu_post_send(con, 9, s + 1, 1u << 20, XH);
        reqs[n++] = tu_post_send(con, 10, s + 2, 500, XH);
        if (late)
            tu_barrier(); /* 4b */
    }
    tu_barrier(); /* 5 */
    reqs[n++] = tu_post_send(con, 11, 16, 2000, 0);
    reqs[n++] = tu_post_send(con, 12, 17, 0, 100);
    reqs[n++] = tu_post_send(con, 13, 18, 10, XH);
    tu_wait_all(reqs, (size_t)n);
    for (int i = 0; i < n; i++) {
        good &= pscom_req_is_done(reqs[i]) && !(reqs[i]->state & PSCOM_REQ_STATE_ERROR);
        tu_req_free(reqs[i]);
    }
    ok(good, "all %d sends done without error", n);
}

static void body(pscom_socket_t *sock, pscom_connection_t *con)
{
    if (tu_rank == 0)
        receiver(sock, con);
    else
        sender(con);
}

int main(void)
{
    tu_run_pair(body);
    return tap_done();
}
