/*
 * Staging of device memory (pscom_gpu.h): a contiguous device buffer is copied straight to or
 * from the message's host buffer; a non-contiguous one goes through MPICH's datatype layer,
 * which stages device memory itself (maint/patches/0016: the span a source covers in one copy,
 * a destination block by block, so that the gaps of its type stay the application's).
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_gpu.h"

/* the hooks of MPICH's datatype layer (pscom_pre.h, maint/patches/0016) */
int MPIDI_PSCOM_gpu_is_dev(const void *ptr)
{
    return pscom_is_gpu_mem(ptr);
}

int MPIDI_PSCOM_gpu_memcpy(void *dst, const void *src, size_t len)
{
    return pscom_gpu_memcpy(dst, src, len) == PSCOM_SUCCESS ? 0 : -1;
}

/* With PSP_CUDA, libpscom's cache of page-locked buffers (pinning costs far more than a
   malloc); a buffer's capacity sits in a header before its bytes, which keeps them 64-byte
   aligned. Without, MPL_malloc. pscom_cuda_on is settled in MPI_Init, before the first buffer. */
#define STAGE_HDR 64

void *MPIDI_PSCOM_stage_alloc(size_t len)
{
    if (!pscom_cuda_on)
        return MPL_malloc(len, MPL_MEM_BUFFER);
    size_t cap;
    char *b = pscom_host_buffer_alloc(len + STAGE_HDR, &cap);
    if (!b)
        return NULL;
    *(size_t *)b = cap;
    return b + STAGE_HDR;
}

void MPIDI_PSCOM_stage_free(void *p)
{
    if (!p || !pscom_cuda_on) {
        MPL_free(p);
        return;
    }
    char *b = (char *)p - STAGE_HDR;
    pscom_host_buffer_free(b, *(size_t *)b);
}

static int copy(void *dst, const void *src, size_t len)
{
    int mpi_errno = MPI_SUCCESS;
    pscom_err_t err = pscom_gpu_memcpy(dst, src, len);
    MPIR_ERR_CHKANDJUMP2(err != PSCOM_SUCCESS, mpi_errno, MPI_ERR_OTHER, "**pscom_cuda",
                         "**pscom_cuda %p %p", src, dst);
fn_fail:
    return mpi_errno;
}

int MPIDI_PSCOM_pack(const void *buf, MPI_Aint count, MPI_Datatype datatype, void *dst,
                     MPI_Aint len)
{
    int dt_contig;
    size_t data_sz;
    MPI_Aint true_lb, packed;
    MPIR_Datatype *dt_ptr;

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, true_lb);
    (void)dt_ptr;
    if (dt_contig && MPIDI_PSCOM_IS_DEV(buf, true_lb, len))
        return copy(dst, MPIR_get_contig_ptr(buf, true_lb), MPL_MIN((size_t)len, data_sz));
    /* MPICH's datatype layer stages device memory itself (maint/patches/0016) */
    return MPIR_Typerep_pack(buf, count, datatype, 0, dst, len, &packed);
}

int MPIDI_PSCOM_unpack(const void *src, MPI_Aint len, void *buf, MPI_Aint count,
                       MPI_Datatype datatype, MPI_Aint *unpacked)
{
    int mpi_errno, dt_contig;
    size_t data_sz;
    MPI_Aint true_lb;
    MPIR_Datatype *dt_ptr;

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, true_lb);
    (void)dt_ptr;
    if (dt_contig && MPIDI_PSCOM_IS_DEV(buf, true_lb, len)) {
        len = MPL_MIN((size_t)len, data_sz);
        mpi_errno = copy(MPIR_get_contig_ptr(buf, true_lb), src, len);
        *unpacked = mpi_errno == MPI_SUCCESS ? len : 0;
        return mpi_errno;
    }
    return MPIR_Typerep_unpack(src, len, buf, count, datatype, 0, unpacked);
}
