/*
 * Allreduce of a few bytes straight over pscom. At this size MPICH's generic path costs more
 * than the messages: two algorithm searches (ch4 and MPIR), a temporary buffer, MPI requests
 * for every send and receive. This is recursive doubling, the ranks above the largest power of
 * two folded in first, as MPICH's own algorithm does it: the partner's data arrives in a stack
 * buffer through one reused pscom receive, sends go out at once (pscom_send_now) or as copies.
 * The messages are ordinary tagged messages on the collective context with MPIR_ALLREDUCE_TAG
 * and MPICH's error bits, so matching, ordering and failure reporting stay those of MPICH.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"

typedef struct {
    MPIR_Comm *comm;
    pscom_request_t *preq; /* the one receive, posted once per exchange */
    void *tmp;             /* the partner's data */
    size_t len;
    MPIR_Errflag_t *errflag;
} exchange_t;

static int coll_tag(MPIR_Errflag_t errflag)
{
    int tag = MPIR_ALLREDUCE_TAG;
    if (errflag == MPIR_ERR_PROC_FAILED)
        MPIR_TAG_SET_PROC_FAILURE_BIT(tag);
    else if (errflag)
        MPIR_TAG_SET_ERROR_BIT(tag);
    return tag;
}

static int send_to(exchange_t *x, int rank, const void *buf)
{
    pscom_connection_t *con = MPIDI_PSCOM_comm_con(x->comm, rank);
    if (!con)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**pscom_con", "**pscom_con %s %s", "?",
                                    "no connection");
    MPIDI_PSCOM_tagged_xhdr_t xh =
        MPIDI_PSCOM_tagged_xhdr(x->comm, MPIR_CONTEXT_INTRA_COLL, coll_tag(*x->errflag));
    if (!pscom_send_now(con, &xh, sizeof(xh), buf, x->len))
        pscom_send(con, &xh, sizeof(xh), buf, x->len); /* a copy: buf may change at once */
    return MPI_SUCCESS;
}

static void post_recv_from(exchange_t *x, int rank)
{
    pscom_request_t *preq = x->preq;
    preq->connection = NULL; /* socket-wide, as every tagged receive (pscom_tagged.c) */
    MPIDI_PSCOM_preq_t *want = MPIDI_PSCOM_PREQ(preq);
    want->context_id = x->comm->recvcontext_id + MPIR_CONTEXT_INTRA_COLL;
    want->src_rank = rank;
    want->tag = MPIR_ALLREDUCE_TAG;
    preq->data = x->tmp;
    preq->data_len = x->len;
    preq->xheader_len = sizeof(MPIDI_PSCOM_tagged_xhdr_t);
    pscom_post_recv(preq);
}

/* Wait for the posted receive with full MPI progress (RMA targets, other requests). */
static int wait_recv(exchange_t *x)
{
    pscom_request_t *preq = x->preq;
    int mpi_errno = MPI_SUCCESS;
    while (!pscom_req_is_done(preq)) {
        mpi_errno = MPID_Progress_test(NULL);
        if (mpi_errno)
            return mpi_errno;
    }
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    if (!pscom_req_successful(preq) || preq->data_len != x->len) {
        *x->errflag = MPIR_ERR_OTHER;
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**pscom_con", "**pscom_con %s %s",
                                    preq->connection ? pscom_con_str(preq->connection) : "?",
                                    pscom_req_state_str(preq->state));
    }
    if (MPIR_TAG_CHECK_PROC_FAILURE_BIT(xh->tag))
        *x->errflag = MPIR_ERR_PROC_FAILED;
    else if (MPIR_TAG_CHECK_ERROR_BIT(xh->tag) && !*x->errflag)
        *x->errflag = MPIR_ERR_OTHER;
    return MPI_SUCCESS;
}

/* Receive from rank into tmp (posted before our own send, so it never waits unexpected). */
static int exchange(exchange_t *x, int rank, const void *mine, int send, int recv)
{
    int mpi_errno = MPI_SUCCESS;
    if (recv)
        post_recv_from(x, rank);
    if (send)
        mpi_errno = send_to(x, rank, mine);
    if (recv) {
        int err = wait_recv(x);
        if (err && !mpi_errno)
            mpi_errno = err;
    }
    return mpi_errno;
}

int MPIDI_PSCOM_allreduce_small(const void *sendbuf, void *recvbuf, MPI_Aint count,
                                MPI_Datatype datatype, MPI_Op op, MPIR_Comm *comm,
                                MPIR_Errflag_t *errflag)
{
    MPI_Aint type_size;
    MPIR_Datatype_get_size_macro(datatype, type_size);
    size_t len = (size_t)count * (size_t)type_size;
    _Alignas(16) unsigned char tmp[MPIDI_PSCOM_ALLREDUCE_SMALL_MAX];
    int mpi_errno = MPI_SUCCESS, err;

    if (sendbuf != MPI_IN_PLACE && len)
        memcpy(recvbuf, sendbuf, len);
    int size = comm->local_size, rank = comm->rank;
    if (size == 1 || !len)
        return MPI_SUCCESS;

    exchange_t x = {.comm = comm, .tmp = tmp, .len = len, .errflag = errflag};
    x.preq = MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_tagged_xhdr_t), NULL);
    MPIR_ERR_CHKANDJUMP(x.preq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    x.preq->ops.io_done = NULL; /* waited for here, never queued for MPIDI_NM_progress */
    x.preq->ops.recv_accept = MPIDI_PSCOM_tagged_accept;

    int pof2 = MPL_pof2(size), rem = size - pof2, newrank;
    /* fold: of the first 2*rem ranks, the even ones hand their data to the odd ones */
    if (rank < 2 * rem) {
        int even = !(rank & 1);
        err = exchange(&x, even ? rank + 1 : rank - 1, recvbuf, even, !even);
        if (err)
            mpi_errno = err;
        else if (!even)
            MPIR_Reduce_local(tmp, recvbuf, count, datatype, op);
        newrank = even ? -1 : rank / 2;
    } else {
        newrank = rank - rem;
    }
    if (newrank >= 0) {
        for (int mask = 1; mask < pof2; mask <<= 1) {
            int newdst = newrank ^ mask;
            int dst = newdst < rem ? newdst * 2 + 1 : newdst + rem;
            err = exchange(&x, dst, recvbuf, 1, 1);
            if (err) {
                mpi_errno = mpi_errno ? mpi_errno : err;
                continue; /* the others still wait for our part */
            }
            /* builtin operations commute: both partners compute the same bits */
            MPIR_Reduce_local(tmp, recvbuf, count, datatype, op);
        }
    }
    /* unfold: the odd ones return the result */
    if (rank < 2 * rem) {
        int even = !(rank & 1);
        x.tmp = recvbuf;
        err = exchange(&x, even ? rank + 1 : rank - 1, recvbuf, !even, even);
        if (err && !mpi_errno)
            mpi_errno = err;
    }
    MPIDI_PSCOM_preq_free(x.preq);

fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
