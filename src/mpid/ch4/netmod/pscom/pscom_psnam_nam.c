/*
 * The nam manifestation of PSNAM: the window's memory is a region in psnamd, segment r for
 * target rank r. Every operation becomes requests to psnamd (src/psnam/psnam_proto.h): one per
 * contiguous piece of the target datatype, cut into chunks of at most PSP_NAM_CHUNK bytes so
 * that large transfers pipeline through psnamd. psnamd applies a request whole before the next,
 * so accumulates and atomics are atomic per element across ranks and jobs, and answers each
 * one after applying it: a flush (and unlock, fence, complete) waits for all answers of the
 * window, which is remote completion. Locks are psnamd's (per segment); PSCW notifications
 * travel between the ranks over a duplicate of the window's communicator.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_psnam.h"
#include "../../../../psnam/psnam_op.h"

#include <sched.h>
#include <unistd.h>

enum { TAG_POST = 1, TAG_DONE = 2 };

static size_t chunk_bytes(void)
{
    char v[32];
    size_t c = 1u << 20;
    if (pscom_env_get("PSP_NAM_CHUNK", v, sizeof(v)) == 0 && atoll(v) > 0)
        c = (size_t)atoll(v);
    if (c > PSNAM_CHUNK_MAX)
        c = PSNAM_CHUNK_MAX;
    return c < 64 ? 64 : c;
}

static int timeout_s(void)
{
    char v[32];
    return pscom_env_get("PSP_NAM_TIMEOUT", v, sizeof(v)) == 0 && atoi(v) > 0 ? atoi(v) : 60;
}

/* ---- window set-up ---- */

/* one rank's OPEN: 0 or a psnam status, the reason in why */
static int open_region(MPIDI_PSNAM_win_t *w, const uint8_t v[PSNAM_MAC_LEN], int create,
                       const uint64_t *sizes, uint64_t *got_sizes, char *why, size_t whylen)
{
    size_t len = sizeof(psnam_open_t) + (create ? (size_t)w->nseg * sizeof(uint64_t) : 0);
    char *buf = MPL_calloc(1, len, MPL_MEM_RMA);
    if (!buf) {
        snprintf(why, whylen, "out of memory");
        return PSNAM_E_NOSPACE;
    }
    psnam_open_t *o = (psnam_open_t *)buf;
    snprintf(o->name, sizeof(o->name), "%s", w->name);
    o->nseg = (uint32_t)w->nseg;
    o->uid = (uint32_t)geteuid();
    if (create) {
        o->flags = PSNAM_F_CREATE | (w->persistent ? PSNAM_F_PERSISTENT : 0);
        memcpy(o->cred, v, PSNAM_MAC_LEN);
        memcpy(buf + sizeof(*o), sizes, (size_t)w->nseg * sizeof(uint64_t));
    } else {
        psnam_proof(v, psnam_nonce(w->client), o->name, o->cred);
    }
    psnam_msg_t m = {.type = PSNAM_OPEN}, reply = {0};
    size_t got = 0;
    int st = psnam_call(w->client, &m, buf, len, got_sizes, (size_t)w->nseg * sizeof(uint64_t),
                        &got, &reply, why, whylen);
    MPL_free(buf);
    if (st == PSNAM_OK) {
        w->handle = reply.region;
        if (got != (size_t)w->nseg * sizeof(uint64_t)) {
            snprintf(why, whylen, "region %s: psnamd reports %llu segments, the window has %d",
                     w->name, (unsigned long long)reply.arg, w->nseg);
            return PSNAM_E_SIZE;
        }
    }
    return st;
}

/* Collective: the key's verifier from rank 0 (one file read, and nodes need not share a home
   directory), a connection per rank, the region created (or first attached) by rank 0, then
   attached by the others. *cls: 0 or the MPI class of this rank's failure, agreed on. */
int MPIDI_PSNAM_nam_open(MPIDI_PSNAM_win_t *w, MPIR_Comm *comm, int disp_unit, int *cls, char *why,
                         size_t whylen)
{
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    struct {
        int status;
        uint8_t v[PSNAM_MAC_LEN];
        char why[PSNAM_REASON_MAX + 64];
    } hello = {0};
    int mpi_errno;
    int n = w->nseg, rank = comm->rank;
    uint64_t *sizes = MPL_calloc((size_t)n, sizeof(uint64_t), MPL_MEM_RMA);
    uint64_t *got = MPL_calloc((size_t)n, sizeof(uint64_t), MPL_MEM_RMA);
    w->disp_units = MPL_calloc((size_t)n, sizeof(int), MPL_MEM_RMA);
    w->locked = MPL_calloc((size_t)n, sizeof(int), MPL_MEM_RMA);
    if (!sizes || !got || !w->disp_units || !w->locked)
        return MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
    uint64_t mine = (uint64_t)w->size;
    mpi_errno = MPIR_Allgather(&mine, 1, MPI_UINT64_T, sizes, 1, MPI_UINT64_T, comm, &errflag);
    if (!mpi_errno)
        mpi_errno =
            MPIR_Allgather(&disp_unit, 1, MPI_INT, w->disp_units, 1, MPI_INT, comm, &errflag);
    if (mpi_errno)
        goto out;
    if (rank == 0) {
        char key[4096] = "";
        pscom_env_get("PSP_NAM_KEY", key, sizeof(key));
        if (psnam_verifier(key, hello.v, hello.why, sizeof(hello.why)) != 0)
            hello.status = MPI_ERR_ACCESS;
    }
    mpi_errno = MPIR_Bcast(&hello, sizeof(hello), MPI_BYTE, 0, comm, &errflag);
    if (mpi_errno)
        goto out;
    w->chunk = chunk_bytes(); /* the configuration lookup costs more than a small request */
    int local = hello.status, st = PSNAM_OK;
    char reason[PSNAM_REASON_MAX + 64] = "";
    snprintf(reason, sizeof(reason), "%s", hello.why);
    if (!local) {
        w->client = psnam_connect(w->server, timeout_s(), reason, sizeof(reason));
        if (!w->client)
            local = MPI_ERR_OTHER;
    }
    /* rank 0 makes the region exist (or checks it), then the others open it */
    if (rank == 0 && !local) {
        st = open_region(w, hello.v, !w->attach, sizes, got, reason, sizeof(reason));
        if (st == PSNAM_OK && w->attach && w->size && got[0] != mine) {
            snprintf(reason, sizeof(reason),
                     "region %s segment 0 holds %llu bytes, "
                     "MPI_Win_allocate asked for %lld (0 takes the region's size)",
                     w->name, (unsigned long long)got[0], (long long)w->size);
            st = PSNAM_E_SIZE;
        }
        if (st != PSNAM_OK)
            local = MPIDI_PSNAM_class(st);
    }
    struct {
        int cls;
        char why[PSNAM_REASON_MAX + 64];
    } first = {local, ""};
    snprintf(first.why, sizeof(first.why), "%s", reason);
    mpi_errno = MPIR_Bcast(&first, sizeof(first), MPI_BYTE, 0, comm, &errflag);
    if (mpi_errno)
        goto out;
    if (first.cls) { /* rank 0 failed: everybody says why */
        *cls = first.cls;
        snprintf(why, whylen, "%s%s", rank ? "rank 0: " : "", first.why);
        goto out;
    }
    if (rank != 0 && !local) {
        st = open_region(w, hello.v, 0, NULL, got, reason, sizeof(reason));
        if (st == PSNAM_OK && w->attach && w->size && got[rank] != mine) {
            snprintf(reason, sizeof(reason),
                     "region %s segment %d holds %llu bytes, "
                     "MPI_Win_allocate asked for %lld",
                     w->name, rank, (unsigned long long)got[rank], (long long)w->size);
            st = PSNAM_E_SIZE;
        }
        if (st != PSNAM_OK)
            local = MPIDI_PSNAM_class(st);
    }
    if (!local)
        w->size = (MPI_Aint)got[rank];
    int worst = 0;
    mpi_errno = MPIR_Allreduce(&local, &worst, 1, MPI_INT, MPI_MAX, comm, &errflag);
    if (mpi_errno)
        goto out;
    if (worst) {
        *cls = local ? local : worst;
        snprintf(why, whylen, "%s", local ? reason : "another rank could not open the region");
        MPIDI_PSNAM_nam_close(w);
    }
out:
    memset(&hello, 0, sizeof(hello));
    MPL_free(sizes);
    MPL_free(got);
    if ((mpi_errno || *cls) && w->client) {
        psnam_disconnect(w->client);
        w->client = NULL;
    }
    if (mpi_errno || *cls) {
        MPL_free(w->disp_units);
        MPL_free(w->locked);
        w->disp_units = NULL;
        w->locked = NULL;
    }
    return mpi_errno;
}

/* ---- requests and completion ---- */

/* An MPI operation: its pieces, what to do when the last one is answered */
typedef struct nam_op {
    MPIDI_PSNAM_win_t *w;
    int pieces;
    int status;
    char reason[PSNAM_REASON_MAX + 1];
    MPIR_Request *req; /* request-based operations */
    void *owned;       /* packed origin data */
    void *stage;       /* result staged for a non-contiguous result buffer */
    MPI_Aint stage_len;
    void *result;
    MPI_Aint result_count;
    MPI_Datatype result_type;
} nam_op_t;

static void note_error(MPIDI_PSNAM_win_t *w, int status, const char *reason)
{
    if (w->error)
        return;
    w->error = MPIDI_PSNAM_class(status);
    snprintf(w->error_msg, sizeof(w->error_msg), "nam window %s: %s", w->name,
             reason && *reason ? reason : psnam_err_str(status));
}

static void op_end(nam_op_t *op)
{
    MPIDI_PSNAM_win_t *w = op->w;
    if (op->status != PSNAM_OK)
        note_error(w, op->status, op->reason);
    else if (op->stage) {
        MPI_Aint actual;
        MPIR_Typerep_unpack(op->stage, op->stage_len, op->result, op->result_count, op->result_type,
                            0, &actual);
    }
    if (op->result_type != MPI_DATATYPE_NULL)
        MPIR_Datatype_release_if_not_builtin(op->result_type);
    if (op->req) {
        if (op->status != PSNAM_OK)
            op->req->status.MPI_ERROR =
                MPIDI_PSNAM_error(MPIDI_PSNAM_class(op->status), "%s", w->error_msg);
        MPID_Request_complete(op->req);
    }
    MPL_free(op->owned);
    MPL_free(op->stage);
    MPL_free(op);
}

static void piece_done(void *user, int status, const char *reason, size_t len)
{
    (void)len;
    nam_op_t *op = user;
    op->w->outstanding--;
    if (status != PSNAM_OK && op->status == PSNAM_OK) {
        op->status = status;
        snprintf(op->reason, sizeof(op->reason), "%s", reason ? reason : "");
    }
    if (--op->pieces == 0)
        op_end(op);
}

static nam_op_t *op_new(MPIDI_PSNAM_win_t *w, MPIR_Request **req)
{
    nam_op_t *op = MPL_calloc(1, sizeof(*op), MPL_MEM_RMA);
    if (!op)
        return NULL;
    op->w = w;
    op->pieces = 1; /* held while posting: op_post_done drops it */
    op->result_type = MPI_DATATYPE_NULL;
    if (req) {
        op->req = MPIR_Request_create(MPIR_REQUEST_KIND__RMA);
        if (!op->req) {
            MPL_free(op);
            return NULL;
        }
        MPIR_Object_set_ref(op->req, 2); /* one for the user, one for completion */
        *req = op->req;
    }
    return op;
}

static void op_post_done(nam_op_t *op)
{
    if (--op->pieces == 0)
        op_end(op);
}

static void post_piece(nam_op_t *op, psnam_msg_t *m, const void *data, size_t len, void *result,
                       size_t rlen)
{
    op->pieces++;
    op->w->outstanding++;
    psnam_post(op->w->client, m, data, len, result, rlen, piece_done, op);
}

/* The contiguous pieces of the target: (offset, bytes) pairs. 0, or an MPI error. */
static int target_pieces(MPIDI_PSNAM_win_t *w, int rank, MPI_Aint disp, MPI_Aint count,
                         MPI_Datatype type, struct iovec *one, struct iovec **out, MPI_Aint *n_out)
{
    MPI_Aint base = disp * w->disp_units[rank];
    int contig;
    MPIR_Datatype_is_contig(type, &contig);
    if (contig) {
        MPI_Aint size, lb;
        MPIR_Datatype_get_size_macro(type, size);
        MPIR_Datatype_get_true_lb(type, &lb);
        *out = one; /* the common case without an allocation */
        (*out)[0].iov_base = (void *)(base + lb);
        (*out)[0].iov_len = (size_t)(size * count);
        *n_out = 1;
        return MPI_SUCCESS;
    }
    MPI_Aint n, actual;
    MPIR_Typerep_iov_len(count, type, -1, &n);
    *out = MPL_malloc((size_t)n * sizeof(struct iovec), MPL_MEM_RMA);
    if (!*out)
        return MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
    MPIR_Typerep_to_iov_offset(NULL, count, type, 0, *out, n, &actual);
    for (MPI_Aint i = 0; i < actual; i++)
        (*out)[i].iov_base = (void *)(base + (MPI_Aint)(*out)[i].iov_base);
    *n_out = actual;
    return MPI_SUCCESS;
}

/* origin data as one contiguous block: the user's buffer itself, or a packed copy (owned) */
static const char *origin_bytes(const void *addr, MPI_Aint count, MPI_Datatype type, void **owned,
                                MPI_Aint *bytes)
{
    int contig;
    MPI_Aint size, lb;
    MPIR_Datatype_get_size_macro(type, size);
    *bytes = size * count;
    MPIR_Datatype_is_contig(type, &contig);
    if (contig) {
        MPIR_Datatype_get_true_lb(type, &lb);
        return (const char *)addr + lb;
    }
    *owned = MPL_malloc(*bytes ? (size_t)*bytes : 1, MPL_MEM_RMA);
    if (!*owned)
        return NULL;
    MPI_Aint actual;
    MPIR_Typerep_pack(addr, count, type, 0, *owned, *bytes, &actual);
    return *owned;
}

/* where results go: the user's buffer, or a stage to unpack at the end */
static char *result_bytes(nam_op_t *op, void *addr, MPI_Aint count, MPI_Datatype type)
{
    int contig;
    MPI_Aint size, lb;
    MPIR_Datatype_get_size_macro(type, size);
    MPIR_Datatype_is_contig(type, &contig);
    if (contig) {
        MPIR_Datatype_get_true_lb(type, &lb);
        return (char *)addr + lb;
    }
    op->stage_len = size * count;
    op->stage = MPL_malloc(op->stage_len ? (size_t)op->stage_len : 1, MPL_MEM_RMA);
    op->result = addr;
    op->result_count = count;
    op->result_type = type;
    MPIR_Datatype_add_ref_if_not_builtin(type);
    return op->stage;
}

static int check_target(MPIR_Win *win, MPIDI_PSNAM_win_t *w, int rank)
{
    if (rank < 0 || rank >= w->nseg)
        return MPIDI_PSNAM_error(MPI_ERR_RANK, "nam window %s: no target rank %d", w->name, rank);
    (void)win;
    return MPI_SUCCESS;
}

/* The element type psnamd computes with for an MPI basic type (PSNAM_T_NONE: none) */
static unsigned element_type(MPI_Datatype basic)
{
    MPI_Aint size;
    MPIR_Datatype_get_size_macro(basic, size);
    if (basic == MPI_FLOAT || basic == MPI_REAL || basic == MPI_REAL4)
        return PSNAM_T_F32;
    if (basic == MPI_DOUBLE || basic == MPI_DOUBLE_PRECISION || basic == MPI_REAL8)
        return PSNAM_T_F64;
    int is_unsigned = basic == MPI_UNSIGNED_CHAR || basic == MPI_UNSIGNED_SHORT ||
                      basic == MPI_UNSIGNED || basic == MPI_UNSIGNED_LONG ||
                      basic == MPI_UNSIGNED_LONG_LONG || basic == MPI_UINT8_T ||
                      basic == MPI_UINT16_T || basic == MPI_UINT32_T || basic == MPI_UINT64_T ||
                      basic == MPI_BYTE || basic == MPI_C_BOOL;
    int is_signed = basic == MPI_CHAR || basic == MPI_SIGNED_CHAR || basic == MPI_SHORT ||
                    basic == MPI_INT || basic == MPI_LONG || basic == MPI_LONG_LONG ||
                    basic == MPI_INT8_T || basic == MPI_INT16_T || basic == MPI_INT32_T ||
                    basic == MPI_INT64_T || basic == MPI_AINT || basic == MPI_OFFSET ||
                    basic == MPI_COUNT || basic == MPI_WCHAR || basic == MPI_INTEGER ||
                    basic == MPI_LOGICAL || basic == MPI_CHARACTER;
    static const unsigned s[] = {0, PSNAM_T_I8, PSNAM_T_I16, 0, PSNAM_T_I32, 0, 0, 0, PSNAM_T_I64};
    static const unsigned u[] = {0, PSNAM_T_U8, PSNAM_T_U16, 0, PSNAM_T_U32, 0, 0, 0, PSNAM_T_U64};
    if (size < 1 || size > 8)
        return PSNAM_T_NONE;
    return is_unsigned ? u[size] : is_signed ? s[size] : PSNAM_T_NONE;
}

static int op_code(MPI_Op op)
{
    static const struct {
        MPI_Op op;
        int code;
    } map[] = {
        {MPI_REPLACE, PSNAM_OP_REPLACE}, {MPI_NO_OP, PSNAM_OP_NO_OP}, {MPI_SUM, PSNAM_OP_SUM},
        {MPI_PROD, PSNAM_OP_PROD},       {MPI_MAX, PSNAM_OP_MAX},     {MPI_MIN, PSNAM_OP_MIN},
        {MPI_LAND, PSNAM_OP_LAND},       {MPI_LOR, PSNAM_OP_LOR},     {MPI_LXOR, PSNAM_OP_LXOR},
        {MPI_BAND, PSNAM_OP_BAND},       {MPI_BOR, PSNAM_OP_BOR},     {MPI_BXOR, PSNAM_OP_BXOR}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (map[i].op == op)
            return map[i].code;
    return -1;
}

/* The target's pieces (one without an allocation when contiguous) */
typedef struct pieces {
    struct iovec one, *iov;
    MPI_Aint n;
} pieces_t;

static void pieces_free(pieces_t *p)
{
    if (p->iov != &p->one)
        MPL_free(p->iov);
}

/* What every operation starts with: the target checked, its pieces, the operation record */
static int op_begin(MPIR_Win *win, int rank, MPI_Aint disp, MPI_Aint count, MPI_Datatype type,
                    MPIR_Request **req, pieces_t *p, nam_op_t **op)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    int mpi_errno = check_target(win, w, rank);
    if (!mpi_errno)
        mpi_errno = target_pieces(w, rank, disp, count, type, &p->one, &p->iov, &p->n);
    if (mpi_errno)
        return mpi_errno;
    if (!(*op = op_new(w, req))) {
        pieces_free(p);
        return MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
    }
    return MPI_SUCCESS;
}

/* put (fetch == 0) or get: pieces of the target, chunked */
static int transfer(int is_get, void *oaddr, MPI_Aint ocount, MPI_Datatype otype, int trank,
                    MPI_Aint tdisp, MPI_Aint tcount, MPI_Datatype ttype, MPIR_Win *win,
                    MPIR_Request **req)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    pieces_t p;
    nam_op_t *op;
    int mpi_errno = op_begin(win, trank, tdisp, tcount, ttype, req, &p, &op);
    if (mpi_errno)
        return mpi_errno;
    struct iovec *iov = p.iov;
    MPI_Aint n = p.n, bytes;
    char *o;
    if (is_get) {
        MPI_Aint size;
        MPIR_Datatype_get_size_macro(otype, size);
        bytes = size * ocount;
        o = result_bytes(op, oaddr, ocount, otype);
    } else {
        o = (char *)origin_bytes(oaddr, ocount, otype, &op->owned, &bytes);
    }
    size_t chunk = w->chunk, done = 0;
    for (MPI_Aint i = 0; o && i < n; i++) {
        for (size_t off = 0; off < iov[i].iov_len && done < (size_t)bytes;) {
            size_t len = iov[i].iov_len - off < chunk ? iov[i].iov_len - off : chunk;
            if (len > (size_t)bytes - done)
                len = (size_t)bytes - done;
            psnam_msg_t m = {.type = is_get ? PSNAM_GET : PSNAM_PUT,
                             .region = w->handle,
                             .seg = (uint32_t)trank,
                             .offset = (uint64_t)(uintptr_t)iov[i].iov_base + off,
                             .len = len};
            if (is_get)
                post_piece(op, &m, NULL, 0, o + done, len);
            else
                post_piece(op, &m, o + done, len, NULL, 0);
            off += len;
            done += len;
        }
    }
    pieces_free(&p);
    if (!o)
        op->status = PSNAM_E_NOSPACE;
    op_post_done(op);
    return MPI_SUCCESS;
}

int MPIDI_PSNAM_put(const void *origin_addr, MPI_Aint origin_count, MPI_Datatype origin_datatype,
                    int target_rank, MPI_Aint target_disp, MPI_Aint target_count,
                    MPI_Datatype target_datatype, MPIR_Win *win, MPIR_Request **req)
{
    return transfer(0, (void *)origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                    target_count, target_datatype, win, req);
}

int MPIDI_PSNAM_get(void *origin_addr, MPI_Aint origin_count, MPI_Datatype origin_datatype,
                    int target_rank, MPI_Aint target_disp, MPI_Aint target_count,
                    MPI_Datatype target_datatype, MPIR_Win *win, MPIR_Request **req)
{
    return transfer(1, origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                    target_count, target_datatype, win, req);
}

int MPIDI_PSNAM_accumulate(const void *origin_addr, MPI_Aint origin_count,
                           MPI_Datatype origin_datatype, void *result_addr, MPI_Aint result_count,
                           MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                           MPI_Aint target_count, MPI_Datatype target_datatype, MPI_Op op,
                           MPIR_Win *win, int fetch, MPIR_Request **req)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    int code = op_code(op);
    if (code < 0)
        return MPIDI_PSNAM_error(MPI_ERR_OP,
                                 "nam window %s: psnamd applies MPI's predefined "
                                 "operations except MPI_MAXLOC/MPI_MINLOC",
                                 w->name);
    if (fetch && code == PSNAM_OP_NO_OP) /* a read */
        return MPIDI_PSNAM_get(result_addr, result_count, result_datatype, target_rank, target_disp,
                               target_count, target_datatype, win, req);
    if (!fetch && code == PSNAM_OP_NO_OP) {
        if (req) {
            *req = MPIR_Request_create_complete(MPIR_REQUEST_KIND__RMA);
            if (!*req)
                return MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
        }
        return MPI_SUCCESS;
    }
    MPI_Datatype basic;
    MPIR_Datatype_get_basic_type(target_datatype, basic);
    unsigned et = element_type(basic);
    MPI_Aint esize;
    MPIR_Datatype_get_size_macro(basic, esize);
    if (et == PSNAM_T_NONE) {
        if (code != PSNAM_OP_REPLACE)
            return MPIDI_PSNAM_error(MPI_ERR_TYPE,
                                     "nam window %s: psnamd does not compute on "
                                     "this element type (integers, float and double only)",
                                     w->name);
        et = PSNAM_T_U8; /* replace moves bytes; whole requests stay atomic */
        esize = 1;
    }
    pieces_t p;
    nam_op_t *nop;
    int mpi_errno =
        op_begin(win, target_rank, target_disp, target_count, target_datatype, req, &p, &nop);
    if (mpi_errno)
        return mpi_errno;
    struct iovec *iov = p.iov;
    MPI_Aint n = p.n, bytes;
    const char *o = origin_bytes(origin_addr, origin_count, origin_datatype, &nop->owned, &bytes);
    char *r = fetch && o ? result_bytes(nop, result_addr, result_count, result_datatype) : NULL;
    size_t chunk = w->chunk / (size_t)esize * (size_t)esize, done = 0;
    for (MPI_Aint i = 0; o && (!fetch || r) && i < n; i++) {
        for (size_t off = 0; off < iov[i].iov_len && done < (size_t)bytes;) {
            size_t len = iov[i].iov_len - off < chunk ? iov[i].iov_len - off : chunk;
            psnam_msg_t m = {.type = fetch ? PSNAM_GACC : PSNAM_ACC,
                             .op = (uint8_t)code,
                             .dtype = (uint8_t)et,
                             .region = w->handle,
                             .seg = (uint32_t)target_rank,
                             .offset = (uint64_t)(uintptr_t)iov[i].iov_base + off};
            post_piece(nop, &m, o + done, len, fetch ? r + done : NULL, fetch ? len : 0);
            off += len;
            done += len;
        }
    }
    pieces_free(&p);
    if (!o || (fetch && !r))
        nop->status = PSNAM_E_NOSPACE;
    op_post_done(nop);
    return MPI_SUCCESS;
}

int MPIDI_PSNAM_compare_and_swap(const void *origin_addr, const void *compare_addr,
                                 void *result_addr, MPI_Datatype datatype, int target_rank,
                                 MPI_Aint target_disp, MPIR_Win *win)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    unsigned et = element_type(datatype);
    MPI_Aint es;
    MPIR_Datatype_get_size_macro(datatype, es);
    if (et == PSNAM_T_NONE) /* compare-and-swap compares bits: any size psnamd knows */
        et = es == 1   ? PSNAM_T_U8
             : es == 2 ? PSNAM_T_U16
             : es == 4 ? PSNAM_T_U32
             : es == 8 ? PSNAM_T_U64
                       : PSNAM_T_NONE;
    if (et == PSNAM_T_NONE)
        return MPIDI_PSNAM_error(MPI_ERR_TYPE,
                                 "nam window %s: compare-and-swap of %ld-byte "
                                 "elements",
                                 w->name, (long)es);
    int mpi_errno = check_target(win, w, target_rank);
    if (mpi_errno)
        return mpi_errno;
    nam_op_t *op = op_new(w, NULL);
    char *both = op ? MPL_malloc(2 * (size_t)es, MPL_MEM_RMA) : NULL;
    if (!both) {
        MPL_free(op);
        return MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
    }
    memcpy(both, compare_addr, (size_t)es);
    memcpy(both + es, origin_addr, (size_t)es);
    op->owned = both;
    psnam_msg_t m = {.type = PSNAM_CAS,
                     .dtype = (uint8_t)et,
                     .region = w->handle,
                     .seg = (uint32_t)target_rank,
                     .offset = (uint64_t)(target_disp * w->disp_units[target_rank])};
    post_piece(op, &m, both, 2 * (size_t)es, result_addr, (size_t)es);
    op_post_done(op);
    return MPI_SUCCESS;
}

/* ---- synchronisation ---- */

/* progress until nothing of this window is outstanding; the first error since the last
   synchronisation, reported once */
int MPIDI_PSNAM_flush(MPIR_Win *win)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    unsigned last = w->outstanding, idle = 0;
    while (w->outstanding) {
        int mpi_errno = MPID_Progress_test(NULL);
        if (mpi_errno)
            return mpi_errno;
        psnam_check(w->client);
        /* nothing answered for a while: psnamd (or the kernel moving our data to it) may
           need this CPU more than our polling does */
        if (w->outstanding != last) {
            last = w->outstanding;
            idle = 0;
        } else if (++idle > 64) {
            sched_yield();
        }
    }
    if (!w->error)
        return MPI_SUCCESS;
    int cls = w->error;
    w->error = 0;
    return MPIDI_PSNAM_error(cls, "%s", w->error_msg);
}

/* a lock request, answered when psnamd grants it */
static int lock_call(MPIDI_PSNAM_win_t *w, int type, uint32_t seg, int kind)
{
    int status = PSNAM_OK;
    char why[PSNAM_REASON_MAX + 1] = "";
    psnam_msg_t m = {.type = (uint8_t)type, .region = w->handle, .seg = seg, .arg = (uint64_t)kind};
    status = psnam_call(w->client, &m, NULL, 0, NULL, 0, NULL, NULL, why, sizeof(why));
    if (status == PSNAM_OK)
        return MPI_SUCCESS;
    return MPIDI_PSNAM_error(MPIDI_PSNAM_class(status), "nam window %s: %s %s: %s", w->name,
                             type == PSNAM_LOCK ? "lock" : "unlock",
                             seg == PSNAM_SEG_ALL ? "all" : "segment", why);
}

int MPIDI_PSNAM_lock(int lock_type, int rank, int assert, MPIR_Win *win)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    int mpi_errno = check_target(win, w, rank);
    if (mpi_errno)
        return mpi_errno;
    if (assert & MPI_MODE_NOCHECK) { /* no conflicting lock exists: nothing to ask psnamd */
        w->locked[rank] = -1;
        return MPI_SUCCESS;
    }
    int kind = lock_type == MPI_LOCK_EXCLUSIVE ? PSNAM_LOCK_EXCLUSIVE : PSNAM_LOCK_SHARED;
    mpi_errno = lock_call(w, PSNAM_LOCK, (uint32_t)rank, kind);
    if (!mpi_errno)
        w->locked[rank] = kind;
    return mpi_errno;
}

int MPIDI_PSNAM_unlock(int rank, MPIR_Win *win)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    int mpi_errno = check_target(win, w, rank);
    if (mpi_errno)
        return mpi_errno;
    if (!w->locked[rank])
        return MPIDI_PSNAM_error(MPI_ERR_RMA_SYNC,
                                 "nam window %s: unlock of rank %d, which "
                                 "this process has not locked",
                                 w->name, rank);
    mpi_errno = MPIDI_PSNAM_flush(win);
    int was = w->locked[rank];
    w->locked[rank] = 0;
    int rc = was > 0 ? lock_call(w, PSNAM_UNLOCK, (uint32_t)rank, was) : MPI_SUCCESS;
    return mpi_errno ? mpi_errno : rc;
}

int MPIDI_PSNAM_lock_all(int assert, MPIR_Win *win)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    if (assert & MPI_MODE_NOCHECK) {
        w->lock_all = -1;
        return MPI_SUCCESS;
    }
    int mpi_errno = lock_call(w, PSNAM_LOCK, PSNAM_SEG_ALL, PSNAM_LOCK_SHARED);
    if (!mpi_errno)
        w->lock_all = 1;
    return mpi_errno;
}

int MPIDI_PSNAM_unlock_all(MPIR_Win *win)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    if (!w->lock_all)
        return MPIDI_PSNAM_error(MPI_ERR_RMA_SYNC,
                                 "nam window %s: MPI_Win_unlock_all without "
                                 "MPI_Win_lock_all",
                                 w->name);
    int mpi_errno = MPIDI_PSNAM_flush(win);
    int was = w->lock_all;
    w->lock_all = 0;
    int rc = was > 0 ? lock_call(w, PSNAM_UNLOCK, PSNAM_SEG_ALL, PSNAM_LOCK_SHARED) : MPI_SUCCESS;
    return mpi_errno ? mpi_errno : rc;
}

int MPIDI_PSNAM_fence(int assert, MPIR_Win *win)
{
    (void)assert;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int mpi_errno = MPIDI_PSNAM_flush(win);
    int rc = MPIR_Barrier(win->comm_ptr, &errflag);
    return mpi_errno ? mpi_errno : rc;
}

/* the window communicator's ranks of group's members */
static int group_ranks(MPIR_Group *group, MPIR_Win *win, int **out)
{
    int n = group->size;
    int *in = MPL_malloc((size_t)n * sizeof(int), MPL_MEM_RMA);
    *out = MPL_malloc((size_t)n * sizeof(int), MPL_MEM_RMA);
    MPIR_Group *wg = NULL;
    int mpi_errno = !in || !*out ? MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory")
                                 : MPIR_Comm_group_impl(win->comm_ptr, &wg);
    for (int i = 0; !mpi_errno && i < n; i++)
        in[i] = i;
    if (!mpi_errno)
        mpi_errno = MPIR_Group_translate_ranks_impl(group, n, in, wg, *out);
    if (wg)
        MPIR_Group_release(wg);
    MPL_free(in);
    return mpi_errno;
}

int MPIDI_PSNAM_post(MPIR_Group *group, int assert, MPIR_Win *win)
{
    (void)assert;
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int *ranks, mpi_errno = group_ranks(group, win, &ranks);
    if (mpi_errno)
        return mpi_errno;
    w->wait_reqs = MPL_calloc((size_t)group->size + 1, sizeof(MPIR_Request *), MPL_MEM_RMA);
    if (!w->wait_reqs) {
        MPL_free(ranks);
        return MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
    }
    w->n_wait = group->size;
    char dummy = 0;
    /* the origins' completions may come any time from now */
    for (int i = 0; !mpi_errno && i < group->size; i++)
        mpi_errno =
            MPIC_Irecv(NULL, 0, MPI_BYTE, ranks[i], TAG_DONE, w->sync_comm, &w->wait_reqs[i]);
    for (int i = 0; !mpi_errno && i < group->size; i++)
        mpi_errno = MPIC_Send(&dummy, 0, MPI_BYTE, ranks[i], TAG_POST, w->sync_comm, &errflag);
    MPL_free(ranks);
    return mpi_errno;
}

int MPIDI_PSNAM_start(MPIR_Group *group, int assert, MPIR_Win *win)
{
    (void)assert;
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int mpi_errno = group_ranks(group, win, &w->start_ranks);
    w->n_start = group->size;
    for (int i = 0; !mpi_errno && i < w->n_start; i++)
        mpi_errno = MPIC_Recv(NULL, 0, MPI_BYTE, w->start_ranks[i], TAG_POST, w->sync_comm,
                              MPI_STATUS_IGNORE, &errflag);
    return mpi_errno;
}

int MPIDI_PSNAM_complete(MPIR_Win *win)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int mpi_errno = MPIDI_PSNAM_flush(win), rc = MPI_SUCCESS;
    char dummy = 0;
    for (int i = 0; !rc && i < w->n_start; i++)
        rc = MPIC_Send(&dummy, 0, MPI_BYTE, w->start_ranks[i], TAG_DONE, w->sync_comm, &errflag);
    MPL_free(w->start_ranks);
    w->start_ranks = NULL;
    w->n_start = 0;
    return mpi_errno ? mpi_errno : rc;
}

static void wait_end(MPIDI_PSNAM_win_t *w)
{
    for (int i = 0; i < w->n_wait; i++)
        if (w->wait_reqs[i])
            MPIR_Request_free(w->wait_reqs[i]);
    MPL_free(w->wait_reqs);
    w->wait_reqs = NULL;
    w->n_wait = 0;
}

int MPIDI_PSNAM_wait(MPIR_Win *win)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int mpi_errno = MPI_SUCCESS;
    if (w->n_wait) {
        MPI_Status *st = MPL_malloc((size_t)w->n_wait * sizeof(MPI_Status), MPL_MEM_RMA);
        mpi_errno = st ? MPIC_Waitall(w->n_wait, w->wait_reqs, st, &errflag)
                       : MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
        MPL_free(st);
        if (!mpi_errno) /* MPIC_Waitall released them */
            memset(w->wait_reqs, 0, (size_t)w->n_wait * sizeof(MPIR_Request *));
    }
    wait_end(w);
    return mpi_errno;
}

int MPIDI_PSNAM_test(MPIR_Win *win, int *flag)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_NAM(win);
    int mpi_errno = MPID_Progress_test(NULL);
    if (mpi_errno)
        return mpi_errno;
    *flag = 1;
    for (int i = 0; i < w->n_wait; i++)
        if (!MPIR_Request_is_complete(w->wait_reqs[i]))
            *flag = 0;
    if (*flag)
        wait_end(w);
    return MPI_SUCCESS;
}

int MPIDI_PSNAM_nam_close(MPIDI_PSNAM_win_t *w)
{
    int mpi_errno = MPI_SUCCESS;
    if (w->client) {
        while (w->outstanding) {
            MPID_Progress_test(NULL);
            psnam_check(w->client);
        }
        if (w->handle) {
            psnam_msg_t m = {.type = PSNAM_CLOSE, .region = w->handle};
            char why[PSNAM_REASON_MAX + 1];
            int st = psnam_call(w->client, &m, NULL, 0, NULL, 0, NULL, NULL, why, sizeof(why));
            if (st != PSNAM_OK && st != PSNAM_E_LOST)
                mpi_errno =
                    MPIDI_PSNAM_error(MPIDI_PSNAM_class(st), "nam window %s: %s", w->name, why);
        }
        psnam_disconnect(w->client);
        w->client = NULL;
    }
    if (w->sync_comm)
        MPIR_Comm_release(w->sync_comm);
    w->sync_comm = NULL;
    MPL_free(w->disp_units);
    MPL_free(w->locked);
    w->disp_units = NULL;
    w->locked = NULL;
    return mpi_errno;
}
