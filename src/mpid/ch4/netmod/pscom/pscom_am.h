/*
 * Active messages (MPIDIG) over pscom, sending side. One AM is one pscom message:
 * xheader = MPIDI_PSCOM_am_xhdr_t + am_hdr, data = the payload (packed if non-contiguous).
 * The receiving side is in pscom_am.c (the socket's default_recv hook).
 */
#ifndef PSCOM_AM_H_INCLUDED
#define PSCOM_AM_H_INCLUDED

#include "pscom_impl.h"
#include "pscom_gpu.h"

MPL_STATIC_INLINE_PREFIX void MPIDI_PSCOM_am_xhdr_init(MPIDI_PSCOM_am_xhdr_t *xh, int handler_id,
                                                       MPI_Aint am_hdr_sz)
{
    xh->type = MPIDI_PSCOM_MSG_AM;
    xh->version = MPIDI_PSCOM_WIRE_VERSION;
    xh->flags = am_hdr_sz > MPIDI_PSCOM_AM_XHDR_MAX ? MPIDI_PSCOM_AM_FLAG_HDR_IN_DATA : 0;
    xh->handler_id = (uint8_t)handler_id;
    xh->am_hdr_sz = (uint32_t)am_hdr_sz;
}

/* Header-only AM: pscom_send copies, so am_hdr may go away when we return. */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_am_send_hdr_to(pscom_connection_t *con, int handler_id,
                                                        const void *am_hdr, MPI_Aint am_hdr_sz)
{
    union {
        MPIDI_PSCOM_am_xhdr_t xh;
        uint64_t raw[PSCOM_XHEADER_MAX / sizeof(uint64_t)];
    } buf;

    MPIDI_PSCOM_am_xhdr_init(&buf.xh, handler_id, am_hdr_sz);
    if (buf.xh.flags & MPIDI_PSCOM_AM_FLAG_HDR_IN_DATA) {
        pscom_send(con, &buf.xh, sizeof(buf.xh), am_hdr, am_hdr_sz);
    } else {
        memcpy(&buf.xh + 1, am_hdr, am_hdr_sz);
        pscom_send(con, &buf.xh, sizeof(buf.xh) + am_hdr_sz, NULL, 0);
    }
    return MPI_SUCCESS;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_am_isend_to(pscom_connection_t *con, int handler_id,
                                                     const void *am_hdr, MPI_Aint am_hdr_sz,
                                                     const void *data, MPI_Aint count,
                                                     MPI_Datatype datatype, MPIR_Request *sreq)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIDI_PSCOM_am_xhdr_t xh;

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    (void)dt_ptr;
    MPIDI_PSCOM_am_xhdr_init(&xh, handler_id, am_hdr_sz);
    int hdr_in_data = (xh.flags & MPIDI_PSCOM_AM_FLAG_HDR_IN_DATA) != 0;

    pscom_request_t *preq = MPIDI_PSCOM_preq_create(sizeof(xh) + (hdr_in_data ? 0 : am_hdr_sz),
                                                    MPIDI_PSCOM_am_send_done);
    MPIR_ERR_CHKANDJUMP(preq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    MPIDI_PSCOM_PREQ(preq)->req = sreq;
    MPIDI_PSCOM_PREQ(preq)->handler_id = handler_id;

    memcpy(preq->xheader, &xh, sizeof(xh));
    preq->xheader_len = sizeof(xh);
    if (!hdr_in_data) {
        memcpy((char *)preq->xheader + sizeof(xh), am_hdr, am_hdr_sz);
        preq->xheader_len += am_hdr_sz;
    }

    if (dt_contig && !hdr_in_data && !MPIDI_PSCOM_IS_DEV(data, dt_true_lb, data_sz)) {
        /* MPIDIG keeps data valid until the origin callback: send in place */
        preq->data = data_sz ? (void *)MPIR_get_contig_ptr(data, dt_true_lb) : NULL;
        preq->data_len = data_sz;
    } else {
        size_t off = hdr_in_data ? am_hdr_sz : 0;
        char *buf = MPIDI_PSCOM_stage_alloc(off + data_sz);
        MPIR_ERR_CHKANDJUMP(buf == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
        MPIDI_PSCOM_PREQ(preq)->buf = buf;
        if (off)
            memcpy(buf, am_hdr, off);
        if (data_sz) {
            mpi_errno = MPIDI_PSCOM_pack(data, count, datatype, buf + off, data_sz);
            MPIR_ERR_CHECK(mpi_errno);
        }
        preq->data = buf;
        preq->data_len = off + data_sz;
    }
    preq->connection = con;
    pscom_post_send(preq);

fn_exit:
    return mpi_errno;
fn_fail:
    if (preq)
        MPIDI_PSCOM_preq_free(preq);
    goto fn_exit;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr(int rank, MPIR_Comm *comm, int handler_id,
                                                  const void *am_hdr, MPI_Aint am_hdr_sz,
                                                  int src_vci, int dst_vci)
{
    (void)src_vci;
    (void)dst_vci;
    return MPIDI_PSCOM_am_send_hdr_to(MPIDI_PSCOM_comm_con(comm, rank), handler_id, am_hdr,
                                      am_hdr_sz);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr_reply(MPIR_Comm *comm, int rank, int handler_id,
                                                        const void *am_hdr, MPI_Aint am_hdr_sz,
                                                        int src_vci, int dst_vci)
{
    (void)src_vci;
    (void)dst_vci;
    return MPIDI_PSCOM_am_send_hdr_to(MPIDI_PSCOM_comm_con(comm, rank), handler_id, am_hdr,
                                      am_hdr_sz);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend(int rank, MPIR_Comm *comm, int handler_id,
                                               const void *am_hdr, MPI_Aint am_hdr_sz,
                                               const void *data, MPI_Aint count,
                                               MPI_Datatype datatype, int src_vci, int dst_vci,
                                               MPIR_Request *sreq)
{
    (void)src_vci;
    (void)dst_vci;
    return MPIDI_PSCOM_am_isend_to(MPIDI_PSCOM_comm_con(comm, rank), handler_id, am_hdr, am_hdr_sz,
                                   data, count, datatype, sreq);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend_reply(MPIR_Comm *comm, int src_rank, int handler_id,
                                                     const void *am_hdr, MPI_Aint am_hdr_sz,
                                                     const void *data, MPI_Aint count,
                                                     MPI_Datatype datatype, int src_vci,
                                                     int dst_vci, MPIR_Request *sreq)
{
    (void)src_vci;
    (void)dst_vci;
    return MPIDI_PSCOM_am_isend_to(MPIDI_PSCOM_comm_con(comm, src_rank), handler_id, am_hdr,
                                   am_hdr_sz, data, count, datatype, sreq);
}

/* Used by MPIDIG RMA to choose between inline and two-phase datatype transfer. */
MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_hdr_max_sz(void)
{
    return MPIDI_PSCOM_AM_XHDR_MAX;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_limit(void)
{
    return MPIDI_PSCOM_AM_EAGER_MAX;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_buf_limit(void)
{
    return MPIDI_PSCOM_AM_EAGER_MAX;
}

MPL_STATIC_INLINE_PREFIX bool MPIDI_NM_am_check_eager(MPI_Aint am_hdr_sz, MPI_Aint data_sz,
                                                      const void *data, MPI_Aint count,
                                                      MPI_Datatype datatype, MPIR_Request *sreq)
{
    (void)data;
    (void)count;
    (void)datatype;
    (void)sreq;
    return am_hdr_sz + data_sz <= MPIDI_PSCOM_AM_EAGER_MAX;
}

/* We deliver every AM whole (never IS_RNDV), so MPIDIG never asks for a copy callback. */
MPL_STATIC_INLINE_PREFIX MPIDIG_recv_data_copy_cb MPIDI_NM_am_get_data_copy_cb(uint32_t attr)
{
    (void)attr;
    return NULL;
}

#endif /* PSCOM_AM_H_INCLUDED */
