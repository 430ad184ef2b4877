/*
 * t_block.c - blocking waits: one side waits while the other sleeps LATE_US before it sends
 * (or receives). The waiting side must get the message (spin, then block, then be woken: the shm
 * doorbell or the socket), and must not burn the CPU all the while: its CPU time during the
 * wait stays below half of the wall time (the spin phase is bounded).
 * Waits: pscom_wait for a small and for a large message, pscom_probe, pscom_recv,
 * pscom_progress(-1), and a sender waiting in pscom_wait for a large send the receiver
 * posts late.
 * Then wakeups in a row: a ping-pong whose sides answer after PSP_SPIN_US (1 ms) give or take
 * 10 %, so that messages come around the moment their receiver goes to sleep, where the
 * publish and the receiver's last look before it sleeps race (the shm ring's fence,
 * shm_fence.h; the window is a store's way to the cache, so a run hits it now and then, not
 * every time). A missed wakeup shows as a wait of a whole block timeout (1 s); each wait must
 * stay below half that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "testutil.h"

#define BIG (4u << 20)
/* the late side's delay: far beyond the spin phase (PSP_SPIN_US, 1 ms), so the waiter blocks */
#define LATE_US 300000

typedef struct meter {
    double wall, cpu;
} meter_t;

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
}

static void meter_start(meter_t *m)
{
    m->wall = tu_now();
    m->cpu = cpu_seconds();
}

static void meter_check(meter_t *m, const char *what)
{
    double wall = tu_now() - m->wall, cpu = cpu_seconds() - m->cpu;
    if (wall < LATE_US * 0.5e-6) {
        /* the peer was scheduled late or we were: nothing to judge */
        tap_skip("the wait was shorter than half the peer's delay",
                 "%s: blocked instead of spinning", what);
        return;
    }
    ok(cpu < 0.5 * wall, "%s: blocked instead of spinning (%.2f s CPU in %.2f s)", what, cpu, wall);
}

static void waiter(pscom_socket_t *sock, pscom_connection_t *con)
{
    pscom_request_t *r;
    meter_t m;
    int peer = 1 - tu_rank;

    /* pscom_wait, small message */
    r = tu_post_recv(con, NULL, 100, TU_XH, -1);
    tu_barrier();
    meter_start(&m);
    pscom_wait(r);
    ok(tu_recv_good(r, 1, peer, 1, 100, TU_XH), "pscom_wait got the late small message");
    meter_check(&m, "pscom_wait, small");
    tu_req_free(r);

    /* pscom_wait, large message */
    r = tu_post_recv(con, NULL, BIG, TU_XH, -1);
    tu_barrier();
    meter_start(&m);
    pscom_wait(r);
    ok(tu_recv_good(r, 1, peer, 2, BIG, TU_XH), "pscom_wait got the late 4 MiB message");
    meter_check(&m, "pscom_wait, 4 MiB");
    tu_req_free(r);

    /* pscom_probe */
    tu_barrier();
    r = tu_req(TU_XH);
    r->connection = con;
    meter_start(&m);
    pscom_probe(r);
    meter_check(&m, "pscom_probe");
    ok(r->data_len == 300 && r->connection == con, "pscom_probe found the late message");
    tu_req_free(r);
    r = tu_post_recv(con, NULL, 300, TU_XH, -1);
    pscom_wait(r);
    ok(tu_recv_good(r, 1, peer, 3, 300, TU_XH), "and a receive gets it");
    tu_req_free(r);

    /* pscom_recv */
    tu_barrier();
    {
        char buf[64];
        tu_xh_t xh;
        pscom_connection_t *from = NULL;
        pscom_err_t rc;
        meter_start(&m);
        rc = pscom_recv(NULL, sock, &xh, sizeof(xh), buf, sizeof(buf), &from);
        meter_check(&m, "pscom_recv");
        ok(rc == PSCOM_SUCCESS && from == con && xh.seq == 4 &&
               tu_verify(buf, sizeof(buf), tu_seed(sizeof(buf), 4, (uint64_t)peer)) < 0,
           "pscom_recv got the late message (%s)", pscom_err_str(rc));
    }

    /* pscom_progress(-1) until a receive is done */
    r = tu_post_recv(con, NULL, 10, TU_XH, -1);
    tu_barrier();
    meter_start(&m);
    while (!pscom_req_is_done(r))
        pscom_progress(-1);
    meter_check(&m, "pscom_progress(-1)");
    ok(tu_recv_good(r, 1, peer, 5, 10, TU_XH), "pscom_progress(-1) returned with the message");
    tu_req_free(r);

    /* now we are the late one: the peer waits for its large send */
    tu_barrier();
    usleep(LATE_US);
    r = tu_post_recv(con, NULL, BIG, TU_XH, -1);
    pscom_wait(r);
    ok(tu_recv_good(r, 1, peer, 6, BIG, TU_XH), "late receive of a 4 MiB message");
    tu_req_free(r);
}

static void late(pscom_connection_t *con)
{
    static const size_t len[] = {100, BIG, 300, 64, 10};
    pscom_request_t *s;
    meter_t m;
    for (int i = 0; i < 5; i++) {
        tu_barrier();
        usleep(LATE_US);
        s = tu_post_send(con, 1, (uint64_t)i + 1, len[i], TU_XH);
        pscom_wait(s);
        ok(pscom_req_successful(s), "late send %d", i + 1);
        tu_req_free(s);
    }
    /* a sender that waits for a receiver that posts late */
    tu_barrier();
    s = tu_post_send(con, 1, 6, BIG, TU_XH);
    meter_start(&m);
    pscom_wait(s);
    ok(pscom_req_successful(s), "4 MiB send to a late receiver completes");
    meter_check(&m, "pscom_wait for a send");
    tu_req_free(s);
}

#define WAKEUPS 1000

static void wakeups(pscom_connection_t *con)
{
    double longest = 0;
    int good = 1;
    unsigned seed = 12345u + (unsigned)tu_rank;
    const char *spin = getenv("PSP_SPIN_US");
    unsigned spin_us = spin ? (unsigned)atoi(spin) : 1000;
    tu_barrier();
    for (int i = 0; i < WAKEUPS; i++) {
        int mine = (i & 1) == tu_rank; /* whose turn it is to send */
        if (mine) {
            usleep(spin_us * 9 / 10 + (unsigned)(rand_r(&seed) % (spin_us / 5 + 50)));
            pscom_request_t *s = tu_post_send(con, 7, (uint64_t)i, 8, TU_XH);
            pscom_wait(s);
            good &= pscom_req_successful(s);
            tu_req_free(s);
        } else {
            pscom_request_t *r = tu_post_recv(con, NULL, 8, TU_XH, -1);
            double t0 = tu_now();
            pscom_wait(r);
            double t = tu_now() - t0;
            if (t > longest)
                longest = t;
            good &= tu_recv_good(r, 7, 1 - tu_rank, i, 8, TU_XH);
            tu_req_free(r);
        }
    }
    ok(good && longest < 0.5,
       "%d waits for a message sent as the receiver goes to sleep: none "
       "missed its wakeup (longest %.3f s)",
       WAKEUPS / 2, longest);
}

static void body(pscom_socket_t *sock, pscom_connection_t *con)
{
    if (tu_rank == 0)
        waiter(sock, con);
    else
        late(con);
    wakeups(con);
}

int main(void)
{
    tu_run_pair(body);
    return tap_done();
}
