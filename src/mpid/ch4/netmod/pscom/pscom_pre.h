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

/* Communicator: the hierarchy of the MSA-aware collectives, built lazily (pscom_coll_msa.c) */
typedef struct {
    void *msa;
} MPIDI_PSCOM_comm_t;

typedef struct {
    int unused;
} MPIDI_PSCOM_dt_t;

typedef struct {
    int unused;
} MPIDI_PSCOM_win_t;

typedef struct {
    int unused;
} MPIDI_PSCOM_op_t;

typedef struct {
    int unused;
} MPIDI_PSCOM_part_t;

#endif /* PSCOM_PRE_H_INCLUDED */
