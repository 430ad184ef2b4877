/*
 * Receiving side of active messages, and the socket's default_recv hook that sorts every
 * message no posted receive took: AMs and ssend acks get a receive request here; tagged and
 * dynamic-process messages stay queued in pscom (generated requests) until a receive or probe
 * finds them.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"

static void am_recv_done(pscom_request_t *preq);

static pscom_request_t *am_recv(pscom_header_net_t *header)
{
    pscom_request_t *preq = MPIDI_PSCOM_preq_create(header->xheader_len, am_recv_done);
    void *buf = NULL;
    if (preq && header->data_len) {
        buf = MPIDI_PSCOM_stage_alloc(header->data_len);
        if (!buf)
            pscom_request_free(preq);
    }
    if (!preq || (header->data_len && !buf)) {
        /* left queued in pscom, nobody will take it: say so rather than hang silently */
        fprintf(stderr, "pscom netmod: out of memory receiving an active message of %llu bytes\n",
                (unsigned long long)header->data_len);
        return NULL;
    }
    if (buf) {
        MPIDI_PSCOM_PREQ(preq)->buf = buf;
        preq->data = buf;
    }
    preq->data_len = header->data_len;
    return preq;
}

/* An active message whose am_hdr does not lie within it, or for a handler not registered here
   (a peer's bug, or not ours): said once, taken in and dropped rather than queued for good */
static void am_dropped(pscom_request_t *preq)
{
    MPIDI_PSCOM_preq_free(preq);
}

static pscom_request_t *am_check(pscom_header_net_t *header)
{
    MPIDI_PSCOM_am_xhdr_t xh;
    memcpy(&xh, pscom_header_xheader(header), sizeof(xh));
    int in_data = (xh.flags & MPIDI_PSCOM_AM_FLAG_HDR_IN_DATA) != 0; /* a large am_hdr: never 0 */
    uint64_t room = in_data ? header->data_len : (uint64_t)(header->xheader_len - sizeof(xh));
    if (xh.am_hdr_sz <= room && (xh.am_hdr_sz || !in_data) &&
        xh.handler_id < MPIDI_AM_HANDLERS_MAX && MPIDIG_global.target_msg_cbs[xh.handler_id])
        return am_recv(header);
    static int warned;
    if (!warned++)
        fprintf(stderr,
                "pscom netmod: dropping a malformed active message (handler %u, am_hdr of %u "
                "bytes in a message of %u + %llu bytes)\n",
                xh.handler_id, xh.am_hdr_sz, header->xheader_len,
                (unsigned long long)header->data_len);
    pscom_request_t *preq = MPIDI_PSCOM_preq_create(0, am_dropped);
    if (preq)
        preq->data_len = 0; /* its data is discarded */
    return preq;
}

pscom_request_t *MPIDI_PSCOM_default_recv(pscom_connection_t *con, pscom_header_net_t *header)
{
    const uint8_t *xh = pscom_header_xheader(header);

    (void)con;
    if (header->xheader_len < 2)
        return NULL;
    if (xh[1] != MPIDI_PSCOM_WIRE_VERSION) {
        /* a peer built from another netmod version: never match it, say why once */
        static int warned;
        if (!warned++)
            fprintf(stderr, "pscom netmod: ignoring message with wire version %d (ours: %d)\n",
                    xh[1], MPIDI_PSCOM_WIRE_VERSION);
        return NULL;
    }
    switch (xh[0]) {
    case MPIDI_PSCOM_MSG_AM:
        if (header->xheader_len < sizeof(MPIDI_PSCOM_am_xhdr_t))
            return NULL;
        return am_check(header);
    case MPIDI_PSCOM_MSG_SSEND_ACK:
        if (header->xheader_len < sizeof(MPIDI_PSCOM_ack_xhdr_t))
            return NULL;
        return MPIDI_PSCOM_ack_recv(header);
    default:
        return NULL; /* tagged / dynamic: unexpected message, wait for a receive */
    }
}

/* Runs in MPIDI_NM_progress: hand the whole AM to its MPIDIG target callback. */
static void am_recv_done(pscom_request_t *preq)
{
    const MPIDI_PSCOM_am_xhdr_t *xh = preq->xheader;
    char *data = preq->data;
    MPI_Aint data_sz = preq->data_len;
    void *am_hdr;
    void *aligned = NULL;

    if (!pscom_req_successful(preq)) {
        fprintf(stderr, "pscom netmod: lost an active message (%s)\n",
                pscom_req_state_str(preq->state));
        goto done;
    }
    if (xh->flags & MPIDI_PSCOM_AM_FLAG_HDR_IN_DATA) {
        am_hdr = data; /* malloc'd: aligned */
        data += xh->am_hdr_sz;
        data_sz -= xh->am_hdr_sz;
    } else {
        am_hdr = (void *)(xh + 1);
    }
    if ((uintptr_t)am_hdr % sizeof(uint64_t)) {
        /* MPIDIG casts am_hdr to its structs */
        aligned = MPL_malloc(xh->am_hdr_sz, MPL_MEM_BUFFER);
        MPIR_Assert(aligned);
        memcpy(aligned, am_hdr, xh->am_hdr_sz);
        am_hdr = aligned;
    }

    uint32_t attr = 0;
    MPIDIG_AM_ATTR_SET_VCIS(attr, 0, 0);
    /* not IS_ASYNC: MPIDIG consumes data before returning */
    MPIDIG_global.target_msg_cbs[xh->handler_id](am_hdr, data_sz ? data : NULL, data_sz, attr,
                                                 NULL);
    MPL_free(aligned);
done:
    MPIDI_PSCOM_preq_free(preq);
}

/* Runs in MPIDI_NM_progress: the origin buffer is free again. */
void MPIDI_PSCOM_am_send_done(pscom_request_t *preq)
{
    MPIR_Request *sreq = MPIDI_PSCOM_PREQ(preq)->req;
    int handler_id = MPIDI_PSCOM_PREQ(preq)->handler_id;

    if (!pscom_req_successful(preq))
        fprintf(stderr, "pscom netmod: active message send failed (%s)\n",
                pscom_req_state_str(preq->state));
    MPIDI_PSCOM_preq_free(preq);
    MPIDIG_global.origin_cbs[handler_id](sreq);
}
