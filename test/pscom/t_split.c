/*
 * t_split.c - large rendezvous messages whose copy both processes share (shm: PSP_SHM_SPLIT,
 * see plugins/shm/shm_copy.h): data verified for sizes around the chunk edges, into larger
 * and truncating receive buffers, many at once; and a sender that stops polling right after
 * posting must not hold the receiver up (the receiver copies alone).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static const size_t sizes[] = {(128u << 10) - 1,  128u << 10,         (128u << 10) + 1,
                               (1u << 20) + 4097, (8u << 20) + 12345, 33u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MANY   24

static int done_pipe[2]; /* rank 1 -> rank 0: received while rank 0 did not poll */

static void exchange(pscom_connection_t *con, int peer)
{
    int good = 1;
    for (size_t i = 0; i < NSIZES; i++) {
        pscom_request_t *s = tu_post_send(con, 1, i, sizes[i], TU_XH);
        pscom_request_t *r = tu_post_recv(con, NULL, sizes[i] + (i % 2 ? 4096 : 0), TU_XH, 1);
        pscom_wait(s);
        pscom_wait(r);
        if (!pscom_req_successful(s) || !tu_recv_good(r, 1, peer, (long long)i, sizes[i], TU_XH)) {
            diag("  size %zu failed", sizes[i]);
            good = 0;
        }
        tu_req_free(s);
        tu_req_free(r);
    }
    ok(good, "%zu sizes each way at once, data verified", NSIZES);
}

static void truncated(pscom_connection_t *con)
{
    size_t len = 3u << 20, room = (1u << 20) + 5;
    if (tu_rank == 0) {
        pscom_request_t *s = tu_post_send(con, 2, 0, len, TU_XH);
        pscom_wait(s);
        ok(pscom_req_successful(s), "send of %zu into a smaller buffer completes", len);
        tu_req_free(s);
        return;
    }
    pscom_request_t *r = tu_post_recv(con, NULL, room, TU_XH, 2);
    pscom_wait(r);
    ok((r->state & PSCOM_REQ_STATE_TRUNCATED) && r->data_len == room,
       "receive into %zu bytes is truncated (%s, %zu bytes)", room, pscom_req_state_str(r->state),
       r->data_len);
    /* the part that arrived is the message's prefix */
    unsigned char *want = malloc(len);
    tu_fill(want, len, tu_seed(len, 0, 0));
    ok(!memcmp(r->data, want, room), "and holds the first %zu bytes of the message", room);
    free(want);
    tu_req_free(r);
}

static void many(pscom_connection_t *con, int peer)
{
    pscom_request_t *s[MANY], *r[MANY];
    size_t len = 2u << 20;
    for (int i = 0; i < MANY; i++)
        r[i] = tu_post_recv(con, NULL, len, TU_XH, 3);
    for (int i = 0; i < MANY; i++)
        s[i] = tu_post_send(con, 3, (uint64_t)i, len, TU_XH);
    tu_wait_all(s, MANY);
    tu_wait_all(r, MANY);
    int good = 1;
    for (int i = 0; i < MANY; i++) {
        good &= pscom_req_successful(s[i]) && tu_recv_good(r[i], 3, peer, i, len, TU_XH);
        tu_req_free(s[i]);
        tu_req_free(r[i]);
    }
    ok(good, "%d messages of %zu bytes in flight both ways, in order, verified", MANY, len);
}

/* rank 0 posts a large send and then does not call pscom for a while */
static void idle_sender(pscom_connection_t *con)
{
    size_t len = 16u << 20;
    const char *cma = getenv("PSP_SHM_CMA");
    if (strcmp(con->transport, "shm") || (cma && !strcmp(cma, "0"))) {
        /* without single copy the sender's progress moves the data */
        tap_skip("needs shm with single copy", "idle sender (transport %s)", con->transport);
        tap_skip("needs shm with single copy", "idle sender completes");
        return;
    }
    if (tu_rank == 0) {
        pscom_request_t *s = tu_post_send(con, 4, 0, len, TU_XH);
        struct pollfd p = {.fd = done_pipe[0], .events = POLLIN};
        int got = poll(&p, 1, 30000); /* no pscom progress here */
        ok(got == 1, "the receiver completed while the sender did not poll");
        pscom_wait(s);
        ok(pscom_req_successful(s), "the send completes once the sender polls again");
        tu_req_free(s);
        return;
    }
    pscom_request_t *r = tu_post_recv(con, NULL, len, TU_XH, 4);
    pscom_wait(r);
    ok(tu_recv_good(r, 4, 0, 0, len, TU_XH), "%zu bytes from an idle sender, verified", len);
    if (write(done_pipe[1], "x", 1) != 1)
        diag("  write to the pipe failed");
    tu_req_free(r);
}

static void body(pscom_socket_t *sock, pscom_connection_t *con)
{
    int peer = 1 - tu_rank;
    (void)sock;
    tu_phase("exchange");
    exchange(con, peer);
    tu_phase("truncated");
    truncated(con);
    tu_phase("many");
    many(con, peer);
    tu_barrier();
    tu_phase("idle sender");
    idle_sender(con);
}

int main(void)
{
    /* split from 128 KiB on, unless the run sets it */
    setenv("PSP_SHM_SPLIT", "128k", 0);
    if (pipe(done_pipe) != 0)
        return 1;
    tu_run_pair(body);
    return tap_done();
}
