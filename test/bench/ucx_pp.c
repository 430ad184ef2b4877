/*
 * ucx_pp: ping-pong between two processes over UCX's UCP API alone, no MPI, no pscom: the floor
 * of each UCP interface on this machine. Three ways of moving one message:
 *   am     ucp_am_send_nbx, received in the active message callback (our ucp plugin's way)
 *   tag    ucp_tag_send_nbx into a receive posted before (MPICH's ch4:ucx way)
 *   stream ucp_stream_send_nbx, read with ucp_stream_recv_data_nb
 * Build: gcc -O2 -o _build/bench/ucx_pp test/bench/ucx_pp.c -lucp -lucs
 * Run:   UCX_TLS=posix,cma,self _build/bench/ucx_pp [--sizes 8,1k] [--api am,tag,stream]
 * One-way latency (round trip / 2) in us per size and interface.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define AM_ID 3
#define MAXSZ (1 << 20)

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_ep_h ep;
static char *rbuf, *sbuf;
static volatile int am_got; /* messages the am callback took */

static void die(const char *what, ucs_status_t st)
{
    fprintf(stderr, "ucx_pp: %s: %s\n", what, ucs_status_string(st));
    exit(1);
}

static ucs_status_t am_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *p)
{
    (void)arg;
    (void)hdr;
    (void)hlen;
    (void)p;
    memcpy(rbuf, data, len);
    am_got++;
    return UCS_OK;
}

static void wait_req(ucs_status_ptr_t r)
{
    if (r == NULL)
        return;
    if (UCS_PTR_IS_ERR(r))
        die("request", UCS_PTR_STATUS(r));
    while (ucp_request_check_status(r) == UCS_INPROGRESS)
        ucp_worker_progress(worker);
    ucp_request_free(r);
}

static void nop_send(void *r, ucs_status_t st, void *u)
{
    (void)r;
    (void)st;
    (void)u;
}

static void nop_recv(void *r, ucs_status_t st, const ucp_tag_recv_info_t *i, void *u)
{
    (void)r;
    (void)st;
    (void)i;
    (void)u;
}

static void send_am(size_t n)
{
    static const ucp_request_param_t now = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS |
                                                            UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
                                            .flags = UCP_AM_SEND_FLAG_EAGER};
    ucs_status_ptr_t r = ucp_am_send_nbx(ep, AM_ID, NULL, 0, sbuf, n, &now);
    if (r == NULL)
        return;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK,
                             .flags = UCP_AM_SEND_FLAG_EAGER,
                             .cb.send = nop_send};
    wait_req(ucp_am_send_nbx(ep, AM_ID, NULL, 0, sbuf, n, &p));
}

static void recv_am(void)
{
    int want = am_got + 1;
    while (am_got < want)
        ucp_worker_progress(worker);
}

static void send_tag(size_t n)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = nop_send};
    wait_req(ucp_tag_send_nbx(ep, sbuf, n, 1, &p));
}

static ucs_status_ptr_t post_tag(size_t n)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv = nop_recv};
    return ucp_tag_recv_nbx(worker, rbuf, n, 1, ~(ucp_tag_t)0, &p);
}

static void send_stream(size_t n)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = nop_send};
    wait_req(ucp_stream_send_nbx(ep, sbuf, n, &p));
}

static void recv_stream(size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t len = 0;
        void *d = ucp_stream_recv_data_nb(ep, &len);
        if (d == NULL) {
            ucp_worker_progress(worker);
            continue;
        }
        if (UCS_PTR_IS_ERR(d))
            die("stream recv", UCS_PTR_STATUS(d));
        memcpy(rbuf + got, d, len);
        got += len;
        ucp_stream_data_release(ep, d);
    }
}

enum { AM, TAG, STREAM };

/* one round trip; rank 0 starts. tag: a receive is always posted before the peer's send */
static ucs_status_ptr_t tag_posted;

static void round_trip(int api, int rank, size_t n)
{
    for (int turn = 0; turn < 2; turn++) {
        int mine = (turn == 0) == (rank == 0);
        if (api == TAG) {
            if (mine) {
                if (!tag_posted)
                    tag_posted = post_tag(n);
                send_tag(n);
            } else {
                if (!tag_posted)
                    tag_posted = post_tag(n);
                wait_req(tag_posted);
                tag_posted = NULL;
                if (rank == 1)
                    tag_posted = post_tag(n); /* for the next round, before our reply */
            }
        } else if (mine) {
            if (api == AM)
                send_am(n);
            else
                send_stream(n);
        } else if (api == AM) {
            recv_am();
        } else {
            recv_stream(n);
        }
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void setup(int sock)
{
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK)
        die("config", st);
    ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                       .features = UCP_FEATURE_AM | UCP_FEATURE_TAG | UCP_FEATURE_STREAM};
    if (getenv("UCX_PP_WAKEUP")) /* as our ucp plugin asks */
        pp.features |= UCP_FEATURE_WAKEUP;
    if ((st = ucp_init(&pp, cfg, &ctx)) != UCS_OK)
        die("ucp_init", st);
    ucp_config_release(cfg);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = getenv("UCX_PP_SERIALIZED")
                                                 ? UCS_THREAD_MODE_SERIALIZED
                                                 : UCS_THREAD_MODE_SINGLE};
    if ((st = ucp_worker_create(ctx, &wp, &worker)) != UCS_OK)
        die("worker", st);
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
                                 .id = AM_ID,
                                 .cb = am_cb,
                                 .flags = UCP_AM_FLAG_WHOLE_MSG};
    if ((st = ucp_worker_set_am_recv_handler(worker, &hp)) != UCS_OK)
        die("am handler", st);
    ucp_address_t *addr;
    size_t alen;
    if ((st = ucp_worker_get_address(worker, &addr, &alen)) != UCS_OK)
        die("address", st);
    unsigned char peer[4096];
    if (alen > sizeof(peer) || write(sock, addr, alen) != (ssize_t)alen)
        die("address exchange", UCS_ERR_IO_ERROR);
    ssize_t got = read(sock, peer, sizeof(peer));
    if (got <= 0)
        die("address exchange", UCS_ERR_IO_ERROR);
    ucp_worker_release_address(worker, addr);
    ucp_ep_params_t ep_p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                            .address = (ucp_address_t *)peer};
    if ((st = ucp_ep_create(worker, &ep_p, &ep)) != UCS_OK)
        die("ep", st);
}

static size_t parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'k')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    return v;
}

int main(int argc, char **argv)
{
    const char *sizes = "8,64,128,1k,4k", *apis = "am,tag,stream";
    double secs = 0.3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes"))
            sizes = argv[i + 1];
        else if (!strcmp(argv[i], "--api"))
            apis = argv[i + 1];
        else if (!strcmp(argv[i], "--time"))
            secs = atof(argv[i + 1]);
        else {
            fprintf(stderr, "usage: ucx_pp [--sizes L] [--api am,tag,stream] [--time S]\n");
            return 2;
        }
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0)
        return 1;
    pid_t child = fork();
    int rank = child == 0;
    int sock = sv[rank];
    setup(sock);
    rbuf = aligned_alloc(4096, MAXSZ);
    sbuf = aligned_alloc(4096, MAXSZ);
    memset(sbuf, 1, MAXSZ);
    if (rank == 0)
        printf("api,size,iters,us\n");
    char *al = strdup(apis);
    for (char *a = strtok(al, ","); a; a = strtok(NULL, ",")) {
        int api = !strcmp(a, "am") ? AM : !strcmp(a, "tag") ? TAG : STREAM;
        char *sl = strdup(sizes), *save;
        for (char *s = strtok_r(sl, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
            size_t n = parse_size(s);
            if (n > MAXSZ)
                n = MAXSZ;
            for (int i = 0; i < 1000; i++)
                round_trip(api, rank, n);
            /* rank 0 picks the count from a calibration round and tells rank 1 */
            long iters = 1000;
            if (rank == 0) {
                double t = now_s();
                for (int i = 0; i < 1000; i++)
                    round_trip(api, rank, n);
                t = now_s() - t;
                iters = (long)(secs / (t / 1000));
                if (iters < 1000)
                    iters = 1000;
                if (write(sock, &iters, sizeof(iters)) != sizeof(iters))
                    return 1;
            } else {
                for (int i = 0; i < 1000; i++)
                    round_trip(api, rank, n);
                if (read(sock, &iters, sizeof(iters)) != sizeof(iters))
                    return 1;
            }
            double t = now_s();
            for (long i = 0; i < iters; i++)
                round_trip(api, rank, n);
            t = now_s() - t;
            if (rank == 0)
                printf("%s,%zu,%ld,%.3f\n", a, n, iters, t / iters / 2 * 1e6);
            fflush(stdout);
        }
        free(sl);
    }
    free(al);
    if (rank == 0)
        waitpid(child, NULL, 0);
    return 0;
}
