/*
 * Dynamic processes (spawn, connect/accept, open_port). A process's upid is its pscom
 * endpoint string (with the NUL); peers from other jobs get a new av table and on-demand
 * connections. dynamic_send/recv are the blocking tagged exchange ch4 uses to set up
 * intercommunicators; they travel as MPIDI_PSCOM_MSG_DYNAMIC messages.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_spawn.h"

int MPIDI_PSCOM_get_local_upids(MPIR_Comm *comm, int **local_upid_size, char **local_upids)
{
    int mpi_errno = MPI_SUCCESS;
    int n = comm->local_size;
    size_t total = 0;
    int *sizes = MPL_malloc(n * sizeof(int), MPL_MEM_ADDRESS);
    char *upids = NULL;

    MPIR_ERR_CHKANDJUMP(sizes == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    for (int i = 0; i < n; i++) {
        const char *ep = MPIDI_PSCOM_AV(MPIDIU_comm_rank_to_av(comm, i)).ep;
        MPIR_Assert(ep);
        sizes[i] = (int)strlen(ep) + 1;
        total += sizes[i];
    }
    upids = MPL_malloc(total, MPL_MEM_ADDRESS);
    MPIR_ERR_CHKANDJUMP(upids == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    char *p = upids;
    for (int i = 0; i < n; i++) {
        memcpy(p, MPIDI_PSCOM_AV(MPIDIU_comm_rank_to_av(comm, i)).ep, sizes[i]);
        p += sizes[i];
    }
    *local_upid_size = sizes;
    *local_upids = upids;
    return MPI_SUCCESS;
fn_fail:
    MPL_free(sizes);
    return mpi_errno;
}

/* The endpoint strings of the av tables made here for dynamic peers (connect/accept, spawn).
 * MPICH frees such a table when its last communicator goes, without telling the netmod: the
 * strings are listed here and freed once their table is gone (looked at whenever a new table
 * is made, which only this file does) or at finalize. */
typedef struct dyn_avt {
    int avtid;
    int n;
    char **eps;
    struct dyn_avt *next;
} dyn_avt_t;
static dyn_avt_t *dyn_avts;

static void free_dyn_avts(int all)
{
    for (dyn_avt_t **p = &dyn_avts; *p;) {
        dyn_avt_t *d = *p;
        if (!all && MPIDIU_get_av_table(d->avtid)) {
            p = &d->next;
            continue;
        }
        for (int i = 0; i < d->n; i++)
            MPL_free(d->eps[i]);
        MPL_free(d->eps);
        *p = d->next;
        MPL_free(d);
    }
}

void MPIDI_PSCOM_dyn_avts_finalize(void)
{
    free_dyn_avts(1);
}

/* gpid of the av entry whose endpoint is ep, or -1. */
static int64_t find_ep(const char *ep)
{
    for (int k = 0; k < MPIDIU_get_n_avts(); k++) {
        MPIDI_av_table_t *t = MPIDIU_get_av_table(k);
        for (int j = 0; t && j < t->size; j++) {
            const char *e = MPIDI_PSCOM_AV(&t->table[j]).ep;
            if (e && strcmp(e, ep) == 0)
                return (int64_t)MPIDIU_GPID_CREATE(k, j);
        }
    }
    return -1;
}

int MPIDI_PSCOM_upids_to_gpids(int size, int *remote_upid_size, char *remote_upids,
                               uint64_t *remote_gpids)
{
    int mpi_errno = MPI_SUCCESS;
    int n_new = 0;
    int *new_idx = MPL_malloc(size * sizeof(int), MPL_MEM_ADDRESS);
    const char **new_ep = MPL_malloc(size * sizeof(char *), MPL_MEM_ADDRESS);
    const char *upid = remote_upids;

    MPIR_ERR_CHKANDJUMP(new_idx == NULL || new_ep == NULL, mpi_errno, MPI_ERR_OTHER,
                        "**pscom_nomem");
    for (int i = 0; i < size; i++) {
        MPIR_ERR_CHKANDJUMP1(remote_upid_size[i] < 1 || upid[remote_upid_size[i] - 1] != '\0',
                             mpi_errno, MPI_ERR_OTHER, "**pscom_ep", "**pscom_ep %s", "(upid)");
        int64_t gpid = find_ep(upid);
        if (gpid >= 0) {
            remote_gpids[i] = (uint64_t)gpid;
        } else {
            new_idx[n_new] = i;
            new_ep[n_new] = upid;
            n_new++;
        }
        upid += remote_upid_size[i];
    }
    if (n_new) {
        int avtid;
        free_dyn_avts(0);
        dyn_avt_t *d = MPL_calloc(1, sizeof(*d), MPL_MEM_ADDRESS);
        char **eps = MPL_calloc(n_new, sizeof(char *), MPL_MEM_ADDRESS);
        if (!d || !eps) {
            MPL_free(d);
            MPL_free(eps);
            MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
        }
        mpi_errno = MPIDIU_new_avt(n_new, &avtid);
        if (mpi_errno) {
            MPL_free(d);
            MPL_free(eps);
            goto fn_fail;
        }
        *d = (dyn_avt_t){.avtid = avtid, .n = n_new, .eps = eps, .next = dyn_avts};
        dyn_avts = d;
        for (int i = 0; i < n_new; i++) {
            MPIDI_av_entry_t *av = &MPIDIU_get_av(avtid, i);
            mpi_errno = MPIDI_PSCOM_connect_av(av, new_ep[i]);
            eps[i] = MPIDI_PSCOM_AV(av).ep; /* owned by the list from here on */
            MPIR_ERR_CHECK(mpi_errno);
            remote_gpids[new_idx[i]] = MPIDIU_GPID_CREATE(avtid, i);
        }
    }
fn_exit:
    MPL_free(new_idx);
    MPL_free(new_ep);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

static void dyn_done(pscom_request_t *preq)
{
    MPIDI_PSCOM_PREQ(preq)->handler_id = 1; /* flag for the waiting loop */
}

static int dyn_accept(pscom_request_t *preq, pscom_connection_t *con, pscom_header_net_t *header)
{
    const MPIDI_PSCOM_dyn_xhdr_t *xh = pscom_header_xheader(header);
    (void)con;
    return header->xheader_len >= sizeof(*xh) && xh->type == MPIDI_PSCOM_MSG_DYNAMIC &&
           xh->version == MPIDI_PSCOM_WIRE_VERSION && xh->tag == MPIDI_PSCOM_PREQ(preq)->tag;
}

/* Progress until preq completed (0) or timeout seconds passed (timeout 0: forever). */
static int dyn_wait(pscom_request_t *preq, int timeout)
{
    int mpi_errno = MPI_SUCCESS;
    MPL_time_t start, now;
    double elapsed = 0;

    MPL_wtime(&start);
    while (!MPIDI_PSCOM_PREQ(preq)->handler_id && (timeout == 0 || elapsed < timeout)) {
        mpi_errno = MPID_Progress_test(NULL);
        MPIR_ERR_CHECK(mpi_errno);
        MPL_wtime(&now);
        MPL_wtime_diff(&start, &now, &elapsed);
    }
fn_fail:
    return mpi_errno;
}

/* A failed first exchange with a process of another job: ch4 made an av table for it that no
   communicator holds (reference count 0) and would release it once more at MPI_Finalize (an
   assertion). Free it now. */
static void drop_unused_avt(uint64_t remote_gpid)
{
    int avtid = MPIDIU_GPID_GET_AVTID(remote_gpid);
    if (avtid > 0 && MPIDIU_get_av_table(avtid) &&
        MPIR_Object_get_ref(MPIDIU_get_av_table(avtid)) == 0)
        MPIDIU_free_avt(avtid);
}

int MPIDI_PSCOM_dynamic_send(uint64_t remote_gpid, int tag, const void *buf, int size, int timeout)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_av_entry_t *av =
        &MPIDIU_get_av(MPIDIU_GPID_GET_AVTID(remote_gpid), MPIDIU_GPID_GET_LPID(remote_gpid));
    pscom_request_t *preq = MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_dyn_xhdr_t), dyn_done);
    MPIR_ERR_CHKANDJUMP(preq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");

    MPIDI_PSCOM_dyn_xhdr_t *xh = preq->xheader;
    memset(xh, 0, sizeof(*xh));
    xh->type = MPIDI_PSCOM_MSG_DYNAMIC;
    xh->version = MPIDI_PSCOM_WIRE_VERSION;
    xh->tag = tag;
    preq->xheader_len = sizeof(*xh);
    preq->data = (void *)buf;
    preq->data_len = size;
    preq->connection = MPIDI_PSCOM_av_con(av);
    pscom_post_send(preq);

    mpi_errno = dyn_wait(preq, timeout);
    if (mpi_errno == MPI_SUCCESS && !MPIDI_PSCOM_PREQ(preq)->handler_id) {
        /* cannot withdraw a posted send: leak the request rather than free a live one */
        MPIR_ERR_SET(mpi_errno, MPI_ERR_PORT, "**pscom_timeout");
        drop_unused_avt(remote_gpid);
        return mpi_errno;
    }
    if (mpi_errno == MPI_SUCCESS && !pscom_req_successful(preq))
        MPIR_ERR_SET1(mpi_errno, MPI_ERR_PORT, "**pscom_dynamic", "**pscom_dynamic %s",
                      pscom_req_state_str(preq->state));
    MPIDI_PSCOM_preq_free(preq);
    if (mpi_errno != MPI_SUCCESS)
        drop_unused_avt(remote_gpid);
fn_fail:
    return mpi_errno;
}

int MPIDI_PSCOM_dynamic_recv(int tag, void *buf, int size, int timeout)
{
    int mpi_errno = MPI_SUCCESS;
    pscom_request_t *preq = MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_dyn_xhdr_t), dyn_done);
    MPIR_ERR_CHKANDJUMP(preq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");

    MPIDI_PSCOM_PREQ(preq)->tag = tag;
    preq->ops.recv_accept = dyn_accept;
    preq->connection = NULL;
    preq->data = buf;
    preq->data_len = size;
    pscom_post_recv(preq);

    mpi_errno = dyn_wait(preq, timeout);
    if (!MPIDI_PSCOM_PREQ(preq)->handler_id) {
        if (pscom_cancel_recv(preq) && !pscom_req_is_done(preq)) {
            MPIDI_PSCOM_preq_free(preq); /* withdrawn before any data arrived */
            if (mpi_errno == MPI_SUCCESS)
                MPIR_ERR_SET(mpi_errno, MPI_ERR_PORT, "**pscom_timeout");
            return mpi_errno;
        }
        /* already matched (or the cancel completed it): buf is being written, wait */
        while (!MPIDI_PSCOM_PREQ(preq)->handler_id) {
            pscom_progress(0);
            MPIDI_PSCOM_drain();
        }
    }
    if (mpi_errno == MPI_SUCCESS && (preq->state & PSCOM_REQ_STATE_CANCELED))
        MPIR_ERR_SET(mpi_errno, MPI_ERR_PORT, "**pscom_timeout");
    else if (mpi_errno == MPI_SUCCESS && !pscom_req_successful(preq))
        MPIR_ERR_SET1(mpi_errno, MPI_ERR_PORT, "**pscom_dynamic", "**pscom_dynamic %s",
                      pscom_req_state_str(preq->state));
    MPIDI_PSCOM_preq_free(preq);
fn_fail:
    return mpi_errno;
}
