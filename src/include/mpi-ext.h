/*
 * psmpi's MPI extensions (ParaStation MPI compatible): include after mpi.h.
 *
 *   MPIX_MSA_AWARENESS       1: MPIX_COMM_TYPE_MODULE (mpi.h), MPI_INFO_ENV keys msa_module_id
 *                            and msa_node_id, PSP_MSA_AWARENESS / PSP_MSA_MODULE_ID at run time
 *   MPIX_CUDA_AWARE_SUPPORT  1: this build can take CUDA device memory buffers (with PSP_CUDA=1;
 *                            the driver is loaded at run time, nothing CUDA is linked)
 *   MPIX_Query_cuda_support  run-time answer: 1 when device buffers work in this run
 *                            (PSP_CUDA=1, the driver and a device found); MPI_INFO_ENV's
 *                            "cuda_aware" says the same ("true"/"false")
 */
#ifndef PSMPI_MPI_EXT_H_INCLUDED
#define PSMPI_MPI_EXT_H_INCLUDED

#define MPIX_MSA_AWARENESS      1
#define MPIX_CUDA_AWARE_SUPPORT 1

#if defined(__cplusplus)
extern "C" {
#endif

int MPIX_Query_cuda_support(void);

#if defined(__cplusplus)
}
#endif

#endif /* PSMPI_MPI_EXT_H_INCLUDED */
