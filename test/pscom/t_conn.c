/*
 * t_conn.c - connections between two processes:
 * 1. both connect DIRECT to each other at the same time: one connection each, con_info right,
 *    no con_accept;
 * 2. one-sided DIRECT connect to a second socket: con_accept fires on the passive side, which
 *    receives and answers on the accepted connection;
 * 3. orderly close: the peer's pending receive fails, its pending send completes, its con_error
 *    fires once with EOF;
 * 4. on demand: no connection before the first send;
 * 5. pscom_close_socket flushes posted sends (also a rendezvous one) before returning;
 * 6. connecting to a socket that stopped listening or was closed fails, DIRECT at once and
 *    ONDEMAND at the first send, without hanging.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static int count_cons(pscom_socket_t *sock)
{
    int n = 0;
    for (pscom_connection_t *c = pscom_get_next_connection(sock, NULL); c;
         c = pscom_get_next_connection(sock, c))
        n++;
    return n;
}

static void check_info(pscom_connection_t *con, int peer, const char *peer_ep, const char *pid,
                       const char *what)
{
    pscom_con_info_t info;
    char name[PSCOM_NAME_MAX];
    const char *str = pscom_con_str(con);
    pscom_con_info(con, &info);
    is(info.peer_pid, atoi(pid), "%s: con_info peer_pid", what);
    snprintf(name, sizeof(name), "r%d", peer);
    ok(!strncmp(info.peer_name, name, strlen(name)), "%s: con_info peer_name %s (is %s)", what,
       name, info.peer_name);
    ok(!strcmp(info.peer_ep, peer_ep), "%s: con_info peer_ep (is \"%s\")", what, info.peer_ep);
    ok(!strcmp(info.transport, con->transport), "%s: con_info transport matches con->transport",
       what);
    is(info.state, PSCOM_CON_STATE_RW, "%s: con_info state RW", what);
    ok(str && strstr(str, con->transport), "%s: pscom_con_str names the transport (%s)", what,
       str ? str : "(null)");
}

static void one_message(pscom_connection_t *con, int peer, uint64_t seq, size_t len)
{
    pscom_request_t *s = tu_post_send(con, 1, seq, len, TU_XH);
    pscom_request_t *r = tu_post_recv(con, NULL, len, TU_XH, -1);
    pscom_wait(s);
    pscom_wait(r);
    ok(pscom_req_successful(s) && tu_recv_good(r, 1, peer, (long long)seq, len, TU_XH),
       "message %llu of %zu bytes each way", (unsigned long long)seq, len);
    tu_req_free(s);
    tu_req_free(r);
}

static int child(void *arg)
{
    int peer = 1 - tu_rank;
    pscom_socket_t *sock = tu_open_socket();
    pscom_socket_t *sock_b, *sock_c;
    char **eps = tu_exchange_eps(sock), **eps_b, **eps_c, **pids;
    char mypid[32];
    pscom_connection_t **cons, *con, *con_b = NULL;
    (void)arg;

    snprintf(mypid, sizeof(mypid), "%d", (int)getpid());
    pids = tu_allgather(mypid);

    /* 1: simultaneous DIRECT connects */
    tu_phase("simultaneous DIRECT connect");
    cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_DIRECT);
    con = cons[peer];
    is(con->state, PSCOM_CON_STATE_RW, "DIRECT connect returns with the connection RW");
    one_message(con, peer, 1, 100);
    tu_barrier();
    is(count_cons(sock), 1, "simultaneous connects give one connection");
    is(tu_accept_count, 0, "no con_accept for a connection we announced");
    tu_check_transport(con, "the connection");
    check_info(con, peer, eps[peer], pids[peer], "simultaneous");

    /* 2: one-sided DIRECT connect to a second socket */
    tu_phase("one-sided connect");
    sock_b = tu_open_socket_named("b");
    eps_b = tu_exchange_eps(sock_b);
    if (tu_rank == 0) {
        con_b = pscom_open_connection(sock_b);
        is(pscom_connect(con_b, eps_b[1], PSCOM_CON_FLAG_DIRECT), PSCOM_SUCCESS,
           "one-sided DIRECT connect");
        one_message(con_b, 1, 2, 5000);
        check_info(con_b, 1, eps_b[1], pids[1], "one-sided, active side");
    } else {
        pscom_request_t *r = tu_post_recv(NULL, sock_b, 5000, TU_XH, -1), *s;
        pscom_wait(r);
        con_b = r->connection;
        ok(tu_recv_good(r, 1, 0, 2, 5000, TU_XH) && con_b && con_b->socket == sock_b,
           "passive side receives on the new socket");
        if (con_b) {
            is(TU_CON(con_b)->accepted, 1, "con_accept called once for it");
            s = tu_post_send(con_b, 1, 2, 5000, TU_XH);
            pscom_wait(s);
            ok(pscom_req_successful(s), "and answers on the accepted connection");
            tu_req_free(s);
            check_info(con_b, 0, eps_b[0], pids[0], "one-sided, passive side");
        }
        tu_req_free(r);
    }
    is(count_cons(sock_b), 1, "one connection on the second socket");

    /* 2b: the passive side connects back with a new connection object: a second connection,
       not a wait for a tie-break winner that never comes */
    tu_phase("connect back");
    if (tu_rank == 1) {
        pscom_connection_t *back = pscom_open_connection(sock_b);
        is(pscom_connect(back, eps_b[0], PSCOM_CON_FLAG_DIRECT), PSCOM_SUCCESS,
           "DIRECT connect back to a peer that connected to us");
        one_message(back, 0, 5, 100);
        is(count_cons(sock_b), 2, "two connections on the second socket");
        tu_barrier(); /* rank 0 closes its end first: no con_error there */
        pscom_close_connection(back);
    } else {
        pscom_request_t *r = tu_post_recv(NULL, sock_b, 100, TU_XH, -1), *s;
        pscom_wait(r);
        pscom_connection_t *back = r->connection;
        ok(tu_recv_good(r, 1, 1, 5, 100, TU_XH) && back && back != con_b,
           "the connect-back arrives on a new connection");
        if (back) {
            s = tu_post_send(back, 1, 5, 100, TU_XH);
            pscom_wait(s);
            ok(pscom_req_successful(s), "and is answered on it");
            tu_req_free(s);
        }
        tu_req_free(r);
        is(count_cons(sock_b), 2, "two connections on the second socket (accepting side)");
        if (back)
            pscom_close_connection(back);
        tu_barrier();
    }

    /* 3: orderly close by rank 0; rank 1 has a receive and a 4 MiB send pending */
    tu_phase("orderly close");
    if (tu_rank == 1) {
        pscom_request_t *r = tu_post_recv(con_b, NULL, 100, TU_XH, -1);
        pscom_request_t *s = tu_post_send(con_b, 1, 77, 4u << 20, TU_XH);
        tu_barrier();
        pscom_wait(r);
        ok(pscom_req_is_done(r) && (r->state & PSCOM_REQ_STATE_ERROR),
           "a pending receive fails when the peer closes (%s)", pscom_req_state_str(r->state));
        pscom_wait(s);
        ok(pscom_req_is_done(s) && TU_REQ(s)->io_done_calls == 1,
           "a send the peer never received completes when it closes (%s)",
           pscom_req_state_str(s->state));
        tu_req_free(r);
        tu_req_free(s);
        for (int i = 0; i < 10; i++)
            pscom_progress(10);
        is(TU_CON(con_b)->errors, 1, "con_error once for the closed connection");
        is(TU_CON(con_b)->last_err, PSCOM_ERR_EOF, "with PSCOM_ERR_EOF");
        is(con_b->state, PSCOM_CON_STATE_CLOSED, "state CLOSED");
        pscom_close_connection(con_b);
    } else {
        tu_barrier();
        tu_wait_arrival(con_b, 1, 77); /* queued unexpected, never received */
        pscom_close_connection(con_b);
    }
    tu_barrier();
    if (tu_rank == 0)
        is(tu_error_count, 0, "no con_error for our own close");

    /* 4: on demand */
    tu_phase("on demand");
    if (tu_rank == 0) {
        pscom_connection_t *c = pscom_open_connection(sock_b);
        pscom_request_t *s;
        is(pscom_connect(c, eps_b[1], PSCOM_CON_FLAG_ONDEMAND), PSCOM_SUCCESS,
           "ONDEMAND connect returns");
        is(c->state, PSCOM_CON_STATE_ONDEMAND, "state ONDEMAND before the first send");
        ok(c->transport && !strcmp(c->transport, "ondemand"), "transport \"ondemand\" (%s)",
           c->transport ? c->transport : "NULL");
        for (int i = 0; i < 10; i++)
            pscom_progress(10);
        is(c->state, PSCOM_CON_STATE_ONDEMAND, "still ONDEMAND without traffic");
        s = tu_post_send(c, 1, 3, 10, TU_XH);
        pscom_wait(s);
        ok(pscom_req_successful(s), "the first send connects");
        is(c->state, PSCOM_CON_STATE_RW, "state RW after it");
        tu_check_transport(c, "on-demand connection");
        tu_req_free(s);
        tu_barrier();
        pscom_close_connection(c);
    } else {
        pscom_request_t *r = tu_post_recv(NULL, sock_b, 10, TU_XH, -1);
        pscom_wait(r);
        ok(tu_recv_good(r, 1, 0, 3, 10, TU_XH), "message over the on-demand connection");
        tu_req_free(r);
        tu_barrier();
    }
    tu_barrier();

    /* 5: close_socket flushes */
    tu_phase("close flushes");
    if (tu_rank == 1) {
        pscom_request_t *r[3];
        static const size_t len[3] = {10, 4u << 20, 20};
        int good = 1;
        for (int i = 0; i < 3; i++)
            r[i] = tu_post_recv(con, NULL, len[i], TU_XH, -1);
        tu_barrier();
        tu_wait_all(r, 3);
        for (int i = 0; i < 3; i++) {
            good &= tu_recv_good(r[i], 1, 0, 10 + i, len[i], TU_XH);
            tu_req_free(r[i]);
        }
        ok(good, "three messages sent right before pscom_close_socket arrive");
        r[0] = tu_post_recv(con, NULL, 10, TU_XH, -1);
        pscom_wait(r[0]);
        ok(r[0]->state & PSCOM_REQ_STATE_ERROR, "then a receive fails (%s)",
           pscom_req_state_str(r[0]->state));
        tu_req_free(r[0]);
        is(TU_CON(con)->errors, 1, "con_error once");
        is(TU_CON(con)->last_err, PSCOM_ERR_EOF, "with PSCOM_ERR_EOF");
        pscom_close_socket(sock);
    } else {
        pscom_request_t *s[3];
        int good = 1;
        tu_barrier();
        s[0] = tu_post_send(con, 1, 10, 10, TU_XH);
        s[1] = tu_post_send(con, 1, 11, 4u << 20, TU_XH);
        s[2] = tu_post_send(con, 1, 12, 20, TU_XH);
        pscom_close_socket(sock);
        for (int i = 0; i < 3; i++) {
            good &= pscom_req_successful(s[i]) && TU_REQ(s[i])->io_done_calls == 1;
            tu_req_free(s[i]);
        }
        ok(good, "pscom_close_socket completed the three posted sends");
    }
    tu_barrier();

    /* 6: connecting to sockets that stopped listening or are closed */
    tu_phase("connect to dead endpoints");
    {
        char *saved;
        sock_c = tu_open_socket_named("c");
        saved = strdup(pscom_socket_get_ep_str(sock_c));
        if (tu_rank == 1) {
            pscom_stop_listen(sock_c);
            ok(pscom_socket_get_ep_str(sock_c) == NULL, "no ep string after stop_listen");
        }
        eps_c = tu_allgather(saved);
        free(saved);
        if (tu_rank == 0) {
            pscom_connection_t *c = pscom_open_connection(sock_b), *d;
            pscom_request_t *s;
            pscom_err_t rc = pscom_connect(c, eps_c[1], PSCOM_CON_FLAG_DIRECT);
            ok(rc != PSCOM_SUCCESS, "DIRECT connect to a socket that stopped listening fails (%s)",
               pscom_err_str(rc));
            pscom_close_connection(c);
            d = pscom_open_connection(sock_b);
            rc = pscom_connect(d, eps_c[1], PSCOM_CON_FLAG_ONDEMAND);
            is(rc, PSCOM_SUCCESS, "ONDEMAND connect to it returns");
            s = tu_post_send(d, 1, 1, 100, TU_XH);
            pscom_wait(s);
            ok(s->state & PSCOM_REQ_STATE_ERROR, "the first send on it fails (%s)",
               pscom_req_state_str(s->state));
            is(TU_CON(d)->errors, 1, "con_error once for it");
            tu_req_free(s);
            pscom_close_connection(d);
        }
        tu_barrier();
        pscom_close_socket(sock_c);
        tu_strv_free(eps_c);
    }

    tu_barrier();
    pscom_close_socket(sock_b);
    pscom_cleanup();
    free(cons);
    tu_strv_free(eps);
    tu_strv_free(eps_b);
    tu_strv_free(pids);
    return 0;
}

int main(void)
{
    tu_run(2, child, NULL, NULL);
    return tap_done();
}
