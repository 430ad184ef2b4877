/* Thin wrapper of UCX's UCP API for the ucp transport (see ucp_ucx.h). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>
#include "ucp_ucx.h"

#define AM_ID 7 /* our one active message id (UCX keeps handlers in an array by id) */

static struct {
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len;
    int efd;
    ux_recv_fn on_recv;
    ux_ep_error_fn on_error;
    int tag;
    pscom_tag_done_t tag_done;
    int tag_done_inline; /* PSCOM_TAG_DONE_INLINE */
} ux = {.efd = -1};

/* UCX's own error and warning lines during a call we expect may fail: kept as the reason
   instead of printed */
static char captured[200];

static ucs_log_func_rc_t capture(const char *file, unsigned line, const char *function,
                                 ucs_log_level_t level, const ucs_log_component_config_t *comp,
                                 const char *fmt, va_list ap)
{
    (void)file;
    (void)line;
    (void)function;
    (void)comp;
    if (level > UCS_LOG_LEVEL_WARN)
        return UCS_LOG_FUNC_RC_CONTINUE;
    if (!captured[0] || level == UCS_LOG_LEVEL_ERROR)
        vsnprintf(captured, sizeof(captured), fmt, ap);
    return UCS_LOG_FUNC_RC_STOP;
}

static void capture_begin(void)
{
    captured[0] = '\0';
    ucs_log_push_handler(capture);
}

static void capture_end(const char *what, ucs_status_t st, char *why, size_t whylen)
{
    ucs_log_pop_handler();
    if (why && st != UCS_OK)
        snprintf(why, whylen, "%s%s%s", what, ucs_status_string(st), captured[0] ? " (" : "");
    if (why && st != UCS_OK && captured[0])
        snprintf(why + strlen(why), whylen - strlen(why), "%s)", captured);
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    (void)arg;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    int keep_ok = rndv || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA);
    int keep = ux.on_recv(header, header_length, data, length, rndv, keep_ok);
    return keep && keep_ok ? UCS_INPROGRESS : UCS_OK;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    ux.on_error(arg, ucs_status_string(status));
}

/* operations UCX has not finished: those left at ux_destroy get their done() there */
static ux_op_t inflight = {.prev = &inflight, .next = &inflight};

static void op_add(ux_op_t *op)
{
    op->next = &inflight;
    op->prev = inflight.prev;
    inflight.prev->next = op;
    inflight.prev = op;
}

static void op_finish(ux_op_t *op, const char *err)
{
    op->prev->next = op->next;
    op->next->prev = op->prev;
    op->done(op, err);
}

void ux_destroy(int abandon)
{
    if (ux.addr)
        ucp_worker_release_address(ux.worker, ux.addr);
    if (ux.worker && !abandon)
        ucp_worker_destroy(ux.worker);
    if (ux.ctx && !abandon)
        ucp_cleanup(ux.ctx);
    ux.addr = NULL;
    ux.worker = NULL;
    ux.ctx = NULL;
    ux.efd = -1;
    while (inflight.next != &inflight)
        op_finish(inflight.next, "UCX shut down");
}

static int failed(const char *what, ucs_status_t st, char *why, size_t whylen)
{
    snprintf(why, whylen, "%s: %s", what, ucs_status_string(st));
    ux_destroy(0);
    return -1;
}

int ux_init(ux_recv_fn on_recv, ux_ep_error_fn on_error, int tag, size_t *max_header, char *why,
            size_t whylen)
{
    ucp_config_t *config;
    ucs_status_t st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK)
        return failed("ucp_config_read", st, why, whylen);
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
                           .features =
                               UCP_FEATURE_AM | UCP_FEATURE_WAKEUP | (tag ? UCP_FEATURE_TAG : 0),
                           .name = "pscom"};
    capture_begin();
    st = ucp_init(&params, config, &ux.ctx);
    capture_end("ucp_init: ", st, why, whylen);
    ucp_config_release(config);
    if (st != UCS_OK) {
        ux.ctx = NULL;
        ux_destroy(0);
        return -1;
    }
    /* pscom serialises all calls (its lock), possibly from several threads */
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    st = ucp_worker_create(ux.ctx, &wp, &ux.worker);
    if (st != UCS_OK) {
        ux.worker = NULL;
        return failed("ucp_worker_create", st, why, whylen);
    }
    ux.on_recv = on_recv;
    ux.on_error = on_error;
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = AM_ID,
        .cb = am_cb,
        .arg = NULL,
        /* no UCP_AM_FLAG_PERSISTENT_DATA: UCX would copy every short message out of its
           receive buffer for us; most are fed to core in the callback instead */
        .flags = UCP_AM_FLAG_WHOLE_MSG};
    st = ucp_worker_set_am_recv_handler(ux.worker, &hp);
    if (st != UCS_OK)
        return failed("ucp_worker_set_am_recv_handler", st, why, whylen);
    st = ucp_worker_get_efd(ux.worker, &ux.efd);
    if (st != UCS_OK)
        return failed("ucp_worker_get_efd", st, why, whylen);
    st = ucp_worker_get_address(ux.worker, &ux.addr, &ux.addr_len);
    if (st != UCS_OK) {
        ux.addr = NULL;
        return failed("ucp_worker_get_address", st, why, whylen);
    }
    ux.tag = tag;
    ucp_worker_attr_t attr = {.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER};
    st = ucp_worker_query(ux.worker, &attr);
    *max_header = st == UCS_OK ? attr.max_am_header : 0;
    return 0;
}

const void *ux_address(size_t *len)
{
    *len = ux.addr_len;
    return ux.addr;
}

int ux_efd(void)
{
    return ux.efd;
}

int ux_progressing;

static void tag_deliver_all(void);
static size_t cmpl_n; /* tag completions recorded inside UCX, to hand out (tag_deliver) */

/* After a call into UCX: hand out what its callbacks recorded (not while inside UCX) */
static inline void tag_deliver(void)
{
    if (cmpl_n && !ux_progressing)
        tag_deliver_all();
}

unsigned ux_progress(void)
{
    if (ux_progressing)
        return 0;
    ux_progressing = 1;
    unsigned n = ucp_worker_progress(ux.worker);
    ux_progressing = 0;
    tag_deliver();
    return n;
}

int ux_arm(void)
{
    return ucp_worker_arm(ux.worker) == UCS_OK ? 0 : 1;
}

/* UCX names no transports in its API (1.13): its endpoint report lists the lanes, as
   "lane[0]:  2:posix/memory.0 md[1] ...". Its shared memory devices are called "memory". The
   report also gives the protocol ranges of active messages, as
   "am_send: 0..<egr/short>..93..<egr/bcopy>..": the size where its short protocol ends (92
   bytes go short over its shared memory, 93 do not). */
static void ep_info(ucp_ep_h ep, int *shm, size_t *short_max)
{
    char *text = NULL;
    size_t len = 0;
    *shm = 1;
    *short_max = SIZE_MAX; /* unknown: always try */
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    ucp_ep_print_info(ep, f);
    fclose(f);
    int lanes = 0, any_shm = 0;
    for (const char *l = text; l && (l = strstr(l, "lane[")) != NULL; l++) {
        const char *tl = strchr(l, ':');
        tl = tl ? strchr(tl + 1, ':') : NULL; /* after "lane[0]:  2:" */
        const char *dev = tl ? strchr(tl, '/') : NULL;
        if (!dev)
            break;
        lanes++;
        any_shm |= strncmp(dev + 1, "memory", 6) == 0;
    }
    *shm = any_shm || !lanes;
    static const char key[] = "am_send: 0..<egr/short>..";
    const char *am = text ? strstr(text, key) : NULL;
    if (am) {
        char *end;
        unsigned long long n = strtoull(am + sizeof(key) - 1, &end, 10);
        if (end != am + sizeof(key) - 1 && *end == '.' && n > 0)
            *short_max = (size_t)n - 1;
    }
    free(text);
}

ux_ep_t *ux_ep_create(const void *addr, void *user, int want_peer, int *peer_mode, int *shm,
                      size_t *short_max, char *why, size_t whylen)
{
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLER,
                         .address = addr,
                         .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = ep_err_cb, .arg = user}};
    ucp_ep_h ep;
    ucs_status_t st = UCS_ERR_UNSUPPORTED;
    capture_begin();
    if (want_peer)
        st = ucp_ep_create(ux.worker, &p, &ep);
    *peer_mode = st == UCS_OK;
    if (st != UCS_OK) {
        /* e.g. UCX's shared memory transports cannot detect peer failure */
        p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        p.field_mask &= ~(uint64_t)UCP_EP_PARAM_FIELD_ERR_HANDLER;
        st = ucp_ep_create(ux.worker, &p, &ep);
    }
    capture_end("", st, why, whylen);
    if (st != UCS_OK)
        return NULL;
    ep_info(ep, shm, short_max);
    return (ux_ep_t *)ep;
}

void *ux_ep_close(ux_ep_t *ep, int force)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t r = ucp_ep_close_nbx((ucp_ep_h)ep, &p);
    tag_deliver(); /* a forced close cancels the endpoint's tagged sends */
    return UCS_PTR_IS_PTR(r) ? r : NULL;
}

int ux_close_done(void *handle)
{
    if (ucp_request_check_status(handle) == UCS_INPROGRESS)
        return 0;
    ucp_request_free(handle);
    return 1;
}

void ux_close_forget(void *handle)
{
    ucp_request_free(handle);
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    op_finish(user_data, status == UCS_OK ? NULL : ucs_status_string(status));
}

static void recv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    send_cb(request, status, user_data);
}

static int started(ucs_status_ptr_t r, ux_op_t *op, const char **why)
{
    if (r == NULL)
        return 0;
    if (UCS_PTR_IS_ERR(r)) {
        *why = ucs_status_string(UCS_PTR_STATUS(r));
        return -1;
    }
    op_add(op); /* UCX calls back only from progress: never before this */
    return 1;
}

int ux_send(ux_ep_t *ep, const void *hdr, size_t hlen, const void *data, size_t len, int eager,
            ux_op_t *op, const char **why)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                             UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
                             .cb.send = send_cb,
                             .user_data = op,
                             .flags = eager ? UCP_AM_SEND_FLAG_EAGER : 0};
    return started(ucp_am_send_nbx((ucp_ep_h)ep, AM_ID, hdr, hlen, data, len, &p), op, why);
}

int ux_send_now(ux_ep_t *ep, const void *hdr, size_t hlen, const void *data, size_t len,
                const char **why)
{
    static const ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS |
                                                          UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
                                          .flags = UCP_AM_SEND_FLAG_EAGER};
    ucs_status_ptr_t r = ucp_am_send_nbx((ucp_ep_h)ep, AM_ID, hdr, hlen, data, len, &p);
    if (r == NULL)
        return 0;
    if (UCS_PTR_IS_PTR(r)) { /* not expected with FORCE_IMM_CMPL: it went anyway */
        ucp_request_free(r);
        return 0;
    }
    if (UCS_PTR_STATUS(r) == UCS_ERR_NO_RESOURCE)
        return 1;
    *why = ucs_status_string(UCS_PTR_STATUS(r));
    return -1;
}

int ux_recv(void *desc, void *buf, size_t len, ux_op_t *op, const char **why)
{
    ucp_request_param_t p = {.op_attr_mask =
                                 UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                             .cb.recv_am = recv_cb,
                             .user_data = op};
    return started(ucp_am_recv_data_nbx(ux.worker, desc, buf, len, &p), op, why);
}

void ux_release(void *data)
{
    ucp_am_data_release(ux.worker, data);
}

/* ---- tag matching ---- */

int ux_tag_ready(void)
{
    return ux.worker && ux.tag;
}

void ux_tag_enable(pscom_tag_done_t done, unsigned flags)
{
    ux.tag_done = done;
    ux.tag_done_inline = (flags & PSCOM_TAG_DONE_INLINE) != 0;
}

static pscom_tag_status_t tag_status(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
        return PSCOM_TAG_DONE;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return PSCOM_TAG_TRUNCATED;
    case UCS_ERR_CANCELED:
        return PSCOM_TAG_CANCELED;
    default:
        return PSCOM_TAG_FAILED;
    }
}

/* Tag completions are recorded in UCX's callbacks and handed to done() once UCX returned:
   a done() that sends must not run inside UCX (ucp_worker_progress may be replaying the
   endpoint's sends queued during its wireup: a send from there would overtake the rest). */
typedef struct tag_cmpl {
    void *user;
    pscom_tag_status_t status;
    int has_info;
    pscom_tag_info_t info;
} tag_cmpl_t;
static tag_cmpl_t *cmpl;
static size_t cmpl_head, cmpl_max;

static __attribute__((noinline)) void tag_record(void *user, pscom_tag_status_t status,
                                                 const pscom_tag_info_t *info)
{
    if (cmpl_n == cmpl_max) {
        size_t max = cmpl_max ? 2 * cmpl_max : 64;
        tag_cmpl_t *c = realloc(cmpl, max * sizeof(*c));
        if (!c) { /* no room: at once, as the lesser evil */
            ux.tag_done(user, status, info);
            return;
        }
        cmpl = c;
        cmpl_max = max;
    }
    cmpl[cmpl_n++] = (tag_cmpl_t){.user = user,
                                  .status = status,
                                  .has_info = info != NULL,
                                  .info = info ? *info : (pscom_tag_info_t){0}};
}

static inline void tag_complete(void *user, pscom_tag_status_t status, const pscom_tag_info_t *info)
{
    if (ux.tag_done_inline)
        ux.tag_done(user, status, info);
    else
        tag_record(user, status, info);
}

static void tag_deliver_all(void)
{
    /* a done() may post, complete and deliver more (nested): one shared position */
    while (cmpl_head < cmpl_n) {
        tag_cmpl_t c = cmpl[cmpl_head++];
        ux.tag_done(c.user, c.status, c.has_info ? &c.info : NULL);
    }
    cmpl_head = cmpl_n = 0;
}

/* tagged sends UCX holds (not complete when posted), for the SIGQUIT dump (ux_dump); receives
   are not counted: that would cost every receive two updates for a debugging aid */
static unsigned long tag_sends_open;

static void tag_send_cb(void *request, ucs_status_t status, void *user)
{
    tag_sends_open--;
    ucp_request_free(request);
    tag_complete(user, tag_status(status), NULL);
}

/* the receive ux_tag_recv is posting (user pointer): did it complete inside the call? */
static struct {
    int on, done;
    void *user;
} posting;

static void tag_recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *ti,
                        void *user)
{
    pscom_tag_info_t info = {.tag = ti->sender_tag, .len = ti->length};
    ucp_request_free(request);
    if (posting.on && user == posting.user)
        posting.done = 1;
    tag_complete(user, tag_status(status), &info);
}

/* The parameters of the message path, filled once: a call sets only its user pointer (UCX
   reads them during the call; the calls are serialised by pscom's lock). */
static ucp_request_param_t send_param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                         UCP_OP_ATTR_FIELD_USER_DATA,
                                         .cb.send = tag_send_cb};
/* UCX 1.13 leaves recv_info.tag_info unset when it completes a receive at once (an unexpected
   eager message; UCX issue 9425, fixed in 1.16): have it call back from the call instead, which
   gets the message's tag and length */
static ucp_request_param_t recv_param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                         UCP_OP_ATTR_FIELD_USER_DATA |
                                                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                                         .cb.recv = tag_recv_cb};

int ux_tag_send(void *ep, uint64_t tag, const void *buf, size_t len, int sync, void *user)
{
    send_param.user_data = user;
    ucs_status_ptr_t r = !sync ? ucp_tag_send_nbx((ucp_ep_h)ep, buf, len, tag, &send_param)
                               : ucp_tag_send_sync_nbx((ucp_ep_h)ep, buf, len, tag, &send_param);
    if (r == NULL)
        return 1;
    if (UCS_PTR_IS_ERR(r))
        return PSCOM_ERR_IOERROR;
    tag_sends_open++;
    return 0;
}

int ux_tag_recv(uint64_t tag, uint64_t mask, void *buf, size_t len, void *user, void **op)
{
    recv_param.user_data = user;
    posting.on = 1;
    posting.done = 0;
    posting.user = user;
    ucs_status_ptr_t r = ucp_tag_recv_nbx(ux.worker, buf, len, tag, mask, &recv_param);
    posting.on = 0;
    if (UCS_PTR_IS_ERR(r))
        return PSCOM_ERR_IOERROR;
    *op = posting.done ? NULL : r; /* done: the request is freed already */
    tag_deliver();
    return 0;
}

int ux_tag_probe(uint64_t tag, uint64_t mask, pscom_tag_info_t *info, void **msg)
{
    ucp_tag_recv_info_t ti;
    ucp_tag_message_h m = ucp_tag_probe_nb(ux.worker, tag, mask, msg != NULL, &ti);
    if (!m)
        return 0;
    info->tag = ti.sender_tag;
    info->len = ti.length;
    if (msg)
        *msg = m;
    return 1;
}

int ux_tag_msg_recv(void *msg, void *buf, size_t len, void *user)
{
    /* always by the callback (also when complete at once): nobody cancels these */
    recv_param.user_data = user;
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(ux.worker, buf, len, msg, &recv_param);
    tag_deliver();
    return UCS_PTR_IS_ERR(r) ? PSCOM_ERR_IOERROR : 0;
}

void ux_tag_cancel(void *op)
{
    ucp_request_cancel(ux.worker, op);
    tag_deliver();
}

void ux_dump(FILE *out)
{
    unsigned long ops = 0;
    for (ux_op_t *op = inflight.next; op != &inflight; op = op->next)
        ops++;
    fprintf(out, "  UCX worker: %lu active message operations in flight (large sends, fetches)",
            ops);
    if (ux.tag)
        fprintf(out,
                "; tag matching: %lu sends posted and not complete, %zu completions not "
                "handed out",
                tag_sends_open, cmpl_n - cmpl_head);
    fputc('\n', out);
}
