/*
 * testutil.h - shared helpers of the pscom tests: forked process groups, collective exchange
 * through pipes, data patterns, request helpers and resource (fd, shm) checks.
 *
 * A multi-process test calls tu_run() from main() BEFORE pscom_init(): it forks n children
 * (ranks 0..n-1), each calls pscom_init() itself. The parent never uses pscom; it relays the
 * children's TAP results, serves tu_barrier()/tu_allgather() over pipes, reaps the children,
 * checks their exit status and that no shared memory was left behind.
 */
#ifndef TESTUTIL_H_INCLUDED
#define TESTUTIL_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pscom.h"
#include "tap.h"

/* ---- process groups ---------------------------------------------------------------------- */

extern int tu_rank;   /* rank of this child, -1 in the parent */
extern int tu_nranks; /* size of the group, 0 in the parent */

typedef int (*tu_child_fn)(void *arg);

/*
 * Fork n children, each running exit(fn(arg)) with tu_rank set. The parent prints the results
 * the children report, one "exit status" result per child (0 expected, or death by
 * expect_sig[rank] when expect_sig is not NULL and the entry is nonzero) and the shm hygiene
 * results. Children still running after T_TIMEOUT seconds (default 45) get SIGQUIT (if
 * PSP_SIGQUIT is set, so that pscom dumps its state), then SIGKILL, and a failure naming the
 * phase they were in (tu_phase()).
 */
void tu_run(int n, tu_child_fn fn, void *arg, const int *expect_sig);

/* In a child: wait until every rank that is still alive calls tu_barrier(). Once this process
   opened a socket with tu_open_socket(), waiting keeps pscom progressing (pscom_progress(1)),
   so that peers blocked in pscom calls are served. So does tu_allgather(). */
void tu_barrier(void);
/* Same, but keep calling idle(arg) while waiting. */
void tu_barrier_while(void (*idle)(void *), void *arg);
/* In a child: every live rank contributes one line (no '\n'); returns all n of them (malloc'ed,
   "" for ranks that died). Free with tu_strv_free(). */
char **tu_allgather(const char *s);
void tu_strv_free(char **v);
/* In a child: name what this rank does now, for the report if it hangs. */
void tu_phase(const char *fmt, ...) TAP_PRINTF(1, 2);

/* ---- environment of the test run (set by test/pscom/lib.sh) ------------------------------- */

/* T_RNDV: the rendezvous threshold forced for this run, or 0 if not forced. (T_TRANSPORT, the
   transport every connection must use, is checked by tu_check_transport().) */
size_t tu_rndv_threshold(void);

/* ---- pscom setup in a child --------------------------------------------------------------- */

/* Per-connection userdata of sockets made by tu_open_socket(). */
typedef struct tu_con_data {
    int accepted; /* con_accept calls for this connection */
    int errors;   /* con_error calls for this connection */
    pscom_op_t last_op;
    pscom_err_t last_err;
} tu_con_data_t;
#define TU_CON(con) ((tu_con_data_t *)(con)->userdata)

extern int tu_accept_count; /* con_accept calls, all sockets of this process */
extern int tu_error_count;  /* con_error calls, all sockets of this process */

/* pscom_init (checked), a socket named "r<rank>" with counting con_accept/con_error hooks,
   listening on any port. Exits on failure. */
pscom_socket_t *tu_open_socket(void);
/* The same for another socket of this process, named "r<rank><suffix>". */
pscom_socket_t *tu_open_socket_named(const char *suffix);
/* Allgather the endpoint strings of sock (one per rank). */
char **tu_exchange_eps(pscom_socket_t *sock);
/* Open and pscom_connect a connection to every other rank (flags: PSCOM_CON_FLAG_*); cons[rank]
   is NULL. All ranks do it at once, so peers connect to each other simultaneously. */
pscom_connection_t **tu_connect_all(pscom_socket_t *sock, char **eps, int flags);
/* One ok() that con uses the transport T_TRANSPORT asks for (if set). */
void tu_check_transport(pscom_connection_t *con, const char *what);

/* End of a two-rank child: check con's transport and that no connection failed, barrier, close
   sock, free cons and eps. Returns 0 (the child's exit status). */
int tu_finish(pscom_socket_t *sock, pscom_connection_t **cons, char **eps, pscom_connection_t *con);
/* The common two-rank test: tu_run(2, ...) where each child opens a socket, connects DIRECT to
   the other rank, runs body(sock, con) and ends with tu_finish(). */
void tu_run_pair(void (*body)(pscom_socket_t *sock, pscom_connection_t *con));

/* ---- messages ----------------------------------------------------------------------------- */

/* The xheader most tests send; tag and seq drive matching and order checks. */
typedef struct tu_xh {
    uint32_t tag;
    uint32_t src; /* sender's rank */
    uint64_t seq;
} tu_xh_t;

/* user part of requests made by tu_req() */
typedef struct tu_req_user {
    int64_t want_tag; /* tu_accept_tag: accept xheaders with this tag; -1: any */
    int64_t want_seq; /* and this seq; -1: any */
    int io_done_calls;
    void *owned; /* buffer freed by tu_req_free() */
} tu_req_user_t;
#define TU_REQ(req) ((tu_req_user_t *)(req)->user)

/* recv_accept: the xheader is a tu_xh_t with tag TU_REQ(req)->want_tag and seq want_seq
   (each unless < 0). */
int tu_accept_tag(pscom_request_t *req, pscom_connection_t *con, pscom_header_net_t *header);

/* A request with a tu_req_user_t and room for max_xheader bytes; io_done counts its calls. */
pscom_request_t *tu_req(size_t max_xheader);
/* Make progress until a message from con with this tag and seq is queued (pscom_iprobe). */
void tu_wait_arrival(pscom_connection_t *con, int64_t tag, int64_t seq);
/* Free req and the buffer it owns. */
void tu_req_free(pscom_request_t *req);

#define TU_XH sizeof(tu_xh_t)

/* Post a send of an xheader of xh_len bytes: a tu_xh_t {tag, tu_rank, seq} if xh_len >= TU_XH,
   then pattern bytes; and len bytes of pattern data (seed tu_seed(len, seq, tu_rank)). The
   request owns its data buffer (tu_req_free()). */
pscom_request_t *tu_post_send(pscom_connection_t *con, uint32_t tag, uint64_t seq, size_t len,
                              size_t xh_len);
/* The same message by pscom_send_now: 1 sent, 0 not taken (nothing sent). */
int tu_send_now(pscom_connection_t *con, uint32_t tag, uint64_t seq, size_t len, size_t xh_len);
/* Post a receive into a new buffer of len bytes (owned) with room for max_xh xheader bytes;
   con NULL: any source of sock. want_tag < 0 accepts everything. */
pscom_request_t *tu_post_recv(pscom_connection_t *con, pscom_socket_t *sock, size_t len,
                              size_t max_xh, int64_t want_tag);
/*
 * Check a receive completed by a tu_post_send() message: successful, io_done exactly once,
 * xheader of xh_len bytes with {tag, src, seq} (each < 0: any; all needed when xh_len < TU_XH,
 * where the xheader is pattern only), data of len bytes with the pattern. Returns 1 if all is
 * well, else 0 after diagnostics (no ok() line: the caller reports).
 */
int tu_recv_good(pscom_request_t *req, long tag, long src, long long seq, size_t len,
                 size_t xh_len);
/* pscom_wait_all on reqs[0..n) */
void tu_wait_all(pscom_request_t **reqs, size_t n);

/* ---- data patterns ------------------------------------------------------------------------ */

uint64_t tu_seed(uint64_t len, uint64_t seq, uint64_t src);
void tu_fill(void *buf, size_t len, uint64_t seed);
/* -1 if buf holds the pattern, else the offset of the first wrong byte. */
long long tu_verify(const void *buf, size_t len, uint64_t seed);

/* ---- resources ---------------------------------------------------------------------------- */

/* Open file descriptors of this process. */
int tu_count_fds(void);
/* Host and port of an endpoint string "ip:port@name"; 0 on success. */
int tu_ep_addr(const char *ep, char *ip, size_t iplen, int *port);

/* Plain sockets, for a process that plays a peer (or a proxy) without pscom. */
struct sockaddr_in;
/* The address of an endpoint string "ip:port@name"; 0 on success. */
int tu_ep_sockaddr(const char *ep, struct sockaddr_in *sa);
/* A TCP socket listening on 127.0.0.1, any port (in *port); -1 on failure. */
int tu_listen_local(int *port);
/* A TCP connection to sa; -1 with errno on failure. */
int tu_dial(const struct sockaddr_in *sa);
/* Send all of buf (retried after EINTR): 0, or -1 once the peer closed or on an error. */
int tu_send_all(int fd, const void *buf, size_t len);
/* Redirect fd 2 into a temporary file until tu_capture_end(), which returns what was written
   (malloc'ed) and restores stderr. */
void tu_capture_begin(void);
char *tu_capture_end(void);
/* The first MiB of the file at path, '\0'-terminated ("" if it cannot be read); free() it. */
char *tu_slurp(const char *path);
/* Lines of text that contain word and, unless also is NULL, also; both as whole words (not
   next to a letter, digit or '_': "PSP_SHM" does not match "PSP_SHM_CMA", "2" not "r2"). */
int tu_count_lines(const char *text, const char *word, const char *also);

/*
 * Shared memory hygiene: tu_hygiene_begin() remembers /dev/shm; tu_hygiene_check() reports
 * (two ok lines) files that appeared in /dev/shm since, and SysV segments created by any of
 * pids[0..n) that still exist.
 */
void tu_hygiene_begin(void);
void tu_hygiene_check(const pid_t *pids, int n);

/* Monotonic seconds. */
double tu_now(void);

#endif /* TESTUTIL_H_INCLUDED */
