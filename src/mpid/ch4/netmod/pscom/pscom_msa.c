/*
 * MSA awareness: module and node ids, MPIX_COMM_TYPE_MODULE and the node override of
 * MPI_COMM_TYPE_SHARED, MPI_INFO_ENV keys, and the statistic of collective traffic between
 * modules.
 *
 * Ids: PSP_MSA_MODULE_ID (read only with PSP_MSA_AWARENESS=1; else every process is in module
 * 0), PSP_MSA_NODE_ID (with awareness) or PSP_SMP_NODE_ID override the node (-1: every process
 * a node of its own); they may differ per process (mpiexec's per-block -env). They travel with
 * our endpoint string in the PMI KVS ("ep|module|node|flags", pscom_init.c), so every process
 * knows each world peer's module (the statistic) and whether anybody overrides nodes or lacks
 * PSP_MSA_AWARE_COLLOPS (decisions that must be the same everywhere).
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include <errno.h>
#include <limits.h>
#include <unistd.h>

MPIDI_PSCOM_msa_t MPIDI_PSCOM_msa;

#define CARD_FLAG_NODE    0x1       /* this process overrides its node */
#define CARD_FLAG_COLLOPS 0x2       /* this process has PSP_MSA_AWARE_COLLOPS=1 */
#define NODE_OWN_BASE     (1 << 30) /* node color of PSP_SMP_NODE_ID=-1: base + world rank */
#define NODE_HOST_BASE    (1 << 29) /* node color without override: base + host hash */

static int awareness_cfg, collops_cfg;
static const char *module_cfg = "", *msa_node_cfg = "", *smp_node_cfg = "";
static const pscom_env_row_t msa_env_rows[] = {
    {"PSP_MSA_AWARENESS", "0",
     "MPI: modular supercomputing awareness: read PSP_MSA_MODULE_ID and PSP_MSA_NODE_ID",
     PSCOM_ENV_BOOL, &awareness_cfg, 0, 0},
    {"PSP_MSA_MODULE_ID", "",
     "MPI: this process's module (integer >= 0; with PSP_MSA_AWARENESS=1, else module 0). "
     "Set per block: mpiexec -n 4 -env PSP_MSA_MODULE_ID 0 ./a : -n 4 -env PSP_MSA_MODULE_ID 1 "
     "./a",
     PSCOM_ENV_STR, &module_cfg, 0, 0},
    {"PSP_MSA_NODE_ID", "",
     "MPI: this process's node (integer >= 0, -1 = a node of its own) instead of the host; "
     "with PSP_MSA_AWARENESS=1, before PSP_SMP_NODE_ID",
     PSCOM_ENV_STR, &msa_node_cfg, 0, 0},
    {"PSP_SMP_NODE_ID", "",
     "MPI: this process's node for MPI_COMM_TYPE_SHARED and the hierarchical collectives "
     "(integer >= 0, -1 = a node of its own) instead of the host",
     PSCOM_ENV_STR, &smp_node_cfg, 0, 0},
    {"PSP_MSA_AWARE_COLLOPS", "0",
     "MPI: hierarchical Barrier, Bcast, Reduce, Allreduce, Scan (node, module, world); must be "
     "the same for all processes",
     PSCOM_ENV_BOOL, &collops_cfg, 0, 0},
    {NULL, NULL, NULL, PSCOM_ENV_INT, NULL, 0, 0},
};

/* A whole decimal integer in [min, max], else -1. */
static int parse_int(const char *s, long min, long max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

static int host_color(void)
{
    char host[256] = "";
    uint32_t h = 2166136261u; /* FNV-1a */
    gethostname(host, sizeof(host) - 1);
    for (const char *p = host; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return NODE_HOST_BASE + (int)(h % NODE_HOST_BASE);
}

static int info_env_set(const char *key, const char *value)
{
    MPIR_Info *info = NULL;
    MPIR_Info_get_ptr(MPI_INFO_ENV, info);
    return info ? MPIR_Info_set_impl(info, key, value) : MPI_SUCCESS;
}

int MPIDI_PSCOM_msa_init(void)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_PSCOM_msa_t *m = &MPIDI_PSCOM_msa;
    char buf[32];

    pscom_env_register("mpi-msa", msa_env_rows);
    m->awareness = awareness_cfg;
    m->module_id = 0;
    if (m->awareness && *module_cfg) {
        MPIR_ERR_CHKANDJUMP2(parse_int(module_cfg, 0, INT_MAX, &m->module_id), mpi_errno,
                             MPI_ERR_OTHER, "**pscom_msa_env", "**pscom_msa_env %s %s",
                             "PSP_MSA_MODULE_ID", module_cfg);
    }
    const char *node_name = m->awareness && *msa_node_cfg ? "PSP_MSA_NODE_ID" : "PSP_SMP_NODE_ID";
    const char *node_val = m->awareness && *msa_node_cfg ? msa_node_cfg : smp_node_cfg;
    m->node_set = *node_val != '\0';
    if (m->node_set) {
        MPIR_ERR_CHKANDJUMP2(parse_int(node_val, -1, NODE_HOST_BASE - 1, &m->node_override),
                             mpi_errno, MPI_ERR_OTHER, "**pscom_msa_env", "**pscom_msa_env %s %s",
                             node_name, node_val);
        m->node_color =
            m->node_override >= 0 ? m->node_override : NODE_OWN_BASE + MPIR_Process.rank;
    } else {
        m->node_color = host_color();
    }
    m->node_any = m->node_set;
    m->collops = m->collops_all = collops_cfg;
    char stats[8];
    m->stats = pscom_env_get("PSP_DEBUG_STATS", stats, sizeof(stats)) == 0 &&
               strcmp(stats, "0") != 0; /* pscom's own row, parsed there */
    m->coll_hooks = 0;                  /* until every card is in: MPIDI_PSCOM_msa_world_done */

    snprintf(buf, sizeof(buf), "%d", m->module_id);
    mpi_errno = info_env_set("msa_module_id", buf);
    MPIR_ERR_CHECK(mpi_errno);
    if (m->node_set) {
        snprintf(buf, sizeof(buf), "%d", m->node_override);
        mpi_errno = info_env_set("msa_node_id", buf);
        MPIR_ERR_CHECK(mpi_errno);
    }
    mpi_errno = info_env_set("cuda_aware", pscom_is_cuda_enabled() ? "true" : "false");
    MPIR_ERR_CHECK(mpi_errno);

fn_fail:
    return mpi_errno;
}

void MPIDI_PSCOM_msa_card(char *buf, size_t len, const char *ep)
{
    MPIDI_PSCOM_msa_t *m = &MPIDI_PSCOM_msa;
    int flags = (m->node_set ? CARD_FLAG_NODE : 0) | (m->collops ? CARD_FLAG_COLLOPS : 0);
    snprintf(buf, len, "%s|%d|%d|%d", ep, m->module_id, m->node_color, flags);
}

int MPIDI_PSCOM_msa_parse_card(char *card)
{
    int module = -1, node = -1, flags = 0;
    char *bar = strchr(card, '|');
    if (bar) {
        *bar = '\0';
        if (sscanf(bar + 1, "%d|%d|%d", &module, &node, &flags) != 3)
            module = -1, flags = 0;
    }
    if (flags & CARD_FLAG_NODE)
        MPIDI_PSCOM_msa.node_any = 1;
    if (!(flags & CARD_FLAG_COLLOPS))
        MPIDI_PSCOM_msa.collops_all = 0;
    return module;
}

void MPIDI_PSCOM_msa_world_done(void)
{
    MPIDI_PSCOM_msa_t *m = &MPIDI_PSCOM_msa;
    m->coll_hooks = m->collops_all || m->stats;
    if (m->collops && !m->collops_all && MPIR_Process.rank == 0)
        fprintf(stderr, "psmpi: PSP_MSA_AWARE_COLLOPS=1 is not set for every process: "
                        "flat collectives\n");
}

static const char *coll_name[MPIDI_PSCOM_COLL_MAX] = {
    "other", "barrier", "bcast", "reduce", "allreduce", "scan", "allgather", "alltoall",
};

void MPIDI_PSCOM_msa_finalize(void)
{
    MPIDI_PSCOM_msa_t *m = &MPIDI_PSCOM_msa;
    char line[1024];
    int n;
    if (!m->stats)
        return;
    n = snprintf(line, sizeof(line),
                 "psmpi-msa-stats: rank %d module %d node %d:", MPIR_Process.rank, m->module_id,
                 m->node_set ? m->node_override : -2);
    for (int c = 0; c < MPIDI_PSCOM_COLL_MAX && n < (int)sizeof(line); c++) {
        MPIDI_PSCOM_msa_stat_t *s = &m->stat[c];
        if (!s->calls && !s->msgs)
            continue;
        n += snprintf(line + n, sizeof(line) - n,
                      " %s calls=%lu hier=%lu xmod_msgs=%lu "
                      "xmod_bytes=%lu;",
                      coll_name[c], s->calls, s->hier, s->msgs, s->bytes);
    }
    fprintf(stderr, "%s\n", line);
}

/* Statistic: a collective message from us to rank of comm (or addr). */
void MPIDI_PSCOM_msa_count(MPIR_Comm *comm, int rank, MPIDI_av_entry_t *addr, MPI_Aint count,
                           MPI_Datatype datatype)
{
    MPIDI_PSCOM_msa_t *m = &MPIDI_PSCOM_msa;
    MPIDI_av_entry_t *av;
    size_t size;
    if (rank == MPI_PROC_NULL)
        return;
    av = addr ? addr : MPIDIU_comm_rank_to_av(comm, rank);
    int peer = MPIDI_PSCOM_AV(av).msa_module;
    if (peer < 0 || peer == m->module_id)
        return;
    MPIR_Datatype_get_size_macro(datatype, size);
    m->stat[m->cur_coll].msgs++;
    m->stat[m->cur_coll].bytes += size * count;
}

/* MPI_COMM_TYPE_SHARED under a node override, and MPIX_COMM_TYPE_MODULE; everything else
 * (and SHARED without any override in our world) goes on in ch4. */
int MPIDI_PSCOM_comm_split_type(MPIR_Comm *comm, int split_type, int key, MPIR_Info *info,
                                MPIR_Comm **newcomm, int *handled)
{
    int color;
    (void)info;
    *handled = 0;
    if (comm->comm_kind != MPIR_COMM_KIND__INTRACOMM)
        return MPI_SUCCESS;
    if (split_type == MPIX_COMM_TYPE_MODULE)
        color = MPIDI_PSCOM_msa.module_id;
    else if (split_type == MPI_COMM_TYPE_SHARED && MPIDI_PSCOM_msa.node_any)
        color = MPIDI_PSCOM_msa.node_color;
    else
        return MPI_SUCCESS;
    *handled = 1;
    return MPIR_Comm_split_impl(comm, color, key, newcomm);
}

/* MPIX_Query_cuda_support (mpi-ext.h) is MPICH's binding, which asks the device
 * (MPID_GPU_QUERY_SUPPORT in pscom_pre.h, maint/patches/0015). */
