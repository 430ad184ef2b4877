/*
 * Hierarchical (MSA-aware) collectives, PSP_MSA_AWARE_COLLOPS=1: Barrier, Bcast, Reduce,
 * Allreduce and Scan in three levels, so that modules talk to each other only through one
 * leader each:
 *
 *   node  - the processes of one node (PSP_SMP_NODE_ID / PSP_MSA_NODE_ID, else the host)
 *           within one module: node_comm, led by its lowest rank
 *   module - the node leaders of one module: mod_comm, led by the module's lowest rank
 *   world  - the module leaders: top_comm
 *
 * The three communicators are built the first time a communicator runs a hierarchical
 * collective (a collective call: every process gets there) and freed with it. Each level runs
 * MPICH's own algorithm (MPIR_*_impl) on its communicator. Levels are ordered by rank (split
 * keys), so an operation that is not commutative stays in rank order as long as every node's
 * and every module's ranks are contiguous; otherwise non-commutative Reduce/Allreduce and
 * every Scan (which needs rank order whatever the op) take the flat algorithm. So do
 * communicators with nothing to gain (one module of one node, or every process alone),
 * intercommunicators, and communicators with processes of another world (spawn/connect).
 *
 * Also here: the bracket of the inter-module statistic (which collective is running).
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"

enum { MSA_BUILDING = 1, MSA_FLAT, MSA_HIER };

typedef struct {
    int state;
    int contiguous; /* nodes and modules are blocks of consecutive ranks */
    MPIR_Comm *node, *mod, *top;
    int node_size, mod_size, top_size; /* 1 where we are not a member */
    int n_mods;
    /* per rank of the communicator */
    int *node_first;   /* lowest rank of its node (= its node leader) */
    int *mod_first;    /* lowest rank of its module (= its module leader) */
    int *rank_in_node; /* its rank in its node_comm */
    int *node_idx;     /* its node leader's rank in mod_comm */
    int *mod_idx;      /* its module leader's rank in top_comm */
} msa_comm_t;

#define MSA(comm) ((msa_comm_t *)(comm)->dev.ch4.netmod.pscom.msa)

void MPIDI_PSCOM_msa_comm_free(MPIR_Comm *comm)
{
    msa_comm_t *h = MSA(comm);
    if (!h)
        return;
    comm->dev.ch4.netmod.pscom.msa = NULL;
    if (h->node)
        MPIR_Comm_free_impl(h->node);
    if (h->mod)
        MPIR_Comm_free_impl(h->mod);
    if (h->top)
        MPIR_Comm_free_impl(h->top);
    MPL_free(h->node_first);
    MPL_free(h);
}

/* Only processes of our own world: their ids came with the business cards. */
static int world_only(MPIR_Comm *comm)
{
    for (int r = 0; r < comm->local_size; r++) {
        int idx, avtid;
        MPIDIU_comm_rank_to_pid(comm, r, &idx, &avtid);
        if (avtid != 0)
            return 0;
    }
    return 1;
}

static int build(MPIR_Comm *comm, msa_comm_t *h)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int n = comm->local_size, me = comm->rank;
    int *ids = NULL;
    int mine[2] = {MPIDI_PSCOM_msa.module_id, MPIDI_PSCOM_msa.node_color};

    ids = MPL_malloc(2 * sizeof(int) * n, MPL_MEM_COMM);
    h->node_first = MPL_malloc(5 * sizeof(int) * n, MPL_MEM_COMM);
    MPIR_ERR_CHKANDJUMP(!ids || !h->node_first, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    h->mod_first = h->node_first + n;
    h->rank_in_node = h->mod_first + n;
    h->node_idx = h->rank_in_node + n;
    h->mod_idx = h->node_idx + n;
    mpi_errno = MPIR_Allgather_impl(mine, 2, MPI_INT, ids, 2, MPI_INT, comm, &errflag);
    MPIR_ERR_CHECK(mpi_errno);

    int n_nodes = 0, n_mods = 0;
    h->contiguous = 1;
    for (int r = 0; r < n; r++) {
        int s;
        for (s = 0; ids[2 * s] != ids[2 * r] || ids[2 * s + 1] != ids[2 * r + 1]; s++)
            ;
        h->node_first[r] = s;
        for (s = 0; ids[2 * s] != ids[2 * r]; s++)
            ;
        h->mod_first[r] = s;
        if (r > 0 && h->node_first[r] != h->node_first[r - 1] && h->node_first[r] != r)
            h->contiguous = 0;
        if (r > 0 && h->mod_first[r] != h->mod_first[r - 1] && h->mod_first[r] != r)
            h->contiguous = 0;
        if (r == h->node_first[r])
            n_nodes++;
        if (r == h->mod_first[r])
            n_mods++;
    }
    for (int r = 0; r < n; r++) {
        int k = 0, nk = 0, mk = 0;
        for (int s = 0; s < r; s++)
            k += h->node_first[s] == h->node_first[r];
        h->rank_in_node[r] = k;
        for (int s = 0; s < h->node_first[r]; s++)
            nk += s == h->node_first[s] && h->mod_first[s] == h->mod_first[r];
        h->node_idx[r] = nk;
        for (int s = 0; s < h->mod_first[r]; s++)
            mk += s == h->mod_first[s];
        h->mod_idx[r] = mk;
    }

    h->n_mods = n_mods;
    /* nothing to gain: one module of one node, every process alone in its node and module,
     * or one module whose nodes are single processes */
    if ((n_mods == 1 && (n_nodes == 1 || n_nodes == n)) || n_mods == n) {
        h->state = MSA_FLAT;
        goto fn_exit;
    }

    mpi_errno = MPIR_Comm_split_impl(comm, h->node_first[me], me, &h->node);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIR_Comm_split_impl(
        comm, me == h->node_first[me] ? h->mod_first[me] : MPI_UNDEFINED, me, &h->mod);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIR_Comm_split_impl(comm, me == h->mod_first[me] ? 0 : MPI_UNDEFINED, me, &h->top);
    MPIR_ERR_CHECK(mpi_errno);
    h->node_size = h->node->local_size;
    h->mod_size = h->mod ? h->mod->local_size : 1;
    h->top_size = h->top ? h->top->local_size : 1;
    h->state = MSA_HIER;

fn_exit:
    MPL_free(ids);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

/* The hierarchy of comm if this collective should use it, else NULL (flat). */
static msa_comm_t *hier(MPIR_Comm *comm, int need_order, MPI_Op op)
{
    msa_comm_t *h = MSA(comm);
    if (!MPIDI_PSCOM_msa.collops_all || comm->comm_kind != MPIR_COMM_KIND__INTRACOMM)
        return NULL;
    if (!h) {
        /* first collective on comm: every process gets here (same decision everywhere) */
        h = MPL_calloc(1, sizeof(*h), MPL_MEM_COMM);
        if (!h)
            return NULL;
        comm->dev.ch4.netmod.pscom.msa = h;
        h->state = MSA_FLAT;
        if (comm->local_size > 2 && world_only(comm)) {
            int saved_coll = MPIDI_PSCOM_msa.cur_coll;
            MPIDI_PSCOM_msa.cur_coll = MPIDI_PSCOM_COLL_NONE; /* statistic: "other" */
            h->state = MSA_BUILDING; /* collectives inside build() are flat */
            int err = build(comm, h);
            MPIDI_PSCOM_msa.cur_coll = saved_coll;
            if (err != MPI_SUCCESS) {
                MPIDI_PSCOM_msa_comm_free(comm);
                return NULL;
            }
        }
    }
    if (h->state != MSA_HIER)
        return NULL;
    if (need_order == 2 && !h->contiguous) /* scan */
        return NULL;
    if (need_order == 1 && !h->contiguous && !MPIR_Op_is_commutative(op))
        return NULL;
    return h;
}

/* Statistic bracket: which collective the messages sent meanwhile belong to. */
#define ENTER(kind)                                                                                \
    int saved_coll = MPIDI_PSCOM_msa.cur_coll;                                                     \
    if (saved_coll == MPIDI_PSCOM_COLL_NONE) {                                                     \
        MPIDI_PSCOM_msa.cur_coll = (kind);                                                         \
        MPIDI_PSCOM_msa.stat[kind].calls++;                                                        \
    }
#define LEAVE() MPIDI_PSCOM_msa.cur_coll = saved_coll
#define COUNT_HIER(kind)                                                                           \
    do {                                                                                           \
        if (saved_coll == MPIDI_PSCOM_COLL_NONE)                                                   \
            MPIDI_PSCOM_msa.stat[kind].hier++;                                                     \
    } while (0)

/* A scratch buffer for count elements of datatype (NULL for count 0). */
static void *tmp_alloc(MPI_Aint count, MPI_Datatype datatype, void **mem)
{
    MPI_Aint true_lb, true_extent, extent;
    MPIR_Type_get_true_extent_impl(datatype, &true_lb, &true_extent);
    MPIR_Datatype_get_extent_macro(datatype, extent);
    *mem = MPL_malloc(count * MPL_MAX(extent, true_extent), MPL_MEM_BUFFER);
    return *mem ? (char *)*mem - true_lb : NULL;
}

/* ---- Barrier: up through node, module and world barriers, then released back down ---- */

static int barrier_hier(msa_comm_t *h, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    if (h->node_size > 1) {
        mpi_errno = MPIR_Barrier_impl(h->node, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (h->mod && h->mod_size > 1) {
        mpi_errno = MPIR_Barrier_impl(h->mod, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (h->top && h->top_size > 1) {
        mpi_errno = MPIR_Barrier_impl(h->top, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    /* the leaders enter the second barrier only once everything below them has arrived */
    if (h->mod && h->mod_size > 1) {
        mpi_errno = MPIR_Barrier_impl(h->mod, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (h->node_size > 1) {
        mpi_errno = MPIR_Barrier_impl(h->node, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    return mpi_errno;
}

int MPIDI_PSCOM_msa_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    ENTER(MPIDI_PSCOM_COLL_BARRIER);
    msa_comm_t *h = hier(comm, 0, MPI_OP_NULL);
    if (h) {
        COUNT_HIER(MPIDI_PSCOM_COLL_BARRIER);
        mpi_errno = barrier_hier(h, errflag);
    } else {
        mpi_errno = MPIR_Barrier_impl(comm, errflag);
    }
    LEAVE();
    return mpi_errno;
}

/* ---- Bcast: the root's node, the root's module, the module leaders, then the rest ---- */

static int bcast_hier(msa_comm_t *h, MPIR_Comm *comm, void *buf, MPI_Aint count, MPI_Datatype dt,
                      int root, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    int me = comm->rank;
    int in_root_node = h->node_first[me] == h->node_first[root];
    int in_root_mod = h->mod_first[me] == h->mod_first[root];

    if (in_root_node && h->node_size > 1) {
        mpi_errno = MPIR_Bcast_impl(buf, count, dt, h->rank_in_node[root], h->node, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (in_root_mod && h->mod && h->mod_size > 1) {
        mpi_errno = MPIR_Bcast_impl(buf, count, dt, h->node_idx[root], h->mod, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (h->top && h->top_size > 1) {
        mpi_errno = MPIR_Bcast_impl(buf, count, dt, h->mod_idx[root], h->top, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (!in_root_mod && h->mod && h->mod_size > 1) {
        mpi_errno = MPIR_Bcast_impl(buf, count, dt, 0, h->mod, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (!in_root_node && h->node_size > 1) {
        mpi_errno = MPIR_Bcast_impl(buf, count, dt, 0, h->node, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    return mpi_errno;
}

int MPIDI_PSCOM_msa_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                          MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    ENTER(MPIDI_PSCOM_COLL_BCAST);
    msa_comm_t *h = count > 0 ? hier(comm, 0, MPI_OP_NULL) : NULL;
    if (h) {
        COUNT_HIER(MPIDI_PSCOM_COLL_BCAST);
        mpi_errno = bcast_hier(h, comm, buffer, count, datatype, root, errflag);
    } else {
        mpi_errno = MPIR_Bcast_impl(buffer, count, datatype, root, comm, errflag);
    }
    LEAVE();
    return mpi_errno;
}

/* Up the first two levels: the node's ranks reduce to the node leader, the module's node
 * leaders to the module leader (all at root 0 of their level). On node leaders acc ends up
 * holding their node's (module leader: module's) reduction; input may equal acc. */
static int reduce_up(msa_comm_t *h, int me, const void *input, void *acc, MPI_Aint count,
                     MPI_Datatype dt, MPI_Op op, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    int node_leader = me == h->node_first[me], mod_leader = me == h->mod_first[me];

    if (!node_leader)
        return MPIR_Reduce_impl(input, NULL, count, dt, op, 0, h->node, errflag);
    if (h->node_size > 1)
        mpi_errno = MPIR_Reduce_impl(input == acc ? MPI_IN_PLACE : input, acc, count, dt, op, 0,
                                     h->node, errflag);
    else if (input != acc)
        mpi_errno = MPIR_Localcopy(input, count, dt, acc, count, dt);
    if (mpi_errno == MPI_SUCCESS && h->mod_size > 1)
        mpi_errno = MPIR_Reduce_impl(mod_leader ? MPI_IN_PLACE : acc, mod_leader ? acc : NULL,
                                     count, dt, op, 0, h->mod, errflag);
    return mpi_errno;
}

/* ---- Reduce: nodes to their leaders, nodes to the module leaders, modules to the root's
 * module leader, which hands the result to the root ---- */

static int reduce_hier(msa_comm_t *h, MPIR_Comm *comm, const void *sendbuf, void *recvbuf,
                       MPI_Aint count, MPI_Datatype dt, MPI_Op op, int root,
                       MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    int me = comm->rank;
    int node_leader = me == h->node_first[me], mod_leader = me == h->mod_first[me];
    int leader = h->mod_first[root], root_mod = h->mod_idx[root];
    const void *input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    void *mem = NULL, *mem2 = NULL, *acc = NULL;

    if (!node_leader) {
        mpi_errno = reduce_up(h, me, input, NULL, count, dt, op, errflag);
        MPIR_ERR_CHECK(mpi_errno);
        goto to_root;
    }
    /* node leaders accumulate in scratch: MPI_IN_PLACE only ever at root 0 of a level (MPICH
     * 4.0.2's reduce_scatter_gather breaks in place at another root, Debian's mpich too) */
    acc = tmp_alloc(count, dt, &mem);
    MPIR_ERR_CHKANDJUMP(!mem, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    mpi_errno = reduce_up(h, me, input, acc, count, dt, op, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    if (mod_leader && h->top_size > 1) {
        void *res = NULL;
        if (me == leader) {
            res = me == root ? recvbuf : tmp_alloc(count, dt, &mem2);
            MPIR_ERR_CHKANDJUMP(!res, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
        }
        mpi_errno = MPIR_Reduce_impl(acc, res, count, dt, op, root_mod, h->top, errflag);
        MPIR_ERR_CHECK(mpi_errno);
        if (me == leader)
            acc = res;
    }
    if (me == root && me == leader && acc != recvbuf) {
        mpi_errno = MPIR_Localcopy(acc, count, dt, recvbuf, count, dt);
        MPIR_ERR_CHECK(mpi_errno);
    }

to_root:
    /* the root's module leader has the result */
    if (leader != root) {
        if (me == leader) {
            mpi_errno = MPIC_Send(acc, count, dt, root, MPIR_REDUCE_TAG, comm, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        } else if (me == root) {
            mpi_errno = MPIC_Recv(recvbuf, count, dt, leader, MPIR_REDUCE_TAG, comm,
                                  MPI_STATUS_IGNORE, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
    }
fn_fail:
    MPL_free(mem);
    MPL_free(mem2);
    return mpi_errno;
}

int MPIDI_PSCOM_msa_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                           MPI_Datatype datatype, MPI_Op op, int root, MPIR_Comm *comm,
                           MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    ENTER(MPIDI_PSCOM_COLL_REDUCE);
    msa_comm_t *h = count > 0 ? hier(comm, 1, op) : NULL;
    if (h) {
        COUNT_HIER(MPIDI_PSCOM_COLL_REDUCE);
        mpi_errno = reduce_hier(h, comm, sendbuf, recvbuf, count, datatype, op, root, errflag);
    } else {
        mpi_errno = MPIR_Reduce_impl(sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
    }
    LEAVE();
    return mpi_errno;
}

/* ---- Allreduce: reduce to the module leaders, allreduce among them, bcast back down ---- */

static int allreduce_hier(msa_comm_t *h, MPIR_Comm *comm, const void *sendbuf, void *recvbuf,
                          MPI_Aint count, MPI_Datatype dt, MPI_Op op, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    int me = comm->rank;
    int node_leader = me == h->node_first[me], mod_leader = me == h->mod_first[me];

    mpi_errno = reduce_up(h, me, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf,
                          node_leader ? recvbuf : NULL, count, dt, op, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    if (mod_leader && h->top_size > 1) {
        mpi_errno = MPIR_Allreduce_impl(MPI_IN_PLACE, recvbuf, count, dt, op, h->top, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (node_leader && h->mod_size > 1) {
        mpi_errno = MPIR_Bcast_impl(recvbuf, count, dt, 0, h->mod, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (h->node_size > 1) {
        mpi_errno = MPIR_Bcast_impl(recvbuf, count, dt, 0, h->node, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    return mpi_errno;
}

int MPIDI_PSCOM_msa_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                              MPI_Datatype datatype, MPI_Op op, MPIR_Comm *comm,
                              MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    ENTER(MPIDI_PSCOM_COLL_ALLREDUCE);
    msa_comm_t *h = count > 0 ? hier(comm, 1, op) : NULL;
    if (h) {
        COUNT_HIER(MPIDI_PSCOM_COLL_ALLREDUCE);
        mpi_errno = allreduce_hier(h, comm, sendbuf, recvbuf, count, datatype, op, errflag);
    } else {
        mpi_errno = MPIR_Allreduce_impl(sendbuf, recvbuf, count, datatype, op, comm, errflag);
    }
    LEAVE();
    return mpi_errno;
}

/* ---- Scan (contiguous nodes and modules only): scan within the node; the node totals give
 * an exclusive scan across the module's nodes, the module totals one across the modules; the
 * node leader combines both into its node's offset, which every rank of the node puts in front
 * of its own prefix ---- */

static int scan_hier(msa_comm_t *h, MPIR_Comm *comm, const void *sendbuf, void *recvbuf,
                     MPI_Aint count, MPI_Datatype dt, MPI_Op op, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    int me = comm->rank;
    int node_leader = me == h->node_first[me], mod_leader = me == h->mod_first[me];
    int has_mex = h->node_idx[me] > 0; /* nodes before ours in our module */
    int has_tex = h->mod_idx[me] > 0;  /* modules before ours */
    void *mem[4] = {NULL, NULL, NULL, NULL};
    void *ntot = NULL, *mex = NULL, *mtot = NULL, *tex = NULL, *off = NULL;

    for (int i = 0; i < 4; i++) {
        void *p = tmp_alloc(count, dt, &mem[i]);
        MPIR_ERR_CHKANDJUMP(!mem[i], mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
        if (i == 0)
            ntot = p;
        else if (i == 1)
            mex = p;
        else if (i == 2)
            mtot = p;
        else
            tex = p;
    }

    /* 1. prefix within the node */
    if (h->node_size > 1)
        mpi_errno = MPIR_Scan_impl(sendbuf, recvbuf, count, dt, op, h->node, errflag);
    else if (sendbuf != MPI_IN_PLACE)
        mpi_errno = MPIR_Localcopy(sendbuf, count, dt, recvbuf, count, dt);
    MPIR_ERR_CHECK(mpi_errno);

    /* 2. the node's total (the last rank's prefix) to the node leader */
    if (h->node_size > 1) {
        if (h->rank_in_node[me] == h->node_size - 1)
            mpi_errno = MPIC_Send(recvbuf, count, dt, 0, MPIR_SCAN_TAG, h->node, errflag);
        else if (node_leader)
            mpi_errno = MPIC_Recv(ntot, count, dt, h->node_size - 1, MPIR_SCAN_TAG, h->node,
                                  MPI_STATUS_IGNORE, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    } else {
        mpi_errno = MPIR_Localcopy(recvbuf, count, dt, ntot, count, dt);
        MPIR_ERR_CHECK(mpi_errno);
    }

    if (node_leader) {
        /* 3. exclusive scan of the node totals in the module; the module total to its leader */
        if (h->mod_size > 1) {
            mpi_errno = MPIR_Exscan_impl(ntot, mex, count, dt, op, h->mod, errflag);
            MPIR_ERR_CHECK(mpi_errno);
            /* the module total is only needed with more than one module */
            if (h->n_mods > 1 && h->node_idx[me] == h->mod_size - 1) {
                mpi_errno = MPIR_Localcopy(ntot, count, dt, mtot, count, dt);
                MPIR_ERR_CHECK(mpi_errno);
                mpi_errno = MPIR_Reduce_local(mex, mtot, count, dt, op); /* mex op ntot */
                MPIR_ERR_CHECK(mpi_errno);
                mpi_errno = MPIC_Send(mtot, count, dt, 0, MPIR_SCAN_TAG, h->mod, errflag);
                MPIR_ERR_CHECK(mpi_errno);
            } else if (h->n_mods > 1 && mod_leader) {
                mpi_errno = MPIC_Recv(mtot, count, dt, h->mod_size - 1, MPIR_SCAN_TAG, h->mod,
                                      MPI_STATUS_IGNORE, errflag);
                MPIR_ERR_CHECK(mpi_errno);
            }
        } else {
            mpi_errno = MPIR_Localcopy(ntot, count, dt, mtot, count, dt);
            MPIR_ERR_CHECK(mpi_errno);
        }
        /* 4. exclusive scan of the module totals among the module leaders */
        if (mod_leader && h->top_size > 1) {
            mpi_errno = MPIR_Exscan_impl(mtot, tex, count, dt, op, h->top, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
        /* 5. the modules before ours, to our module's node leaders */
        if (has_tex && h->mod_size > 1) {
            mpi_errno = MPIR_Bcast_impl(tex, count, dt, 0, h->mod, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
        /* 6. our node's offset: (modules before) op (nodes before, in our module) */
        if (has_tex && has_mex) {
            mpi_errno = MPIR_Reduce_local(tex, mex, count, dt, op);
            MPIR_ERR_CHECK(mpi_errno);
            off = mex;
        } else if (has_tex) {
            off = tex;
        } else if (has_mex) {
            off = mex;
        }
    }
    /* 7. the offset to the node, in front of every prefix */
    if (has_tex || has_mex) {
        if (!node_leader)
            off = tex;
        if (h->node_size > 1) {
            mpi_errno = MPIR_Bcast_impl(off, count, dt, 0, h->node, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
        mpi_errno = MPIR_Reduce_local(off, recvbuf, count, dt, op);
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    for (int i = 0; i < 4; i++)
        MPL_free(mem[i]);
    return mpi_errno;
}

int MPIDI_PSCOM_msa_scan(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype datatype,
                         MPI_Op op, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    ENTER(MPIDI_PSCOM_COLL_SCAN);
    msa_comm_t *h = count > 0 ? hier(comm, 2, op) : NULL;
    if (h) {
        COUNT_HIER(MPIDI_PSCOM_COLL_SCAN);
        mpi_errno = scan_hier(h, comm, sendbuf, recvbuf, count, datatype, op, errflag);
    } else {
        mpi_errno = MPIR_Scan_impl(sendbuf, recvbuf, count, datatype, op, comm, errflag);
    }
    LEAVE();
    return mpi_errno;
}

/* ---- Allgather, Alltoall: flat, only counted ---- */

int MPIDI_PSCOM_msa_allgather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                              void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                              MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    ENTER(MPIDI_PSCOM_COLL_ALLGATHER);
    mpi_errno = MPIR_Allgather_impl(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                    comm, errflag);
    LEAVE();
    return mpi_errno;
}

int MPIDI_PSCOM_msa_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                             void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                             MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    ENTER(MPIDI_PSCOM_COLL_ALLTOALL);
    mpi_errno = MPIR_Alltoall_impl(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                   errflag);
    LEAVE();
    return mpi_errno;
}
