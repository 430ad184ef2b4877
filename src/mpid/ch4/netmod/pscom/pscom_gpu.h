/*
 * Device memory in MPI calls (PSP_CUDA=1, libpscom's pscom_cuda.c). No transport moves device
 * memory itself yet, so every path that would let the CPU or a transport touch a user buffer
 * asks first and stages through host memory: a send packs (copies) the buffer to host memory,
 * a receive lands in host memory and is copied to the device when it completes. Without
 * PSP_CUDA the question costs one load (MPIDI_PSCOM_global.cuda).
 */
#ifndef PSCOM_GPU_H_INCLUDED
#define PSCOM_GPU_H_INCLUDED

#include <pscom.h>

/* 1 if ptr is device memory */
#define MPIDI_PSCOM_IS_DEV_PTR(ptr_)                                                               \
    unlikely(MPIDI_PSCOM_global.cuda && (pscom_is_gpu_mem_query(ptr_)))
/* 1 if the first byte of (buf, true_lb) is device memory; data_sz 0 never needs staging */
#define MPIDI_PSCOM_IS_DEV(buf_, true_lb_, data_sz_)                                               \
    unlikely(MPIDI_PSCOM_global.cuda && (data_sz_) &&                                              \
             pscom_is_gpu_mem_query(MPIR_get_contig_ptr(buf_, true_lb_)))

/* MPIR_Typerep_pack of all len bytes into host memory dst, where buf may be device memory. */
int MPIDI_PSCOM_pack(const void *buf, MPI_Aint count, MPI_Datatype datatype, void *dst,
                     MPI_Aint len);
/* MPIR_Typerep_unpack of len bytes of host memory src, where buf may be device memory. */
int MPIDI_PSCOM_unpack(const void *src, MPI_Aint len, void *buf, MPI_Aint count,
                       MPI_Datatype datatype, MPI_Aint *unpacked);

#endif /* PSCOM_GPU_H_INCLUDED */
