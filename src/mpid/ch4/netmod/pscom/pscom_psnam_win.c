/*
 * PSNAM windows: the info keys, allocation and free of both manifestations, MPI_Win_get_info
 * and MPI_Win_shared_query (pscom_psnam.h). Errors are MPI error classes whose message names
 * the region; a collective step that fails on one rank fails on all of them (nothing hangs).
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_psnam.h"

#include <stdarg.h>

static const char *const known_keys[] = {"psnam_manifestation", "psnam_name",   "psnam_persistent",
                                         "psnam_attach",        "psnam_server", NULL};

int MPIDI_PSNAM_error(int errclass, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, errclass,
                                "**psnam", "**psnam %s", msg);
}

int MPIDI_PSNAM_class(int psnam_err)
{
    switch (psnam_err) {
    case PSNAM_OK:
        return MPI_SUCCESS;
    case PSNAM_E_NOENT:
        return MPI_ERR_NO_SUCH_FILE;
    case PSNAM_E_EXIST:
        return MPI_ERR_FILE_EXISTS;
    case PSNAM_E_ACCESS:
        return MPI_ERR_ACCESS;
    case PSNAM_E_SIZE:
        return MPI_ERR_SIZE;
    case PSNAM_E_NOSPACE:
        return MPI_ERR_NO_SPACE;
    case PSNAM_E_RANGE:
        return MPI_ERR_RMA_RANGE;
    case PSNAM_E_TYPE:
        return MPI_ERR_TYPE;
    case PSNAM_E_BUSY:
        return MPI_ERR_FILE_IN_USE;
    case PSNAM_E_IO:
        return MPI_ERR_IO;
    default:
        return MPI_ERR_OTHER; /* a lost psnamd, a malformed exchange */
    }
}

/* does this info ask for a PSNAM window (any psnam_* key)? */
int MPIDI_PSNAM_wants(MPIR_Info *info)
{
    if (!info)
        return 0;
    for (MPIR_Info *i = info->next; i; i = i->next)
        if (i->key && strncmp(i->key, "psnam_", 6) == 0)
            return 1;
    return 0;
}

static int get_bool(MPIR_Info *info, const char *key, int deflt, int *out)
{
    char v[16];
    int flag = 0;
    MPIR_Info_get_impl(info, key, sizeof(v), v, &flag);
    if (!flag) {
        *out = deflt;
        return MPI_SUCCESS;
    }
    if (!strcmp(v, "true") || !strcmp(v, "1")) {
        *out = 1;
        return MPI_SUCCESS;
    }
    if (!strcmp(v, "false") || !strcmp(v, "0")) {
        *out = 0;
        return MPI_SUCCESS;
    }
    return MPIDI_PSNAM_error(MPI_ERR_INFO_VALUE, "info %s=%s: use true or false", key, v);
}

/* the window's settings from its info; the same on every rank (MPI_Win_allocate's info is) */
static int parse(MPIR_Info *info, MPIDI_PSNAM_win_t *w)
{
    int mpi_errno;
    for (MPIR_Info *i = info->next; i; i = i->next) {
        if (!i->key || strncmp(i->key, "psnam_", 6) != 0)
            continue;
        int k = 0;
        while (known_keys[k] && strcmp(known_keys[k], i->key) != 0)
            k++;
        if (!known_keys[k])
            return MPIDI_PSNAM_error(MPI_ERR_INFO_KEY,
                                     "unknown info key %s (PSNAM knows psnam_manifestation, "
                                     "psnam_name, psnam_persistent, psnam_attach, psnam_server)",
                                     i->key);
    }
    char v[256];
    int flag = 0;
    MPIR_Info_get_impl(info, "psnam_manifestation", sizeof(v), v, &flag);
    if (!flag)
        return MPIDI_PSNAM_error(MPI_ERR_INFO_VALUE,
                                 "psnam_* info keys without psnam_manifestation (shm or nam)");
    if (!strcmp(v, "shm"))
        w->kind = MPIDI_PSNAM_SHM;
    else if (!strcmp(v, "nam"))
        w->kind = MPIDI_PSNAM_NAM;
    else
        return MPIDI_PSNAM_error(MPI_ERR_INFO_VALUE,
                                 "psnam_manifestation=%s: not a manifestation (shm or nam)", v);
    flag = 0;
    MPIR_Info_get_impl(info, "psnam_name", sizeof(v), v, &flag);
    if (!flag)
        return MPIDI_PSNAM_error(MPI_ERR_INFO_VALUE, "a %s window needs psnam_name",
                                 w->kind == MPIDI_PSNAM_SHM ? "shm" : "nam");
    if (!psnam_name_ok(v))
        return MPIDI_PSNAM_error(MPI_ERR_INFO_VALUE,
                                 "psnam_name=%s: a region name is 1-63 letters, digits, '-', '_' "
                                 "or '.' (not starting with '.')",
                                 v);
    snprintf(w->name, sizeof(w->name), "%s", v);
    mpi_errno = get_bool(info, "psnam_attach", 0, &w->attach);
    if (mpi_errno)
        return mpi_errno;
    /* an attached region is kept unless psnam_persistent=false says it ends with this window */
    mpi_errno = get_bool(info, "psnam_persistent", w->attach, &w->persistent);
    if (mpi_errno)
        return mpi_errno;
    flag = 0;
    MPIR_Info_get_impl(info, "psnam_server", sizeof(w->server), w->server, &flag);
    if (!flag)
        pscom_env_get("PSP_NAM_SERVER", w->server, sizeof(w->server));
    if (w->kind == MPIDI_PSNAM_NAM && !w->server[0])
        return MPIDI_PSNAM_error(MPI_ERR_INFO_VALUE,
                                 "nam window %s: no psnamd (info psnam_server or PSP_NAM_SERVER)",
                                 w->name);
    return MPI_SUCCESS;
}

/* Every rank learns the worst class of all (0: all fine); a rank whose own step succeeded
   returns an error that says another rank failed. */
static int agree(MPIR_Comm *comm, int local_class, const char *name)
{
    int worst = 0;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int mpi_errno = MPIR_Allreduce(&local_class, &worst, 1, MPI_INT, MPI_MAX, comm, &errflag);
    if (mpi_errno)
        return mpi_errno;
    if (worst && !local_class)
        return MPIDI_PSNAM_error(worst,
                                 "region %s: another rank of the window failed (see its "
                                 "error)",
                                 name);
    return MPI_SUCCESS;
}

int MPIDI_PSNAM_allocate(MPI_Aint size, int disp_unit, MPIR_Info *info, MPIR_Comm *comm,
                         void *baseptr, MPIR_Win **win_ptr)
{
    MPIDI_PSNAM_win_t *w = MPL_calloc(1, sizeof(*w), MPL_MEM_RMA);
    if (!w)
        return MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
    w->size = size;
    w->nseg = comm->local_size;
    int mpi_errno = parse(info, w);
    /* the same info everywhere, so the same verdict: no agreement needed */
    if (mpi_errno) {
        MPL_free(w);
        return mpi_errno;
    }
    char why[PSNAM_REASON_MAX + 256] = "";
    int cls = 0;
    if (w->kind == MPIDI_PSNAM_SHM)
        cls = MPIDI_PSNAM_shm_open(w, comm, disp_unit, why, sizeof(why));
    else
        mpi_errno = MPIDI_PSNAM_nam_open(w, comm, disp_unit, &cls, why, sizeof(why));
    if (mpi_errno) {
        MPL_free(w);
        return mpi_errno;
    }
    int own = cls ? MPIDI_PSNAM_error(cls, "%s", why) : MPI_SUCCESS;
    if (w->kind == MPIDI_PSNAM_SHM) {
        mpi_errno = agree(comm, cls, w->name);
        if (own || mpi_errno) {
            if (!own) /* ours was made: the region is not, so it goes */
                MPIDI_PSNAM_shm_close(w, !w->attach);
            MPL_free(w);
            return own ? own : mpi_errno;
        }
    } else if (own) { /* nam_open agreed already */
        MPL_free(w);
        return own;
    }
    void *base = w->kind == MPIDI_PSNAM_SHM ? w->file.data : NULL;
    mpi_errno = MPIDIG_mpi_win_create(base, w->size, disp_unit, info, comm, win_ptr);
    if (mpi_errno) {
        if (w->kind == MPIDI_PSNAM_SHM)
            MPIDI_PSNAM_shm_close(w, !w->persistent);
        else
            MPIDI_PSNAM_nam_close(w);
        MPL_free(w);
        return mpi_errno;
    }
    MPIR_Win *win = *win_ptr;
    /* MPIDIG made a window over our memory (flavor create, so that its free leaves the memory
       alone); the user asked for MPI_Win_allocate and sees that flavor */
    win->create_flavor = MPI_WIN_FLAVOR_ALLOCATE;
    win->dev.netmod.pscom.psnam = w;
    if (w->kind == MPIDI_PSNAM_NAM) {
        win->dev.netmod.pscom.nam = w;
        mpi_errno = MPIR_Comm_dup_impl(win->comm_ptr, &w->sync_comm);
        if (mpi_errno)
            return mpi_errno;
    }
    *(void **)baseptr = base;
    return MPI_SUCCESS;
}

int MPIDI_PSNAM_free(MPIR_Win **win_ptr)
{
    MPIR_Win *win = *win_ptr;
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_WIN(win);
    int mpi_errno = MPI_SUCCESS;
    if (w->kind == MPIDI_PSNAM_NAM)
        mpi_errno = MPIDI_PSNAM_nam_close(w);
    win->create_flavor = MPI_WIN_FLAVOR_CREATE;
    win->dev.netmod.pscom.psnam = NULL;
    win->dev.netmod.pscom.nam = NULL;
    int rc = MPIDIG_mpi_win_free(win_ptr);
    if (w->kind == MPIDI_PSNAM_SHM)
        MPIDI_PSNAM_shm_close(w, !w->persistent); /* after MPIDIG's barrier: all are done */
    MPL_free(w);
    return rc ? rc : mpi_errno;
}

int MPIDI_PSNAM_get_info(MPIR_Win *win, MPIR_Info *info)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_WIN(win);
    char v[64];
    int mpi_errno =
        MPIR_Info_set_impl(info, "psnam_manifestation", w->kind == MPIDI_PSNAM_SHM ? "shm" : "nam");
    if (!mpi_errno)
        mpi_errno = MPIR_Info_set_impl(info, "psnam_name", w->name);
    if (!mpi_errno)
        mpi_errno = MPIR_Info_set_impl(info, "psnam_persistent", w->persistent ? "true" : "false");
    if (!mpi_errno)
        mpi_errno = MPIR_Info_set_impl(info, "psnam_attach", w->attach ? "true" : "false");
    snprintf(v, sizeof(v), "%d", w->nseg);
    if (!mpi_errno)
        mpi_errno = MPIR_Info_set_impl(info, "psnam_segments", v);
    snprintf(v, sizeof(v), "%lld", (long long)w->size);
    if (!mpi_errno)
        mpi_errno = MPIR_Info_set_impl(info, "psnam_size", v);
    if (!mpi_errno && w->kind == MPIDI_PSNAM_NAM)
        mpi_errno = MPIR_Info_set_impl(info, "psnam_server", w->server);
    return mpi_errno;
}

int MPIDI_PSNAM_shared_query(MPIR_Win *win, int rank, MPI_Aint *size, int *disp_unit, void *baseptr)
{
    MPIDI_PSNAM_win_t *w = MPIDI_PSNAM_WIN(win);
    *size = 0;
    *disp_unit = win->disp_unit;
    *(void **)baseptr = NULL;
    if (w->kind != MPIDI_PSNAM_SHM)
        return MPI_SUCCESS; /* a nam window's memory is in psnamd: no load/store access */
    if (rank != MPI_PROC_NULL)
        return MPIDI_PSNAM_shm_query(w, rank, size, disp_unit, (void **)baseptr);
    /* MPI_PROC_NULL: the first rank on this node with memory */
    for (int r = 0; r < win->comm_ptr->local_size; r++) {
        int mpi_errno = MPIDI_PSNAM_shm_query(w, r, size, disp_unit, (void **)baseptr);
        if (mpi_errno || *size)
            return mpi_errno;
    }
    return MPI_SUCCESS;
}
