/*
 * Connections to peer processes. An av entry holds the peer's endpoint string and a pscom
 * connection (on demand: connected at the first send). Connections a peer closed are closed
 * on our side as well, and the av entry reconnects if it is used again.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_broken.h"

/*
 * A connection the peer at ep opened to us before we knew it (e.g. a spawned child or a
 * connecting job that sent first). We send on it too: pscom would open a second connection
 * to the same peer, which costs a transport slot (an shm segment) and gains nothing.
 */
static pscom_connection_t *find_accepted(const char *ep)
{
    pscom_con_info_t info;
    pscom_socket_t *socket = MPIDI_PSCOM_global.socket;
    for (pscom_connection_t *con = pscom_get_next_connection(socket, NULL); con;
         con = pscom_get_next_connection(socket, con)) {
        if (con->state >= PSCOM_CON_STATE_CLOSING || con->state == PSCOM_CON_STATE_ONDEMAND)
            continue;
        pscom_con_info(con, &info);
        if (strcmp(info.peer_ep, ep) == 0)
            return con;
    }
    return NULL;
}

static pscom_connection_t *open_con(const char *ep)
{
    pscom_connection_t *con = find_accepted(ep);
    if (con)
        return con;
    con = pscom_open_connection(MPIDI_PSCOM_global.socket);
    if (con && pscom_connect(con, ep, PSCOM_CON_FLAG_ONDEMAND) != PSCOM_SUCCESS) {
        pscom_close_connection(con);
        con = NULL;
    }
    return con;
}

/* Record the process listening at ep in av; its connection is made on the first send. */
int MPIDI_PSCOM_connect_av(MPIDI_av_entry_t *av, const char *ep)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_PSCOM_addr_t *a = &MPIDI_PSCOM_AV(av);

    a->msa_module = -1; /* known only for our world (init_world) */
    a->ep = MPL_strdup(ep);
    MPIR_ERR_CHKANDJUMP(a->ep == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    a->con = open_con(ep);
    MPIR_ERR_CHKANDJUMP2(a->con == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_connect",
                         "**pscom_connect %s %s", ep, "bad endpoint or out of memory");
fn_fail:
    return mpi_errno;
}

/* The peer closed our last connection and we talk to it again (e.g. after a disconnect). */
pscom_connection_t *MPIDI_PSCOM_av_reconnect(MPIDI_av_entry_t *av)
{
    MPIDI_PSCOM_addr_t *a = &MPIDI_PSCOM_AV(av);
    MPIR_Assert(a->ep);
    a->con = open_con(a->ep);
    MPIR_Assert(a->con); /* the endpoint string was good before */
    return a->con;
}

void MPIDI_PSCOM_con_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    if (MPIDI_PSCOM_global.finalizing)
        return; /* peers close their side while we shut down */
    if (err != PSCOM_ERR_EOF) {
        fprintf(stderr, "pscom netmod: connection %s failed (op %d): %s\n", pscom_con_str(con),
                (int)op, pscom_err_str(err));
        /* A connection lost later: a dead rank or node is the launcher's to report (it names
           both, within a second or, for a node cut off, hydra's keepalive time); a lost
           gateway or link nobody else sees. MPIDI_PSCOM_check_lost ends the job after
           PSP_MPI_LOST_PEER_ABORT seconds if it still runs.
           A peer we never reached (refused, unreachable, a gateway that would not take us):
           nothing else ends the job if it lives, and a receive from it would wait forever, so
           the job ends after one second; not at once: a peer that just died is refused too,
           and the launcher's report of that death (rank, host, signal) must come first. */
        uint64_t wait_s = MPIDI_PSCOM_lost_peer_abort_s;
        if (op == PSCOM_OP_CONNECT && wait_s > 1)
            wait_s = 1;
        uint64_t deadline = MPIDI_PSCOM_now_ns() + wait_s * 1000000000ull;
        if (!MPIDI_PSCOM_global.lost_deadline_ns ||
            deadline < MPIDI_PSCOM_global.lost_deadline_ns) {
            MPIDI_PSCOM_global.lost_deadline_ns = deadline;
            snprintf(MPIDI_PSCOM_global.lost_msg, sizeof(MPIDI_PSCOM_global.lost_msg),
                     op == PSCOM_OP_CONNECT ? "pscom netmod: cannot connect to %s: %s"
                                            : "pscom netmod: connection %s broke: %s",
                     pscom_con_str(con), pscom_err_str(err));
        }
        return;
    }
    /* Orderly close (a disconnected or finished peer). We may not close it from inside this
     * callback; MPIDI_NM_progress does. A closed connection left open would make pscom refuse
     * a new process that later listens on the same address. */
    if (MPIDI_PSCOM_global.n_closed == MPIDI_PSCOM_global.max_closed) {
        int n = MPIDI_PSCOM_global.max_closed ? 2 * MPIDI_PSCOM_global.max_closed : 8;
        void *p = MPL_realloc(MPIDI_PSCOM_global.closed, n * sizeof(con), MPL_MEM_ADDRESS);
        if (!p)
            return; /* only the address reuse case suffers */
        MPIDI_PSCOM_global.closed = p;
        MPIDI_PSCOM_global.max_closed = n;
    }
    MPIDI_PSCOM_global.closed[MPIDI_PSCOM_global.n_closed++] = con;
}

/* Does con still hold messages that arrived before the close and nobody received yet? */
static int has_unreceived(pscom_connection_t *con)
{
    pscom_request_t *probe = pscom_request_create(0, 0);
    if (!probe)
        return 1;
    probe->connection = con; /* no recv_accept: any message */
    int found = pscom_iprobe(probe);
    pscom_request_free(probe);
    return found;
}

/* Forget con in every av entry (they reconnect when used) and close it. */
static void close_con(pscom_connection_t *con)
{
    for (int k = 0; k < MPIDIU_get_n_avts(); k++) {
        MPIDI_av_table_t *t = MPIDIU_get_av_table(k);
        for (int j = 0; t && j < t->size; j++)
            if (MPIDI_PSCOM_AV(&t->table[j]).con == con)
                MPIDI_PSCOM_AV(&t->table[j]).con = NULL;
    }
    pscom_close_connection(con);
}

void MPIDI_PSCOM_check_lost(void)
{
    if (MPIDI_PSCOM_global.finalizing || MPIDI_PSCOM_now_ns() < MPIDI_PSCOM_global.lost_deadline_ns)
        return;
    MPIDI_PSCOM_global.lost_deadline_ns = 0;
    /* with the world, so that the launcher gets the abort (PMI) and ends the job with its
     * status; without a communicator MPID_Abort only exits, and hydra then reports the ranks
     * it kills while cleaning up as the failure (KILLED BY SIGNAL 9) */
    MPID_Abort(MPIR_Process.comm_world, MPI_ERR_OTHER, 1, MPIDI_PSCOM_global.lost_msg);
}

/* Complete a request that failed because its connection broke, a second later (or after
 * PSP_MPI_LOST_PEER_ABORT if that is shorter). A broken connection mostly means a dead peer,
 * and the launcher names it (rank, host, signal) when it ends the job; an error handed to
 * MPI at once (fatal by default) would end the job first, from this process, with only
 * "connection broken" to say. A program with MPI_ERRORS_RETURN gets the error all the same. */
static uint64_t broken_grace_s(void)
{
    return MPIDI_PSCOM_global.finalizing       ? 0
           : MPIDI_PSCOM_lost_peer_abort_s < 1 ? MPIDI_PSCOM_lost_peer_abort_s
                                               : 1;
}

void MPIDI_PSCOM_complete_broken(MPIR_Request *req)
{
    MPIDI_PSCOM_global_t *g = &MPIDI_PSCOM_global;
    uint64_t grace_s = broken_grace_s();
    if (!grace_s) {
        MPIDIU_request_complete(req);
        return;
    }
    if (g->n_held == g->max_held) {
        int n = g->max_held ? 2 * g->max_held : 16;
        void *p = MPL_realloc(g->held, n * sizeof(req), MPL_MEM_OTHER);
        if (!p) {
            MPIDIU_request_complete(req); /* only the message may then be the less helpful one */
            return;
        }
        g->held = p;
        g->max_held = n;
    }
    if (!g->n_held)
        g->held_until_ns = MPIDI_PSCOM_now_ns() + grace_s * 1000000000ull;
    g->held[g->n_held++] = req;
}

/* The same grace where the netmod waits for its own pscom requests (pscom_coll_small.c): keep
 * progressing until it passed; the caller then returns its error. */
void MPIDI_PSCOM_broken_wait(void)
{
    uint64_t until = MPIDI_PSCOM_now_ns() + broken_grace_s() * 1000000000ull;
    while (MPIDI_PSCOM_now_ns() < until && MPID_Progress_test(NULL) == MPI_SUCCESS)
        MPIDI_PROGRESS_YIELD();
}

/* Progress (and finalize): complete the held requests once their time came. */
void MPIDI_PSCOM_release_held(void)
{
    MPIDI_PSCOM_global_t *g = &MPIDI_PSCOM_global;
    if (!g->finalizing && MPIDI_PSCOM_now_ns() < g->held_until_ns)
        return;
    MPIR_Request **list = g->held; /* a completion may fail more requests: a new list */
    int n = g->n_held;
    g->held = NULL;
    g->n_held = g->max_held = 0;
    for (int i = 0; i < n; i++)
        MPIDIU_request_complete(list[i]);
    MPL_free(list);
}

/* Close the connections peers closed, once nothing is left to receive from them. */
void MPIDI_PSCOM_reap_closed(void)
{
    int kept = 0;
    for (int i = 0; i < MPIDI_PSCOM_global.n_closed; i++) {
        pscom_connection_t *con = MPIDI_PSCOM_global.closed[i];
        if (has_unreceived(con))
            MPIDI_PSCOM_global.closed[kept++] = con; /* try again on a later progress call */
        else
            close_con(con);
    }
    MPIDI_PSCOM_global.n_closed = kept;
}
