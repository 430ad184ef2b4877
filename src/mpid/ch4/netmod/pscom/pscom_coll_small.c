/*
 * Small collectives straight over pscom: Allreduce of a few bytes (of any size on 2 ranks, and on
 * up to 8 of one node), Barrier, Bcast (of a few KiB, of up to 64 KiB on up to 8 ranks),
 * Allgather (on 2 ranks, and on up to 8 of one node), Alltoall of small blocks (of any size on
 * up to 8 ranks of one node). "One node": MPIDI_PSCOM_direct_coll_ok (pscom_coll.h).
 * At these sizes MPICH's generic path costs more than the messages: algorithm searches (ch4
 * and MPIR), the node-aware composition (a Barrier on 2 ranks of one node became a node
 * Barrier plus a 1-byte node Bcast), temporary buffers, MPI requests for every send and
 * receive. The algorithms are MPICH's own (recursive doubling with the ranks above the largest
 * power of two folded in first; dissemination; binomial tree) or exchanges with every rank at
 * once: reused pscom receives, sends go out at once (pscom_send_now) or through requests that
 * are waited for before the call returns. The
 * messages are ordinary tagged messages on the collective context with MPICH's tags and error
 * bits, so matching, ordering and failure reporting stay those of MPICH.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_broken.h"
#include "pscom_gpu.h"
#include "pscom_coll_shm.h"

typedef struct {
    MPIR_Comm *comm;
    int tag;               /* MPIR_ALLREDUCE_TAG, MPIR_BARRIER_TAG, ... */
    pscom_request_t *preq; /* the one receive, posted once per exchange */
    pscom_request_t *sreq; /* a send that must wait (Bcast), made when first needed */
    void *tmp;             /* the partner's data */
    size_t len;
    MPIR_Errflag_t *errflag;
    int may_sleep;   /* a wait may sleep (wait_preq): Bcast, whose ranks wait for one parent */
    int sleep_after; /* with may_sleep: after this many idle polls (-1 never) */
} exchange_t;

static int coll_tag(int tag, MPIR_Errflag_t errflag)
{
    if (errflag == MPIR_ERR_PROC_FAILED)
        MPIR_TAG_SET_PROC_FAILURE_BIT(tag);
    else if (errflag)
        MPIR_TAG_SET_ERROR_BIT(tag);
    return tag;
}

/* One receive and one send request kept from call to call: making and freeing them cost more
   than an 8-byte Bcast on a receiving rank (pscom's request init, malloc and free). Taken and
   returned under MPICH's global lock; a collective of another thread that runs while ours
   waits (the lock is let go there) finds none and makes its own. */
static pscom_request_t *spare_recv, *spare_send;
/* The same for the partner's data of an Allreduce above ALLREDUCE_SMALL_MAX, one segment (a
   malloc of that size is an mmap, whose pages would fault in again on every call); only the
   pages a call uses become resident. A page more: the data goes at the offset in its page that
   our send buffer has, which the partner's likely has too. A copy whose destination lies a few
   bytes past its source modulo 4 KiB runs at a fraction of the speed (the CPU takes the loads
   for ones of the bytes just stored): the kernel's copy of a 64 KiB Allreduce took 3x longer
   into a buffer 16 bytes off from the source's page offset than into one at the same offset. */
#define PAGE 4096
static void *spare_segment;
/* 1 MiB: 64-256 KiB segments took 6-15 % longer for 1 and 4 MiB on 2 ranks, 2 and 4 MiB ones
   3-18 % for 4 MiB (the partner's data then no longer stays in this core's cache) */
#define SEGMENT (1024 * 1024)

/* A tagged request that is waited for here, never queued for MPIDI_NM_progress */
static pscom_request_t *coll_preq_create(void)
{
    pscom_request_t *preq = MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_tagged_xhdr_t), NULL);
    if (preq) {
        preq->ops.io_done = NULL;
        preq->ops.recv_accept = MPIDI_PSCOM_tagged_accept;
    }
    return preq;
}

static pscom_request_t *preq_get(pscom_request_t **spare)
{
    pscom_request_t *preq = *spare;
    if (!preq)
        return coll_preq_create();
    *spare = NULL;
    return preq;
}

static void preq_put(pscom_request_t **spare, pscom_request_t *preq)
{
    if (!preq)
        return;
    if (*spare)
        MPIDI_PSCOM_preq_free(preq);
    else
        *spare = preq;
}

/* before the socket closes: the requests belong to it */
void MPIDI_PSCOM_coll_small_finalize(void)
{
    if (spare_recv)
        MPIDI_PSCOM_preq_free(spare_recv);
    if (spare_send)
        MPIDI_PSCOM_preq_free(spare_send);
    spare_recv = spare_send = NULL;
    MPL_free(spare_segment);
    spare_segment = NULL;
}

/* Wait for a pscom request with full MPI progress (RMA targets, other requests). Under
   MPI_THREAD_MULTIPLE the global lock is let go between polls, as ch4's own wait does: another
   thread of this process may hold what our peer waits for before it can answer. sleep_after:
   after that many idle polls (PSP_MPI_COLL_BLOCK), sleep until a message comes. On an
   oversubscribed node a Bcast's waiting ranks then leave the CPUs to the ones that forward (8 ranks
   on 2 CPUs over tcp: 8 B 43-52 -> 28-33 us); in a Barrier or Allreduce every rank waits for the
   others, and the wakeup only added to it (98-104 -> 100-147 us). */
static int wait_preq(pscom_request_t *preq, int block_after)
{
    int idle = 0;
    while (!pscom_req_is_done(preq)) {
        int mpi_errno = MPID_Progress_test(NULL);
        if (mpi_errno)
            return mpi_errno;
        if (pscom_req_is_done(preq))
            break;
        if (block_after >= 0 && ++idle > block_after) {
            pscom_progress(1); /* a message, or 1 ms (MPI's other progress) */
            idle = 0;
        } else {
            MPIDI_PROGRESS_YIELD();
        }
    }
    return MPI_SUCCESS;
}

/* Start a send of len bytes of buf to rank: written at once where the transport takes it whole
   (*posted 0), else posted through *sreq, which is made when first needed (*posted 1; the kept
   spare for x->sreq). */
static int start_send(exchange_t *x, int rank, const void *buf, size_t len, pscom_request_t **sreq,
                      int *posted)
{
    *posted = 0;
    pscom_connection_t *con = MPIDI_PSCOM_comm_con(x->comm, rank);
    if (!con)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**pscom_con", "**pscom_con %s %s", "?",
                                    "no connection");
    MPIDI_PSCOM_tagged_xhdr_t xh =
        MPIDI_PSCOM_tagged_xhdr(x->comm, MPIR_CONTEXT_INTRA_COLL, coll_tag(x->tag, *x->errflag));
    if (pscom_send_now(con, &xh, MPIDI_PSCOM_TAGGED_XHDR_LEN, buf, len))
        return MPI_SUCCESS;
    if (!*sreq)
        *sreq = sreq == &x->sreq ? preq_get(&spare_send) : coll_preq_create();
    if (!*sreq)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**pscom_nomem", NULL);
    pscom_request_t *r = *sreq;
    memcpy(r->xheader, &xh, MPIDI_PSCOM_TAGGED_XHDR_LEN);
    r->xheader_len = MPIDI_PSCOM_TAGGED_XHDR_LEN;
    r->data = (void *)buf;
    r->data_len = len;
    r->connection = con;
    pscom_post_send(r);
    *posted = 1;
    return MPI_SUCCESS;
}

/* Wait until the send start_send posted has been written out. */
static int wait_sent(exchange_t *x, pscom_request_t *sreq)
{
    int mpi_errno = wait_preq(sreq, x->may_sleep ? x->sleep_after : -1);
    if (!mpi_errno && !pscom_req_successful(sreq)) {
        MPIDI_PSCOM_broken_wait();
        *x->errflag = MPIR_ERR_OTHER;
        mpi_errno = MPIR_Err_create_code(
            MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER, "**pscom_con",
            "**pscom_con %s %s", pscom_con_str(sreq->connection), pscom_req_state_str(sreq->state));
    }
    return mpi_errno;
}

/* A send that has been written out when this returns. Never a copy left queued behind us: a
   rank that leaves the collective and then blocks outside MPI (in MPI_Finalize's PMI barrier,
   in user code) would never write it, and its peer would wait forever (MPICH's
   comm/comm_create_group hung so, 7 runs in 25); and a Bcast root's copies would pile up. */
static int send_to(exchange_t *x, int rank, const void *buf)
{
    int posted;
    int mpi_errno = start_send(x, rank, buf, x->len, &x->sreq, &posted);
    return !mpi_errno && posted ? wait_sent(x, x->sreq) : mpi_errno;
}

/* Sends to n <= SEND_TO_MAX ranks, all started before any is waited for: they then go out
   together instead of each after the one before has been taken (a rendezvous send waits for
   the receiver to pull it). Written out when this returns, as send_to. */
#define SEND_TO_MAX 32 /* children in a binomial tree of up to 2^32 ranks */
typedef struct {
    int rank;
    const void *buf;
    size_t len;
} send_dest_t;

static int send_to_each(exchange_t *x, const send_dest_t *to, int n)
{
    pscom_request_t *extra[SEND_TO_MAX], *started[SEND_TO_MAX];
    int mpi_errno = MPI_SUCCESS, err, posted, n_started = 0;
    MPIR_Assert(n <= SEND_TO_MAX);
    for (int i = 0; i < n; i++) {
        pscom_request_t **sreq = &x->sreq;
        if (i > 0) {
            extra[i] = NULL;
            sreq = &extra[i];
        }
        err = start_send(x, to[i].rank, to[i].buf, to[i].len, sreq, &posted);
        if (posted)
            started[n_started++] = *sreq;
        mpi_errno = mpi_errno ? mpi_errno : err; /* the others still wait for theirs */
    }
    for (int i = 0; i < n_started; i++) {
        err = wait_sent(x, started[i]);
        mpi_errno = mpi_errno ? mpi_errno : err;
    }
    for (int i = 1; i < n; i++)
        if (extra[i] && pscom_req_is_done(extra[i])) /* a failed wait leaves one behind */
            MPIDI_PSCOM_preq_free(extra[i]);
    return mpi_errno;
}

static void post_recv_from(exchange_t *x, int rank)
{
    pscom_request_t *preq = x->preq;
    preq->connection = NULL; /* socket-wide, as every tagged receive (pscom_tagged.c) */
    MPIDI_PSCOM_preq_t *want = MPIDI_PSCOM_PREQ(preq);
    want->context_id = x->comm->recvcontext_id + MPIR_CONTEXT_INTRA_COLL;
    want->src_rank = rank;
    want->tag = x->tag;
    preq->data = x->tmp;
    preq->data_len = x->len;
    preq->xheader_len = sizeof(MPIDI_PSCOM_tagged_xhdr_t);
    pscom_post_recv(preq);
}

/* Wait for the posted receive with full MPI progress (RMA targets, other requests). */
static int wait_recv(exchange_t *x)
{
    pscom_request_t *preq = x->preq;
    int mpi_errno = wait_preq(preq, x->may_sleep ? x->sleep_after : -1);
    if (mpi_errno)
        return mpi_errno;
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    if ((preq->state & PSCOM_REQ_STATE_TRUNCATED) ||
        (pscom_req_successful(preq) && preq->data_len != x->len)) {
        /* a Bcast whose counts differ between the ranks: an error, but the tree goes on */
        *x->errflag = MPIR_ERR_OTHER;
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**collective_size_mismatch",
                                    "**collective_size_mismatch %d %d", (int)preq->data_len,
                                    (int)x->len);
    }
    if (!pscom_req_successful(preq)) {
        if (preq->state & PSCOM_REQ_STATE_ERROR)
            MPIDI_PSCOM_broken_wait();
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

static int exchange_init(exchange_t *x)
{
    x->preq = preq_get(&spare_recv);
    if (!x->preq)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**pscom_nomem", NULL);
    return MPI_SUCCESS;
}

/* MPICH's convention: a failure seen anywhere in the collective (error bits) fails it here too */
static int exchange_finish(exchange_t *x, int mpi_errno)
{
    preq_put(&spare_recv, x->preq);
    preq_put(&spare_send, x->sreq);
    /* a plain name: MPICH's extracterrmsgs (autogen) accepts only errflag/errclass here */
    int errflag = *x->errflag;
    if (!mpi_errno && errflag != MPIR_ERR_NONE)
        MPIR_ERR_SET(mpi_errno, errflag, "**coll_fail");
    return mpi_errno;
}

#define NOBODY (-1)

/* Send mine to rank `to` and receive from rank `from` into tmp, either may be NOBODY. The
   receive is posted before our own send, so it never waits as unexpected; a failed send still
   waits for the receive (the others go on with the collective). */
static int exchange(exchange_t *x, int to, const void *mine, int from)
{
    int mpi_errno = MPI_SUCCESS;
    if (from != NOBODY)
        post_recv_from(x, from);
    if (to != NOBODY)
        mpi_errno = send_to(x, to, mine);
    if (from != NOBODY) {
        int err = wait_recv(x);
        if (err && !mpi_errno)
            mpi_errno = err;
    }
    return mpi_errno;
}

/* A receive of one block (tag: MPIR_ALLTOALL_TAG, ...) from `from` into buf, posted now, waited
   for by the caller */
static pscom_request_t *post_block_recv(MPIR_Comm *comm, int tag, int from, void *buf, size_t len)
{
    pscom_request_t *preq = coll_preq_create();
    if (!preq)
        return NULL;
    exchange_t x = {.comm = comm, .tag = tag, .preq = preq, .tmp = buf, .len = len};
    post_recv_from(&x, from);
    return preq;
}

/* exchange() with n <= SEND_TO_MAX partners at once: every receive posted (from[i].len bytes
   into from[i].buf from rank from[i].rank), every send started (send_to_each), then the
   receives waited for. Without memory for a receive our sends still go out, so that the others
   finish. x's own receive (x->preq) is left as it was. */
typedef struct {
    int rank;
    void *buf;
    size_t len;
} recv_src_t;

static int exchange_all(exchange_t *x, const recv_src_t *from, const send_dest_t *to, int n)
{
    pscom_request_t *rq[SEND_TO_MAX], *own = x->preq;
    int mpi_errno = MPI_SUCCESS, err, posted = 0;
    MPIR_Assert(n <= SEND_TO_MAX);
    for (; posted < n; posted++) {
        rq[posted] =
            post_block_recv(x->comm, x->tag, from[posted].rank, from[posted].buf, from[posted].len);
        if (!rq[posted])
            break;
    }
    if (posted < n) {
        *x->errflag = MPIR_ERR_OTHER;
        mpi_errno = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                         MPI_ERR_OTHER, "**pscom_nomem", NULL);
    }
    err = send_to_each(x, to, n);
    mpi_errno = mpi_errno ? mpi_errno : err;
    for (int i = 0; i < posted; i++) {
        x->preq = rq[i];
        x->len = from[i].len;
        err = wait_recv(x);
        mpi_errno = mpi_errno ? mpi_errno : err;
        MPIDI_PSCOM_preq_free(rq[i]);
    }
    x->preq = own;
    return mpi_errno;
}

/* One segment of an Allreduce: out = the reduction of every rank's in. Our partial result
   stays in the send buffer until the first reduction writes it to out: on 2 ranks the partner
   reads the user's data as it is, without a copy into out first (which would also hand it the
   lines as just written by us, one slow transfer between the cores each). */
static int allreduce_segment(exchange_t *x, const void *in, void *out, MPI_Aint count,
                             MPI_Datatype datatype, MPI_Op op)
{
    int size = x->comm->local_size, rank = x->comm->rank, mpi_errno = MPI_SUCCESS, err;
    const void *mine = in;
    void *tmp = x->tmp;
    int pof2 = MPL_pof2(size), rem = size - pof2, newrank;
    /* fold: of the first 2*rem ranks, the even ones hand their data to the odd ones */
    if (rank < 2 * rem) {
        int even = !(rank & 1);
        int partner = even ? rank + 1 : rank - 1;
        err = exchange(x, even ? partner : NOBODY, mine, even ? NOBODY : partner);
        if (err) {
            mpi_errno = err;
        } else if (!even) {
            mpi_errno = MPIDI_PSCOM_reduce(out, mine, tmp, count, datatype, op);
            mine = out;
        }
        newrank = even ? -1 : rank / 2;
    } else {
        newrank = rank - rem;
    }
    if (newrank >= 0) {
        for (int mask = 1; mask < pof2; mask <<= 1) {
            int newdst = newrank ^ mask;
            int dst = newdst < rem ? newdst * 2 + 1 : newdst + rem;
            err = exchange(x, dst, mine, dst);
            if (err) {
                mpi_errno = mpi_errno ? mpi_errno : err;
                continue; /* the others still wait for our part */
            }
            /* builtin operations commute: both partners compute the same bits */
            err = MPIDI_PSCOM_reduce(out, mine, tmp, count, datatype, op);
            mpi_errno = mpi_errno ? mpi_errno : err;
            mine = out;
        }
    }
    /* unfold: the odd ones return the result, straight into the even ones' out (their in was
       sent: an eager send is copied, a rendezvous one waited for) */
    if (rank < 2 * rem) {
        int even = !(rank & 1);
        x->tmp = out;
        int partner = even ? rank + 1 : rank - 1;
        err = exchange(x, even ? NOBODY : partner, mine, even ? partner : NOBODY);
        x->tmp = tmp;
        if (err && !mpi_errno)
            mpi_errno = err;
        if (even && !err)
            mine = out;
    }
    if (mine != out) /* an exchange failed: out holds what we have */
        memcpy(out, mine, x->len);
    return mpi_errno;
}

/* One segment of an Allreduce on 3 to 8 ranks, cut into one block per rank (block j: elements
   [j*base + min(j, extra), ...), base or base + 1 of them): every rank sends block j of its
   data to rank j and reduces its own block from all ranks' (a reduce-scatter), then sends the
   result to every rank (an allgather), each phase all at once. Two phases, where recursive
   halving and doubling (MPICH's from 2 KiB) take 2 log2(p) steps that each wait for a partner.
   Every block is reduced on one rank, in rank order, so every rank gets the same bits. tmp
   takes the others' parts of our block: size - 1 blocks. */
static int allreduce_blocks_segment(exchange_t *x, char *tmp, const void *in, void *out,
                                    MPI_Aint count, MPI_Datatype datatype, MPI_Op op,
                                    size_t type_size)
{
    int size = x->comm->local_size, rank = x->comm->rank, mpi_errno, err;
    MPI_Aint base = count / size, extra = count % size;
#define BLOCK_AT(j) ((size_t)((j)*base + MPL_MIN((j), extra)) * type_size)
#define BLOCK_N(j)  (base + ((j) < extra))
    MPI_Aint my_n = BLOCK_N(rank);
    size_t my_len = (size_t)my_n * type_size, slot = (size_t)(base + (extra > 0)) * type_size;
    char *mine_out = (char *)out + BLOCK_AT(rank);
    recv_src_t from[MPIDI_PSCOM_FLAT_COLL_MAX_RANKS];
    send_dest_t to[MPIDI_PSCOM_FLAT_COLL_MAX_RANKS];

    /* reduce-scatter: from rank - i its part of our block into slot i - 1; to rank + i its
       block of ours */
    for (int i = 1; i < size; i++) {
        int r = (rank - i + size) % size, j = (rank + i) % size;
        from[i - 1] = (recv_src_t){r, tmp + (size_t)(i - 1) * slot, my_len};
        to[i - 1] =
            (send_dest_t){j, (const char *)in + BLOCK_AT(j), (size_t)BLOCK_N(j) * type_size};
    }
    mpi_errno = exchange_all(x, from, to, size - 1);
    if (in != out)
        memcpy(mine_out, (const char *)in + BLOCK_AT(rank), my_len);
    for (int r = 0; r < size && !mpi_errno; r++) { /* slot of rank r: (rank - r) - 1 */
        if (r != rank)
            mpi_errno = MPIDI_PSCOM_reduce(mine_out, mine_out,
                                           tmp + (size_t)((rank - r + size) % size - 1) * slot,
                                           my_n, datatype, op);
    }

    /* allgather: block r from rank r straight into out, ours to every rank */
    for (int i = 1; i < size; i++) {
        int r = (rank - i + size) % size;
        from[i - 1] = (recv_src_t){r, (char *)out + BLOCK_AT(r), (size_t)BLOCK_N(r) * type_size};
        to[i - 1] = (send_dest_t){(rank + i) % size, mine_out, my_len};
    }
    err = exchange_all(x, from, to, size - 1);
    mpi_errno = mpi_errno ? mpi_errno : err;
    return mpi_errno;
#undef BLOCK_AT
#undef BLOCK_N
}

static void *segment_get(void)
{
    void *buf = spare_segment;
    spare_segment = NULL;
    return buf ? buf : MPL_malloc(SEGMENT + PAGE, MPL_MEM_COLL);
}

static void segment_put(void *buf)
{
    if (spare_segment)
        MPL_free(buf);
    else
        spare_segment = buf;
}

int MPIDI_PSCOM_allreduce_direct(const void *sendbuf, void *recvbuf, MPI_Aint count,
                                 MPI_Datatype datatype, MPI_Op op, MPIR_Comm *comm,
                                 MPIR_Errflag_t *errflag)
{
    MPI_Aint type_size;
    MPIR_Datatype_get_size_macro(datatype, type_size);
    size_t len = (size_t)count * (size_t)type_size;
    int small = len <= MPIDI_PSCOM_ALLREDUCE_SMALL_MAX;
    _Alignas(16) unsigned char tmp_small[MPIDI_PSCOM_ALLREDUCE_SMALL_MAX];
    _Alignas(16) unsigned char host_small[MPIDI_PSCOM_ALLREDUCE_SMALL_MAX];
    void *tmp = NULL, *host = NULL;
    int mpi_errno = MPI_SUCCESS, err;
    if (!len)
        return MPI_SUCCESS;

    /* device memory on this rank (not necessarily on the others): reduce in a host copy */
    void *const user_recvbuf = recvbuf;
    const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    int staged = MPIDI_PSCOM_IS_DEV_PTR(recvbuf) || (in != recvbuf && MPIDI_PSCOM_IS_DEV_PTR(in));
    if (staged) {
        host = small ? host_small : MPIDI_PSCOM_stage_alloc(len);
        MPIR_ERR_CHKANDJUMP(!host, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIR_Localcopy(in, count, datatype, host, count, datatype);
        MPIR_ERR_CHECK(mpi_errno);
        in = recvbuf = host;
    }
    if (comm->local_size == 1) {
        if (in != recvbuf)
            memcpy(recvbuf, in, len);
        goto fn_copy_back;
    }
    if (MPIDI_PSCOM_coll_shm_allreduce(in, recvbuf, count, datatype, op, len, comm, errflag,
                                       &mpi_errno)) {
        MPIR_ERR_CHECK(mpi_errno);
        goto fn_copy_back;
    }

    tmp = small ? tmp_small : segment_get();
    MPIR_ERR_CHKANDJUMP(!tmp, mpi_errno, MPI_ERR_OTHER, "**nomem");
    exchange_t x = {.comm = comm,
                    .tag = MPIR_ALLREDUCE_TAG,
                    .tmp = small ? tmp : (char *)tmp + ((uintptr_t)in - (uintptr_t)tmp) % PAGE,
                    .errflag = errflag};
    mpi_errno = exchange_init(&x);
    MPIR_ERR_CHECK(mpi_errno);
    /* every rank cuts the same segments: the count and type are the same everywhere */
    MPI_Aint per_segment = small ? count : MPL_MAX(1, SEGMENT / type_size);
    for (MPI_Aint done = 0; done < count; done += per_segment) {
        MPI_Aint n = MPL_MIN(per_segment, count - done);
        size_t off = (size_t)done * (size_t)type_size;
        x.len = (size_t)n * (size_t)type_size;
        if (!small && comm->local_size > 2 && n >= comm->local_size)
            err = allreduce_blocks_segment(&x, tmp, (const char *)in + off, (char *)recvbuf + off,
                                           n, datatype, op, (size_t)type_size);
        else
            err = allreduce_segment(&x, (const char *)in + off, (char *)recvbuf + off, n, datatype,
                                    op);
        if (err && !mpi_errno)
            mpi_errno = err; /* the others still wait for our parts */
    }
    mpi_errno = exchange_finish(&x, mpi_errno);

fn_copy_back:
    if (staged && !mpi_errno)
        mpi_errno = MPIR_Localcopy(host, count, datatype, user_recvbuf, count, datatype);
fn_exit:
    if (tmp && tmp != tmp_small)
        segment_put(tmp);
    if (host && host != host_small)
        MPIDI_PSCOM_stage_free(host);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

/* Allgather on 2 ranks, and on up to 8 of one node: our block straight to every other rank, all
   receives posted and all sends started before any is waited for (MPICH: recursive doubling, or a
   ring from 512 KiB in all: 3 or 7 steps on 8 ranks that each wait for a partner). Our block goes
   out from the send buffer as it is (packed only for a layout that is not contiguous, or device
   memory), the others' land in their blocks of the receive buffer (through a packed copy likewise),
   and ours is copied locally. On 2 ranks that is one exchange: MPICH's recursive doubling copied
   the send buffer into the receive buffer first and sent that block, so the partner pulled lines
   this core had just written (64 KiB: 25 vs Open MPI's 11 us). */
int MPIDI_PSCOM_allgather_direct(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                                 void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                                 MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, err, rank = comm->rank, size = comm->local_size, r_contig,
        s_contig;
    MPI_Aint r_size, s_size, r_lb, s_lb, r_extent, n;
    MPIR_Datatype *dt_ptr;
    void *spack = NULL;
    char *rpack = NULL;

    MPIDI_Datatype_get_info(recvcount, recvtype, r_contig, r_size, dt_ptr, r_lb);
    MPIR_Datatype_get_extent_macro(recvtype, r_extent);
    size_t stride = (size_t)(recvcount * r_extent); /* between the blocks in recvbuf */
    char *mine = (char *)recvbuf + rank * stride;
    const void *src = sendbuf == MPI_IN_PLACE ? mine : sendbuf;
    MPI_Aint scount = sendbuf == MPI_IN_PLACE ? recvcount : sendcount;
    MPI_Datatype stype = sendbuf == MPI_IN_PLACE ? recvtype : sendtype;
    MPIDI_Datatype_get_info(scount, stype, s_contig, s_size, dt_ptr, s_lb);
    (void)dt_ptr;
    if (!r_size) /* the same on every rank of a correct program */
        return MPI_SUCCESS;

    const void *out = (const char *)src + s_lb;
    if (!s_contig || s_size != r_size || MPIDI_PSCOM_IS_DEV_PTR(src)) {
        spack = MPIDI_PSCOM_stage_alloc(r_size);
        MPIR_ERR_CHKANDJUMP(!spack, mpi_errno, MPI_ERR_OTHER, "**nomem");
        if (s_size != r_size) {
            /* the others still get a block of the size they expect, and wait for nothing */
            memset(spack, 0, r_size);
            *errflag = MPIR_ERR_OTHER;
            mpi_errno =
                MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                     MPI_ERR_OTHER, "**collective_size_mismatch",
                                     "**collective_size_mismatch %d %d", (int)s_size, (int)r_size);
        }
        err = MPIR_Typerep_pack(src, scount, stype, 0, spack, MPL_MIN(s_size, r_size), &n);
        mpi_errno = mpi_errno ? mpi_errno : err;
        out = spack;
    }
    int r_staged = !r_contig || MPIDI_PSCOM_IS_DEV_PTR(recvbuf);
    if (r_staged) { /* block i at rpack + i * r_size */
        rpack = MPIDI_PSCOM_stage_alloc(r_size * size);
        MPIR_ERR_CHKANDJUMP(!rpack, mpi_errno, MPI_ERR_OTHER, "**nomem");
    }

    exchange_t x = {.comm = comm, .tag = MPIR_ALLGATHER_TAG, .errflag = errflag};
    if (MPIDI_PSCOM_coll_shm_allgather(out, (size_t)r_size,
                                       r_staged ? rpack : (char *)recvbuf + r_lb,
                                       r_staged ? (size_t)r_size : stride, comm, errflag, &err)) {
        mpi_errno = mpi_errno ? mpi_errno : err;
        goto unpack;
    }
    recv_src_t from[MPIDI_PSCOM_FLAT_COLL_MAX_RANKS];
    send_dest_t to[MPIDI_PSCOM_FLAT_COLL_MAX_RANKS];
    for (int i = 1; i < size; i++) {
        int r = (rank - i + size) % size;
        char *into = r_staged ? rpack + r * r_size : (char *)recvbuf + r * stride + r_lb;
        from[i - 1] = (recv_src_t){r, into, (size_t)r_size};
        to[i - 1] = (send_dest_t){(rank + i) % size, out, (size_t)r_size};
    }
    err = exchange_all(&x, from, to, size - 1);
    mpi_errno = mpi_errno ? mpi_errno : err;
unpack:
    for (int i = 1; i < size && r_staged && !err; i++) {
        int r = (rank - i + size) % size;
        err = MPIR_Typerep_unpack(rpack + r * r_size, r_size, (char *)recvbuf + r * stride,
                                  recvcount, recvtype, 0, &n);
        mpi_errno = mpi_errno ? mpi_errno : err;
    }
    if (sendbuf != MPI_IN_PLACE) {
        err = MPIR_Localcopy(sendbuf, sendcount, sendtype, mine, recvcount, recvtype);
        mpi_errno = mpi_errno ? mpi_errno : err;
    }
    mpi_errno = exchange_finish(&x, mpi_errno);

fn_exit:
    MPIDI_PSCOM_stage_free(spack);
    MPIDI_PSCOM_stage_free(rpack);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

/* Dissemination: in round k every rank sends to rank + 2^k and receives from rank - 2^k. */
int MPIDI_PSCOM_barrier_small(MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int size = comm->local_size, rank = comm->rank, mpi_errno = MPI_SUCCESS;
    if (size == 1)
        return MPI_SUCCESS;
    if (MPIDI_PSCOM_coll_shm_barrier(comm, errflag, &mpi_errno))
        return mpi_errno;
    exchange_t x = {.comm = comm, .tag = MPIR_BARRIER_TAG, .errflag = errflag};
    int err = exchange_init(&x);
    if (err)
        return err;
    for (int mask = 1; mask < size; mask <<= 1) {
        err = exchange(&x, (rank + mask) % size, NULL, (rank - mask + size) % size);
        if (err && !mpi_errno)
            mpi_errno = err; /* the others still wait for our messages */
    }
    return exchange_finish(&x, mpi_errno);
}

/* Binomial tree from root (relative ranks): receive from the parent, send to the children,
   farthest first, all at once. Contiguous host data goes straight into and out of the user's
   buffer; a derived layout or device memory through a packed copy (on the stack up to 12 KiB).
   That is decided here, not in the shortcut's condition: ranks may pass different datatypes of
   the same signature, and all of them must take the same algorithm. */
int MPIDI_PSCOM_bcast_tree(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                           MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int size = comm->local_size, rank = comm->rank, mpi_errno = MPI_SUCCESS, dt_contig, err;
    MPI_Aint len, true_lb, n;
    MPIR_Datatype *dt_ptr;
    MPIDI_Datatype_get_info(count, datatype, dt_contig, len, dt_ptr, true_lb);
    (void)dt_ptr;
    if (size == 1 || !len)
        return MPI_SUCCESS;
    _Alignas(16) unsigned char packed_small[MPIDI_PSCOM_BCAST_SMALL_MAX];
    int dev = MPIDI_PSCOM_IS_DEV_PTR(buffer), staged = !dt_contig || dev;
    unsigned char *packed = packed_small;
    /* device memory is staged in page-locked memory, which the driver copies directly */
    if (staged && (dev || len > MPIDI_PSCOM_BCAST_SMALL_MAX)) {
        packed = MPIDI_PSCOM_stage_alloc(len);
        if (!packed)
            return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                        MPI_ERR_OTHER, "**nomem", NULL);
    }
    void *data = staged ? (void *)packed : MPIR_get_contig_ptr(buffer, true_lb);
    if (staged && rank == root) {
        err = MPIR_Typerep_pack(buffer, count, datatype, 0, packed, len, &n);
        if (err) {
            mpi_errno = err; /* the tree still runs: nobody may wait for us forever */
            *errflag = MPIR_ERR_OTHER;
        }
    }

    if (MPIDI_PSCOM_coll_shm_bcast(data, (size_t)len, root, comm, errflag, &err)) {
        mpi_errno = mpi_errno ? mpi_errno : err;
        if (staged && rank != root && !mpi_errno)
            mpi_errno = MPIR_Typerep_unpack(packed, len, buffer, count, datatype, 0, &n);
        goto fn_exit;
    }
    exchange_t x = {.comm = comm,
                    .tag = MPIR_BCAST_TAG,
                    .tmp = data,
                    .len = (size_t)len,
                    .errflag = errflag,
                    /* larger ones were slower sleeping: 64 KiB on 8 ranks sharing 2 CPUs 72-103
                       against 71-76 us spinning, 256 KiB on 4 ranks 121-216 against 102-108 */
                    .may_sleep = len <= MPIDI_PSCOM_BCAST_SMALL_MAX,
                    .sleep_after = MPIDI_PSCOM_comm_node_shm(comm)
                                       ? MPIDI_PSCOM_global.coll_block_polls_shm
                                       : MPIDI_PSCOM_global.coll_block_polls};
    err = exchange_init(&x);
    if (err) {
        mpi_errno = err;
        goto fn_exit;
    }
    int rel = (rank - root + size) % size, mask = 1;
    for (; mask < size; mask <<= 1) {
        if (rel & mask) {
            mpi_errno = exchange(&x, NOBODY, NULL, (rank - mask + size) % size);
            break;
        }
    }
    send_dest_t children[SEND_TO_MAX];
    int n_children = 0;
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rel + mask < size)
            children[n_children++] = (send_dest_t){(rank + mask) % size, data, (size_t)len};
    err = send_to_each(&x, children, n_children);
    if (err && !mpi_errno)
        mpi_errno = err;
    if (staged && rank != root && !mpi_errno && *errflag == MPIR_ERR_NONE)
        mpi_errno = MPIR_Typerep_unpack(packed, len, buffer, count, datatype, 0, &n);
    mpi_errno = exchange_finish(&x, mpi_errno);
fn_exit:
    if (packed != packed_small)
        MPIDI_PSCOM_stage_free(packed);
    return mpi_errno;
}

/*
 * Bruck's Alltoall of blocks contiguous in sb and rb, radix BRUCK_RADIX: in round k (w =
 * radix^k) a rank sends, for each digit d = 1 .. radix-1, the blocks whose index (counted from
 * its own rank) has d as its k-th digit to rank + d*w, as one message, and gets the same from
 * rank - d*w. Every receive of every round is posted first (no two have the same source), so a
 * message that comes early lands in place. For small blocks on many ranks the p - 1 messages
 * of the direct exchange cost more than the data. Measured on 2 CPUs (direct -> radix 8, ms):
 * 8 B 32 ranks 0.68-0.76 -> 0.49-0.53, 128 ranks 11-15 -> 3.9-5.4; 256 B 64 ranks 2.2-3.0 ->
 * 2.0-2.3; 1 KiB 64 ranks 3.5-4.2 -> 4.6 (worse), 256 ranks 203-289 -> 137-172. Radix 2 was
 * as good at 8 B and up to 2x slower from 256 B (half the data moves in every round).
 */
#define BRUCK_RADIX      8
#define BRUCK_MAX_MSGS   80 /* (radix - 1) * rounds: 7 * 11 for 2^31 ranks */
#define BRUCK_MIN_RANKS  32
#define BRUCK_MAX_BLOCK  256
#define BRUCK_MANY_RANKS 256 /* and from here blocks up to MPIDI_PSCOM_ALLTOALL_SMALL_MAX */

#define BRUCK_NOMEM (-1) /* nothing sent yet: the direct exchange takes over */

static int use_bruck(int size, MPI_Aint blk)
{
    return size >= BRUCK_MANY_RANKS || (size >= BRUCK_MIN_RANKS && blk <= BRUCK_MAX_BLOCK);
}

/* the blocks i < size whose k-th digit is d: [base, base + w) for base = d*w, d*w + radix*w, ... */
#define FOR_DIGIT_BLOCKS(i, d, w, size)                                                            \
    for (long base_ = (d) * (w); base_ < (size); base_ += BRUCK_RADIX * (w))                       \
        for (int i = (int)base_; i < base_ + (w) && i < (size); i++)

static int alltoall_bruck(exchange_t *x, const char *sb, char *rb, size_t blk)
{
    int size = x->comm->local_size, rank = x->comm->rank, mpi_errno = MPI_SUCCESS, err;
    size_t cnt[BRUCK_MAX_MSGS], off[BRUCK_MAX_MSGS + 1], most = 0;
    pscom_request_t *rq[BRUCK_MAX_MSGS] = {NULL};
    int nmsg = 0;
    off[0] = 0;
    for (long w = 1; w < size; w *= BRUCK_RADIX)
        for (int d = 1; d < BRUCK_RADIX && d * w < size; d++, nmsg++) {
            size_t n = 0;
            FOR_DIGIT_BLOCKS(i, d, w, size) n++;
            cnt[nmsg] = n;
            off[nmsg + 1] = off[nmsg] + n * blk;
            most = n > most ? n : most;
        }
    char *rot = MPL_malloc((size_t)size * blk + most * blk + off[nmsg], MPL_MEM_COLL);
    if (!rot)
        return BRUCK_NOMEM;
    char *out = rot + (size_t)size * blk, *in = out + most * blk;
    /* rot[i]: the block for rank + i; after the rounds, the one from rank - i */
    for (int i = 0; i < size; i++)
        memcpy(rot + (size_t)i * blk, sb + (size_t)((rank + i) % size) * blk, blk);
    int m = 0;
    for (long w = 1; w < size; w *= BRUCK_RADIX)
        for (int d = 1; d < BRUCK_RADIX && d * w < size; d++, m++) {
            rq[m] = post_block_recv(x->comm, MPIR_ALLTOALL_TAG, (int)((rank - d * w + size) % size),
                                    in + off[m], cnt[m] * blk);
            if (!rq[m] && !mpi_errno) {
                *x->errflag = MPIR_ERR_OTHER;
                mpi_errno = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
                                                 __LINE__, MPI_ERR_OTHER, "**pscom_nomem", NULL);
            }
        }
    m = 0;
    for (long w = 1; w < size; w *= BRUCK_RADIX) {
        int first = m;
        for (int d = 1; d < BRUCK_RADIX && d * w < size; d++, m++) {
            size_t n = 0;
            FOR_DIGIT_BLOCKS(i, d, w, size)
            memcpy(out + n++ * blk, rot + (size_t)i * blk, blk);
            x->len = n * blk;
            err = send_to(x, (int)((rank + d * w) % size), out);
            mpi_errno = mpi_errno ? mpi_errno : err;
        }
        m = first;
        for (int d = 1; d < BRUCK_RADIX && d * w < size; d++, m++) {
            if (!rq[m])
                continue; /* our blocks still went out: the others finish */
            x->preq = rq[m];
            x->len = cnt[m] * blk;
            err = wait_recv(x);
            mpi_errno = mpi_errno ? mpi_errno : err;
            MPIDI_PSCOM_preq_free(rq[m]);
            size_t n = 0;
            FOR_DIGIT_BLOCKS(i, d, w, size)
            memcpy(rot + (size_t)i * blk, in + off[m] + n++ * blk, blk);
        }
    }
    for (int i = 0; i < size; i++)
        memcpy(rb + (size_t)((rank - i + size) % size) * blk, rot + (size_t)i * blk, blk);
    x->preq = NULL;
    MPL_free(rot);
    return mpi_errno;
}

/*
 * Alltoall of small blocks (MPIDI_PSCOM_ALLTOALL_SMALL_MAX bytes each; of any size on up to 8
 * ranks): every receive posted, every block's send started, then all waited for. MPICH's algorithms
 * for such blocks go in log2(p) (Bruck) or p-1 (pairwise) steps that each wait for a partner, with
 * MPI requests and temporary copies in every step; here no rank waits for another's step, which on
 * a node with more ranks than CPUs is what costs. Blocks that are not host memory of a contiguous
 * type, and MPI_IN_PLACE, go through a packed copy: the choice depends on the block size alone,
 * which is the same on every rank. Many ranks take Bruck's rounds instead (use_bruck).
 */
int MPIDI_PSCOM_alltoall_small(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                               void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                               MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int size = comm->local_size, rank = comm->rank, mpi_errno = MPI_SUCCESS, err, contig;
    MPI_Aint blk, lb, bytes, n;
    MPIR_Datatype *dt_ptr;
    MPIDI_Datatype_get_info(recvcount, recvtype, contig, blk, dt_ptr, lb);
    (void)dt_ptr;
    if (!blk)
        return MPI_SUCCESS;
    size_t all = (size_t)blk * (size_t)size;
    char *spack = NULL, *rpack = NULL, *rb;
    const char *sb;
    pscom_request_t *few[16], **rq = few;
    exchange_t x = {.comm = comm, .tag = MPIR_ALLTOALL_TAG, .len = (size_t)blk, .errflag = errflag};

    int r_staged = !contig || MPIDI_PSCOM_IS_DEV_PTR(recvbuf);
    rb = r_staged ? (rpack = MPIDI_PSCOM_stage_alloc(all)) : (char *)recvbuf + lb;
    if (sendbuf == MPI_IN_PLACE) { /* our blocks go out of the buffer the others' come into */
        sendbuf = recvbuf;
        sendcount = recvcount;
        sendtype = recvtype;
        contig = 0;
    } else {
        int s_contig;
        MPIDI_Datatype_get_info(sendcount, sendtype, s_contig, bytes, dt_ptr, lb);
        if (bytes != blk) { /* the others still get blocks of the size they expect */
            *errflag = MPIR_ERR_OTHER;
            mpi_errno =
                MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                     MPI_ERR_OTHER, "**collective_size_mismatch",
                                     "**collective_size_mismatch %d %d", (int)bytes, (int)blk);
        }
        contig = s_contig && bytes == blk && !MPIDI_PSCOM_IS_DEV_PTR(sendbuf);
    }
    if (contig) {
        sb = (const char *)sendbuf + lb;
    } else {
        spack = MPIDI_PSCOM_stage_alloc(all);
        MPIR_ERR_CHKANDJUMP(!spack, mpi_errno, MPI_ERR_OTHER, "**nomem");
        memset(spack, 0, all);
        err = MPIR_Typerep_pack(sendbuf, sendcount * size, sendtype, 0, spack, all, &n);
        mpi_errno = mpi_errno ? mpi_errno : err;
        sb = spack;
    }
    MPIR_ERR_CHKANDJUMP(!rb, mpi_errno, MPI_ERR_OTHER, "**nomem");
    if (MPIDI_PSCOM_coll_shm_alltoall(sb, rb, (size_t)blk, comm, errflag, &err)) {
        mpi_errno = mpi_errno ? mpi_errno : err;
        goto unpack;
    }
    if (use_bruck(size, blk)) {
        err = alltoall_bruck(&x, sb, rb, (size_t)blk);
        if (err != BRUCK_NOMEM) {
            mpi_errno = mpi_errno ? mpi_errno : err;
            goto unpack;
        }
    }
    if (size - 1 > (int)(sizeof(few) / sizeof(few[0])))
        rq = MPL_malloc((size_t)(size - 1) * sizeof(*rq), MPL_MEM_COLL);
    MPIR_ERR_CHKANDJUMP(!rq, mpi_errno, MPI_ERR_OTHER, "**nomem");

    /* from the nearest ranks first, as the blocks are sent. Without memory for a receive our
       blocks still go out, so that the others finish */
    int posted = 0;
    while (posted < size - 1) {
        int from = (rank - posted - 1 + size) % size;
        rq[posted] = post_block_recv(comm, MPIR_ALLTOALL_TAG, from, rb + (size_t)from * (size_t)blk,
                                     (size_t)blk);
        if (!rq[posted]) {
            *errflag = MPIR_ERR_OTHER;
            mpi_errno = MPIR_Err_create_code(mpi_errno, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                             MPI_ERR_OTHER, "**pscom_nomem", NULL);
            break;
        }
        posted++;
    }
    for (int i = 1; i < size; i += SEND_TO_MAX) {
        send_dest_t to[SEND_TO_MAX];
        int n_to = 0;
        for (; n_to < SEND_TO_MAX && i + n_to < size; n_to++) {
            int r = (rank + i + n_to) % size;
            to[n_to] = (send_dest_t){r, sb + (size_t)r * (size_t)blk, (size_t)blk};
        }
        err = send_to_each(&x, to, n_to);
        mpi_errno = mpi_errno ? mpi_errno : err;
    }
    memcpy(rb + (size_t)rank * (size_t)blk, sb + (size_t)rank * (size_t)blk, (size_t)blk);
    for (int i = 1; i <= posted; i++) {
        x.preq = rq[i - 1];
        err = wait_recv(&x);
        mpi_errno = mpi_errno ? mpi_errno : err;
        MPIDI_PSCOM_preq_free(rq[i - 1]);
    }
unpack:
    if (r_staged && !mpi_errno) {
        err = MPIR_Typerep_unpack(rpack, all, recvbuf, recvcount * size, recvtype, 0, &n);
        mpi_errno = mpi_errno ? mpi_errno : err;
    }
    x.preq = NULL;
    mpi_errno = exchange_finish(&x, mpi_errno);

fn_exit:
    if (rq != few)
        MPL_free(rq);
    MPIDI_PSCOM_stage_free(spack);
    MPIDI_PSCOM_stage_free(rpack);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
