/*
 * Flow control of eager messages: the bytes a process holds for unexpected messages stay
 * under PSP_UNEXPECTED_MAX (plus FC_INITIAL per connection).
 *
 * Credit per connection, granted by the receiver. A sender sends a user message eagerly only
 * while its credit covers the message's cost (pscom_fc_cost); otherwise the message goes by
 * rendezvous, which parks only a header at the receiver and leaves the data with the sender
 * until a receive matches it. No message ever waits for credit, so a receive that waits for a
 * later message on the same connection still gets it: that message goes as a rendezvous
 * request and is matched as usual. The receiver gives the credit of every message a receive
 * took back to its sender, a quarter window at a time (MSGTYPE_CREDIT); a message still
 * unexpected keeps its credit, so what waits unexpected never exceeds the windows.
 *
 * A connection's window: every connection starts with FC_INITIAL, and when established its
 * receiver grants at once (a grant that needs no receive, so waiting for it is safe: a sender
 * whose FC_INITIAL is spent holds its next message until this first grant arrives, rather
 * than sending it by rendezvous because the grant is a moment late) and reserves more from the
 * process's pool (PSP_UNEXPECTED_MAX), up to twice the
 * connection's rendezvous threshold (at least FC_WINDOW_MIN, at most FC_WINDOW_MAX): enough
 * that a stream of eager messages into posted receives never runs dry. Once the pool is spent,
 * later connections keep FC_INITIAL (their larger messages go rendezvous). A connection whose
 * sender runs out of credit (a rendezvous request below the threshold shows it) while a receive
 * waits for that message doubles its window from what the pool has left (pscom_fc_starved);
 * one whose receiver is behind (its receives mostly find messages that waited) keeps it.
 * Where the transport has no single-copy pull, rendezvous messages for want of credit that
 * wait unexpected are parked (con->fc_parked), and the credit that receives free goes to them
 * before any goes back to the sender: their data is fetched ahead (fetch_ahead), in order, and
 * waits as an eager message would, within the same window.
 * Credit applies to every transport, also where PSP_<ARCH>_RENDEZVOUS=inf (rendezvous is
 * core's protocol and works over each); PSP_UNEXPECTED_MAX=inf switches it off. Tag matching
 * in the transport (pscom_tag.c, UCX's tag API) bypasses core's queues and so this limit: UCX
 * keeps its own unexpected messages.
 */
#include <stdint.h>
#include <string.h>
#include "pscom_priv.h"

#define FC_WINDOW_MIN ((uint64_t)1 << 20)
#define FC_WINDOW_MAX ((uint64_t)4 << 20)
#define FC_UNLIMITED  ((uint64_t)1 << 62)
#define FC_GROW_MIN   ((uint64_t)64 << 10)
/* a send held up this long by credit is worth one log line (it may be a program that relies on
   buffering, waiting forever) */
#define FC_STALL_MS 10000

void pscom_fc_init(void)
{
    pscom_global.fc_pool = pscom_config.unexpected_max;
}

static void send_credit(pscom_con_t *con, uint64_t bytes)
{
    fc_credit_t c = {.bytes = bytes};
    pscom_stats.fc_grants++;
    /* first: sends queued before (during the connect) may wait for the peer's first grant, and
       the peer's for ours */
    pscom_send_ctrl_first(con, MSGTYPE_CREDIT, &c, sizeof(c));
}

void pscom_fc_con_ready(pscom_con_t *con)
{
    if (pscom_config.unexpected_max == SIZE_MAX) {
        con->fc_window = FC_UNLIMITED;
        send_credit(con, FC_UNLIMITED);
        return;
    }
    uint64_t want = con->rndv_threshold >= FC_WINDOW_MAX / 2 ? FC_WINDOW_MAX
                                                             : 2 * (uint64_t)con->rndv_threshold;
    if (want < FC_WINDOW_MIN)
        want = FC_WINDOW_MIN;
    uint64_t more = want - FC_INITIAL;
    if (more > pscom_global.fc_pool) {
        more = pscom_global.fc_pool;
        PSCOM_LOG(3, "%s: eager window %llu bytes (PSP_UNEXPECTED_MAX spent by others)",
                  con->log_name, (unsigned long long)(FC_INITIAL + more));
    }
    pscom_global.fc_pool -= more;
    con->fc_reserved = more;
    con->fc_window = FC_INITIAL + more;
    send_credit(con, more); /* also when 0: the peer's sends past FC_INITIAL wait for it */
}

int pscom_fc_grants_due;
static list_head_t grants_due = LIST_HEAD_INIT(grants_due);

void pscom_fc_grant_later(pscom_con_t *con)
{
    if (list_linked(&con->fc_link))
        return;
    list_add_tail(&con->fc_link, &grants_due);
    pscom_fc_grants_due = 1;
}

void pscom_fc_send_grants(void)
{
    pscom_fc_grants_due = 0;
    while (!list_empty(&grants_due)) {
        pscom_con_t *con = list_entry(grants_due.next, pscom_con_t, fc_link);
        list_del(&con->fc_link);
        pscom_fc_grant(con);
    }
}

void pscom_fc_con_free(pscom_con_t *con)
{
    list_del(&con->fc_link);
    pscom_global.fc_pool += con->fc_reserved;
    con->fc_reserved = 0;
}

/* A rendezvous request for a message below the rendezvous threshold that a posted receive
   took: its sender ran out of credit while we waited. If the pool has room, double the window
   (once per round of grants, however many such requests come meanwhile): a stream with more
   in flight than the window holds (a bandwidth loop over tcp, 1 MiB eager) then goes eager
   again. Not for a receiver that is behind, whose receives mostly take messages that waited
   unexpected (over tcp the backlog waits in the socket, and the receive that waits for the
   next message says nothing): a larger window would only let the sender run further ahead.
   Over tcp a receiver that is behind but catches up for a moment still gets a doubling now and
   then (test/mpi/flood.t, "behind": 1.7-12 MB held, 47 MB without these conditions). */
void pscom_fc_starved(pscom_con_t *con)
{
    if (con->fc_grown || con->fc_window >= FC_UNLIMITED)
        return;
    /* fc_return holds only bytes taken here: nothing grew since the last grant */
    if ((con->fc_late_old + con->fc_late) * 2 > con->fc_taken_old + con->fc_return)
        return;
    uint64_t more = con->fc_window < pscom_global.fc_pool ? con->fc_window : pscom_global.fc_pool;
    if (more < FC_GROW_MIN)
        return;
    con->fc_grown = more;
    pscom_global.fc_pool -= more;
    con->fc_reserved += more;
    con->fc_window += more;
    con->fc_return += more; /* goes with the next grant (we are inside the parser) */
    pscom_fc_grant_later(con);
}

void pscom_fc_park(pscom_con_t *con, pscom_req_t *gen)
{
    if (con->ops && con->ops->rndv_pull)
        return; /* a receive pulls it in one copy, without a round trip */
    gen->flags |= RQ_FC_PARKED;
    list_add_tail(&gen->q_rndv, &con->fc_parked);
    if (con->fc_return)
        pscom_fc_grant_later(con);
}

void pscom_fc_unpark(pscom_req_t *gen)
{
    if (gen->flags & (RQ_FC_PARKED | RQ_FC_AHEAD))
        list_del(&gen->q_rndv);
    gen->flags &= ~(RQ_FC_PARKED | RQ_FC_AHEAD);
}

/* The credit that messages taken have freed goes to parked messages first, in their order:
   their data is asked for now, and waits here as the sender's eager messages would have. A
   receiver that takes a later message first and then the earlier ones in order (test/mpi/
   flood.c, "later first") otherwise makes a round trip for each. 1: parked ones are left. */
static int fetch_ahead(pscom_con_t *con)
{
    while (!list_empty(&con->fc_parked)) {
        pscom_req_t *gen = list_entry(con->fc_parked.next, pscom_req_t, q_rndv);
        uint64_t cost = pscom_fc_cost(gen->pub.header.xheader_len, gen->rndv_len);
        /* what the window grew by goes to the sender as credit */
        if (con->fc_return < con->fc_grown + cost)
            return 1;
        pscom_fc_unpark(gen);
        if (pscom_rndv_fetch_ahead(con, gen, cost) != 0)
            return 0; /* no memory: the receive pulls it */
        con->fc_return -= cost;
    }
    return 0;
}

void pscom_fc_grant(pscom_con_t *con)
{
    /* a sender with parked messages sends rendezvous anyway: the credit fetches those */
    if (!list_empty(&con->fc_parked) && con->pub.state == PSCOM_CON_STATE_RW && !con->closed &&
        fetch_ahead(con))
        return;
    uint64_t n = con->fc_return;
    con->fc_taken_old = con->fc_taken_old / 2 + (n - con->fc_grown);
    con->fc_late_old = con->fc_late_old / 2 + con->fc_late;
    con->fc_return = con->fc_grown = con->fc_late = 0;
    /* a connection going away needs no credit, and an unlimited one never runs out */
    if (con->pub.state != PSCOM_CON_STATE_RW || con->closed || con->user_closed ||
        con->fc_window == FC_UNLIMITED)
        return;
    send_credit(con, n);
}

int pscom_fc_credit_received(pscom_con_t *con, const pscom_header_net_t *hdr)
{
    fc_credit_t c;
    if (hdr->xheader_len != sizeof(c) || hdr->data_len)
        return -1;
    memcpy(&c, pscom_header_xheader(hdr), sizeof(c));
    if (c.bytes > FC_UNLIMITED)
        return -1;
    if (con->fc_credit < (int64_t)FC_UNLIMITED)
        con->fc_credit += (int64_t)c.bytes;
    con->fc_granted = 1;
    return 0;
}

void pscom_fc_gen_held(pscom_req_t *gen, uint64_t cost)
{
    gen->fc_cost = cost;
    pscom_stats.unexp_bytes += cost;
    if (pscom_stats.unexp_bytes > pscom_stats.unexp_bytes_max)
        pscom_stats.unexp_bytes_max = pscom_stats.unexp_bytes;
}

void pscom_fc_gen_taken(pscom_con_t *con, pscom_req_t *gen)
{
    uint64_t cost = gen->fc_cost;
    if (!cost)
        return;
    gen->fc_cost = 0;
    pscom_stats.unexp_bytes -= cost;
    pscom_fc_consumed(con, cost);
    con->fc_late += cost;
    /* messages parked behind it take this credit now (here, not in pscom_fc_consumed: only a
       receiver that takes waiting messages has parked ones, and posted receives stay as they
       were) */
    if (!list_empty(&con->fc_parked))
        pscom_fc_grant_later(con);
}

void pscom_fc_gen_dropped(pscom_req_t *gen)
{
    pscom_stats.unexp_bytes -= gen->fc_cost;
    gen->fc_cost = 0;
}

void pscom_fc_check_stalls(void)
{
    static uint64_t next_ms;
    static int told;
    uint64_t now = pscom_now_ns() / 1000000;
    if (told || now < next_ms)
        return;
    next_ms = now + 1000;
    list_head_t *ps, *pc, *pr;
    list_for_each(ps, &pscom_global.sockets)
    {
        pscom_sock_t *sock = list_entry(ps, pscom_sock_t, next);
        list_for_each(pc, &sock->cons)
        {
            pscom_con_t *con = list_entry(pc, pscom_con_t, next);
            list_for_each(pr, &con->rndv_sends)
            {
                pscom_req_t *req = list_entry(pr, pscom_req_t, q_rndv);
                if (!(req->flags & RQ_FC_RNDV) || now - req->seq < FC_STALL_MS)
                    continue;
                told = 1;
                pscom_log(1,
                          "a send to %s has waited %llu s for its receive: %s holds as many of "
                          "our messages unexpected as PSP_UNEXPECTED_MAX allows. If it waits "
                          "for a later message, the program relies on buffering (unsafe by the "
                          "MPI standard); PSP_UNEXPECTED_MAX=inf lets it run",
                          con->log_name, (unsigned long long)(now - req->seq) / 1000,
                          con->peer_name[0] ? con->peer_name : "the peer");
                return;
            }
        }
    }
}
