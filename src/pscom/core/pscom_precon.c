/*
 * The handshake on a fresh TCP connection ("precon"). Every frame is versioned and
 * length-checked; anything else on the listening port is closed with one log line.
 *
 *   connector                          acceptor
 *   HELLO(identity, nc)      ->
 *                            <-        CHALLENGE(na, HMAC(key, A nc na)) | REJECT(reason)
 *   PROOF(HMAC(key, C na nc), own key) ->
 *                            <-        HELLO_ACK(identity) | REJECT(reason)
 *   ARCH_REQ(plugin, offer)  ->                                  \  once per plugin,
 *                            <-        ARCH_OK(reply) | ARCH_NEXT | best first
 *   ARCH_DONE | ARCH_NEXT    ->                                  /
 *
 * key: the listening socket's (the "#..." of its endpoint string; zeros for a connector whose
 * endpoint string has none). Each side proves it knows the key for the other's fresh nonce
 * (nc, na: 16 random bytes), so the key never crosses the wire and a recorded handshake does
 * not replay. A sealed socket (pscom_socket_seal) refuses a connector whose proof is wrong
 * before anything is bound to a connection; a connector whose endpoint string had a key
 * refuses an acceptor that does not prove it. The connector's PROOF carries its own socket's
 * key, which the acceptor puts into the endpoint string of the connection (the same as the
 * connector's own, as any process of the job has it).
 *
 * Two peers that connect to each other at once: the connection started by the peer whose
 * listen address sorts lower wins; the other side drops its own attempt (REJECT DUP) and
 * waits for the winner's.
 *
 * A HELLO may ask for a service (a plugin's name, pscom_socket_set_service): the handshake then
 * moves to the socket that serves it in this process (pscom_socket_serve), or is refused. A
 * handshake may also run over a stream a relaying plugin gives (con_relay, pscom_relay_accept)
 * instead of a TCP connection to the peer's listener; it then negotiates only that plugin.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "pscom_priv.h"

#define FRAME_MAGIC      0x5053434du /* "PSCM" */
#define PAYLOAD_MAX      (PSCOM_HS_BLOB_MAX + 32)
#define REJECT_DUP       1
#define REJECT_BADVER    2
#define REJECT_NOSERVICE 3
#define REJECT_AUTH      4
#define NONCE_LEN        16

enum frame_type {
    F_HELLO = 1,
    F_HELLO_ACK,
    F_REJECT,
    F_ARCH_REQ,
    F_ARCH_OK,
    F_ARCH_NEXT,
    F_ARCH_DONE,
    F_FAIL,
    F_CHALLENGE,
    F_PROOF,
};

typedef struct frame_hdr {
    uint32_t magic;
    uint8_t version;
    uint8_t type;
    uint16_t len;
} frame_hdr_t;

typedef struct hello {
    char addr[PSCOM_EP_STR_MAX]; /* sender's listen "ip:port" ("" if not listening) */
    char name[PSCOM_NAME_MAX];
    char host[64];
    int32_t pid;
    uint32_t reserved;
    uint64_t node_id;
    char service[16];         /* "" or the service of the peer's process this connection is for */
    uint8_t nonce[NONCE_LEN]; /* the connector's (in a HELLO_ACK: zeros) */
} hello_t;

typedef struct challenge {
    uint8_t nonce[NONCE_LEN];
    uint8_t proof[PSCOM_SHA256_LEN]; /* HMAC(key, "A" nc na) */
} challenge_t;

typedef struct proof {
    uint8_t proof[PSCOM_SHA256_LEN]; /* HMAC(key, "C" na nc) */
    uint8_t key[16];                 /* the connector's own socket's key */
} proof_t;

typedef struct arch_req {
    char name[16];
    unsigned char blob[];
} arch_req_t;

enum pre_state {
    C_CONNECTING,
    C_WAIT_CHALLENGE,
    C_WAIT_HELLO_ACK,
    C_WAIT_ARCH,
    A_WAIT_HELLO,
    A_WAIT_PROOF,
    A_WAIT_ARCH_REQ,
    A_WAIT_ARCH_DONE,
};

struct precon {
    list_head_t link; /* first member: sock->precons holds unbound incoming precons */
    pscom_sock_t *sock;
    pscom_con_t *con;
    int fd;
    pscom_ufd_t ufd;
    enum pre_state state;
    int plugin_idx;               /* connector: plugin being negotiated */
    const pscom_plugin_t *plugin; /* plugin with state to release on failure */
    const pscom_plugin_t *relay;  /* the handshake runs over this plugin's relay (con_relay) */
    uint64_t deadline_ms;
    char peer_str[64];
    uint8_t key[16];       /* acceptor: the listening socket's */
    uint8_t nc[NONCE_LEN]; /* the connector's nonce */
    uint8_t na[NONCE_LEN]; /* the acceptor's nonce */
    hello_t hello;         /* acceptor: the connector's HELLO, until its proof came */
    pscom_sock_t *serving; /* acceptor: the socket of the HELLO's service, or NULL */
    size_t ilen;
    unsigned char ibuf[sizeof(frame_hdr_t) + PAYLOAD_MAX];
};

static uint64_t now_ms(void)
{
    return pscom_now_ns() / 1000000;
}

static void precon_handler(pscom_ufd_t *ufd, uint32_t revents);

static precon_t *precon_new(pscom_sock_t *sock, int fd)
{
    precon_t *pre = calloc(1, sizeof(*pre));
    if (!pre)
        return NULL;
    list_init(&pre->link);
    pre->sock = sock;
    pre->fd = fd;
    pre->deadline_ms = now_ms() + pscom_config.connect_timeout_ms;
    pre->ufd = (pscom_ufd_t){.fd = fd, .events = EPOLLIN, .handler = precon_handler, .priv = pre};
    pscom_ufd_add(&pre->ufd);
    /* Polled every round while the handshake lasts, not with the idle fds (every 256th round):
       with many ranks per CPU a process makes a round or two per time slice, and each step of
       a handshake waited 256 slices (Alltoall of 128 ranks on 2 CPUs: 24 s to connect). */
    pscom_reactor_busy_fd(1);
    return pre;
}

void pscom_precon_destroy(precon_t *pre)
{
    if (pre->plugin && pre->con && pre->plugin->con_abort)
        pre->plugin->con_abort(pre->con);
    list_del(&pre->link);
    pscom_reactor_busy_fd(-1);
    if (pre->fd >= 0) {
        pscom_ufd_del(&pre->ufd);
        close(pre->fd);
    }
    if (pre->con && pre->con->precon == pre)
        pre->con->precon = NULL;
    free(pre);
}

static int send_frame(precon_t *pre, int type, const void *payload, size_t len)
{
    unsigned char buf[sizeof(frame_hdr_t) + PAYLOAD_MAX];
    frame_hdr_t h = {.magic = FRAME_MAGIC,
                     .version = PSCOM_WIRE_VERSION,
                     .type = (uint8_t)type,
                     .len = (uint16_t)len};
    memcpy(buf, &h, sizeof(h));
    if (len)
        memcpy(buf + sizeof(h), payload, len);
    size_t off = 0, total = sizeof(h) + len;
    /* frames are small: the socket buffer takes them; wait briefly if it does not */
    while (off < total) {
        ssize_t n = send(pre->fd, buf + off, total - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        return -1;
    }
    return 0;
}

/* HMAC(key, role n1 n2): role "A" proves the acceptor, "C" the connector */
static void auth_proof(const uint8_t key[16], char role, const uint8_t *n1, const uint8_t *n2,
                       uint8_t out[PSCOM_SHA256_LEN])
{
    uint8_t msg[1 + 2 * NONCE_LEN];
    msg[0] = (uint8_t)role;
    memcpy(msg + 1, n1, NONCE_LEN);
    memcpy(msg + 1 + NONCE_LEN, n2, NONCE_LEN);
    pscom_hmac_sha256(key, 16, msg, sizeof(msg), out);
}

static int key_is_zero(const uint8_t key[16])
{
    static const uint8_t zero[16];
    return !memcmp(key, zero, 16);
}

static void fill_hello(pscom_sock_t *sock, hello_t *h)
{
    memset(h, 0, sizeof(*h));
    snprintf(h->addr, sizeof(h->addr), "%s", sock->addr);
    snprintf(h->name, sizeof(h->name), "%s", sock->pub.local_name);
    snprintf(h->host, sizeof(h->host), "%s", pscom_global.hostname);
    h->pid = pscom_global.pid;
    h->node_id = pscom_global.node_id;
    snprintf(h->service, sizeof(h->service), "%s", sock->service);
}

/* May plugin p carry this handshake's connection? A relayed handshake takes only its relay,
   and a relaying plugin only the handshakes it relays. */
static int plugin_fits(const precon_t *pre, const pscom_plugin_t *p)
{
    if (pre->relay || p->con_relay)
        return p == pre->relay;
    return 1;
}

/* key: the peer's socket's (from its PROOF), NULL where we connected to its endpoint string */
static void take_identity(pscom_con_t *con, const hello_t *h, const uint8_t *key)
{
    if (h->addr[0])
        snprintf(con->peer_addr, sizeof(con->peer_addr), "%.*s", (int)sizeof(h->addr) - 1, h->addr);
    if (!con->peer_ep[0] && h->addr[0]) {
        char hex[33];
        pscom_key_hex(key ? key : con->peer_key, hex);
        snprintf(con->peer_ep, sizeof(con->peer_ep), "%s@%s#%s", con->peer_addr, h->name, hex);
        if (key)
            memcpy(con->peer_key, key, sizeof(con->peer_key));
    }
    snprintf(con->peer_name, sizeof(con->peer_name), "%.*s", (int)sizeof(h->name) - 1, h->name);
    snprintf(con->peer_host, sizeof(con->peer_host), "%.*s", (int)sizeof(h->host) - 1, h->host);
    con->peer_pid = h->pid;
    con->peer_node = h->node_id;
    pscom_con_set_name(con);
}

/* Garbage or a broken handshake on an incoming connection: one line, close, carry on. */
static void drop_incoming(precon_t *pre, const char *why)
{
    if (why) {
        pscom_stats.garbage_cons++;
        pscom_log(1, "closed incoming connection from %s on %s: %s", pre->peer_str, pre->sock->ep,
                  why);
    }
    pscom_con_t *con = pre->con;
    pscom_sock_t *sock = pre->sock;
    pscom_precon_destroy(pre);
    if (con && con->pub.state == PSCOM_CON_STATE_ACCEPTING && con->accepted_new)
        pscom_con_free(con);
    else if (con && con->pub.state == PSCOM_CON_STATE_ACCEPTING)
        pscom_con_fail(con, PSCOM_OP_CONNECT, PSCOM_ERR_PROTOCOL);
    if (con)
        pscom_con_start_deferred(sock); /* a connect that waited for this one */
}

/* A frame could not be sent on an incoming connection: the connecting side gave up meanwhile
   (lost a simultaneous connect, timed out, exited), which it may; anything else is logged */
static void drop_unsendable(precon_t *pre)
{
    if (errno == EPIPE || errno == ECONNRESET) {
        PSCOM_LOG(2, "incoming connection from %s on %s: the peer is gone (%s)", pre->peer_str,
                  pre->sock->ep, strerror(errno));
        drop_incoming(pre, NULL);
        return;
    }
    drop_incoming(pre, strerror(errno));
}

/* Our outgoing attempt failed. */
static void fail_outgoing(precon_t *pre, pscom_err_t err, const char *why)
{
    pscom_con_t *con = pre->con;
    pscom_log(1, "connect to %s failed: %s", con->log_name, why);
    pscom_precon_destroy(pre);
    pscom_con_fail(con, PSCOM_OP_CONNECT, err);
}

static void established(precon_t *pre, const pscom_plugin_t *plugin)
{
    pscom_con_t *con = pre->con;
    int fd = pre->fd;
    pscom_ufd_del(&pre->ufd);
    pre->fd = -1;
    pre->plugin = NULL;
    pscom_precon_destroy(pre);
    pscom_con_established(con, plugin, fd);
}

/* ---- connector side ---- */

static void offer_next_plugin(precon_t *pre)
{
    pscom_con_t *con = pre->con;
    for (; pre->plugin_idx < pscom_plugin_count(); pre->plugin_idx++) {
        const pscom_plugin_t *p = pscom_plugin_get(pre->plugin_idx);
        if (!p || (con->sock->tag_plugin && p != con->sock->tag_plugin) || !plugin_fits(pre, p))
            continue; /* tag matching in a transport: it carries every connection */
        unsigned char buf[PAYLOAD_MAX];
        arch_req_t *req = (arch_req_t *)buf;
        size_t len = 0;
        memset(req->name, 0, sizeof(req->name));
        snprintf(req->name, sizeof(req->name), "%s", p->name);
        if (p->con_offer(con, req->blob, &len) != 0) {
            PSCOM_LOG(2, "%s: transport %s not usable for this peer", con->log_name, p->name);
            continue;
        }
        pre->plugin = p;
        if (send_frame(pre, F_ARCH_REQ, buf, sizeof(*req) + len) != 0) {
            fail_outgoing(pre, PSCOM_ERR_IOERROR, strerror(errno));
            return;
        }
        pre->state = C_WAIT_ARCH;
        return;
    }
    send_frame(pre, F_FAIL, NULL, 0);
    fail_outgoing(pre, PSCOM_ERR_CONNECTION_REFUSED, "no transport usable by both sides");
}

static void connector_frame(precon_t *pre, int type, const unsigned char *payload, size_t len)
{
    pscom_con_t *con = pre->con;
    switch (pre->state) {
    case C_WAIT_CHALLENGE:
        if (type == F_CHALLENGE && len == sizeof(challenge_t)) {
            challenge_t c;
            memcpy(&c, payload, sizeof(c));
            uint8_t want[PSCOM_SHA256_LEN];
            auth_proof(con->peer_key, 'A', pre->nc, c.nonce, want);
            if (!key_is_zero(con->peer_key) && !pscom_auth_equal(want, c.proof, sizeof(want))) {
                fail_outgoing(pre, PSCOM_ERR_PROTOCOL,
                              "the peer does not prove the key of its endpoint string (not the "
                              "process we were told of)");
                return;
            }
            proof_t pf;
            auth_proof(con->peer_key, 'C', c.nonce, pre->nc, pf.proof);
            memcpy(pf.key, con->sock->key, sizeof(pf.key));
            if (send_frame(pre, F_PROOF, &pf, sizeof(pf)) != 0) {
                fail_outgoing(pre, PSCOM_ERR_IOERROR, strerror(errno));
                return;
            }
            pre->state = C_WAIT_HELLO_ACK;
            return;
        }
        /* a refusal, handled as one in reply to the proof */
        __attribute__((fallthrough));
    case C_WAIT_HELLO_ACK:
        if (type == F_REJECT && len >= 1 && payload[0] == REJECT_DUP) {
            /* the peer's own attempt wins the tie-break; its connection will bind to con */
            PSCOM_LOG(4, "%s: simultaneous connect, waiting for the peer's connection",
                      con->log_name);
            pscom_precon_destroy(pre);
            con->pub.state = PSCOM_CON_STATE_ACCEPTING;
            con->connect_start_ms = now_ms(); /* the wait is bounded: see check_timeouts */
            return;
        }
        if (type != F_HELLO_ACK || len != sizeof(hello_t)) {
            int noservice = type == F_REJECT && len >= 1 && payload[0] == REJECT_NOSERVICE;
            int auth = type == F_REJECT && len >= 1 && payload[0] == REJECT_AUTH;
            fail_outgoing(pre, PSCOM_ERR_PROTOCOL,
                          noservice ? "the peer's process offers no such service"
                          : auth    ? "the peer refused our proof of its key (its endpoint "
                                      "string, with the key, was not given to us)"
                          : type == F_REJECT ? "rejected by the peer"
                                             : "bad handshake reply");
            return;
        }
        take_identity(con, (const hello_t *)payload, NULL);
        pre->plugin_idx = 0;
        offer_next_plugin(pre);
        return;
    case C_WAIT_ARCH:
        if (type == F_ARCH_OK) {
            const pscom_plugin_t *p = pre->plugin;
            if (p->con_finish(con, payload, len) == 0) {
                if (send_frame(pre, F_ARCH_DONE, NULL, 0) != 0) {
                    fail_outgoing(pre, PSCOM_ERR_IOERROR, strerror(errno));
                    return;
                }
                pre->plugin = NULL; /* the plugin's state now belongs to the connection */
                established(pre, p);
                return;
            }
            PSCOM_LOG(2, "%s: transport %s failed to complete; trying the next", con->log_name,
                      p->name);
            send_frame(pre, F_ARCH_NEXT, NULL, 0);
        } else if (type == F_ARCH_NEXT) {
            PSCOM_LOG(2, "%s: peer declined transport %s; trying the next", con->log_name,
                      pre->plugin->name);
        } else {
            fail_outgoing(pre, PSCOM_ERR_PROTOCOL, "unexpected handshake frame");
            return;
        }
        if (pre->plugin->con_abort)
            pre->plugin->con_abort(con);
        pre->plugin = NULL;
        pre->plugin_idx++;
        offer_next_plugin(pre);
        return;
    default:
        fail_outgoing(pre, PSCOM_ERR_PROTOCOL, "unexpected handshake frame");
    }
}

/* A relaying plugin's stream to the peer at addr, or -1 (con_relay) */
static int relay_fd(pscom_con_t *con, const char *addr, int unreachable,
                    const pscom_plugin_t **relay)
{
    const pscom_plugin_t *p;
    for (int i = 0; (p = pscom_plugin_relay(i)); i++) {
        int fd = p->con_relay(con, addr, unreachable);
        if (fd >= 0) {
            *relay = p;
            return fd;
        }
    }
    return -1;
}

static int is_unreachable(int err)
{
    return err == ENETUNREACH || err == EHOSTUNREACH;
}

precon_t *pscom_precon_connect(pscom_con_t *con)
{
    char addr[PSCOM_EP_STR_MAX];
    const pscom_plugin_t *relay = NULL;
    snprintf(addr, sizeof(addr), "%s", con->peer_addr);
    /* never relay to ourselves: that is loop's */
    int fd = pscom_sock_by_addr(addr) ? -1 : relay_fd(con, addr, 0, &relay);
    if (fd < 0) {
        fd = socket_fd_connect(addr);
        if (fd < 0 && is_unreachable(errno)) {
            int e = errno;
            fd = relay_fd(con, addr, 1, &relay);
            if (fd < 0)
                errno = e;
        }
    }
    if (fd < 0) {
        pscom_log(1, "connect to %s failed: %s", con->log_name, strerror(errno));
        return NULL;
    }
    precon_t *pre = precon_new(con->sock, fd);
    if (!pre) {
        close(fd);
        return NULL;
    }
    pre->con = con;
    pre->relay = relay;
    pre->state = C_CONNECTING;
    snprintf(pre->peer_str, sizeof(pre->peer_str), "%s", addr);
    pscom_ufd_mod(&pre->ufd, EPOLLOUT | EPOLLIN);
    con->precon = pre;
    return pre;
}

/* The direct connection found the peer's network unreachable: a relay may still reach it */
static int retry_via_relay(precon_t *pre)
{
    const pscom_plugin_t *relay = NULL;
    int fd = relay_fd(pre->con, pre->peer_str, 1, &relay);
    if (fd < 0)
        return -1;
    pscom_ufd_del(&pre->ufd);
    close(pre->fd);
    pre->fd = fd;
    pre->relay = relay;
    pre->ufd.fd = fd;
    pre->ufd.events = EPOLLOUT | EPOLLIN;
    pscom_ufd_add(&pre->ufd);
    return 0;
}

static void connector_connected(precon_t *pre)
{
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(pre->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err && !pre->relay && is_unreachable(err) && retry_via_relay(pre) == 0)
        return;
    if (err) {
        fail_outgoing(pre, err == ECONNREFUSED ? PSCOM_ERR_CONNECTION_REFUSED : PSCOM_ERR_IOERROR,
                      strerror(err));
        return;
    }
    pscom_ufd_mod(&pre->ufd, EPOLLIN);
    hello_t h;
    fill_hello(pre->sock, &h);
    if (pscom_random_bytes(pre->nc, NONCE_LEN) != 0) {
        fail_outgoing(pre, PSCOM_ERR_IOERROR, "no random bytes for the handshake");
        return;
    }
    memcpy(h.nonce, pre->nc, NONCE_LEN);
    if (send_frame(pre, F_HELLO, &h, sizeof(h)) != 0) {
        fail_outgoing(pre, PSCOM_ERR_IOERROR, strerror(errno));
        return;
    }
    pre->state = C_WAIT_CHALLENGE;
}

/* ---- acceptor side ---- */

precon_t *pscom_precon_accept(pscom_sock_t *sock, int fd)
{
    precon_t *pre = precon_new(sock, fd);
    if (!pre) {
        close(fd);
        return NULL;
    }
    pre->state = A_WAIT_HELLO;
    memcpy(pre->key, sock->key, sizeof(pre->key));
    socket_fd_peer_str(fd, pre->peer_str, sizeof(pre->peer_str));
    list_add_tail(&pre->link, &sock->precons);
    return pre;
}

int pscom_relay_accept(const pscom_plugin_t *plugin, const char *listen_addr, int fd,
                       const char *from)
{
    pscom_sock_t *sock = pscom_sock_by_addr(listen_addr);
    if (!sock)
        return -1;
    precon_t *pre = pscom_precon_accept(sock, fd);
    if (pre) {
        pre->relay = plugin;
        snprintf(pre->peer_str, sizeof(pre->peer_str), "%s", from);
    }
    return 0;
}

/* Which connection object does an incoming HELLO belong to? NULL: reject as duplicate. */
static pscom_con_t *bind_incoming(precon_t *pre, const hello_t *h)
{
    pscom_sock_t *sock = pre->sock;
    int self = h->addr[0] && !strcmp(h->addr, sock->addr);
    pscom_con_t *con = (h->addr[0] && !self) ? pscom_con_find_by_addr(sock, h->addr) : NULL;
    if (con) {
        switch (con->pub.state) {
        case PSCOM_CON_STATE_ONDEMAND:
        case PSCOM_CON_STATE_NO_RW:
            return con;
        case PSCOM_CON_STATE_ACCEPTING:
            /* we lost an earlier tie-break and wait for exactly this connection; if another
               attempt of the peer is already being accepted, this one is a second connection */
            if (con->precon)
                break;
            return con;
        case PSCOM_CON_STATE_CONNECTING:
            if (strcmp(h->addr, sock->addr) < 0) {
                /* the peer's attempt wins: drop ours, take theirs */
                if (con->precon)
                    pscom_precon_destroy(con->precon);
                return con;
            }
            return NULL;
        default:
            /* already connected: the peer connects a second connection object to us (its
               own pscom_connect after we connected to it). Rejecting it would leave the peer
               waiting for a connection that never comes. */
            break;
        }
    }
    con = pscom_con_create(sock);
    if (con)
        con->accepted_new = 1;
    return con;
}

static void acceptor_frame(precon_t *pre, int type, const unsigned char *payload, size_t len)
{
    switch (pre->state) {
    case A_WAIT_HELLO: {
        if (type != F_HELLO || len != sizeof(hello_t)) {
            drop_incoming(pre, "not a pscom handshake");
            return;
        }
        hello_t h;
        memcpy(&h, payload, sizeof(h));
        h.addr[sizeof(h.addr) - 1] = h.name[sizeof(h.name) - 1] = h.host[sizeof(h.host) - 1] = 0;
        h.service[sizeof(h.service) - 1] = 0;
        if (h.service[0]) {
            /* for a plugin of this process, not for the socket that listens here */
            pscom_sock_t *serving = pscom_sock_serving(h.service);
            if (!serving || pre->relay) {
                unsigned char r = REJECT_NOSERVICE;
                char why[64];
                send_frame(pre, F_REJECT, &r, 1);
                snprintf(why, sizeof(why), "asks for service '%s', not offered here", h.service);
                drop_incoming(pre, why);
                return;
            }
            list_del(&pre->link);
            pre->sock = serving;
            list_add_tail(&pre->link, &serving->precons);
        }
        pre->hello = h;
        memcpy(pre->nc, h.nonce, NONCE_LEN);
        challenge_t c;
        if (pscom_random_bytes(pre->na, NONCE_LEN) != 0) {
            drop_incoming(pre, "no random bytes for the handshake");
            return;
        }
        memcpy(c.nonce, pre->na, NONCE_LEN);
        auth_proof(pre->key, 'A', pre->nc, pre->na, c.proof);
        if (send_frame(pre, F_CHALLENGE, &c, sizeof(c)) != 0) {
            drop_unsendable(pre);
            return;
        }
        pre->state = A_WAIT_PROOF;
        return;
    }
    case A_WAIT_PROOF: {
        if (type != F_PROOF || len != sizeof(proof_t)) {
            drop_incoming(pre, "not a pscom handshake (no proof)");
            return;
        }
        proof_t pf;
        memcpy(&pf, payload, sizeof(pf));
        uint8_t want[PSCOM_SHA256_LEN];
        auth_proof(pre->key, 'C', pre->na, pre->nc, want);
        if (!pscom_auth_equal(want, pf.proof, sizeof(want)) && pre->sock->sealed) {
            unsigned char r = REJECT_AUTH;
            send_frame(pre, F_REJECT, &r, 1);
            pscom_stats.garbage_cons++;
            PSCOM_LOG(2,
                      "refused a connection from %s (%.*s pid %d) on %s: no proof of this "
                      "socket's key (another job, or a client not given our endpoint)",
                      pre->peer_str, (int)sizeof(pre->hello.host) - 1, pre->hello.host,
                      (int)pre->hello.pid, pre->sock->ep);
            drop_incoming(pre, NULL);
            return;
        }
        hello_t h = pre->hello;
        pscom_con_t *con = bind_incoming(pre, &h);
        if (!con) {
            unsigned char r = REJECT_DUP;
            send_frame(pre, F_REJECT, &r, 1);
            drop_incoming(pre, NULL);
            return;
        }
        list_del(&pre->link);
        pre->con = con;
        con->precon = pre; /* marks the connection as being accepted; bounds it in time */
        con->pub.state = PSCOM_CON_STATE_ACCEPTING;
        take_identity(con, &h, pf.key);
        hello_t mine;
        fill_hello(pre->sock, &mine);
        if (send_frame(pre, F_HELLO_ACK, &mine, sizeof(mine)) != 0) {
            drop_unsendable(pre);
            return;
        }
        pre->state = A_WAIT_ARCH_REQ;
        return;
    }
    case A_WAIT_ARCH_REQ: {
        if (type == F_FAIL) {
            drop_incoming(pre, "peer found no common transport");
            return;
        }
        if (type != F_ARCH_REQ || len < sizeof(arch_req_t)) {
            drop_incoming(pre, "bad transport request");
            return;
        }
        arch_req_t *req = (arch_req_t *)payload;
        req->name[sizeof(req->name) - 1] = '\0';
        int idx = pscom_plugin_index(req->name);
        const pscom_plugin_t *p = idx >= 0 ? pscom_plugin_get(idx) : NULL;
        const pscom_plugin_t *only = pre->con->sock->tag_plugin;
        if ((only && p != only) || (p && !plugin_fits(pre, p)))
            p = NULL; /* tag matching in a transport: it carries every connection */
        unsigned char reply[PAYLOAD_MAX];
        size_t rlen = 0;
        if (p && p->con_accept(pre->con, req->blob, len - sizeof(*req), reply, &rlen) == 0) {
            pre->plugin = p;
            if (send_frame(pre, F_ARCH_OK, reply, rlen) != 0) {
                drop_unsendable(pre);
                return;
            }
            pre->state = A_WAIT_ARCH_DONE;
        } else {
            PSCOM_LOG(2, "%s: declined transport %s", pre->con->log_name, req->name);
            if (send_frame(pre, F_ARCH_NEXT, NULL, 0) != 0)
                drop_unsendable(pre);
        }
        return;
    }
    case A_WAIT_ARCH_DONE:
        if (type == F_ARCH_DONE) {
            const pscom_plugin_t *p = pre->plugin;
            pre->plugin = NULL;
            established(pre, p);
            return;
        }
        if (type == F_ARCH_NEXT) {
            if (pre->plugin->con_abort)
                pre->plugin->con_abort(pre->con);
            pre->plugin = NULL;
            pre->state = A_WAIT_ARCH_REQ;
            return;
        }
        drop_incoming(pre, "unexpected handshake frame");
        return;
    default:
        drop_incoming(pre, "unexpected handshake frame");
    }
}

/* ---- frame reading: exactly one frame at a time, never past the handshake ---- */

static void precon_handler(pscom_ufd_t *ufd, uint32_t revents)
{
    precon_t *pre = ufd->priv;
    int outgoing = pre->state <= C_WAIT_ARCH;
    if (pre->state == C_CONNECTING) {
        if (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            connector_connected(pre);
        return;
    }
    for (;;) {
        size_t need = sizeof(frame_hdr_t);
        frame_hdr_t h;
        if (pre->ilen >= need) {
            memcpy(&h, pre->ibuf, sizeof(h));
            if (h.magic != FRAME_MAGIC || h.version != PSCOM_WIRE_VERSION || h.len > PAYLOAD_MAX) {
                const char *why = h.magic != FRAME_MAGIC            ? "not a pscom peer (bad magic)"
                                  : h.version != PSCOM_WIRE_VERSION ? "pscom wire version mismatch"
                                                                    : "oversized handshake frame";
                if (outgoing)
                    fail_outgoing(pre, PSCOM_ERR_PROTOCOL, why);
                else
                    drop_incoming(pre, why);
                return;
            }
            need += h.len;
        }
        ssize_t n = recv(pre->fd, pre->ibuf + pre->ilen, need - pre->ilen, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            const char *why = n == 0 ? "closed during the handshake" : strerror(errno);
            if (outgoing) {
                fail_outgoing(pre, PSCOM_ERR_IOERROR, why);
            } else if (pre->ilen) {
                drop_incoming(pre, why); /* a frame cut short: broken or not pscom */
            } else {
                /* between frames: the connecting side gave up or exited (e.g. while this
                   job shuts down); nothing the user needs to see */
                if (pre->state != A_WAIT_HELLO)
                    PSCOM_LOG(2, "incoming connection from %s on %s: %s", pre->peer_str,
                              pre->sock->ep, why);
                drop_incoming(pre, NULL);
            }
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        pre->ilen += (size_t)n;
        if (pre->ilen < sizeof(frame_hdr_t))
            continue;
        memcpy(&h, pre->ibuf, sizeof(h));
        if (pre->ilen < sizeof(frame_hdr_t) + h.len || h.magic != FRAME_MAGIC)
            continue; /* validate or read the rest on the next pass */
        pre->ilen = 0;
        pre->deadline_ms = now_ms() + pscom_config.connect_timeout_ms;
        if (outgoing)
            connector_frame(pre, h.type, pre->ibuf + sizeof(h), h.len);
        else
            acceptor_frame(pre, h.type, pre->ibuf + sizeof(h), h.len);
        return; /* pre may be gone; further frames come with the next event */
    }
}

void pscom_precon_dump(const precon_t *pre, FILE *out)
{
    static const char *const what[] = {
        [C_CONNECTING] = "waits for the TCP connection to the peer's listener",
        [C_WAIT_CHALLENGE] = "waits for the peer to answer our hello (the peer has not progressed)",
        [C_WAIT_HELLO_ACK] = "waits for the peer to take our proof",
        [C_WAIT_ARCH] = "waits for the peer's answer to a transport offer",
        [A_WAIT_HELLO] = "waits for the peer's hello",
        [A_WAIT_PROOF] = "waits for the peer's proof of our key",
        [A_WAIT_ARCH_REQ] = "waits for the peer's transport offer",
        [A_WAIT_ARCH_DONE] = "waits for the peer to complete the transport",
    };
    uint64_t now = now_ms();
    fprintf(out, "    handshake %s%s%s; gives up in %lld ms\n",
            pre->state < sizeof(what) / sizeof(what[0]) && what[pre->state] ? what[pre->state]
                                                                            : "in progress",
            pre->plugin ? ", transport " : "", pre->plugin ? pre->plugin->name : "",
            (long long)pre->deadline_ms - (long long)now);
}

void pscom_precon_check_timeouts(void)
{
    uint64_t now = now_ms();
    list_head_t *ps, *pc, *tmp;
    list_for_each(ps, &pscom_global.sockets)
    {
        pscom_sock_t *sock = list_entry(ps, pscom_sock_t, next);
        list_for_each_safe(pc, tmp, &sock->precons)
        {
            precon_t *pre = (precon_t *)pc;
            if (now > pre->deadline_ms)
                drop_incoming(pre, pre->ilen ? "handshake timed out" : NULL);
        }
        list_for_each(pc, &sock->cons)
        {
            pscom_con_t *con = list_entry(pc, pscom_con_t, next);
            precon_t *pre = con->precon;
            if (pre && now > pre->deadline_ms) {
                if (pre->state <= C_WAIT_ARCH)
                    fail_outgoing(pre, PSCOM_ERR_IOERROR, "handshake timed out");
                else
                    drop_incoming(pre, "handshake timed out");
                return; /* the list may have changed */
            }
            if (!pre && con->pub.state == PSCOM_CON_STATE_ACCEPTING && con->connect_start_ms &&
                now > con->connect_start_ms + pscom_config.connect_timeout_ms) {
                pscom_log(1, "connect to %s failed: the peer's own connection never came",
                          con->log_name);
                pscom_con_fail(con, PSCOM_OP_CONNECT, PSCOM_ERR_CONNECTION_REFUSED);
                return;
            }
        }
    }
}
