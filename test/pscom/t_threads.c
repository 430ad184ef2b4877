/*
 * t_threads.c - pscom_init_thread: two processes, each with 4 threads that send and receive
 * concurrently on the same connection (one tag per thread, every 5th message above the
 * rendezvous threshold); per-thread order and data are checked.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

#define THREADS 4
#define N       400

static pscom_connection_t *con;
static int peer;

static size_t msg_len(uint64_t i)
{
    return i % 5 == 0 ? 100000 + i : i % 300;
}

static void *worker(void *arg)
{
    long t = (long)arg, bad = 0;
    for (uint64_t i = 0; i < N; i++) {
        uint64_t seq = (uint64_t)t * N + i;
        pscom_request_t *r = tu_post_recv(con, NULL, msg_len(seq), TU_XH, t);
        pscom_request_t *s = tu_post_send(con, (uint32_t)t, seq, msg_len(seq), TU_XH);
        pscom_wait(s);
        pscom_wait(r);
        if (!pscom_req_successful(s) ||
            !tu_recv_good(r, t, peer, (long long)seq, msg_len(seq), TU_XH))
            bad++;
        tu_req_free(r);
        tu_req_free(s);
    }
    return (void *)bad;
}

static int child(void *arg)
{
    (void)arg;
    ok(pscom_init_thread(PSCOM_VERSION) == PSCOM_SUCCESS, "pscom_init_thread");
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_ONDEMAND);
    peer = 1 - tu_rank;
    con = cons[peer];
    tu_barrier();

    tu_phase("threads exchanging");
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    long bad = 0;
    for (int t = 0; t < THREADS; t++) {
        void *ret;
        pthread_join(th[t], &ret);
        bad += (long)ret;
    }
    ok(bad == 0, "%d threads x %d messages each way: order and data verified (%ld bad)", THREADS, N,
       bad);
    return tu_finish(sock, cons, eps, con);
}

int main(void)
{
    tu_run(2, child, NULL, NULL);
    return tap_done();
}
