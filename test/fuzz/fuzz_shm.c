/*
 * fuzz_shm: the shm transport's ring reader (plugins/shm/shm.c: shm_read and the poller, the
 * doorbell's end-of-peer path) with the harness as the peer process. Each run makes a ring
 * pair in a SysV arena as a connecting peer would (shm_arena_new_pair), offers it to the shm
 * plugin (con_accept: the plugin claims and checks it), starts the connection on a socketpair
 * doorbell, and then writes the fuzz input into the ring the plugin reads: slots with their
 * sequence number and length as the input says, wrong ones included. What the plugin reads
 * goes on to core's wire parser. At the end the harness's doorbell end closes (the peer died).
 *
 * Input: a geometry byte (slots 2-5, slot size 256/320/512/8320 bytes), then records
 *   u8 ctl   bit 0: publish with a wrong sequence number (ctl >> 4 ahead)
 *            bit 1: a progress round after it
 *            bit 2: write the peer's "consumed" count of the plugin's own ring (next 4 bytes)
 *            bit 3: ring the doorbell
 *   u16 len  the slot's length field; that many bytes follow (at most what the slot holds)
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "fuzz_pscom.h"
#include "shm_arena.h"
#include "shm_offer.h"

static pscom_sock_t *sock;
static const pscom_plugin_t *shm;

typedef struct ring_writer {
    shm_ring_t *ring;
    uint32_t nslots, slot_size, head, wseq;
} ring_writer_t;

static int ring_full(ring_writer_t *w)
{
    return w->wseq - atomic_load(&w->ring->consumed) >= w->nslots;
}

/* what the plugin wrote to its ring: the highest sequence number of its slots */
static uint32_t written(shm_ring_t *ring, uint32_t nslots, uint32_t slot_size)
{
    uint32_t max = 0;
    for (uint32_t i = 0; i < nslots; i++) {
        uint32_t s = atomic_load(&shm_ring_slot(ring, slot_size, i)->seq);
        max = s > max ? s : max;
    }
    return max;
}

static void setup(void)
{
    fz_pscom_init((const char *const[]){"PSP_SHM_CMA=0", "PSP_SHM_ARENA=1024", NULL});
    sock = get_sock(pscom_open_socket(0, 0));
    int idx = pscom_plugin_index("shm");
    shm = idx >= 0 ? pscom_plugin_get(idx) : NULL;
    if (!shm)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t slot_sizes[4] = {256, 320, 512, 8320};
    if (!sock)
        setup();
    fz_in_t in = {data, size};
    uint8_t geo = fz_u8(&in);
    uint32_t nslots = 2 + (geo & 3), slot_size = slot_sizes[(geo >> 2) & 3];

    /* the peer: a pair of rings, offered to the plugin */
    shm_arena_t *arena;
    shm_pair_ref_t ref;
    shm_pair_t *pair = shm_arena_new_pair(nslots, slot_size, 1024, &arena, &ref);
    if (!pair)
        abort();
    shm_offer_t o = {.magic = SHM_OFFER_MAGIC,
                     .version = SHM_OFFER_VERSION,
                     .shmid = ref.shmid,
                     .index = ref.index,
                     .npairs = ref.npairs,
                     .nslots = ref.nslots,
                     .slot_size = ref.slot_size,
                     .arena_cookie = ref.arena_cookie,
                     .pair_cookie = ref.pair_cookie};
    pscom_con_t *con = pscom_con_create(sock);
    con->peer_node = pscom_global.node_id; /* the handshake's HELLO said so */
    unsigned char reply[PSCOM_HS_BLOB_MAX];
    size_t rlen = 0;
    int sv[2];
    if (shm->con_accept(con, &o, sizeof(o), reply, &rlen) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    pscom_con_established(con, shm, sv[0]);

    /* ring 0 is the creator's (ours), the plugin reads it; it writes ring 1 */
    ring_writer_t w = {shm_pair_ring(pair, 0), nslots, slot_size, 0, 0};
    shm_ring_t *back = shm_pair_ring(pair, 1);
    uint32_t payload = slot_size - (uint32_t)sizeof(shm_slot_t);
    while (in.n && fz_con_up(con)) {
        uint8_t ctl = fz_u8(&in);
        uint32_t len = fz_u16(&in);
        if (ctl & 4)
            atomic_store(&back->consumed, fz_u32(&in));
        else
            atomic_store(&back->consumed, written(back, nslots, slot_size)); /* all read */
        for (int r = 0; r < 4 && ring_full(&w) && fz_con_up(con); r++)
            fz_progress(1);
        if (ring_full(&w))
            break; /* the plugin stopped reading (a wrong sequence number) */
        size_t n = len < payload ? len : payload;
        const uint8_t *p = fz_take(&in, &n);
        shm_slot_t *slot = shm_ring_slot(w.ring, slot_size, w.head);
        memcpy(slot->data, p, n);
        slot->len = len;
        atomic_store(&slot->seq, ctl & 1 ? w.wseq + 2 + (ctl >> 4) : w.wseq + 1);
        w.wseq++;
        if (++w.head == nslots)
            w.head = 0;
        if (ctl & 8)
            (void)!write(sv[1], "", 1);
        if (ctl & 2)
            fz_progress(1);
    }
    for (int r = 0; r < 4 && fz_con_up(con); r++)
        fz_progress(1);
    close(sv[1]); /* the peer is gone: the doorbell reports it */
    /* with writes pending into a full ring the transport keeps polling and never blocks, and
       the reactor looks at idle fds (the doorbell) only every 256th round and at most every
       PSP_FD_POLL_US: rounds enough for that */
    for (int r = 0; r < 4096 && fz_con_up(con); r++)
        fz_progress(1);
    if (con->pub.state == PSCOM_CON_STATE_RW)
        abort(); /* the plugin missed its peer's end */
    pscom_close_connection(&con->pub);
    shm_arena_put(arena);
    return 0;
}

/* ---- seeds ---- */

static size_t rec(uint8_t *p, uint8_t ctl, const void *msg, size_t len)
{
    p[0] = ctl;
    p[1] = (uint8_t)len;
    p[2] = (uint8_t)(len >> 8);
    memcpy(p + 3, msg, len);
    return 3 + len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    uint8_t buf[4096], m[1024], d[600];
    memset(d, 'd', sizeof(d));
    size_t n = 0, l;
    /* 4 slots of 256 bytes: small messages one per slot */
    buf[n++] = 2;
    l = fz_wire_msg(m, "xh", 2, "data", 4);
    n += rec(buf + n, 0, m, l);
    l = fz_wire_msg(m, NULL, 0, NULL, 0);
    n += rec(buf + n, 2, m, l);
    l = fz_wire_msg(m, "xheader8", 8, d, 100);
    n += rec(buf + n, 8, m, l);
    fz_seed("small", buf, n);
    /* a message larger than a slot: in pieces, as shm_write cuts it */
    n = 0;
    buf[n++] = 1;
    l = fz_wire_msg(m, "xh", 2, d, sizeof(d));
    for (size_t off = 0; off < l; off += 248)
        n += rec(buf + n, 2, m + off, l - off < 248 ? l - off : 248);
    fz_seed("pieces", buf, n);
    /* a corrupt length, then a wrong sequence number */
    n = 0;
    buf[n++] = 0;
    l = fz_wire_msg(m, "x", 1, "y", 1);
    n += rec(buf + n, 0, m, l);
    buf[n - l - 2] = 0xff, buf[n - l - 1] = 0x7f; /* len 0x7fff */
    fz_seed("bad-len", buf, n);
    n = 0;
    buf[n++] = 0;
    n += rec(buf + n, 0x11, m, l);
    n += rec(buf + n, 0, m, l);
    fz_seed("bad-seq", buf, n);
    exit(0);
}
