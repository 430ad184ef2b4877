/* Library init and cleanup, core configuration rows, statistics and the SIGQUIT dump. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "pscom_priv.h"

#ifndef PSCOM_VERSION_STR
#define PSCOM_VERSION_STR "1.0.0"
#endif

pscom_global_t pscom_global = {
    .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP,
    .sockets = LIST_HEAD_INIT(pscom_global.sockets),
};
pscom_config_t pscom_config;
pscom_stats_t pscom_stats;

static const pscom_env_row_t core_env[] = {
    {"PSP_DEBUG", "1",
     "Verbosity: 0 fatal, 1 errors, 2 warnings, 3 info, 4 debug, 5 verbose, 6 trace.",
     PSCOM_ENV_INT, &pscom_config.debug, 0, 6},
    {"PSP_DEBUG_OUT", "", "Write log lines to this file instead of stderr ($VARS expanded).",
     PSCOM_ENV_STR, &pscom_config.debug_out, 0, 0},
    {"PSP_DEBUG_CONTYPE", "0", "Print one line per connection: peers and transport.",
     PSCOM_ENV_BOOL, &pscom_config.debug_contype, 0, 0},
    {"PSP_DEBUG_STATS", "0", "Print counters when the library shuts down.", PSCOM_ENV_BOOL,
     &pscom_config.debug_stats, 0, 0},
    {"PSP_DEBUG_PARAM", "0", "Log configuration: 1 variables set in the environment, 2 all.",
     PSCOM_ENV_INT, &pscom_config.debug_param, 0, 2},
    {"PSP_SIGQUIT", "0", "On SIGQUIT, dump sockets, connections, requests and counters.",
     PSCOM_ENV_BOOL, &pscom_config.sigquit, 0, 0},
    {"PSP_RENDEZVOUS", "",
     "Eager/rendezvous threshold for every transport (bytes, inf = eager "
     "only); PSP_<ARCH>_RENDEZVOUS overrides it per transport. Empty: transport defaults.",
     PSCOM_ENV_SIZE_OPT, &pscom_config.rendezvous, 0, 0},
    {"PSP_NETWORK", "",
     "Network (a.b.c.d or a.b.c.d/bits) whose interface address goes into endpoint strings; "
     "several, comma-separated, in order of preference. Empty: the first non-loopback "
     "interface.",
     PSCOM_ENV_STR, &pscom_config.network, 0, 0},
    {"PSP_PLUGINDIR", "", "Directory searched first for libpscom4<name>.so plugins.", PSCOM_ENV_STR,
     &pscom_config.plugindir, 0, 0},
    {"PSP_SCHED_YIELD", "0", "Call sched_yield() while waiting (oversubscribed nodes).",
     PSCOM_ENV_BOOL, &pscom_config.sched_yield, 0, 0},
    {"PSP_SPIN_US", "1000",
     "Poll this long without progress before blocking (microseconds); "
     "after the first 20 us each poll yields the CPU to other runnable processes.",
     PSCOM_ENV_UINT, &pscom_config.spin_us, 0, 0},
    {"PSP_FD_POLL_US", "50",
     "While busy polling, look at listen and doorbell sockets at most this often "
     "(microseconds; each look is a system call). Sockets that carry data or a handshake in "
     "progress are polled always.",
     PSCOM_ENV_UINT, &pscom_config.fd_poll_us, 0, 1000000},
    {"PSP_POLL_PAUSE", "2",
     "Pause instructions after a poll that found nothing (x86 pause, arm yield), once "
     "PSP_POLL_SPIN polls in a row found nothing: a spinning receiver then takes the cache line "
     "a sender is writing away less often. 0: none.",
     PSCOM_ENV_UINT, &pscom_config.poll_pause, 0, 1000},
    {"PSP_POLL_SPIN", "8",
     "Polls in a row that found nothing before the PSP_POLL_PAUSE pauses start: a message that "
     "comes soon (a peer on a sibling hyperthread) is seen without a pause's delay.",
     PSCOM_ENV_UINT, &pscom_config.poll_spin, 0, 1000000},
    {"PSP_CONNECT_TIMEOUT", "30000", "Give up a connection attempt after this many ms.",
     PSCOM_ENV_UINT, &pscom_config.connect_timeout_ms, 0, 0},
    {"PSP_PEER_TIMEOUT", "20000",
     "A peer whose node stops answering on the network (crashed, cut off) is given up after "
     "about this many ms: pscom's TCP sockets (the tcp transport's, and the handshake socket a "
     "ucp connection keeps) probe an idle peer after half of it and fail when probes or data "
     "stay unanswered that long. A peer that is only slow or stopped still answers (its "
     "kernel does). 0: the kernel's defaults (hours).",
     PSCOM_ENV_UINT, &pscom_config.peer_timeout_ms, 0, 0},
    {"PSP_UNEXPECTED_MAX", "64M",
     "Bytes one process holds at most for eager messages no receive has asked for yet "
     "(counted with 512 bytes per message), all connections together (plus 16 KiB each): "
     "past it senders send by rendezvous, which leaves the data with them until a receive "
     "matches. inf: no limit.",
     PSCOM_ENV_SIZE, &pscom_config.unexpected_max, 0, 0},
    {"PSP_SHUTDOWN_TIMEOUT", "0",
     "Closing a connection waits this long (ms) for the peer to take "
     "our last messages; 0: as long as it takes (5 s at exit).",
     PSCOM_ENV_UINT, &pscom_config.shutdown_timeout_ms, 0, 0},
    {NULL, NULL, NULL, 0, NULL, 0, 0},
};

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Processes may share memory when host, boot and IPC namespace are the same. */
static uint64_t compute_node_id(void)
{
    uint64_t h = 1469598103934665603ULL;
    h = fnv1a(h, pscom_global.hostname, strlen(pscom_global.hostname));
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f))
            boot[0] = '\0';
        fclose(f);
    }
    h = fnv1a(h, boot, strlen(boot));
    struct stat st;
    if (stat("/proc/self/ns/ipc", &st) == 0)
        h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
    return h;
}

static int parse_network(const char *s, uint32_t *net, uint32_t *mask, int *have_mask)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", s);
    char *slash = strchr(buf, '/');
    *have_mask = 0;
    if (slash) {
        *slash = '\0';
        char *end;
        long bits = strtol(slash + 1, &end, 10);
        if (*end || bits < 0 || bits > 32)
            return -1;
        *mask = bits ? htonl(~0u << (32 - bits)) : 0;
        *have_mask = 1;
    }
    struct in_addr a;
    if (inet_pton(AF_INET, buf, &a) != 1)
        return -1;
    *net = a.s_addr;
    return 0;
}

/* PSP_NETWORK: networks "a.b.c.d[/bits]" separated by commas, in order of preference (a job
   whose nodes sit on different networks, joined by gateways, names all of them) */
static void choose_ip(void)
{
    struct ifaddrs *ifs = NULL, *i;
    uint32_t net[8], mask[8];
    int have_mask[8], n_net = 0;
    pscom_global.ip = htonl(INADDR_LOOPBACK);
    if (pscom_config.network && *pscom_config.network) {
        char list[256], *save = NULL;
        snprintf(list, sizeof(list), "%s", pscom_config.network);
        for (char *w = strtok_r(list, ",", &save); w && n_net < 8; w = strtok_r(NULL, ",", &save)) {
            if (parse_network(w, &net[n_net], &mask[n_net], &have_mask[n_net]) == 0) {
                n_net++;
                continue;
            }
            pscom_log(1, "warning: PSP_NETWORK: '%s' is not a.b.c.d or a.b.c.d/bits; ignored", w);
        }
        if (!n_net)
            pscom_log(1, "warning: PSP_NETWORK='%s' names no network; using the default interface",
                      pscom_config.network);
    }
    if (getifaddrs(&ifs) != 0)
        return;
    int found = 0;
    for (int k = 0; k < (n_net ? n_net : 1) && !found; k++) {
        for (i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
                continue;
            uint32_t a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            if (n_net) {
                uint32_t m = have_mask[k] ? mask[k]
                             : i->ifa_netmask
                                 ? ((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr
                                 : 0xffffffffu;
                if ((a & m) != (net[k] & m))
                    continue;
            } else if (i->ifa_flags & IFF_LOOPBACK) {
                continue;
            }
            pscom_global.ip = a;
            found = 1;
            break;
        }
    }
    if (n_net && !found)
        pscom_log(1, "warning: PSP_NETWORK='%s' matches no interface; using 127.0.0.1",
                  pscom_config.network);
    freeifaddrs(ifs);
}

static void sigquit_handler(int sig)
{
    (void)sig;
    fprintf(stderr, "+++ SIGQUIT START (%s) +++\n", pscom_log_prefix_name());
    pscom_dump_info(stderr);
    fprintf(stderr, "+++ SIGQUIT END +++\n");
}

static void print_stats(void)
{
    pscom_stats_t *s = &pscom_stats;
    pscom_log(0, "stats: sent %llu msgs %llu bytes, received %llu msgs %llu bytes, unexpected %llu",
              (unsigned long long)s->msgs_sent, (unsigned long long)s->bytes_sent,
              (unsigned long long)s->msgs_recv, (unsigned long long)s->bytes_recv,
              (unsigned long long)s->eager_unexpected);
    pscom_log(0,
              "stats: rendezvous sent %llu received %llu single-copy %llu software %llu "
              "device-to-device %llu",
              (unsigned long long)s->rndv_sent, (unsigned long long)s->rndv_recv,
              (unsigned long long)s->rndv_pull, (unsigned long long)s->rndv_sw_fallback,
              (unsigned long long)s->rndv_gpu);
    char plugins[512];
    pscom_plugin_counters(plugins, sizeof(plugins));
    pscom_log(0,
              "stats: unexpected bytes at most %llu (PSP_UNEXPECTED_MAX), rendezvous "
              "for want of credit %llu (fetched ahead %llu), credit grants %llu",
              (unsigned long long)s->unexp_bytes_max, (unsigned long long)s->fc_rndv,
              (unsigned long long)s->fc_ahead, (unsigned long long)s->fc_grants);
    pscom_log(0, "stats: connections opened %llu failed %llu garbage %llu, blocked waits %llu%s",
              (unsigned long long)s->cons_opened, (unsigned long long)s->cons_failed,
              (unsigned long long)s->garbage_cons, (unsigned long long)s->progress_blocks, plugins);
}

static pscom_err_t init_common(int version, int threaded)
{
    if ((version >> 8) != PSCOM_VERSION_MAJOR || (version & 0xff) > PSCOM_VERSION_MINOR)
        return PSCOM_ERR_UNSUPPORTED_VERSION;
    pscom_lock();
    if (threaded && !pscom_global.threaded)
        pscom_global.threaded = 1; /* the lock is recursive and usable before this point */
    if (pscom_global.initialized) {
        pscom_unlock();
        return PSCOM_SUCCESS;
    }
    pscom_global.pid = getpid();
    if (gethostname(pscom_global.hostname, sizeof(pscom_global.hostname)) != 0)
        strcpy(pscom_global.hostname, "localhost");
    pscom_global.hostname[sizeof(pscom_global.hostname) - 1] = '\0';
    pscom_global.node_id = compute_node_id();

    pscom_env_register("pscom", core_env);
    pscom_fc_init();
    pscom_log_init();
    pscom_cuda_init();
    choose_ip();
    pscom_reactor_init();
    pscom_plugins_init();
    if (pscom_config.sigquit)
        signal(SIGQUIT, sigquit_handler);
    /* a peer that vanishes must not kill us with SIGPIPE */
    signal(SIGPIPE, SIG_IGN);
    pscom_global.initialized = 1;
    atexit(pscom_cleanup);
    pscom_unlock();
    return PSCOM_SUCCESS;
}

PSCOM_API pscom_err_t pscom_init(int version)
{
    return init_common(version, 0);
}

PSCOM_API pscom_err_t pscom_init_thread(int version)
{
    return init_common(version, 1);
}

PSCOM_API void pscom_cleanup(void)
{
    pscom_lock();
    if (!pscom_global.initialized) {
        pscom_unlock();
        return;
    }
    pscom_global.initialized = 0; /* closes below are bounded by the exit timeout */
    /* sockets that serve a plugin (the gateway's carriers) last: the others' connections may
       still send their last messages through them */
    for (int serving = 0; serving < 2; serving++) {
        list_head_t *p, *n;
        list_for_each_safe(p, n, &pscom_global.sockets)
        {
            pscom_sock_t *sock = list_entry(p, pscom_sock_t, next);
            if (!sock->serves[0] == !serving)
                pscom_sock_close(sock);
        }
    }
    if (pscom_config.debug_stats)
        print_stats();
    pscom_plugins_destroy();
    pscom_reactor_destroy();
    pscom_cuda_cleanup();
    pscom_global.initialized = 0;
    pscom_unlock();
}

PSCOM_API const char *pscom_version_str(void)
{
    return PSCOM_VERSION_STR;
}

PSCOM_API void pscom_set_oversubscribed(int oversubscribed)
{
    pscom_lock();
    pscom_config.oversubscribed = oversubscribed != 0;
    pscom_unlock();
}

int pscom_node_oversubscribed(void)
{
    return pscom_config.oversubscribed;
}

PSCOM_API void pscom_set_node_processes(int n)
{
    pscom_lock();
    pscom_config.node_processes = n > 0 ? n : 0;
    pscom_unlock();
}

int pscom_node_processes(void)
{
    return pscom_config.node_processes;
}

PSCOM_API const char *pscom_err_str(pscom_err_t err)
{
    switch (err) {
    case PSCOM_SUCCESS:
        return "success";
    case PSCOM_ERR_STDERROR:
        return strerror(errno);
    case PSCOM_ERR_INVALID:
        return "invalid argument";
    case PSCOM_ERR_ALREADY:
        return "already done";
    case PSCOM_NOT_IMPLEMENTED:
        return "not implemented";
    case PSCOM_ERR_EOF:
        return "connection closed by peer";
    case PSCOM_ERR_IOERROR:
        return "connection broken (peer died?)";
    case PSCOM_ERR_UNSUPPORTED_VERSION:
        return "unsupported version";
    case PSCOM_ERR_CONNECTION_REFUSED:
        return "connection refused";
    case PSCOM_ERR_PROTOCOL:
        return "protocol error (malformed message)";
    case PSCOM_ERR_NOMEM:
        return "out of memory";
    }
    return "unknown error";
}

static const char *con_state_str(pscom_con_state_t s)
{
    static const char *names[] = {"no_rw", "ondemand", "connecting", "accepting",
                                  "rw",    "closing",  "closed",     "error"};
    return (unsigned)s < 8 ? names[s] : "?";
}

static int count(list_head_t *h)
{
    int n = 0;
    list_head_t *p;
    list_for_each(p, h) n++;
    return n;
}

/* The first requests of a connection queue (linked through q): enough to see which message a
   hung receive waits for and what arrived instead. */
static void dump_reqs(FILE *out, const char *what, list_head_t *h)
{
    list_head_t *p;
    int n = 0;
    list_for_each(p, h)
    {
        pscom_req_t *req = list_entry(p, pscom_req_t, q);
        if (n++ == 4) {
            fprintf(out, "    %s: ... (%d in all)\n", what, count(h));
            return;
        }
        const pscom_request_t *r = &req->pub;
        const unsigned char *xh = (const unsigned char *)r->xheader;
        size_t xn = r->xheader_len < 16 ? r->xheader_len : 16;
        fprintf(out, "    %s: %s, %zu B data, xheader %zu B:", what, pscom_req_state_str(r->state),
                r->data_len, r->xheader_len);
        for (size_t i = 0; i < xn; i++)
            fprintf(out, " %02x", xh[i]);
        fputc('\n', out);
    }
}

PSCOM_API void pscom_dump_info(FILE *out)
{
    list_head_t *ps, *pc;
    fprintf(out, "pscom %s pid %d host %s\n", PSCOM_VERSION_STR, pscom_global.pid,
            pscom_global.hostname);
    list_for_each(ps, &pscom_global.sockets)
    {
        pscom_sock_t *sock = list_entry(ps, pscom_sock_t, next);
        fprintf(out, "socket %s ep %s: %d connections, %d any-source receives, %d unexpected\n",
                sock->pub.local_name, sock->ep[0] ? sock->ep : "-", count(&sock->cons),
                count(&sock->recvq_any), count(&sock->genq_any));
        list_for_each(pc, &sock->cons)
        {
            pscom_con_t *con = list_entry(pc, pscom_con_t, next);
            fprintf(out,
                    "  con %s state %s: %d sends, %d receives, %d unexpected, %d rndv "
                    "sends, %d rndv receives\n",
                    con->log_name, con_state_str(con->pub.state), count(&con->sendq),
                    count(&con->recvq), count(&con->genq), count(&con->rndv_sends),
                    count(&con->rndv_recvs));
            dump_reqs(out, "receive", &con->recvq);
            dump_reqs(out, "unexpected", &con->genq);
            dump_reqs(out, "send", &con->sendq);
            if (con->precon)
                pscom_precon_dump(con->precon, out);
            else if (con->connect_deferred)
                fprintf(out, "    connect waits for the peer's own attempt to settle\n");
            else if (con->pub.state == PSCOM_CON_STATE_ACCEPTING)
                fprintf(out, "    waits for the peer's own connection (it won the tie-break)\n");
            fprintf(out, "    credit %lld bytes, window granted %llu, held back %llu\n",
                    (long long)con->fc_credit, (unsigned long long)con->fc_window,
                    (unsigned long long)con->fc_return);
            if (con->ops && !con->closed && con->ops->dump)
                con->ops->dump(con, out);
        }
    }
    pscom_plugin_dump(out);
    pscom_stats_t *s = &pscom_stats;
    char plugins[512];
    pscom_plugin_counters(plugins, sizeof(plugins));
    fprintf(out,
            "counters: sent %llu/%llu B, recv %llu/%llu B, unexpected %llu, rndv %llu/%llu, "
            "pull %llu, sw %llu, cons %llu failed %llu, blocks %llu%s\n",
            (unsigned long long)s->msgs_sent, (unsigned long long)s->bytes_sent,
            (unsigned long long)s->msgs_recv, (unsigned long long)s->bytes_recv,
            (unsigned long long)s->eager_unexpected, (unsigned long long)s->rndv_sent,
            (unsigned long long)s->rndv_recv, (unsigned long long)s->rndv_pull,
            (unsigned long long)s->rndv_sw_fallback, (unsigned long long)s->cons_opened,
            (unsigned long long)s->cons_failed, (unsigned long long)s->progress_blocks, plugins);
}
