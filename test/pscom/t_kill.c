/*
 * t_kill.c - a peer killed mid-transfer.
 * rank 0 talks to rank 2 (a bystander) throughout.
 * 1. rank 1 streams 64 MiB messages to rank 0; while rank 0's receive is in progress rank 0
 *    SIGKILLs rank 1. The pending receive must complete with ERROR, con_error fire exactly once,
 *    later requests on that connection fail at once.
 * 2. rank 0 streams 64 MiB messages to rank 3, which SIGKILLs itself in the middle of a
 *    receive. rank 0's send must complete with ERROR; con_error fires once.
 * Then rank 0 still talks to rank 2, and after closing the dead connections it has as many fds
 * and SysV shm mappings as before they existed.
 * 3. Two processes talk, then both die by SIGKILL: no shared memory stays behind.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define BIG      (64u << 20)
#define MAX_MSGS 1000
#define TAG_PING 1
#define TAG_BIG  2

static int count_sysv_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, "/SYSV") != NULL;
    fclose(f);
    return n;
}

static int ping(pscom_connection_t *con, uint64_t seq)
{
    pscom_request_t *s = tu_post_send(con, TAG_PING, seq, 1000 + seq, TU_XH);
    pscom_request_t *r = tu_post_recv(con, NULL, 1000 + seq, TU_XH, TAG_PING);
    int good;
    pscom_wait(s);
    pscom_wait(r);
    good =
        pscom_req_successful(s) && tu_recv_good(r, TAG_PING, 2, (long long)seq, 1000 + seq, TU_XH);
    tu_req_free(s);
    tu_req_free(r);
    return good;
}

/* rank 2: echo pings: one, or until the last one (seq 0) */
static void bystander(pscom_connection_t *con0, int once)
{
    for (;;) {
        pscom_request_t *r = tu_post_recv(con0, NULL, 4096, TU_XH, TAG_PING), *s;
        tu_xh_t xh;
        pscom_wait(r);
        if (!pscom_req_successful(r)) {
            ok(0, "bystander receive: %s", pscom_req_state_str(r->state));
            tu_req_free(r);
            return;
        }
        memcpy(&xh, r->xheader, TU_XH);
        /* answer with the same seq and length, sent by us */
        s = tu_post_send(con0, TAG_PING, xh.seq, r->data_len, TU_XH);
        pscom_wait(s);
        tu_req_free(s);
        tu_req_free(r);
        if (once || xh.seq == 0)
            return;
    }
}

/* rank 1: send 64 MiB messages until killed */
static void streaming_victim(pscom_connection_t *con0)
{
    for (uint64_t seq = 0;; seq++) {
        pscom_request_t *s = tu_post_send(con0, TAG_BIG, seq, BIG, TU_XH);
        pscom_wait(s);
        tu_req_free(s);
    }
}

/* rank 3: receive one message, then die while receiving the next */
static void receiving_victim(pscom_connection_t *con0)
{
    pscom_request_t *r = tu_post_recv(con0, NULL, BIG, TU_XH, TAG_BIG);
    pscom_wait(r);
    ok(tu_recv_good(r, TAG_BIG, 0, 0, BIG, TU_XH), "victim: first 64 MiB message received");
    tu_req_free(r);
    r = tu_post_recv(con0, NULL, BIG, TU_XH, TAG_BIG);
    tu_phase("dying in a receive");
    while (!(r->state & (PSCOM_REQ_STATE_IO_STARTED | PSCOM_REQ_STATE_DONE)))
        pscom_test(r);
    raise(SIGKILL);
}

/* after a connection broke: requests on it fail at once, con_error stays at one call */
static void check_dead(pscom_connection_t *con, const char *who)
{
    pscom_request_t *r = tu_post_recv(con, NULL, 100, TU_XH, -1);
    pscom_request_t *s = tu_post_send(con, TAG_PING, 1, 100, TU_XH);
    pscom_wait(r);
    pscom_wait(s);
    ok((r->state & PSCOM_REQ_STATE_ERROR) && TU_REQ(r)->io_done_calls == 1,
       "%s: a new receive on the dead connection fails (%s)", who, pscom_req_state_str(r->state));
    ok((s->state & PSCOM_REQ_STATE_ERROR) && TU_REQ(s)->io_done_calls == 1,
       "%s: a new send on the dead connection fails (%s)", who, pscom_req_state_str(s->state));
    tu_req_free(r);
    tu_req_free(s);
    for (int i = 0; i < 10; i++)
        pscom_progress(10);
    if (!is(TU_CON(con)->errors, 1, "%s: con_error called exactly once", who))
        diag("  last error %s", pscom_err_str(TU_CON(con)->last_err));
    ok(con->state == PSCOM_CON_STATE_ERROR || con->state == PSCOM_CON_STATE_CLOSED,
       "%s: connection state is ERROR or CLOSED (%d)", who, con->state);
}

static void main_rank(pscom_connection_t **cons, char **pids)
{
    pscom_connection_t *con1 = cons[1], *con2 = cons[2], *con3 = cons[3];
    pscom_request_t *r;
    pscom_con_info_t info;
    int fds, maps, got = 0;
    uint64_t seq = 1;

    ok(ping(con2, seq++), "ping the bystander");
    fds = tu_count_fds();
    maps = count_sysv_maps();
    tu_barrier(); /* A: the victims start */

    /* 1: kill the sender while our receive runs */
    tu_phase("receiving from rank 1");
    r = tu_post_recv(con1, NULL, BIG, TU_XH, TAG_BIG);
    pscom_wait(r);
    ok(tu_recv_good(r, TAG_BIG, 1, 0, BIG, TU_XH), "first 64 MiB message from rank 1");
    tu_req_free(r);
    pscom_con_info(con1, &info);
    is(info.peer_pid, atoi(pids[1]), "con_info names rank 1's pid");
    tu_check_transport(con1, "connection to rank 1");
    r = tu_post_recv(con1, NULL, BIG, TU_XH, TAG_BIG);
    while (!(r->state & (PSCOM_REQ_STATE_IO_STARTED | PSCOM_REQ_STATE_DONE)))
        pscom_test(r);
    kill(atoi(pids[1]), SIGKILL);
    tu_phase("waiting for the receive from killed rank 1 to fail");
    for (;;) {
        pscom_wait(r);
        if (!pscom_req_successful(r) || ++got > MAX_MSGS)
            break;
        /* it had arrived whole before the kill: fine, take the next one */
        if (!tu_recv_good(r, TAG_BIG, 1, got, BIG, TU_XH))
            ok(0, "message %d before the kill is intact", got);
        tu_req_free(r);
        r = tu_post_recv(con1, NULL, BIG, TU_XH, TAG_BIG);
    }
    ok(pscom_req_is_done(r) && (r->state & PSCOM_REQ_STATE_ERROR),
       "the receive from the killed sender completes with ERROR (%s)",
       pscom_req_state_str(r->state));
    is(TU_REQ(r)->io_done_calls, 1, "its io_done is called once");
    tu_req_free(r);
    check_dead(con1, "killed sender");
    ok(ping(con2, seq++), "the bystander still answers");

    /* 2: the receiver kills itself in the middle */
    tu_phase("sending to rank 3");
    got = 0;
    for (;;) {
        pscom_request_t *s = tu_post_send(con3, TAG_BIG, (uint64_t)got, BIG, TU_XH);
        int good;
        pscom_wait(s);
        good = pscom_req_successful(s);
        if (!good || ++got > MAX_MSGS) {
            ok(pscom_req_is_done(s) && (s->state & PSCOM_REQ_STATE_ERROR) &&
                   TU_REQ(s)->io_done_calls == 1,
               "the send to the killed receiver completes with ERROR (%s) after %d messages",
               pscom_req_state_str(s->state), got);
            tu_req_free(s);
            break;
        }
        tu_req_free(s);
    }
    check_dead(con3, "killed receiver");
    ok(ping(con2, seq++), "the bystander still answers");
    is(tu_error_count, 2, "con_error called twice in all (once per dead peer)");

    pscom_close_connection(con1);
    pscom_close_connection(con3);
    for (int i = 0; i < 10; i++)
        pscom_progress(10);
    /* fewer is fine: UCX over tcp may still have had a connection of its own in the making
       when we counted before */
    int fds_now = tu_count_fds();
    /* through a gateway, the gateway's own connection to us may have come after the count (it
       comes with the first connection a peer opens to us through it) and stays */
    const char *t = getenv("T_TRANSPORT");
    int slack = t && !strcmp(t, "gw");
    ok(fds_now <= fds + slack, "no fd leaked for the dead connections (%d open before, %d now)",
       fds, fds_now);
    is(count_sysv_maps(), maps, "no SysV shm mapping left for the dead connections");
    ok(ping(con2, 0), "the bystander still answers (last ping)");
}

static int child(void *arg)
{
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    char mypid[32];
    char **pids;
    pscom_connection_t **cons;
    (void)arg;

    snprintf(mypid, sizeof(mypid), "%d", (int)getpid());
    pids = tu_allgather(mypid);
    cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_ONDEMAND);
    switch (tu_rank) {
    case 0:
        main_rank(cons, pids);
        break;
    case 1:
        tu_barrier(); /* A */
        streaming_victim(cons[0]);
        break;
    case 2:
        bystander(cons[0], 1); /* the first ping, before A */
        tu_barrier();          /* A */
        bystander(cons[0], 0); /* the rest */
        is(tu_error_count, 0, "bystander: no connection error");
        break;
    case 3:
        tu_barrier(); /* A */
        receiving_victim(cons[0]);
        break;
    }
    tu_barrier(); /* B: the survivors */
    pscom_close_socket(sock);
    free(cons);
    tu_strv_free(pids);
    tu_strv_free(eps);
    return 0;
}

/* both sides die without any cleanup, right after talking: nothing may stay behind (tu_run
   checks /dev/shm and the SysV segments of all four processes) */
static int both_die(void *arg)
{
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_DIRECT);
    pscom_request_t *s = tu_post_send(cons[1 - tu_rank], TAG_BIG, 0, 1u << 20, TU_XH);
    pscom_request_t *r = tu_post_recv(cons[1 - tu_rank], NULL, 1u << 20, TU_XH, TAG_BIG);
    (void)arg;
    pscom_wait(s);
    pscom_wait(r);
    ok(pscom_req_successful(s) && tu_recv_good(r, TAG_BIG, 1 - tu_rank, 0, 1u << 20, TU_XH),
       "exchanged 1 MiB each way before dying");
    tu_barrier();
    raise(SIGKILL);
    return 1;
}

int main(void)
{
    static const int expect_sig[] = {0, SIGKILL, 0, SIGKILL};
    static const int both_sig[] = {SIGKILL, SIGKILL};
    tu_run(4, child, NULL, expect_sig);
    tu_run(2, both_die, NULL, both_sig);
    return tap_done();
}
