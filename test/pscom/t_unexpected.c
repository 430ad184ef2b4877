/*
 * t_unexpected.c - unexpected messages and the socket's default_recv hook.
 * Rank 1 sends 100 tagged messages (some above the rendezvous threshold) and, between them,
 * 20 "AM" messages before rank 0 posts anything. Rank 0's default_recv takes the AM messages
 * (returns a request with a buffer) and declines the rest, which become generated requests.
 * Rank 0 then posts receives by tag in reverse order; every one must find its message.
 * Then: with receives posted first, default_recv is not asked at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NMSG   100
#define NAM    20
#define TAG_AM 0x414d

static pscom_request_t *am_reqs[NAM + 1];
static int n_am;         /* AM messages taken */
static int other_offers; /* other messages offered to default_recv */
static int am_extra;     /* AM messages beyond NAM */

static size_t msg_len(int tag)
{
    return tag % 10 == 0 ? 100000 + (size_t)tag : (size_t)tag * 13;
}

static size_t am_len(int k)
{
    return (size_t)k * 1000;
}

static pscom_request_t *default_recv(pscom_connection_t *con, pscom_header_net_t *header)
{
    tu_xh_t xh = {0};
    pscom_request_t *req;
    if (header->xheader_len >= TU_XH)
        memcpy(&xh, pscom_header_xheader(header), TU_XH);
    if (xh.tag != TAG_AM) {
        other_offers++;
        return NULL;
    }
    if (n_am == NAM) {
        am_extra++;
        return NULL;
    }
    req = tu_req(TU_XH);
    req->data = malloc(header->data_len ? header->data_len : 1);
    req->data_len = header->data_len;
    req->connection = con;
    TU_REQ(req)->owned = req->data;
    am_reqs[n_am++] = req;
    return req;
}

static int am_all_done(void)
{
    for (int k = 0; k < NAM; k++)
        if (k >= n_am || !pscom_req_is_done(am_reqs[k]))
            return 0;
    return 1;
}

static void sender(pscom_connection_t *con)
{
    pscom_request_t *reqs[NMSG + NAM];
    int n = 0, am = 0;
    for (int tag = 0; tag < NMSG; tag++) {
        reqs[n++] = tu_post_send(con, (uint32_t)tag, (uint64_t)tag, msg_len(tag), TU_XH);
        if (tag % 5 == 4) {
            reqs[n++] = tu_post_send(con, TAG_AM, (uint64_t)am, am_len(am), TU_XH);
            am++;
        }
    }
    tu_barrier(); /* A: all posted */
    tu_wait_all(reqs, (size_t)n);
    {
        int good = 1;
        for (int i = 0; i < n; i++) {
            good &= pscom_req_successful(reqs[i]);
            tu_req_free(reqs[i]);
        }
        ok(good, "%d sends successful", n);
    }
    /* phase 2: the receiver posts first */
    tu_barrier(); /* B: receives posted */
    for (int i = 0; i < 10; i++)
        reqs[i] = tu_post_send(con, 500, 500 + (uint64_t)i, 2000 * (size_t)i, TU_XH);
    tu_wait_all(reqs, 10);
    for (int i = 0; i < 10; i++)
        tu_req_free(reqs[i]);
}

static void receiver(pscom_socket_t *sock, pscom_connection_t *con)
{
    pscom_request_t *probe, *reqs[NMSG];
    int good = 1, offers;

    tu_barrier(); /* A: the sender has posted everything */

    /* wait until the last message is there: by per-connection order so are all before it */
    tu_phase("probing for tag %d", NMSG - 1);
    tu_wait_arrival(con, NMSG - 1, NMSG - 1);
    tu_phase("waiting for the AM messages");
    while (!am_all_done())
        pscom_progress(10);
    is(other_offers, NMSG, "default_recv was offered each of the %d other messages once", NMSG);

    for (int tag = NMSG - 1; tag >= 0; tag--)
        reqs[tag] = tu_post_recv(con, NULL, msg_len(tag), TU_XH, tag);
    tu_wait_all(reqs, NMSG);
    for (int tag = 0; tag < NMSG; tag++) {
        if (!tu_recv_good(reqs[tag], tag, 1, tag, msg_len(tag), TU_XH) ||
            reqs[tag]->connection != con) {
            diag("  ^ message with tag %d", tag);
            good = 0;
        }
        tu_req_free(reqs[tag]);
    }
    ok(good, "%d unexpected messages received by tag in reverse order, data verified", NMSG);

    good = n_am == NAM && !am_extra;
    for (int k = 0; k < n_am; k++) {
        pscom_request_t *r = am_reqs[k];
        if (!tu_recv_good(r, TAG_AM, 1, k, am_len(k), TU_XH) || r->connection != con) {
            diag("  ^ AM message %d", k);
            good = 0;
        }
    }
    ok(good, "default_recv took the %d AM messages in order (%d taken, %d extra)", NAM, n_am,
       am_extra);

    probe = tu_req(TU_XH);
    probe->ops.recv_accept = tu_accept_tag;
    TU_REQ(probe)->want_tag = TAG_AM;
    probe->connection = NULL;
    probe->socket = sock;
    is(pscom_iprobe(probe), 0, "no AM message was queued as a generated request");
    TU_REQ(probe)->want_tag = -1;
    probe->ops.recv_accept = NULL;
    is(pscom_iprobe(probe), 0, "no generated request is left");
    tu_req_free(probe);

    /* phase 2: receives posted first: default_recv is not asked */
    offers = other_offers;
    for (int i = 0; i < 10; i++)
        reqs[i] = tu_post_recv(NULL, sock, 2000 * (size_t)i, TU_XH, -1);
    tu_barrier(); /* B */
    tu_wait_all(reqs, 10);
    good = 1;
    for (int i = 0; i < 10; i++) {
        good &= tu_recv_good(reqs[i], 500, 1, 500 + i, 2000 * (size_t)i, TU_XH);
        tu_req_free(reqs[i]);
    }
    ok(good, "10 messages into posted any-source receives");
    is(other_offers, offers, "default_recv not asked for messages a posted receive takes");
    for (int k = 0; k < n_am; k++)
        tu_req_free(am_reqs[k]);
}

static int child(void *arg)
{
    pscom_socket_t *sock = tu_open_socket();
    char **eps;
    pscom_connection_t **cons, *con;
    (void)arg;

    if (tu_rank == 0)
        sock->ops.default_recv = default_recv; /* before anything can arrive */
    eps = tu_exchange_eps(sock);
    cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_ONDEMAND);
    con = cons[1 - tu_rank];

    if (tu_rank == 1)
        sender(con);
    else
        receiver(sock, con);
    return tu_finish(sock, cons, eps, con);
}

int main(void)
{
    tu_run(2, child, NULL, NULL);
    return tap_done();
}
