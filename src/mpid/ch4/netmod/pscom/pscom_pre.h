/*
 * Types the ch4:pscom netmod embeds in MPICH's own objects (requests, communicators, windows,
 * address vector entries, ...). Included from mpidpre.h, i.e. by every MPICH source file, so
 * it stays small and does not include pscom.h: pscom objects are only forward-declared.
 */
#ifndef PSCOM_PRE_H_INCLUDED
#define PSCOM_PRE_H_INCLUDED

struct pscom_request;
struct pscom_connection;

/* Member of MPIDI_NM_Global_t (maint/patches/0001); real state is in MPIDI_PSCOM_global. */
typedef struct {
    int unused;
} MPIDI_PSCOM_Global_t;

/* Native point-to-point state of an MPIR_Request (req->dev.ch4.netmod.pscom). */
typedef struct {
    struct pscom_request *preq; /* the pscom request carrying this message */
    void *pack_buf;             /* non-contiguous data: packed copy (send) or staging (recv) */
    void *user_buf;             /* recv: where to unpack pack_buf */
    MPI_Aint count;
    MPI_Datatype datatype;
    int mrecv_state; /* matched probe: MPIDI_PSCOM_MRECV_* */
    void *tag_op;    /* matching in the transport: the receive in flight (for a cancel), or
                        the message a matched probe took (pscom_tagmatch.h) */
} MPIDI_PSCOM_request_t;

/* Active-message state (req->dev.ch4.am.netmod_am.pscom): kept in the pscom request instead. */
typedef struct {
    int unused;
} MPIDI_PSCOM_am_request_t;

/* Address vector entry: one (possibly on-demand) pscom connection per peer process. */
typedef struct {
    struct pscom_connection *con;
    char *ep;       /* peer's endpoint string: its upid for dynamic processes */
    int msa_module; /* peer's MSA module (business card); -1 unknown (other worlds) */
} MPIDI_PSCOM_addr_t;

/* Communicator: the hierarchy of the MSA-aware collectives, built lazily (pscom_coll_msa.c),
   and the shared segment of a communicator within one node (pscom_coll_shm.c) */
typedef struct {
    void *seg;                     /* mapped, NULL until made */
    size_t seg_len;                /* its length */
    int calls;                     /* collectives that could have used it before it was made */
    int refused;                   /* a rank could not map it: messages for good */
    int setting_up;                /* the setup's own collectives go by messages */
    unsigned long long bcasts;     /* ring slots its Bcasts took so far */
    unsigned long long bcast_free; /* as root we may fill the ring up to this slot */
} MPIDI_PSCOM_coll_shm_t;

typedef struct {
    void *msa;
    MPIDI_PSCOM_coll_shm_t coll_shm;
} MPIDI_PSCOM_comm_t;

typedef struct {
    int unused;
} MPIDI_PSCOM_dt_t;

/* Window: a PSNAM window's state (pscom_psnam.h); nam set only for the nam manifestation,
   whose RMA operations all go to psnamd (pscom_rma.h branches on it) */
typedef struct {
    void *psnam;
    void *nam;
} MPIDI_PSCOM_win_t;

/* MPI_Win_shared_query on a PSNAM window (maint/patches/0014): its shm segments are files
   that node peers map; a nam window answers size 0 */
#define MPID_Win_shared_query_allowed(win_) ((win_)->dev.netmod.pscom.psnam != NULL)

/* Device memory (CUDA), PSP_CUDA=1: libpscom loads the driver (pscom_cuda_on); the netmod
   stages its messages (pscom_gpu.h), and MPICH's datatype layer its copies and reductions
   through these hooks (maint/patches/0016). MPIX_Query_cuda_support and MPIX_GPU_query_support
   answer from the same flag (maint/patches/0015). */
extern int pscom_cuda_on;
int MPIDI_PSCOM_gpu_is_dev(const void *ptr);
int MPIDI_PSCOM_gpu_memcpy(void *dst, const void *src, size_t len); /* 0, else -1 */
#define MPID_GPU_ENABLED            __builtin_expect(pscom_cuda_on, 0)
#define MPID_GPU_IS_DEV(ptr_)       (MPID_GPU_ENABLED && MPIDI_PSCOM_gpu_is_dev(ptr_))
#define MPID_GPU_MEMCPY(d_, s_, n_) MPIDI_PSCOM_gpu_memcpy(d_, s_, n_)
/* Host memory that stages or packs a message (pscom_gpu.c): every buffer that becomes a
   request's pack_buf or its pscom request's buf, and MPICH's staging copies, come from here.
   With PSP_CUDA it is page-locked, so that the driver copies device memory to and from it
   directly. */
void *MPIDI_PSCOM_stage_alloc(size_t len);
void MPIDI_PSCOM_stage_free(void *p);
#define MPID_GPU_HOST_ALLOC(n_) MPIDI_PSCOM_stage_alloc(n_)
#define MPID_GPU_HOST_FREE(p_)  MPIDI_PSCOM_stage_free(p_)
#define MPID_GPU_QUERY_SUPPORT(type_, answer_)                                                     \
    (*(answer_) = (type_) == MPIX_GPU_SUPPORT_CUDA && pscom_cuda_on, 1)

typedef struct {
    int unused;
} MPIDI_PSCOM_op_t;

typedef struct {
    int unused;
} MPIDI_PSCOM_part_t;

#endif /* PSCOM_PRE_H_INCLUDED */
