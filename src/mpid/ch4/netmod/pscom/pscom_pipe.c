/*
 * Chunked sends of device memory (PSP_CUDA=1), so that copying and moving overlap: a large
 * contiguous send from the device is copied to host memory chunk by chunk, and each chunk is
 * posted as soon as it is there, so the transport (the receiver pulling it, the kernel sending
 * it) moves chunk i while the sender copies chunk i+1; the receiver copies each chunk on to the
 * device as it arrives, while later ones are still on the way.
 *
 * Wire: the first chunk is the MPI message (TAGGED_PIPE: matched like any tagged message, the
 * whole message's size and the pipeline's id in its xheader), the others are PIPE_CHUNK
 * messages on the same connection, which the receive that matched the first one takes (a
 * receive per chunk, posted in order: pscom matches them in order). A chunk that arrives first
 * waits in pscom like any unexpected message. Synchronous sends and transports that match
 * (UCX tag matching) send whole messages.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_gpu.h"
#include "pscom_broken.h"

size_t MPIDI_PSCOM_pipe_min = 2 << 20;   /* PSP_MPI_CUDA_PIPELINE_MIN */
size_t MPIDI_PSCOM_pipe_chunk = 1 << 20; /* PSP_MPI_CUDA_PIPELINE_CHUNK */
static uint32_t next_pipe_id;

/* ---- sending ---- */

typedef struct {
    MPIR_Request *req;
    char *host; /* the message's bytes, copied from the device chunk by chunk (page-locked) */
    size_t remaining;
    int failed, broken;
} pipe_send_t;

static void send_done(pscom_request_t *preq)
{
    pipe_send_t *p = MPIDI_PSCOM_PREQ(preq)->pipe;
    if (!pscom_req_successful(preq) && !p->failed) {
        p->failed = 1;
        p->broken = MPIDI_PSCOM_preq_broken(preq);
        p->req->status.MPI_ERROR = MPIR_Err_create_code(
            MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER, "**pscom_send",
            "**pscom_send %s", pscom_req_state_str(preq->state));
    }
    MPIDI_PSCOM_preq_free(preq);
    if (--p->remaining)
        return;
    MPIDI_PSCOM_complete(p->req, p->broken);
    MPIDI_PSCOM_stage_free(p->host);
    MPL_free(p);
}

int MPIDI_PSCOM_pipe_isend(const void *dev, size_t len, MPIDI_PSCOM_tagged_xhdr_t xh,
                           pscom_connection_t *con, MPIR_Request **request)
{
    int mpi_errno = MPI_SUCCESS;
    size_t chunk = MPL_MAX(MPIDI_PSCOM_pipe_chunk, 4096), n = (len + chunk - 1) / chunk;
    pipe_send_t *p = MPL_malloc(sizeof(*p), MPL_MEM_BUFFER);
    char *host = MPIDI_PSCOM_stage_alloc(len);
    pscom_request_t **preqs = MPL_malloc(n * sizeof(*preqs), MPL_MEM_BUFFER);
    MPIR_Request *req = *request;

    if (!p || !host || !preqs)
        goto fn_nomem;
    for (size_t i = 0; i < n; i++) {
        preqs[i] = MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_tagged_xhdr_t), send_done);
        if (!preqs[i]) {
            while (i--)
                MPIDI_PSCOM_preq_free(preqs[i]);
            goto fn_nomem;
        }
    }
    /* from here on nothing fails before the chunks are posted */
    if (req)
        MPIR_Request_add_ref(req);
    else
        req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__SEND, 0, 2);
    if (!req) {
        for (size_t i = 0; i < n; i++)
            MPIDI_PSCOM_preq_free(preqs[i]);
        MPL_free(p);
        MPIDI_PSCOM_stage_free(host);
        MPL_free(preqs);
        MPIR_ERR_SETANDJUMP(mpi_errno, MPIX_ERR_NOREQ, "**nomemreq");
    }
    *p = (pipe_send_t){.req = req, .host = host, .remaining = n};
    uint32_t id = ++next_pipe_id;
    xh.type = MPIDI_PSCOM_MSG_TAGGED_PIPE;
    xh.unused = id;
    xh.sreq = len;
    for (size_t i = 0; i < n; i++) {
        size_t off = i * chunk, l = MPL_MIN(chunk, len - off);
        pscom_request_t *preq = preqs[i];
        /* a failed copy still sends the chunk (the receiver expects it): its bytes are lost,
           the send reports the error */
        if (pscom_gpu_memcpy(host + off, (const char *)dev + off, l) != PSCOM_SUCCESS &&
            !p->failed) {
            p->failed = 1;
            req->status.MPI_ERROR = MPIR_Err_create_code(
                MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER,
                "**pscom_cuda", "**pscom_cuda %p %p", (const char *)dev + off, host + off);
        }
        if (i == 0) {
            memcpy(preq->xheader, &xh, sizeof(xh));
            preq->xheader_len = sizeof(xh);
        } else {
            MPIDI_PSCOM_chunk_xhdr_t cx = {.type = MPIDI_PSCOM_MSG_PIPE_CHUNK,
                                           .version = MPIDI_PSCOM_WIRE_VERSION,
                                           .pipe = id,
                                           .offset = off};
            memcpy(preq->xheader, &cx, sizeof(cx));
            preq->xheader_len = sizeof(cx);
        }
        preq->data = host + off;
        preq->data_len = l;
        preq->connection = con;
        MPIDI_PSCOM_PREQ(preq)->pipe = p;
        pscom_post_send(preq);
        pscom_progress(0); /* let the transport take it while the next chunk is copied */
    }
    MPL_free(preqs);
    *request = req;
fn_exit:
    return mpi_errno;
fn_nomem:
    MPL_free(p);
    MPIDI_PSCOM_stage_free(host);
    MPL_free(preqs);
    MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
fn_fail:
    goto fn_exit;
}

/* ---- receiving ---- */

typedef struct {
    pscom_request_t *preq0; /* the receive that matched the first chunk */
    char *base;             /* where the message's bytes land (cap of them) */
    size_t cap, total, got;
    char *dev; /* contiguous device memory each chunk goes on to, or NULL */
    size_t remaining;
    int failed, truncated;
    void (*finish)(pscom_request_t *preq0);
} pipe_recv_t;

static void recv_finish(pipe_recv_t *p)
{
    pscom_request_t *preq0 = p->preq0;
    preq0->data_len = p->got;
    preq0->header.data_len = p->total; /* more than got: the receive truncated it */
    if (p->failed)
        preq0->state |= PSCOM_REQ_STATE_ERROR;
    void (*finish)(pscom_request_t *) = p->finish;
    MPL_free(p);
    finish(preq0);
}

/* bytes [off, off + len) of the message are in base: count them, and on to the device */
static void landed(pipe_recv_t *p, size_t off, size_t len)
{
    if (off >= p->cap)
        return;
    len = MPL_MIN(len, p->cap - off);
    p->got += len;
    if (p->dev && pscom_gpu_memcpy(p->dev + off, p->base + off, len) != PSCOM_SUCCESS)
        p->failed = 1;
}

static void chunk_done(pscom_request_t *preq)
{
    pipe_recv_t *p = MPIDI_PSCOM_PREQ(preq)->pipe;
    const MPIDI_PSCOM_chunk_xhdr_t *cx = preq->xheader;
    size_t off = MPIDI_PSCOM_PREQ(preq)->pipe_off; /* where it was posted */
    if (!pscom_req_successful(preq) && !(preq->state & PSCOM_REQ_STATE_TRUNCATED))
        p->failed = 1;
    else if (cx->offset != off)
        p->failed = 1; /* a chunk out of order: never from a sender of ours */
    else
        landed(p, off, MPL_MIN(preq->data_len, preq->header.data_len));
    MPIDI_PSCOM_preq_free(preq);
    if (--p->remaining == 0)
        recv_finish(p);
}

static int chunk_accept(pscom_request_t *preq, pscom_connection_t *con, pscom_header_net_t *header)
{
    const MPIDI_PSCOM_chunk_xhdr_t *cx = pscom_header_xheader(header);
    (void)con;
    return header->xheader_len >= sizeof(*cx) && cx->type == MPIDI_PSCOM_MSG_PIPE_CHUNK &&
           cx->version == MPIDI_PSCOM_WIRE_VERSION &&
           cx->pipe == (uint32_t)MPIDI_PSCOM_PREQ(preq)->context_id;
}

/*
 * preq0 completed with the first chunk of a chunked message (TAGGED_PIPE) in its buffer, which
 * has room for cap bytes (dev: contiguous device memory that is the real destination, or
 * NULL). Receives the other chunks into the same buffer and calls finish(preq0) when all are
 * there, with data_len the bytes received and header.data_len the message's size. Returns 0
 * if preq0 is not such a message (finish it as usual), 1 if it took it over.
 */
int MPIDI_PSCOM_pipe_recv(pscom_request_t *preq0, size_t cap, void *dev,
                          void (*finish)(pscom_request_t *preq0))
{
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq0->xheader;
    if ((preq0->state & (PSCOM_REQ_STATE_CANCELED | PSCOM_REQ_STATE_ERROR)) ||
        preq0->xheader_len < sizeof(*xh) || xh->type != MPIDI_PSCOM_MSG_TAGGED_PIPE)
        return 0;
    size_t total = xh->sreq, first = preq0->header.data_len;
    pipe_recv_t *p = MPL_malloc(sizeof(*p), MPL_MEM_BUFFER);
    if (!p) {
        preq0->state |= PSCOM_REQ_STATE_ERROR; /* its chunks stay queued: say it failed */
        return 0;
    }
    *p = (pipe_recv_t){.preq0 = preq0,
                       .base = preq0->data,
                       .cap = cap,
                       .total = total,
                       .dev = dev,
                       .finish = finish};
    landed(p, 0, MPL_MIN(preq0->data_len, first));
    if (first == 0 || first >= total) { /* a sender of ours sends at least two chunks */
        recv_finish(p);
        return 1;
    }
    size_t n = (total - first + first - 1) / first;
    p->remaining = n;
    for (size_t i = 0; i < n; i++) {
        size_t off = first * (i + 1), len = MPL_MIN(first, total - off);
        pscom_request_t *preq =
            MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_tagged_xhdr_t), chunk_done);
        if (!preq) { /* the chunks not asked for stay queued; the receive fails */
            p->failed = 1;
            if ((p->remaining -= n - i) == 0)
                recv_finish(p);
            break;
        }
        /* what of it fits in base; the rest of a truncated message is taken and dropped */
        preq->data = off < cap ? p->base + off : NULL;
        preq->data_len = off < cap ? MPL_MIN(len, cap - off) : 0;
        preq->connection = preq0->connection;
        preq->ops.recv_accept = chunk_accept;
        MPIDI_PSCOM_PREQ(preq)->pipe = p;
        MPIDI_PSCOM_PREQ(preq)->context_id = xh->unused;
        MPIDI_PSCOM_PREQ(preq)->pipe_off = off;
        pscom_post_recv(preq);
    }
    return 1;
}
