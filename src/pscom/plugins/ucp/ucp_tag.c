/*
 * Tag matching in UCX for pscom's tagged messages (pscom_socket_tag_matching): core hands the
 * calls over only for a socket whose connections are all ucp ones, so a message needs nothing
 * but the connection's endpoint; UCX's worker matches them process-wide.
 */
#include <stdio.h>
#include "ucp_priv.h"

static int tag_usable(char *why, size_t whylen)
{
    if (!ucp_cfg.tag) {
        snprintf(why, whylen, "PSP_UCP_TAG=0");
        return 0;
    }
    if (!ux_tag_ready()) {
        snprintf(why, whylen, "UCX was initialised without tag matching");
        return 0;
    }
    return 1;
}

/* inlined at link time (LTO): pscom_tag_recv's call comes straight here */
static int tag_recv(pscom_socket_t *socket, uint64_t tag, uint64_t mask, void *buf, size_t len,
                    void *user, void **op)
{
    (void)socket; /* UCX's worker is the process's one matching queue */
    return ux_tag_recv(tag, mask, buf, len, user, op);
}

const pscom_tag_ops_t ucp_tag_ops = {
    .usable = tag_usable,
    .enable = ux_tag_enable,
    .send = ux_tag_send, /* to the endpoint con_start (ucp.c) gave core (pscom_con_set_tag_ep) */
    .recv = tag_recv,
    .probe = ux_tag_probe,
    .msg_recv = ux_tag_msg_recv,
    .cancel = ux_tag_cancel,
};
