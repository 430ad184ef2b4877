/*
 * Start-up and shut-down: one pscom socket per process, named "r%07d" after the world rank,
 * listening on any port. Endpoint strings are exchanged through the PMI KVS, and every world
 * rank (ourselves included) gets an on-demand connection (pscom_con.c): nothing is connected
 * until the first message, and pscom resolves two peers connecting at once.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_spawn.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define EP_KEY_FMT "pscom-ep-%d"

/* Our PSP_* settings: rows in pscom's configuration table, so pscom_info -c and
 * PSP_DEBUG_PARAM show them with pscom's own. */
static int sched_yield_cfg = -1, sched_batch_cfg = -1, coll_block_cfg = -2, nap_cfg = -2;
static unsigned yield_after_us_cfg = 20, nap_after_us_cfg = 1000;
static size_t bcast_tree_max_cfg = 65536;
static int direct_connect_cfg, coll_shm_cfg = 1;
unsigned MPIDI_PSCOM_lost_peer_abort_s = 10;
/* read through pscom_env_get by the PSNAM windows (pscom_psnam_*.c) */
static const char *nam_server_cfg, *nam_key_cfg, *psnam_dir_cfg;
static unsigned nam_timeout_cfg = 60;
static size_t nam_chunk_cfg = 1u << 20;
static const pscom_env_row_t env_rows[] = {
    {"PSP_DIRECT_CONNECT", "0",
     "MPI: open the connections to all processes of MPI_COMM_WORLD in MPI_Init (default: on "
     "demand, at the first message to a peer)",
     PSCOM_ENV_BOOL, &direct_connect_cfg, 0, 0},
    {"PSP_MPI_SCHED_YIELD", "-1",
     "MPI: sched_yield() when a progress poll finds nothing (1 always, 0 never, -1 always when "
     "this node runs more ranks than the job may use CPUs here, else once the rank has found "
     "nothing for PSP_MPI_YIELD_AFTER_US)",
     PSCOM_ENV_INT, &sched_yield_cfg, -1, 1},
    {"PSP_MPI_SCHED_BATCH", "-1",
     "MPI: run as SCHED_BATCH, so that this process, woken by a message, waits for its turn "
     "instead of preempting the running one (1 always, 0 never, -1 when this node runs more "
     "ranks than the job may use CPUs here and MPI_THREAD_MULTIPLE was not asked for); a "
     "scheduling policy the user set stays",
     PSCOM_ENV_INT, &sched_batch_cfg, -1, 1},
    {"PSP_MPI_YIELD_AFTER_US", "20",
     "MPI: with PSP_MPI_SCHED_YIELD=-1 on a node that is not known to be crowded, idle "
     "progress polls yield once nothing came for this many microseconds, so that a peer that "
     "shares the CPU unknown to the launcher runs before the scheduler's next tick (0: never)",
     PSCOM_ENV_UINT, &yield_after_us_cfg, 0, 1000000},
    {"PSP_MPI_COLL_BLOCK", "-2",
     "MPI: a rank that waits in a small Bcast (the netmod's, up to 12 KiB) sleeps until a "
     "message comes after this many polls that found nothing (-1 never; -2: 64 when this node "
     "runs more ranks than the job may use CPUs here, 256 on a communicator within one node's "
     "shared memory, else never). Not with "
     "MPI_THREAD_MULTIPLE.",
     PSCOM_ENV_INT, &coll_block_cfg, -2, 1 << 20},
    {"PSP_MPI_BCAST_TREE_MAX", "64k",
     "MPI: a Bcast on a communicator of up to 8 ranks goes down the netmod's binomial tree up "
     "to this many bytes, instead of MPICH's scatter and allgather from 12 KiB on (0: 12 KiB, "
     "as MPICH). Must be the same in every process of the job.",
     PSCOM_ENV_SIZE, &bcast_tree_max_cfg, 0, 0},
    {"PSP_MPI_COLL_SHM", "1",
     "MPI: Barrier, Bcast up to 64 KiB (3 ranks or more), Allreduce up to 1 KiB, Allgather and "
     "Alltoall of up to 1 KiB per rank (up to 64 ranks) on a communicator within one node's "
     "shared memory go through a segment its ranks map (made at the communicator's second such "
     "call, unlinked at once); 0: by messages. A process with 0 makes its communicators keep "
     "the messages.",
     PSCOM_ENV_BOOL, &coll_shm_cfg, 0, 0},
    {"PSP_MPI_NAP", "-2",
     "MPI: where idle polls yield (PSP_MPI_SCHED_YIELD), after this many in a row each one "
     "sleeps for the kernel's timer slack (about 50 us) instead (-1 never; -2: 16 when this "
     "node runs at least 32 ranks per CPU the job may use here, else never; counted in steps "
     "of 16). Not with MPI_THREAD_MULTIPLE.",
     PSCOM_ENV_INT, &nap_cfg, -2, 1 << 20},
    {"PSP_MPI_NAP_AFTER_US", "1000",
     "MPI: where every idle poll yields (PSP_MPI_SCHED_YIELD: a crowded node), a rank that has "
     "found nothing for this many microseconds naps at each idle poll (as with PSP_MPI_NAP), "
     "leaving the CPU to the ranks that have work (0: never). Not with MPI_THREAD_MULTIPLE.",
     PSCOM_ENV_UINT, &nap_after_us_cfg, 0, 1000000},
    {"PSP_MPI_LOST_PEER_ABORT", "10",
     "MPI: seconds after a connection to a peer broke (not an orderly close) until this process "
     "aborts the job, naming the connection, if the launcher has not ended it by then (a lost "
     "gateway, a cut link); 0: at once",
     PSCOM_ENV_UINT, &MPIDI_PSCOM_lost_peer_abort_s, 0, 0},
    {"PSP_MPI_CUDA_PIPELINE_MIN", "2M",
     "MPI, PSP_CUDA=1: a contiguous send from device memory of at least this many bytes goes in "
     "chunks, so that copying it to host memory and moving it overlap (inf: never)",
     PSCOM_ENV_SIZE, &MPIDI_PSCOM_pipe_min, 0, 0},
    {"PSP_MPI_CUDA_PIPELINE_CHUNK", "1M",
     "MPI, PSP_CUDA=1: the chunk size of those sends (at least 4k)", PSCOM_ENV_SIZE,
     &MPIDI_PSCOM_pipe_chunk, 0, 0},
    {"PSP_NAM_SERVER", "",
     "PSNAM: host:port of the psnamd that nam windows use when their info has no psnam_server",
     PSCOM_ENV_STR, &nam_server_cfg, 0, 0},
    {"PSP_NAM_KEY", "",
     "PSNAM: the key file that proves ownership of nam regions to psnamd (default "
     "~/.psnam.key, created with mode 0600 at the first use)",
     PSCOM_ENV_STR, &nam_key_cfg, 0, 0},
    {"PSP_NAM_TIMEOUT", "60",
     "PSNAM: seconds a nam window waits for psnamd to answer a request before its operations "
     "fail (a lock waits as long as it takes)",
     PSCOM_ENV_UINT, &nam_timeout_cfg, 0, 0},
    {"PSP_NAM_CHUNK", "1M",
     "PSNAM: largest piece of a nam window's put, get or accumulate sent to psnamd at a time "
     "(at most 4M; pieces pipeline through the daemon)",
     PSCOM_ENV_SIZE, &nam_chunk_cfg, 0, 0},
    {"PSP_PSNAM_DIR", "/dev/shm",
     "PSNAM: directory of the shm manifestation's segment files (psnam.NAME.RANK); a tmpfs",
     PSCOM_ENV_STR, &psnam_dir_cfg, 0, 0},
    {NULL, NULL, NULL, PSCOM_ENV_INT, NULL, 0, 0},
};

/* Processes of this job on this node. MPICH's local_size is what MPICH pretends for its
   debugging modes (MPIR_CVAR_NOLOCAL=1: 1; MPIR_CVAR_NUM_CLIQUES=n: 1/n of it), so the
   launcher's count wins when it says more: 8 ranks on 2 cores with NOLOCAL that never yield
   take MPICH's sendflood past its time limit. */
static int node_processes(void)
{
    int n = MPIR_Process.local_size;
    const char *env = getenv("MPI_LOCALNRANKS"); /* set by hydra for every process */
    if (env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*env && !*end && v > n && v < (1L << 24))
            n = (int)v;
    }
    return n;
}

static int cpus_allowed(pid_t pid)
{
    cpu_set_t set;
    return sched_getaffinity(pid, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

/* The CPUs of this job on this node (0: unknown). A launcher that binds each rank to its own
   CPUs (mpiexec -bind-to core, srun --cpu-bind) keeps the job's CPUs itself: so the larger of
   our own mask and our parent's (hydra's proxy, slurmstepd), not ours alone, which would call
   every bound job oversubscribed. */
static int job_cpus(void)
{
    int own = cpus_allowed(0), launcher = cpus_allowed(getppid());
    return own > launcher ? own : launcher;
}

/* SCHED_BATCH (the calling thread, and the threads it starts later): the kernel does not let
   a woken process preempt the running one. On a crowded node the ranks that sleep in a wait
   (PSP_MPI_COLL_BLOCK) were woken by every message and took the CPU from the ranks that
   forward. 4 interleaved rounds, 8 ranks on 2 CPUs, us (SCHED_OTHER -> SCHED_BATCH; Open MPI):
   Bcast 8 B over tcp 54-81 -> 45-56 (25-39), of 4 ranks 24-35 -> 18-20 (15-27); Barrier over
   shm 35-44 -> 34-39 (27-37); Allreduce and Alltoall 8 B, Bcast 64 KiB, tcp Barrier and
   Allreduce 64 KiB level. A policy the user chose (chrt) stays. */
static void use_sched_batch(int asked)
{
    struct sched_param sp = {0};
    if (sched_getscheduler(0) != SCHED_OTHER)
        return;
    if (sched_setscheduler(0, SCHED_BATCH, &sp) != 0 && asked)
        fprintf(stderr, "psmpi: PSP_MPI_SCHED_BATCH=1: SCHED_BATCH refused (%s); runs on as is\n",
                strerror(errno));
}

/* PSP_MPI_NAP=-2: from this many ranks per CPU. Collectives of 8 B, ranks on 2 CPUs, yield ->
   nap after 16 idle polls: 32 ranks Barrier 292 -> 414-529 us (worse), 64 ranks 1.3-1.9 ->
   1.4 ms, 128 ranks 9.2-11.0 -> 2.9-3.4 ms, 256 ranks 29 -> 9.4 ms; Alltoall 256 ranks 37-43
   -> 16-20 ms. With 8 ranks every nap added to the latency (Barrier 23 -> 26-140 us). */
#define NAP_RANKS_PER_CPU 32
#define NAP_AFTER_POLLS   16

void MPIDI_PSCOM_nap(void)
{
    /* 1 ns: the kernel's timer slack decides; longer would only keep a rank away whose
       message may have come meanwhile */
    struct timespec ts = {0, 1};
    nanosleep(&ts, NULL);
}

/* Idle polls on a crowded node yield, and after PSP_MPI_NAP polls or PSP_MPI_NAP_AFTER_US nap:
   a rank that waits long is not the one everybody waits for, and yielding keeps it on the run
   queue ahead of those that have work. 8 senders waiting for a late receiver over tcp
   (test/mpi/flood.c "later first", 9 ranks on 2 CPUs, a round trip per message): 60-67 s
   yielding, 8 s napping after 1 ms; 8-32 rank collectives level. */
void MPIDI_PSCOM_idle_crowded(void)
{
    uint64_t now = MPIDI_PSCOM_now_ns();
    unsigned n = MPIDI_PSCOM_global.idle_polls;
    if (n == MPIDI_PSCOM_IDLE_POLLS)
        MPIDI_PSCOM_global.idle_since_ns = now;
    MPIDI_PSCOM_global.napping =
        (MPIDI_PSCOM_global.nap_polls >= 0 && n >= (unsigned)MPIDI_PSCOM_global.nap_polls) ||
        (MPIDI_PSCOM_global.nap_after_ns &&
         now - MPIDI_PSCOM_global.idle_since_ns >= MPIDI_PSCOM_global.nap_after_ns);
}

/* Polls that find nothing while no peer is known to share our CPU: a short wait is spent
   spinning (a message is seen at once), a long one yields, which costs one system call per
   poll when nobody else wants the CPU and hands it over when somebody does. The clock is read
   every MPIDI_PSCOM_IDLE_POLLS idle polls only (at each one, 3 % of an 8-byte message-rate
   run went to clock_gettime: the waits for the next window); a tcp poll is a system call, so
   that every 64 polls delayed the first yield to 60-120 us. 4 ranks on 4 simulated nodes of
   2 CPUs, tcp, 8 B Allreduce: 4.1-6.0 ms spinning, 86-90 us yielding after 20 us, 36-43 us
   yielding at once (which would cost every short wait its system calls). */
void MPIDI_PSCOM_idle_long(void)
{
    uint64_t now = MPIDI_PSCOM_now_ns();
    if (MPIDI_PSCOM_global.idle_polls == MPIDI_PSCOM_IDLE_POLLS) {
        MPIDI_PSCOM_global.idle_since_ns = now;
    } else if (now - MPIDI_PSCOM_global.idle_since_ns >= MPIDI_PSCOM_global.late_yield_ns) {
        MPIDI_PSCOM_global.late_yielding = 1;
        sched_yield();
    }
}

int MPIDI_PSCOM_init_local(int *tag_bits)
{
    int mpi_errno = MPI_SUCCESS;
    pscom_err_t rc;
    char name[PSCOM_NAME_MAX];

    int multiple = MPIR_ThreadInfo.thread_provided == MPI_THREAD_MULTIPLE;
    /* MPICH serialises netmod calls with its global lock; the pscom lock also covers
     * pscom calls that may come from other threads in MPI_THREAD_MULTIPLE programs */
    if (multiple)
        rc = pscom_init_thread(PSCOM_VERSION);
    else
        rc = pscom_init(PSCOM_VERSION);
    MPIR_ERR_CHKANDJUMP1(rc != PSCOM_SUCCESS, mpi_errno, MPI_ERR_OTHER, "**pscom_init",
                         "**pscom_init %s", pscom_err_str(rc));

    pscom_env_register("mpi", env_rows);
    MPIDI_PSCOM_global.cuda = pscom_is_cuda_enabled(); /* pscom_gpu.h */
    int cpus = job_cpus(), nprocs = node_processes();
    int over = cpus > 0 && nprocs > cpus;
    pscom_set_oversubscribed(over);   /* before any connection: shm's protocol choice */
    pscom_set_node_processes(nprocs); /* and its ring size */
    MPIDI_PSCOM_global.yield_idle = sched_yield_cfg < 0 ? over : sched_yield_cfg;
    /* not by default under MPI_THREAD_MULTIPLE: threads that hand MPICH's global lock to each
       other would wait a time slice for each handover (test/mpi/threads.c, 8 ranks on 2 CPUs:
       0.8-1.5 s as SCHED_OTHER, 20-49 s as SCHED_BATCH) */
    if (sched_batch_cfg < 0 ? over && !multiple : sched_batch_cfg)
        use_sched_batch(sched_batch_cfg > 0);
    MPIDI_PSCOM_global.late_yield_ns =
        sched_yield_cfg < 0 && !over ? (uint64_t)yield_after_us_cfg * 1000 : 0;
    /* a sleeping rank would hold MPICH's global lock, which other threads may need. Over shm
       a wakeup costs more than the polls: 4 ranks on 2 CPUs, 8-byte Bcast, 4 interleaved
       rounds, 0.72-0.95 us sleeping after 64, 0.54-0.70 after 256 (Open MPI 0.53-0.72); 8 ranks
       level; over tcp 256 was slower (38-48 -> 65-82 us) */
    MPIDI_PSCOM_global.coll_block_polls = multiple               ? -1
                                          : coll_block_cfg == -2 ? (over ? 64 : -1)
                                                                 : coll_block_cfg;
    MPIDI_PSCOM_global.coll_block_polls_shm = multiple               ? -1
                                              : coll_block_cfg == -2 ? (over ? 256 : -1)
                                                                     : coll_block_cfg;
    MPIDI_PSCOM_global.bcast_tree_max = bcast_tree_max_cfg;
    MPIDI_PSCOM_global.coll_shm = coll_shm_cfg;
    char shm_prio[16];
    MPIDI_PSCOM_global.shm_on =
        pscom_env_get("PSP_SHM", shm_prio, sizeof(shm_prio)) == 0 && strcmp(shm_prio, "0") != 0;
    MPIDI_PSCOM_global.nap_polls =
        multiple        ? -1
        : nap_cfg == -2 ? (cpus > 0 && nprocs >= NAP_RANKS_PER_CPU * cpus ? NAP_AFTER_POLLS : -1)
                        : nap_cfg;
    MPIDI_PSCOM_global.nap_after_ns = multiple ? 0 : (uint64_t)nap_after_us_cfg * 1000;
    mpi_errno = MPIDI_PSCOM_msa_init(); /* PSP_MSA_*: a bad value fails MPI_Init */
    MPIR_ERR_CHECK(mpi_errno);

    pscom_socket_t *socket = pscom_open_socket(0, 0);
    MPIR_ERR_CHKANDJUMP1(socket == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_socket",
                         "**pscom_socket %s", "pscom_open_socket");
    socket->ops.default_recv = MPIDI_PSCOM_default_recv;
    socket->ops.con_error = MPIDI_PSCOM_con_error;
    snprintf(name, sizeof(name), "r%07d", MPIR_Process.rank);
    pscom_socket_set_name(socket, name);
    /* only who was given our endpoint string (this job, through PMI; a job given one of its
       port names) connects: a process of another job is refused in the handshake */
    pscom_socket_seal(socket);
    rc = pscom_listen(socket, PSCOM_ANYPORT);
    MPIR_ERR_CHKANDJUMP1(rc != PSCOM_SUCCESS, mpi_errno, MPI_ERR_OTHER, "**pscom_socket",
                         "**pscom_socket %s", pscom_err_str(rc));
    const char *ep = pscom_socket_get_ep_str(socket);
    MPIR_ERR_CHKANDJUMP1(ep == NULL || strlen(ep) >= sizeof(MPIDI_PSCOM_global.ep_str), mpi_errno,
                         MPI_ERR_OTHER, "**pscom_ep", "**pscom_ep %s", ep ? ep : "(none)");
    strcpy(MPIDI_PSCOM_global.ep_str, ep);
    MPIDI_PSCOM_global.socket = socket;
    MPIDI_PSCOM_global.finalizing = 0; /* a session after an earlier finalize */
    MPIDI_PSCOM_tm_init();             /* before any connection */

    /* the whole 31-bit MPI tag travels in the xheader */
    *tag_bits = MPIR_TAG_BITS_DEFAULT;

fn_fail:
    return mpi_errno;
}

/* PSP_DIRECT_CONNECT=1: each pair once, started by the lower rank (no crossing handshakes);
   then wait until every connection, also those the higher ranks start, is up. */
static int connect_world(void)
{
    int mpi_errno = MPI_SUCCESS;
    int me = MPIR_Process.rank, n = MPIR_Process.size;
    for (int i = 0; i < n; i++) {
        int r = (me + i) % n; /* ring order spreads the handshakes over the listeners */
        if (r >= me)
            pscom_con_connect_now(MPIDI_PSCOM_AV(&MPIDIU_get_av(0, r)).con);
    }
    for (int r = 0; r < n; r++) {
        pscom_connection_t *con = MPIDI_PSCOM_AV(&MPIDIU_get_av(0, r)).con;
        while (!pscom_con_settled(con))
            pscom_progress(100);
        MPIR_ERR_CHKANDJUMP2(con->state != PSCOM_CON_STATE_RW, mpi_errno, MPI_ERR_OTHER,
                             "**pscom_connect", "**pscom_connect %s %s",
                             MPIDI_PSCOM_AV(&MPIDIU_get_av(0, r)).ep,
                             "PSP_DIRECT_CONNECT: the connection failed");
    }
fn_fail:
    return mpi_errno;
}

int MPIDI_PSCOM_init_world(void)
{
    int mpi_errno = MPI_SUCCESS;
    char key[32];
    char *val = NULL;
    int val_max = MPIR_pmi_max_val_size();

    val = MPL_malloc(val_max, MPL_MEM_ADDRESS);
    MPIR_ERR_CHKANDJUMP(val == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    /* our business card: the endpoint plus the MSA ids (pscom_msa.c) */
    MPIDI_PSCOM_msa_card(val, val_max, MPIDI_PSCOM_global.ep_str);
    snprintf(key, sizeof(key), EP_KEY_FMT, MPIR_Process.rank);
    mpi_errno = MPIR_pmi_kvs_put(key, val);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIR_pmi_barrier();
    MPIR_ERR_CHECK(mpi_errno);

    for (int r = 0; r < MPIR_Process.size; r++) {
        if (r == MPIR_Process.rank) {
            MPIDI_PSCOM_msa_card(val, val_max, MPIDI_PSCOM_global.ep_str);
        } else {
            snprintf(key, sizeof(key), EP_KEY_FMT, r);
            mpi_errno = MPIR_pmi_kvs_get(r, key, val, val_max);
            MPIR_ERR_CHECK(mpi_errno);
        }
        int module = MPIDI_PSCOM_msa_parse_card(val); /* leaves the endpoint in val */
        /* self too: a loopback connection keeps self-sends in pscom's matching order */
        mpi_errno = MPIDI_PSCOM_connect_av(&MPIDIU_get_av(0, r), val);
        MPIR_ERR_CHECK(mpi_errno);
        MPIDI_PSCOM_AV(&MPIDIU_get_av(0, r)).msa_module = module;
    }
    MPIDI_PSCOM_msa_world_done();
    MPIDI_PSCOM_global.world_done = 1;
    if (direct_connect_cfg) {
        mpi_errno = connect_world();
        MPIR_ERR_CHECK(mpi_errno);
    }

fn_exit:
    MPL_free(val);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

int MPIDI_PSCOM_post_init(void)
{
    return MPI_SUCCESS;
}

/* MPI_Finalize's barrier through the launcher, with pscom progressing meanwhile: a rank that is
   done must go on serving its peers until all are, since a transport may hold a peer's last
   messages until both sides progress (UCX queues what a late receiver had no room for, and its
   rendezvous and tcp flushes wait for the receiver's answer). A PMI barrier blocks in a socket
   read, so it runs in a thread of its own while this one progresses. */
typedef struct {
    int rc;
    atomic_int done;
} pmi_barrier_t;

static void *pmi_barrier_thread(void *arg)
{
    pmi_barrier_t *b = arg;
    b->rc = MPIR_pmi_barrier();
    atomic_store(&b->done, 1);
    return NULL;
}

static int barrier_progressing(void)
{
    pmi_barrier_t b = {.rc = MPI_SUCCESS};
    pthread_t t;
    atomic_init(&b.done, 0);
    if (pthread_create(&t, NULL, pmi_barrier_thread, &b) != 0)
        return MPIR_pmi_barrier(); /* no thread to be had: block as MPICH does */
    while (!atomic_load(&b.done)) {
        /* sleeps in pscom's wait, but at most 5 ms: UCX does not wake a sender when the peer
           makes room in its shared memory queue */
        pscom_progress(5);
        if (MPIDI_PSCOM_global.done_head)
            MPIDI_PSCOM_drain();
    }
    pthread_join(t, NULL);
    return b.rc;
}

int MPIDI_PSCOM_mpi_finalize_hook(void)
{
    int mpi_errno = MPI_SUCCESS;

    /* finish what completed but was not processed yet (e.g. last ssend acks) */
    pscom_progress(0);
    MPIDI_PSCOM_drain();
    MPIDI_PSCOM_tm_finalize();
    MPIDI_PSCOM_msa_finalize(); /* PSP_DEBUG_STATS: inter-module collective traffic */
    MPIDI_PSCOM_coll_small_finalize();

    /* comm_world is gone already: synchronise through PMI, so nobody closes a connection
     * a peer still sends on, then let pscom flush and close everything */
    mpi_errno = barrier_progressing();
    MPIDI_PSCOM_global.finalizing = 1;
    if (MPIDI_PSCOM_global.n_held)
        MPIDI_PSCOM_release_held(); /* all of them now */
    MPIDI_PSCOM_preq_cache_drop();
    for (int i = 0; i < MPIDIU_get_n_avts(); i++) {
        MPIDI_av_table_t *t = MPIDIU_get_av_table(i);
        if (i == 0 && !MPIDI_PSCOM_global.world_done)
            continue; /* sessions without MPI_COMM_WORLD: ch4 never asked us to fill it */
        for (int j = 0; t && j < t->size; j++) {
            if (i == 0) /* the dynamic tables' strings: MPIDI_PSCOM_dyn_avts_finalize */
                MPL_free(MPIDI_PSCOM_AV(&t->table[j]).ep);
            MPIDI_PSCOM_AV(&t->table[j]).ep = NULL;
            MPIDI_PSCOM_AV(&t->table[j]).con = NULL; /* closed with the socket */
        }
    }
    MPIDI_PSCOM_dyn_avts_finalize();
    pscom_close_socket(MPIDI_PSCOM_global.socket);
    MPIDI_PSCOM_global.socket = NULL;
    MPL_free(MPIDI_PSCOM_global.closed);
    MPIDI_PSCOM_global.closed = NULL;
    MPIDI_PSCOM_global.n_closed = MPIDI_PSCOM_global.max_closed = 0;
    return mpi_errno;
}

/* Only used with info mpich_buf_type=network: nothing special about pscom memory. */
void *MPIDI_PSCOM_mpi_alloc_mem(MPI_Aint size, MPIR_Info *info_ptr)
{
    return MPIDIG_mpi_alloc_mem(size, info_ptr);
}

int MPIDI_PSCOM_mpi_free_mem(void *ptr)
{
    return MPIDIG_mpi_free_mem(ptr);
}
