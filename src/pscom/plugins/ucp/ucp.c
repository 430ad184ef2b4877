/*
 * ucp transport: pscom over UCX's UCP API, built as libpscom4ucp.so and loaded by core at run
 * time. One UCP worker per process; each side of a connection has an endpoint to the other's
 * worker (addresses swapped in the handshake blobs).
 *
 * Data (ucp_stream.c): the pscom byte stream of a connection travels as UCX active messages,
 * each with {the receiver's connection id, a sequence number}: the id finds the connection
 * whatever endpoint UCX delivered it on, the sequence number restores the stream order.
 * UCX callbacks only record what happened; the poller feeds core after ucp_worker_progress.
 * Before blocking, the poller arms the worker; its event fd is in pscom's epoll set.
 *
 * Life: the handshake's TCP socket stays open as peer-death detector (like shm). An orderly
 * close writes a goodbye there (the number of messages sent: ucp_bye_t), closes the endpoint
 * with a flush, then the socket; the peer ends the connection when it has fed that many. A
 * socket that closes without a goodbye and all messages before it within PSP_UCP_HUP_MS, or an
 * endpoint error (UCX's peer failure detection), fails the connection.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "ucp_priv.h"

struct ucp_cfg ucp_cfg;
size_t ucp_max_header;

static const pscom_env_row_t plugin_env[] = {
    {"PSP_UCP_SMALL", "8k",
     "Messages (header, xheader and data) of at most this many bytes are copied into one UCX "
     "active message and complete at once; of larger ones the data is handed to UCX in place "
     "(its own zero-copy rendezvous where the transport can) and completes when UCX is done.",
     PSCOM_ENV_SIZE, &ucp_cfg.small, 0, 0},
    {"PSP_UCP_EAGER", "512k",
     "Messages of at most this many bytes go by UCX's eager protocol even where UCX would pick "
     "its rendezvous (over tcp it switches at a few KiB, and each active message rendezvous "
     "costs a round trip: a window of 16-256 KiB messages streams 2-6x faster eager). Larger "
     "ones: UCX decides. Shared memory endpoints are always eager.",
     PSCOM_ENV_SIZE, &ucp_cfg.eager, 0, 0},
    {"PSP_UCP_DIRECT", "1",
     "Fetch large (UCX rendezvous) payloads straight into the matched receive buffer (0: into "
     "a temporary buffer, then copy).",
     PSCOM_ENV_BOOL, &ucp_cfg.direct, 0, 0},
    {"PSP_UCP_CMA", "32k",
     "On endpoints where UCX cannot detect a dead peer (its shared memory transports, which "
     "then must not use UCX's rendezvous), messages of at least this size go by pscom's "
     "rendezvous: the receiver copies them once with process_vm_readv (0: always eager).",
     PSCOM_ENV_SIZE, &ucp_cfg.cma, 0, 0},
    {"PSP_UCP_QUEUE", "1M",
     "Bytes of copied messages that UCX may hold queued for one connection while the peer's "
     "receive queue (or socket) is full; further sends wait in pscom's queue, and a blocking "
     "send blocks, until UCX has room again. Bounds a sender's memory when its receiver runs "
     "late (copies of small messages count 8 KiB each).",
     PSCOM_ENV_SIZE, &ucp_cfg.queue, 1, 0},
    {"PSP_UCP_PEER_FAILURE", "0",
     "1: endpoints in UCX's peer failure mode (UCX's keepalive also notices a peer node that "
     "vanished; UCX then sends over a single lane). 0: a peer's exit is noticed by the "
     "handshake socket, and UCX may spread large messages over several devices.",
     PSCOM_ENV_BOOL, &ucp_cfg.peer_failure, 0, 0},
    {"PSP_UCP_TAG", "1",
     "Where ucp is the only transport (PSP_SHM=0 PSP_TCP=0 ...), MPI's point-to-point messages "
     "are matched by UCX's tag matching, as UCX's own MPI netmods do, instead of pscom's (0: "
     "pscom matches them; they go as UCX active messages). Must be the same in all processes.",
     PSCOM_ENV_BOOL, &ucp_cfg.tag, 0, 0},
    {"PSP_UCP_HUP_MS", "300",
     "Milliseconds to wait, after a peer's handshake socket closed, for its goodbye and the "
     "messages before it, before the connection counts as lost.",
     PSCOM_ENV_UINT, &ucp_cfg.hup_ms, 0, 600000},
    {NULL, NULL, NULL, 0, NULL, 0, 0},
};

/* ---- handshake blob ---- */

#define BLOB_MAGIC 0x33504355u /* "UCP3": tag matching flag */
#define BLOB_TAG   0x1u        /* ucp_blob_t.flags: the sender's socket matches tags in UCX */

typedef struct ucp_blob {
    uint32_t magic;
    uint32_t flags;
    uint32_t addr_len; /* bytes of worker address that follow */
    uint32_t unused;
    uint64_t id;    /* the sender's connection id: goes into every message to it */
    uint64_t check; /* hash of the above (check 0) and the address */
    unsigned char addr[];
} ucp_blob_t;

/* ---- state ---- */

static list_head_t active = LIST_HEAD_INIT(active);   /* started connections, by uc_t.link */
static list_head_t closing = LIST_HEAD_INIT(closing); /* shut down, not yet freed, by link */
static list_head_t work = LIST_HEAD_INIT(work);       /* to serve in the next poll, by work_link */
static int n_hup;
static pscom_poller_t poller;
static pscom_ufd_t efd_ufd = {.fd = -1};
static int poller_on;

#define ID_MAX (1u << UCP_ID_BITS) /* connection ids: see ucp_id_find */
uc_t **ucp_ids;
uint32_t ucp_n_ids;
static uint32_t id_free, id_gen;

uint64_t ucp_now_ms(void)
{
    return pscom_now_ns() / 1000000;
}

static int id_add(uc_t *uc)
{
    uint32_t i = id_free;
    while (i < ucp_n_ids && ucp_ids[i])
        i++;
    if (i == ID_MAX) {
        PSCOM_LOG(1, "ucp: more than %u connections in this process", ID_MAX);
        return -1;
    }
    if (i == ucp_n_ids) {
        uint32_t n = ucp_n_ids ? 2 * ucp_n_ids : 64;
        uc_t **t = realloc(ucp_ids, n * sizeof(*t));
        if (!t)
            return -1;
        memset(t + ucp_n_ids, 0, (n - ucp_n_ids) * sizeof(*t));
        ucp_ids = t;
        ucp_n_ids = n;
    }
    if (++id_gen >= 1u << (32 - UCP_ID_BITS))
        id_gen = 1;
    ucp_ids[i] = uc;
    id_free = i + 1;
    uc->id = id_gen << UCP_ID_BITS | i;
    return 0;
}

static void id_del(uc_t *uc)
{
    uint32_t i = uc->id & (ID_MAX - 1);
    if (i < ucp_n_ids && ucp_ids[i] == uc) {
        ucp_ids[i] = NULL;
        if (i < id_free)
            id_free = i;
    }
}

void ucp_work_add(uc_t *uc)
{
    if (!list_linked(&uc->work_link))
        list_add_tail(&uc->work_link, &work);
}

void ucp_fail(uc_t *uc, pscom_op_t op, pscom_err_t err, const char *why)
{
    if (!uc->dead && uc->con)
        pscom_con_transport_failed(uc->con, op, err, why);
}

static void on_ep_error(void *user, const char *why)
{
    uc_t *uc = user;
    if (uc->dead || uc->ep_err)
        return;
    uc->ep_err = why;
    if (uc->started)
        ucp_work_add(uc);
}

/* Our goodbye after the last message: the number of messages sent. 0, or -1. */
static int send_bye(uc_t *uc)
{
    ucp_bye_t b = {.magic = BYE_MAGIC, .seq = uc->tx_seq};
    return send(uc->fd, &b, sizeof(b), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(b) ? 0 : -1;
}

static void con_write_start(pscom_con_t *con)
{
    uc_t *uc = pscom_con_transport_data(con);
    uc->busy++;
    ucp_write(uc);
    uc->busy--;
}

/* ---- progress ---- */

static __attribute__((noinline)) int do_work(void)
{
    int made = 0;
    /* this round's connections; those that get work meanwhile wait for the next poll (a send
       that found no room must not be retried before UCX has progressed) */
    list_head_t round = LIST_HEAD_INIT(round);
    if (list_empty(&work))
        return 0;
    list_splice_tail_init(&work, &round);
    while (!list_empty(&round)) {
        uc_t *uc = list_entry(round.next, uc_t, work_link);
        list_del(&uc->work_link);
        if (uc->dead)
            continue;
        uc->busy++;
        made |= ucp_service(uc);
        uc->busy--;
        if (uc->dead)
            ucp_reap(uc);
    }
    return made;
}

#define HUP_DRAIN_MAX 100000 /* UCX progress calls: a bound, should messages keep coming */

/* Handshake sockets that closed: the peer is gone if its goodbye and the messages before it
   are not all fed in time. With act, fail those that are due; else only tell whether one is
   due (1) or how long until the next (*wait_ms). */
static int check_hups(int act, int *wait_ms)
{
    uint64_t now = ucp_now_ms();
    list_head_t *l;
    list_for_each(l, &active)
    {
        uc_t *uc = list_entry(l, uc_t, link);
        if (!uc->hup_at || uc->bye)
            continue;
        uint64_t due = uc->hup_at + ucp_cfg.hup_ms;
        if (now < due) {
            if (wait_ms && (*wait_ms < 0 || (int)(due - now) < *wait_ms))
                *wait_ms = (int)(due - now);
            continue;
        }
        if (!act)
            return 1;
        if (!uc->hup_drained) {
            /* The deadline is the wall clock's: a process that was not scheduled for a while
               may have the messages already, behind others in UCX's queue (a poll takes a
               few of them). Take all that are there before judging, on the next round. */
            uc->hup_drained = 1;
            for (int i = 0; i < HUP_DRAIN_MAX && ux_progress(); i++)
                ;
            return 1;
        }
        char why[128];
        if (uc->bye_in)
            snprintf(why, sizeof(why),
                     "peer process exited; its goodbye came, %u of the messages before it did not",
                     uc->bye_seq - uc->rx_seq);
        else
            snprintf(why, sizeof(why), "peer process exited without a goodbye");
        uc->busy++;
        ucp_fail(uc, PSCOM_OP_READ, PSCOM_ERR_IOERROR, why);
        uc->busy--;
        ucp_reap(uc);
        return 1; /* the list changed; the others wait for the next round */
    }
    return 0;
}

static void reap_closing(void);

/* what a poll has to do besides UCX's progress, now and then: out of the poll's way */
static __attribute__((noinline)) int poll_rest(void)
{
    int made = 0;
    if (!list_empty(&work))
        made |= do_work();
    if (n_hup)
        made |= check_hups(1, NULL);
    if (!list_empty(&closing))
        reap_closing();
    return made;
}

static int poller_poll(pscom_poller_t *p)
{
    (void)p;
    int saved = ucp_direct_feed;
    ucp_direct_feed = 1;
    int made = ux_progress() != 0;
    ucp_direct_feed = saved;
    if (unlikely(!list_empty(&work) || n_hup || !list_empty(&closing)))
        made |= poll_rest();
    return made;
}

static int poller_prepare_block(pscom_poller_t *p)
{
    (void)p;
    if (!list_empty(&work))
        return 1;
    if (n_hup) {
        int wait_ms = -1;
        if (check_hups(0, &wait_ms))
            return 1;
        if (wait_ms >= 0)
            pscom_progress_block_hint(wait_ms + 1);
    }
    list_head_t *l;
    list_for_each(l, &closing)
    {
        uc_t *uc = list_entry(l, uc_t, link);
        if (uc->close_req && !uc->gone) {
            pscom_progress_block_hint(100); /* endpoints being flushed */
            break;
        }
    }
    return ux_arm();
}

static void efd_handler(pscom_ufd_t *ufd, uint32_t revents)
{
    (void)ufd;
    (void)revents; /* a wakeup: the poller progresses the worker */
}

/* The peer's goodbye (ucp_bye_t) came in whole: the connection ends once its messages are fed. */
static void bye_in(uc_t *uc)
{
    ucp_bye_t b;
    memcpy(&b, uc->bye_buf, sizeof(b));
    if (b.magic != BYE_MAGIC) {
        uc->ep_err = "malformed goodbye on the handshake socket";
    } else {
        uc->bye_in = 1;
        uc->bye_seq = b.seq;
    }
    if (uc->started)
        ucp_work_add(uc);
}

/* The handshake socket: the peer's goodbye, then its close (or its death) */
static void hup_handler(pscom_ufd_t *ufd, uint32_t revents)
{
    uc_t *uc = ufd->priv;
    (void)revents;
    for (;;) {
        unsigned char extra[64];
        int want_bye = uc->bye_len < sizeof(uc->bye_buf);
        ssize_t n = want_bye ? recv(ufd->fd, uc->bye_buf + uc->bye_len,
                                    sizeof(uc->bye_buf) - uc->bye_len, MSG_DONTWAIT)
                             : recv(ufd->fd, extra, sizeof(extra), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0)
            break;
        if (!want_bye)
            continue; /* nothing follows a goodbye; ignore */
        uc->bye_len += (unsigned)n;
        if (uc->bye_len == sizeof(uc->bye_buf))
            bye_in(uc);
    }
    pscom_ufd_del(&uc->ufd);
    uc->ufd_on = 0;
    uc->hup_at = ucp_now_ms();
    if (!uc->hup_at)
        uc->hup_at = 1;
    n_hup++;
}

/* ---- connection life ---- */

/* From the first endpoint on, UCX needs progress (also to tear down closed endpoints). */
static void poller_start(void)
{
    if (poller_on)
        return;
    poller = (pscom_poller_t){.poll = poller_poll, .prepare_block = poller_prepare_block};
    pscom_poller_add(&poller);
    efd_ufd = (pscom_ufd_t){.fd = ux_efd(), .events = EPOLLIN, .handler = efd_handler};
    if (pscom_ufd_add(&efd_ufd) != 0)
        PSCOM_LOG(1, "ucp: cannot watch the UCX wakeup fd: %s", strerror(errno));
    poller_on = 1;
}

static uc_t *uc_new(pscom_con_t *con)
{
    uc_t *uc = calloc(1, sizeof(*uc));
    if (!uc)
        return NULL;
    uc->con = con;
    uc->fd = -1;
    list_init(&uc->link);
    list_init(&uc->work_link);
    if (id_add(uc) != 0) {
        free(uc);
        return NULL;
    }
    poller_start();
    return uc;
}

/* Free uc once nothing refers to it any more. */
void ucp_reap(uc_t *uc)
{
    if (!uc->dead || uc->busy || uc->ops || list_linked(&uc->work_link))
        return;
    if (uc->close_req && !ux_close_done(uc->close_req))
        return;
    uc->close_req = NULL;
    list_del(&uc->link);
    if (uc->fd >= 0)
        close(uc->fd);
    free(uc);
}

static void reap_closing(void)
{
    list_head_t *l, *next;
    list_for_each_safe(l, next, &closing)
    {
        ucp_reap(list_entry(l, uc_t, link));
    }
}

/* Take uc out of service: goodbye and a flushing close if all is well, else a forced close. */
static void uc_shutdown(uc_t *uc)
{
    uc->dead = 1;
    uc->con = NULL;
    id_del(uc);
    list_del(&uc->link);
    list_del(&uc->work_link);
    if (uc->ufd_on) {
        pscom_ufd_del(&uc->ufd);
        uc->ufd_on = 0;
    }
    /* a peer that is gone gets no goodbye, and what is in flight to it is dropped */
    uc->gone = uc->ep_err || uc->hup_at;
    int force = uc->gone || uc->ops || !uc->started;
    if (uc->hup_at) {
        n_hup--;
        uc->hup_at = 0;
    }
    ucp_drop_all(uc);
    if (force && uc->fd >= 0) { /* no goodbye: the peer sees the close */
        close(uc->fd);
        uc->fd = -1;
    }
    if (uc->ep) {
        if (!force && send_bye(uc) != 0)
            force = 1;
        /* UCX refuses to force-close its shared memory endpoints */
        uc->close_req = ux_ep_close(uc->ep, force && !uc->eager);
        uc->ep = NULL;
        uc->close_at = ucp_now_ms();
        /* What is in flight must let go of user buffers now: a forced close cancels it; else
           it completes when the peer takes it, unless the peer is gone (then it never moves
           again: UCX keeps it until exit) */
        int wait = force && !(uc->eager && uc->gone);
        if (wait && ux_in_progress()) { /* closed from a callback: cannot progress here */
            PSCOM_LOG(3, "ucp: connection closed inside UCX progress; not waiting");
            wait = 0;
        }
        while ((uc->ops || uc->close_req) && wait && ucp_now_ms() < uc->close_at + 2000) {
            ux_progress();
            if (uc->close_req && ux_close_done(uc->close_req))
                uc->close_req = NULL;
        }
        if (wait && uc->ops)
            PSCOM_LOG(2, "ucp: %u operations still in flight after closing a connection", uc->ops);
    }
    list_add_tail(&uc->link, &closing);
    ucp_reap(uc);
}

static void con_close(pscom_con_t *con)
{
    uc_t *uc = pscom_con_transport_data(con);
    pscom_con_set_transport(con, NULL, NULL);
    pscom_con_set_tag_ep(con, NULL);
    if (uc)
        uc_shutdown(uc);
}

/* Core's rendezvous, only on eager-only endpoints to peers on this node (con_start) */
static int con_rndv_pull(pscom_con_t *con, void *dst, uint64_t remote, size_t len)
{
    uc_t *uc = pscom_con_transport_data(con);
    if (!uc || !uc->cma_ok)
        return -1;
    if (pscom_cma_read(pscom_con_peer_pid(con), dst, remote, len) == 0)
        return 0;
    if (errno == EPERM || errno == ENOSYS || errno == EACCES) {
        uc->cma_ok = 0;
        PSCOM_LOG(2, "single-copy from %s not permitted (%s); the sender pushes through UCX",
                  pscom_con_name(con), strerror(errno));
    }
    return -1; /* core asks the sender to push the data */
}

/* A closing connection's last messages have left once UCX holds no copies for it (the
   endpoint's close then flushes what UCX buffered) */
static int con_flushed(pscom_con_t *con)
{
    uc_t *uc = pscom_con_transport_data(con);
    return !uc || uc->dead || !uc->queued;
}

/* PSP_SIGQUIT: what the connection waits for (reads only: the process is stuck anyway) */
static void con_dump(pscom_con_t *con, FILE *out)
{
    uc_t *uc = pscom_con_transport_data(con);
    if (!uc)
        return;
    unsigned queued = 0, released = 0;
    for (rx_t *rx = uc->rx_head; rx; rx = rx->next)
        queued++;
    for (tx_t *tx = uc->tx_done; tx; tx = tx->next)
        released++;
    fprintf(out,
            "    ucp: id %#x, peer's %#x, %s endpoint; messages sent %u, fed to core %u, arrived "
            "out of order or not yet fed %u%s; UCX operations in flight on it %u, completed "
            "large sends not yet released %u\n",
            uc->id, uc->peer_id,
            uc->peer_mode ? "peer-failure-mode"
            : uc->eager   ? "shared memory (eager only)"
                          : "plain",
            uc->tx_seq, uc->rx_seq, queued,
            uc->rx_cur ? ", one rendezvous payload being fetched" : "", uc->ops, released);
    if (uc->queued || uc->tx_blocked)
        fprintf(out, "    ucp: copies queued in UCX %zu B%s\n", uc->queued,
                uc->tx_blocked ? ", sends wait for room (PSP_UCP_QUEUE)" : "");
    uint64_t now = ucp_now_ms();
    if (uc->full_since)
        fprintf(out,
                "    ucp: short sends find no room in UCX since %llu ms (the peer does not "
                "drain its receive queue)\n",
                (unsigned long long)(now - uc->full_since));
    if (uc->bye_in)
        fprintf(out, "    ucp: the peer said goodbye after %u messages\n", uc->bye_seq);
    if (uc->hup_at)
        fprintf(out, "    ucp: the peer's handshake socket closed %llu ms ago\n",
                (unsigned long long)(now - uc->hup_at));
    if (uc->ep_err)
        fprintf(out, "    ucp: endpoint error: %s\n", uc->ep_err);
}

static const pscom_con_ops_t con_ops = {
    .write_start = con_write_start,
    .write_user_now = ucp_write_user_now,
    .close = con_close,
    .rndv_pull = con_rndv_pull,
    .dump = con_dump,
    .flushed = con_flushed,
};

/* ---- handshake ---- */

/* FNV-1a over the blob with check = 0: UCX trusts worker addresses (a corrupt one trips its
   assertions), so a blob that was garbled on the way must not reach it */
static uint64_t blob_hash(const ucp_blob_t *b, const void *addr)
{
    ucp_blob_t h = *b;
    h.check = 0;
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof(h); i++)
        x = (x ^ ((const unsigned char *)&h)[i]) * 0x100000001b3ull;
    for (size_t i = 0; i < b->addr_len; i++)
        x = (x ^ ((const unsigned char *)addr)[i]) * 0x100000001b3ull;
    return x;
}

static size_t fill_blob(uc_t *uc, void *blob)
{
    size_t alen;
    const void *addr = ux_address(&alen);
    ucp_blob_t b = {.magic = BLOB_MAGIC,
                    .flags = pscom_con_tag_on(uc->con) ? BLOB_TAG : 0,
                    .addr_len = (uint32_t)alen,
                    .id = uc->id};
    b.check = blob_hash(&b, addr);
    memcpy(blob, &b, sizeof(b));
    memcpy((char *)blob + sizeof(b), addr, alen);
    return sizeof(b) + alen;
}

/* Check a peer's blob and make our endpoint to its worker. 0, or -1 (logged). */
static int uc_connect(uc_t *uc, pscom_con_t *con, const void *blob, size_t len)
{
    ucp_blob_t b;
    if (len < sizeof(b)) {
        PSCOM_LOG(2, "%s: ucp handshake blob too short (%zu bytes)", pscom_con_name(con), len);
        return -1;
    }
    memcpy(&b, blob, sizeof(b));
    if (b.magic != BLOB_MAGIC || b.addr_len == 0 || b.id > UINT32_MAX ||
        b.addr_len != len - sizeof(b) || b.check != blob_hash(&b, (const char *)blob + sizeof(b))) {
        PSCOM_LOG(2, "%s: malformed ucp handshake blob (%zu bytes)", pscom_con_name(con), len);
        return -1;
    }
    if (!(b.flags & BLOB_TAG) != !pscom_con_tag_on(con)) {
        pscom_log(1,
                  "%s: ucp: %s matches MPI messages in UCX and %s does not (PSP_UCP_TAG, or "
                  "other transports enabled, differ between the two)",
                  pscom_con_name(con), b.flags & BLOB_TAG ? "the peer" : "this process",
                  b.flags & BLOB_TAG ? "this process" : "the peer");
        return -1;
    }
    /* UCX parses the address without a length: give it zeros past the end, not our stack */
    unsigned char *addr = calloc(1, b.addr_len + 256);
    if (!addr)
        return -1;
    memcpy(addr, (const char *)blob + sizeof(b), b.addr_len);
    char why[256];
    uc->peer_id = (uint32_t)b.id;
    int shm;
    uc->ep = ux_ep_create(addr, uc, ucp_cfg.peer_failure, &uc->peer_mode, &shm, &uc->short_max, why,
                          sizeof(why));
    free(addr);
    if (!uc->ep) {
        PSCOM_LOG(2, "%s: ucp cannot reach the peer: %s", pscom_con_name(con), why);
        return -1;
    }
    /* Without peer failure detection UCX aborts the process when the peer dies during a
       single-copy (cma) rendezvous of its shared memory transports: send everything eager
       there */
    uc->eager = !uc->peer_mode && shm;
    PSCOM_LOG(4, "%s: ucp endpoint%s%s, short messages up to %zd bytes", pscom_con_name(con),
              uc->peer_mode ? " with UCX peer failure detection" : "",
              uc->eager ? ", shared memory without it: eager only" : "",
              uc->short_max == SIZE_MAX ? (ssize_t)-1 : (ssize_t)uc->short_max);
    ux_progress(); /* an unreachable peer may show at once */
    if (uc->ep_err) {
        PSCOM_LOG(2, "%s: ucp endpoint failed: %s", pscom_con_name(con), uc->ep_err);
        return -1;
    }
    return 0;
}

static int con_offer(pscom_con_t *con, void *blob, size_t *len)
{
    size_t alen;
    ux_address(&alen);
    if (sizeof(ucp_blob_t) + alen > PSCOM_HS_BLOB_MAX) {
        PSCOM_LOG(2, "%s: ucp worker address of %zu bytes does not fit the handshake (%d)",
                  pscom_con_name(con), alen, PSCOM_HS_BLOB_MAX);
        return -1;
    }
    uc_t *uc = uc_new(con);
    if (!uc)
        return -1;
    *len = fill_blob(uc, blob);
    pscom_con_set_transport(con, NULL, uc); /* pending until start or abort */
    return 0;
}

static int con_accept(pscom_con_t *con, const void *offer, size_t offer_len, void *blob,
                      size_t *len)
{
    *len = 0;
    size_t alen;
    ux_address(&alen);
    if (sizeof(ucp_blob_t) + alen > PSCOM_HS_BLOB_MAX)
        return -1;
    uc_t *uc = uc_new(con);
    if (!uc)
        return -1;
    if (uc_connect(uc, con, offer, offer_len) != 0) {
        uc_shutdown(uc);
        return -1;
    }
    *len = fill_blob(uc, blob);
    pscom_con_set_transport(con, NULL, uc);
    return 0;
}

static int con_finish(pscom_con_t *con, const void *reply, size_t reply_len)
{
    return uc_connect(pscom_con_transport_data(con), con, reply, reply_len);
}

static void con_abort(pscom_con_t *con)
{
    uc_t *uc = pscom_con_transport_data(con);
    pscom_con_set_transport(con, NULL, NULL);
    if (uc)
        uc_shutdown(uc);
}

static void con_start(pscom_con_t *con, int fd)
{
    uc_t *uc = pscom_con_transport_data(con);
    uc->fd = fd;
    uc->ufd = (pscom_ufd_t){.fd = fd, .events = EPOLLIN, .handler = hup_handler, .priv = uc};
    uc->ufd_on = pscom_ufd_add(&uc->ufd) == 0;
    uc->started = 1;
    list_add_tail(&uc->link, &active);
    pscom_con_set_transport(con, &con_ops, uc);
    pscom_con_set_tag_ep(con, uc->ep); /* tag matching in UCX: core sends there directly */
    /* UCX's own rendezvous is off here (see uc_connect): large messages go by core's */
    uc->cma_ok = uc->eager && ucp_cfg.cma && pscom_con_peer_same_node(con);
    if (uc->cma_ok)
        pscom_con_set_rendezvous(con, ucp_cfg.cma);
    if (uc->rx_head || uc->ep_err)
        ucp_work_add(uc); /* arrived before the handshake ended */
}

/* ---- plugin ---- */

static int plugin_init(void)
{
    char why[200];
    if (ux_init(ucp_on_recv, on_ep_error, ucp_cfg.tag, &ucp_max_header, why, sizeof(why)) != 0) {
        const char *tls = getenv("UCX_TLS");
        pscom_plugin_set_status("ucp", "UCX not usable: %s%s%s", why, tls ? ", UCX_TLS=" : "",
                                tls ? tls : "");
        return -1;
    }
    return 0;
}

/* How long an exiting process waits for its last messages to reach live peers. A flush over
   shared memory ends only once the peer has taken what did not fit its queue, and with many
   ranks per CPU a peer may not run for a second: 1 s let 128 ranks over UCX's shared memory on
   2 CPUs exit with messages undelivered, and their peers then reported them lost (half of the
   jobs). Such a peer is on this node, so its exit shows at once (peer_exited); one across the
   network may be unreachable without a sign, and is given the second as before. */
#define CLOSE_WAIT_MS     1000
#define CLOSE_WAIT_SHM_MS 10000

/* The peer closed its end of the handshake socket: it has exited, or is about to with its own
   closes done, and takes nothing more from us */
static int peer_exited(uc_t *uc)
{
    struct pollfd p = {.fd = uc->fd, .events = POLLRDHUP};
    return uc->fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

static void plugin_destroy(void)
{
    /* connections core left open (it closes its own before): drop them */
    while (!list_empty(&active)) {
        uc_t *uc = list_entry(active.next, uc_t, link);
        if (uc->con)
            pscom_con_set_transport(uc->con, NULL, NULL);
        uc_shutdown(uc);
    }
    /* let the endpoint closes (flushes of the last messages) finish; those to peers that are
       gone never will */
    uint64_t start = ucp_now_ms();
    for (int idle = 0;; idle = !ux_progress()) {
        reap_closing();
        uint64_t waited = ucp_now_ms() - start;
        int waiting = 0;
        list_head_t *l;
        list_for_each(l, &closing)
        {
            uc_t *uc = list_entry(l, uc_t, link);
            if (idle && !uc->gone && peer_exited(uc))
                uc->gone = 1;
            waiting |= !uc->gone && waited < (uc->eager ? CLOSE_WAIT_SHM_MS : CLOSE_WAIT_MS);
        }
        if (!waiting)
            break;
        if (idle) /* the peers we wait for may need this CPU to take our messages */
            sched_yield();
    }
    /* A shared memory endpoint whose close never finished (its peer exited first, so what was
       queued to it stays queued) makes ucp_worker_destroy abort: leave UCX's state to the
       process exit then, nothing of it outlives the process. Only then: with UCX left running
       at exit, LeakSanitizer's exit check crashes on UCX's threads (the ASan build's tests). */
    int abandon = 0;
    list_head_t *l;
    list_for_each(l, &closing)
    {
        uc_t *uc = list_entry(l, uc_t, link);
        abandon |= uc->eager && uc->close_req;
        if (uc->close_req) {
            ux_close_forget(uc->close_req);
            uc->close_req = NULL;
        }
    }
    if (poller_on) {
        pscom_poller_del(&poller);
        if (efd_ufd.fd >= 0)
            pscom_ufd_del(&efd_ufd);
        poller_on = 0;
    }
    if (abandon)
        PSCOM_LOG(2, "ucp: endpoint closes to exited peers unfinished; UCX left to the exit");
    ux_destroy(abandon); /* cancels what is left; its callbacks run now or never */
    ucp_bounce_drop();
    while (!list_empty(&closing)) {
        uc_t *uc = list_entry(closing.next, uc_t, link);
        list_del(&uc->link);
        list_del(&uc->work_link);
        if (uc->fd >= 0)
            close(uc->fd);
        free(uc);
    }
    free(ucp_ids);
    ucp_ids = NULL;
    ucp_n_ids = id_free = 0;
}

/* the priority is plugin.conf's (src/pscom/Makefile), which core reads without loading us */
#ifndef PSCOM_PLUGIN_PRIORITY
#error "PSCOM_PLUGIN_PRIORITY: built by src/pscom/Makefile from plugins/ucp/plugin.conf"
#endif

static const pscom_plugin_t pscom_plugin_ucp = {
    .name = "ucp",
    .api_version = PSCOM_PLUGIN_API_VERSION,
    .priority = PSCOM_PLUGIN_PRIORITY,
    .rendezvous = SIZE_MAX, /* UCX does its own */
    .env = plugin_env,
    .init = plugin_init,
    .destroy = plugin_destroy,
    .con_offer = con_offer,
    .con_accept = con_accept,
    .con_finish = con_finish,
    .con_abort = con_abort,
    .con_start = con_start,
    .tag = &ucp_tag_ops,
    .dump = ux_dump,
};
PSCOM_PLUGIN_DEFINE(pscom_plugin_ucp);
