/*
 * t_sizes.c - two processes exchange every size class (0 B .. 16 MiB, odd sizes around the
 * eager/fragment/rendezvous edges) with xheaders of 0, 8, 100 and PSCOM_XHEADER_MAX bytes, in
 * both directions, receives posted before and after the sends, all data verified; then every
 * size both ways at the same time; then the copying pscom_send() and the blocking pscom_recv().
 *
 * usage: t_sizes [direct|ondemand]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const size_t sizes[] = {
    0, 1, 7, 8, 63, 64, 4095, 4096, 65535, 65536, 1u << 20, (4u << 20) + 3, 16u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
static const size_t xhs[] = {0, 8, 100, PSCOM_XHEADER_MAX};
#define NXHS (sizeof(xhs) / sizeof(xhs[0]))

static int connect_flags = PSCOM_CON_FLAG_DIRECT;

static void send_batch(pscom_connection_t *con, uint64_t seq0, size_t xh, int dir)
{
    pscom_request_t *reqs[NSIZES];
    size_t rndv = tu_rndv_threshold();
    int good = 1, rndv_good = 1;

    for (size_t i = 0; i < NSIZES; i++)
        reqs[i] = tu_post_send(con, 7, seq0 + i, sizes[i], xh);
    tu_wait_all(reqs, NSIZES);
    for (size_t i = 0; i < NSIZES; i++) {
        pscom_request_t *r = reqs[i];
        int is_rndv = (r->state & PSCOM_REQ_STATE_RENDEZVOUS) != 0;
        if (!pscom_req_successful(r) || TU_REQ(r)->io_done_calls != 1 ||
            !(r->state & PSCOM_REQ_STATE_SEND)) {
            diag("  send of %zu bytes: state %s, io_done %d times", sizes[i],
                 pscom_req_state_str(r->state), TU_REQ(r)->io_done_calls);
            good = 0;
        }
        if (rndv && ((sizes[i] >= 2 * rndv && !is_rndv) || (sizes[i] <= rndv / 2 && is_rndv))) {
            diag("  send of %zu bytes (threshold %zu): state %s", sizes[i], rndv,
                 pscom_req_state_str(r->state));
            rndv_good = 0;
        }
        tu_req_free(r);
    }
    ok(good, "dir %d xheader %zu: %zu sends complete, successful, io_done once", dir, xh, NSIZES);
    if (rndv)
        ok(rndv_good, "dir %d xheader %zu: RENDEZVOUS state exactly on sends well above %zu", dir,
           xh, rndv);
}

static void recv_batch(pscom_connection_t *con, int peer, uint64_t seq0, size_t xh, int dir,
                       int preposted)
{
    pscom_request_t *reqs[NSIZES];

    for (size_t i = 0; i < NSIZES; i++) {
        size_t room = sizes[i] + (i % 3 == 0 ? 1000 : 0); /* some buffers larger than needed */
        size_t max_xh = i % 2 ? PSCOM_XHEADER_MAX : xh;
        reqs[i] = tu_post_recv(con, NULL, room, max_xh, -1);
    }
    if (preposted)
        tu_barrier();
    tu_wait_all(reqs, NSIZES);
    for (size_t i = 0; i < NSIZES; i++) {
        ok(tu_recv_good(reqs[i], 7, peer, (long long)(seq0 + i), sizes[i], xh) &&
               reqs[i]->connection == con,
           "dir %d xheader %4zu size %8zu: received and verified (%s)", dir, xh, sizes[i],
           preposted ? "posted first" : "posted late");
        tu_req_free(reqs[i]);
    }
}

/* pscom_send (buffers reusable at once) and the blocking pscom_recv */
static void copy_api(pscom_socket_t *sock, pscom_connection_t *con, int peer)
{
    static const size_t csizes[] = {0, 1, 4096, 65536, (1u << 20) + 1};
    const size_t n = sizeof(csizes) / sizeof(csizes[0]);
    char *buf = malloc((1u << 20) + 1);
    tu_xh_t xh;

    for (int dir = 0; dir < 2; dir++) {
        if (tu_rank == dir) {
            for (size_t i = 0; i < n; i++) {
                xh = (tu_xh_t){.tag = 9, .src = (uint32_t)tu_rank, .seq = 1000 + i};
                tu_fill(buf, csizes[i], tu_seed(csizes[i], xh.seq, xh.src));
                pscom_send(con, &xh, sizeof(xh), buf, csizes[i]);
                memset(&xh, 0xee, sizeof(xh)); /* pscom_send copied both */
                memset(buf, 0xee, csizes[i]);
            }
            tu_barrier();
        } else {
            tu_barrier(); /* the sender is done before we look: all of it is unexpected */
            for (size_t i = 0; i < n; i++) {
                pscom_connection_t *from = NULL;
                /* half of them from the connection, half from any connection of the socket */
                pscom_err_t rc =
                    i % 2 ? pscom_recv(NULL, sock, &xh, sizeof(xh), buf, csizes[i], &from)
                          : pscom_recv(con, NULL, &xh, sizeof(xh), buf, csizes[i], &from);
                long long bad = tu_verify(buf, csizes[i], tu_seed(csizes[i], 1000 + i, peer));
                if (!ok(rc == PSCOM_SUCCESS && from == con && xh.seq == 1000 + i &&
                            xh.src == (uint32_t)peer && bad < 0,
                        "dir %d pscom_send/pscom_recv(%s) of %zu bytes", dir, i % 2 ? "any" : "con",
                        csizes[i]))
                    diag("  rc %s, from %s, seq %llu, first bad byte %lld", pscom_err_str(rc),
                         from == con ? "con" : "other", (unsigned long long)xh.seq, bad);
            }
        }
    }
    free(buf);
}

static int child(void *arg)
{
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, connect_flags);
    int peer = 1 - tu_rank;
    pscom_connection_t *con = cons[peer];
    uint64_t seq = 0;
    (void)arg;

    for (int dir = 0; dir < 2; dir++) {
        for (size_t x = 0; x < NXHS; x++, seq += NSIZES) {
            int preposted = x % 2 == 0;
            tu_phase("dir %d xheader %zu", dir, xhs[x]);
            if (tu_rank == dir) {
                if (preposted)
                    tu_barrier();
                send_batch(con, seq, xhs[x], dir);
            } else {
                recv_batch(con, peer, seq, xhs[x], dir, preposted);
            }
        }
    }

    /* both directions at once: every size, 16 MiB included, each way at the same time */
    tu_phase("both directions");
    {
        pscom_request_t *reqs[2 * NSIZES];
        int good = 1;
        for (size_t i = 0; i < NSIZES; i++)
            reqs[i] = tu_post_recv(con, NULL, sizes[i], 100, -1);
        tu_barrier();
        for (size_t i = 0; i < NSIZES; i++)
            reqs[NSIZES + i] = tu_post_send(con, 7, seq + i, sizes[i], 100);
        tu_wait_all(reqs, 2 * NSIZES);
        for (size_t i = 0; i < NSIZES; i++) {
            if (!tu_recv_good(reqs[i], 7, peer, (long long)(seq + i), sizes[i], 100) ||
                !pscom_req_successful(reqs[NSIZES + i])) {
                diag("  ^ size %zu", sizes[i]);
                good = 0;
            }
            tu_req_free(reqs[i]);
            tu_req_free(reqs[NSIZES + i]);
        }
        ok(good, "both directions at once: %zu sizes up to 16 MiB each way, verified", NSIZES);
    }

    tu_check_transport(con, "the connection");
    tu_phase("copy api");
    copy_api(sock, con, peer);
    is(tu_error_count, 0, "no connection error");
    tu_barrier();
    pscom_close_socket(sock);
    pscom_cleanup();
    tu_strv_free(eps);
    free(cons);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "ondemand"))
        connect_flags = PSCOM_CON_FLAG_ONDEMAND;
    tu_run(2, child, NULL, NULL);
    return tap_done();
}
