/* gw_priv.h - the gw transport's state, shared by its files: gw.c (the plugin's interface to
   core, tunnels and their data path) and gw_carrier.c (connections to gateways: sending,
   authentication, receiving). Protocol: gw_proto.h. */
#ifndef GW_PRIV_H_INCLUDED
#define GW_PRIV_H_INCLUDED

#include "gw_proto.h"
#include "gw_route.h"
#include "pscom_plugin.h"

/* A message's data of at least this size travels in fragments of its own, sent straight from
   the sender's buffer and received straight into the matched receive buffer (no copy at
   either end); smaller messages are copied and gathered, several to a fragment. */
#define DIRECT_MIN    8192
#define FRAG_DATA_MAX (64u << 20)

typedef struct gw_cfg {
    const char *server, *key_path;
    size_t mtu;
    unsigned tokens;
} gw_cfg_t;
extern gw_cfg_t gw_cfg;

typedef struct carrier {
    list_head_t link;
    pscom_connection_t *con;
    char addr[GW_ADDR_MAX]; /* the gateway's "ip:port" */
    char name[GW_ADDR_MAX + 16];
    char role;     /* our end: 'C' we connected, 'A' psgwd connected to us */
    int authed;    /* the gateway proved the key */
    int named;     /* an accepted carrier's addr is the gateway's (from its first OPEN) */
    int torn_down; /* failed, and its tunnels ended (teardown_poll) */
    char reason[GW_REASON_MAX + GW_ADDR_MAX + 32];
    int failed;
    uint8_t nonce[GW_NONCE_LEN]; /* our challenge */
    uint64_t msgs_sent, bytes_sent, msgs_recv, bytes_recv;
    uint64_t send_seq;
    gw_order_t order;
} carrier_t;

enum { T_OPENING, T_HANDSHAKE, T_DATA };

typedef struct tunnel {
    uint64_t id;   /* ours */
    uint64_t peer; /* the gateway's */
    carrier_t *carrier;
    pscom_con_t *con; /* connecting side: from con_relay; accepting side: from con_start */
    int fd, core_fd;  /* socketpair of the handshake: ours, core's */
    pscom_ufd_t ufd;
    int state, peer_gone;
    int peer_closed;          /* the peer closed in order before our core finished the handshake */
    int writing, write_again; /* in gw_write_start: nested calls only ask for another round */
    char target[GW_ADDR_MAX];
    uint32_t credits, owed;
    unsigned inflight; /* DATA fragments posted on the carrier, not yet written */
    size_t ahead;      /* bytes of the head message posted from its buffer, not yet written */
    int down_deferred; /* tunnel_down waits for ahead == 0: core must not hand the buffer back
                          to its owner while the carrier still reads from it */
    int down_error;
    char down_why[GW_REASON_MAX + 1];
    pscom_request_t *pending, **pending_tail; /* DATA that came before con_start */
    list_head_t waiting; /* in waiting_open: the carrier is not authenticated yet */
} tunnel_t;

extern pscom_socket_t *gw_sock;     /* the carriers' socket (serves GW_SERVICE) */
extern list_head_t gw_carriers;     /* carrier_t.link */
extern list_head_t gw_waiting_open; /* tunnel_t.waiting */
extern gw_ids_t gw_tunnels;
extern uint8_t gw_key[GW_KEY_MAX];
extern size_t gw_key_len;
extern const pscom_plugin_t pscom_plugin_gw;

/* gw.c: tunnels */
tunnel_t *tunnel_get(uint64_t id);
tunnel_t *tunnel_new(carrier_t *c);
void tunnel_free(tunnel_t *t);
void tunnel_down(tunnel_t *t, int error, const char *why);
void pump_start(tunnel_t *t);
int write_all(int fd, const char *p, size_t len);
void gw_write_start(pscom_con_t *con);

/* gw_carrier.c */
pscom_request_t *frag_get(size_t len);
void frag_put(pscom_request_t *req);
void send_ctrl(carrier_t *c, gw_msg_t *h, const void *data, size_t len);
void tunnel_ctrl(tunnel_t *t, int type, uint16_t flags, const void *data, size_t len);
void send_frag(tunnel_t *t, pscom_request_t *req, void *data, size_t len);
carrier_t *carrier_to(const char *addr);
void carrier_failed(carrier_t *c, const char *why);
void carriers_free(void);
void send_open(tunnel_t *t);
void return_credits(tunnel_t *t);
void feed(tunnel_t *t, pscom_request_t *req); /* a DATA fragment into the connection */
void gw_con_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err);
void gw_con_accept(pscom_connection_t *con);
pscom_request_t *gw_default_recv(pscom_connection_t *con, pscom_header_net_t *header);

#endif
