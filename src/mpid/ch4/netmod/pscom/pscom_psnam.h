/*
 * PSNAM windows (DESIGN.md section 6, README.md "PSNAM"): MPI_Win_allocate with the info key
 * psnam_manifestation puts the window into a named region that can outlive the job.
 *  - shm: one file per rank in PSP_PSNAM_DIR (/dev/shm), mapped; RMA stays MPIDIG's (the target
 *    process applies operations to its mapping), MPI_Win_shared_query maps a node peer's file.
 *  - nam: the region lives in psnamd; every RMA operation and synchronisation of the window
 *    goes there (pscom_psnam_nam.c) through the protocol client of src/psnam.
 */
#ifndef PSCOM_PSNAM_H_INCLUDED
#define PSCOM_PSNAM_H_INCLUDED

#include "../../../../psnam/psnam_client.h"
#include "../../../../psnam/psnam_region.h"

enum { MPIDI_PSNAM_SHM = 1, MPIDI_PSNAM_NAM = 2 };

typedef struct MPIDI_PSNAM_win {
    int kind; /* MPIDI_PSNAM_SHM / NAM */
    char name[PSNAM_NAME_MAX];
    char server[128];
    int persistent, attach;
    int nseg;
    MPI_Aint size; /* this rank's segment */
    /* shm */
    char path[4200];
    psnam_file_t file;
    psnam_file_t *peers; /* MPI_Win_shared_query's mappings of node peers' segments */
    /* nam */
    psnam_client_t *client;
    uint32_t handle;
    int *disp_units;      /* per target rank */
    size_t chunk;         /* PSP_NAM_CHUNK, read once */
    unsigned outstanding; /* requests of this window not answered yet */
    int error;            /* the first failure since the last synchronisation */
    char error_msg[PSNAM_REASON_MAX + 64];
    MPIR_Comm *sync_comm; /* PSCW notifications */
    int *start_ranks, n_start;
    MPIR_Request **wait_reqs;
    int n_wait;
    int *locked; /* per target: 0, or the lock kind held (MPI_Win_lock) */
    int lock_all;
} MPIDI_PSNAM_win_t;

#define MPIDI_PSNAM_WIN(win) ((MPIDI_PSNAM_win_t *)(win)->dev.netmod.pscom.psnam)
#define MPIDI_PSNAM_NAM(win) ((MPIDI_PSNAM_win_t *)(win)->dev.netmod.pscom.nam)

/* pscom_psnam_win.c: allocation, free, info, shared query; an MPI error code that names the
   region */
int MPIDI_PSNAM_wants(MPIR_Info *info);
int MPIDI_PSNAM_allocate(MPI_Aint size, int disp_unit, MPIR_Info *info, MPIR_Comm *comm,
                         void *baseptr, MPIR_Win **win_ptr);
int MPIDI_PSNAM_free(MPIR_Win **win_ptr);
int MPIDI_PSNAM_get_info(MPIR_Win *win, MPIR_Info *info);
int MPIDI_PSNAM_shared_query(MPIR_Win *win, int rank, MPI_Aint *size, int *disp_unit,
                             void *baseptr);
int MPIDI_PSNAM_class(int psnam_err); /* the MPI error class of a PSNAM_E_* */
int MPIDI_PSNAM_error(int mpi_class, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* pscom_psnam_shm.c */
int MPIDI_PSNAM_shm_open(MPIDI_PSNAM_win_t *w, MPIR_Comm *comm, int disp_unit, char *why,
                         size_t whylen);
void MPIDI_PSNAM_shm_close(MPIDI_PSNAM_win_t *w, int remove);
int MPIDI_PSNAM_shm_query(MPIDI_PSNAM_win_t *w, int rank, MPI_Aint *size, int *disp_unit,
                          void **base);

/* pscom_psnam_nam.c: window set-up and the RMA entry points of a nam window */
int MPIDI_PSNAM_nam_open(MPIDI_PSNAM_win_t *w, MPIR_Comm *comm, int disp_unit, int *err_class,
                         char *why, size_t whylen);
int MPIDI_PSNAM_nam_close(MPIDI_PSNAM_win_t *w);

int MPIDI_PSNAM_put(const void *origin_addr, MPI_Aint origin_count, MPI_Datatype origin_datatype,
                    int target_rank, MPI_Aint target_disp, MPI_Aint target_count,
                    MPI_Datatype target_datatype, MPIR_Win *win, MPIR_Request **req);
int MPIDI_PSNAM_get(void *origin_addr, MPI_Aint origin_count, MPI_Datatype origin_datatype,
                    int target_rank, MPI_Aint target_disp, MPI_Aint target_count,
                    MPI_Datatype target_datatype, MPIR_Win *win, MPIR_Request **req);
int MPIDI_PSNAM_accumulate(const void *origin_addr, MPI_Aint origin_count,
                           MPI_Datatype origin_datatype, void *result_addr, MPI_Aint result_count,
                           MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                           MPI_Aint target_count, MPI_Datatype target_datatype, MPI_Op op,
                           MPIR_Win *win, int fetch, MPIR_Request **req);
int MPIDI_PSNAM_compare_and_swap(const void *origin_addr, const void *compare_addr,
                                 void *result_addr, MPI_Datatype datatype, int target_rank,
                                 MPI_Aint target_disp, MPIR_Win *win);
int MPIDI_PSNAM_flush(MPIR_Win *win);
int MPIDI_PSNAM_fence(int assert, MPIR_Win *win);
int MPIDI_PSNAM_lock(int lock_type, int rank, int assert, MPIR_Win *win);
int MPIDI_PSNAM_unlock(int rank, MPIR_Win *win);
int MPIDI_PSNAM_lock_all(int assert, MPIR_Win *win);
int MPIDI_PSNAM_unlock_all(MPIR_Win *win);
int MPIDI_PSNAM_post(MPIR_Group *group, int assert, MPIR_Win *win);
int MPIDI_PSNAM_start(MPIR_Group *group, int assert, MPIR_Win *win);
int MPIDI_PSNAM_complete(MPIR_Win *win);
int MPIDI_PSNAM_wait(MPIR_Win *win);
int MPIDI_PSNAM_test(MPIR_Win *win, int *flag);

#endif /* PSCOM_PSNAM_H_INCLUDED */
