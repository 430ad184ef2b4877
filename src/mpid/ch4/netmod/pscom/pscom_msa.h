/*
 * MSA (modular supercomputing architecture) awareness of the ch4:pscom netmod: module and node
 * ids (pscom_msa.c), MPIX_COMM_TYPE_MODULE, MPI_INFO_ENV keys, hierarchical collectives
 * (pscom_coll_msa.c) and the inter-module traffic statistic.
 * Included by pscom_impl.h; the collective hooks MPICH inlines are in pscom_coll.h.
 */
#ifndef PSCOM_MSA_H_INCLUDED
#define PSCOM_MSA_H_INCLUDED

/* The collectives the statistic tells apart (MPIDI_PSCOM_msa.cur_coll). */
enum MPIDI_PSCOM_msa_coll {
    MPIDI_PSCOM_COLL_NONE = 0, /* point-to-point-based traffic of any other collective */
    MPIDI_PSCOM_COLL_BARRIER,
    MPIDI_PSCOM_COLL_BCAST,
    MPIDI_PSCOM_COLL_REDUCE,
    MPIDI_PSCOM_COLL_ALLREDUCE,
    MPIDI_PSCOM_COLL_SCAN,
    MPIDI_PSCOM_COLL_ALLGATHER,
    MPIDI_PSCOM_COLL_ALLTOALL,
    MPIDI_PSCOM_COLL_MAX
};

typedef struct {
    unsigned long calls; /* top-level calls of the collective */
    unsigned long hier;  /* of which took the hierarchical algorithm */
    unsigned long msgs;  /* collective messages this process sent to another module */
    unsigned long bytes;
} MPIDI_PSCOM_msa_stat_t;

typedef struct {
    int awareness;     /* PSP_MSA_AWARENESS */
    int module_id;     /* PSP_MSA_MODULE_ID if awareness, else 0 */
    int node_set;      /* PSP_MSA_NODE_ID (with awareness) or PSP_SMP_NODE_ID given */
    int node_override; /* its value (-1: every process is a node of its own) */
    int node_color;    /* our node as a non-negative id: override, else a hash of the host */
    int node_any;      /* some process of our world has a node override */
    int collops;       /* PSP_MSA_AWARE_COLLOPS here */
    int collops_all;   /* ... and at every process of our world */
    int stats;         /* PSP_DEBUG_STATS */
    int coll_hooks;    /* collops_all || stats: the collective hooks call pscom_coll_msa.c */
    int cur_coll;      /* enum MPIDI_PSCOM_msa_coll being run (statistic) */
    MPIDI_PSCOM_msa_stat_t stat[MPIDI_PSCOM_COLL_MAX];
} MPIDI_PSCOM_msa_t;

extern MPIDI_PSCOM_msa_t MPIDI_PSCOM_msa;

/* pscom_msa.c */
int MPIDI_PSCOM_msa_init(void); /* read the PSP_MSA_* variables (init_local) */
/* the business card: our endpoint string plus our ids, for the PMI KVS */
void MPIDI_PSCOM_msa_card(char *buf, size_t len, const char *ep);
/* a peer's card: strips the ids from card (leaving its endpoint string) and returns its
 * module; the flags go into the world-wide node_any/collops_all */
int MPIDI_PSCOM_msa_parse_card(char *card);
void MPIDI_PSCOM_msa_world_done(void); /* after every card is in */
void MPIDI_PSCOM_msa_finalize(void);   /* PSP_DEBUG_STATS output */
int MPIDI_PSCOM_comm_split_type(MPIR_Comm *comm, int split_type, int key, MPIR_Info *info,
                                MPIR_Comm **newcomm, int *handled);
void MPIDI_PSCOM_msa_count(MPIR_Comm *comm, int rank, MPIDI_av_entry_t *addr, MPI_Aint count,
                           MPI_Datatype datatype);

/* pscom_coll_msa.c */
void MPIDI_PSCOM_msa_comm_free(MPIR_Comm *comm);

/* ch4 core asks us first about every split type (maint/patches/0006) */
#define MPIDI_NM_COMM_SPLIT_TYPE_HOOK MPIDI_PSCOM_comm_split_type

/* Count a collective message to another module (only with PSP_DEBUG_STATS). */
#define MPIDI_PSCOM_MSA_COUNT_COLL(comm, rank, addr, count, datatype)                              \
    do {                                                                                           \
        if (unlikely(MPIDI_PSCOM_msa.stats))                                                       \
            MPIDI_PSCOM_msa_count(comm, rank, addr, count, datatype);                              \
    } while (0)

#endif /* PSCOM_MSA_H_INCLUDED */
