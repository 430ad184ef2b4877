/*
 * The shm manifestation of PSNAM: rank r's segment is the file psnam.NAME.r in PSP_PSNAM_DIR
 * (default /dev/shm) on rank r's node, mode 0600, with a checksummed header
 * (src/psnam/psnam_region.h). A later job attaches segment r in rank r, so it must place rank
 * r on the node that holds it, and have as many ranks as the region has segments.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_psnam.h"

#include <unistd.h>

static void shm_dir(char *dir, size_t len)
{
    if (pscom_env_get("PSP_PSNAM_DIR", dir, len) != 0 || !dir[0])
        snprintf(dir, len, "/dev/shm");
}

/* 0, or an MPI error class with the reason in why */
int MPIDI_PSNAM_shm_open(MPIDI_PSNAM_win_t *w, MPIR_Comm *comm, int disp_unit, char *why,
                         size_t whylen)
{
    char dir[4096], reason[PSNAM_REASON_MAX + 4200];
    int rank = comm->rank;
    shm_dir(dir, sizeof(dir));
    if (psnam_shm_path(w->path, sizeof(w->path), dir, w->name, rank) != 0) {
        snprintf(why, whylen, "region %s: PSP_PSNAM_DIR %s is too long", w->name, dir);
        return MPI_ERR_INFO_VALUE;
    }
    char host[64] = "";
    gethostname(host, sizeof(host));
    if (!w->attach) {
        psnam_header_t h = {0};
        snprintf(h.name, sizeof(h.name), "%s", w->name);
        snprintf(h.manifestation, sizeof(h.manifestation), "shm");
        h.nseg = (uint32_t)w->nseg;
        h.seg = rank;
        h.size = (uint64_t)w->size;
        h.disp_unit = (uint32_t)disp_unit;
        h.persistent = (uint32_t)w->persistent;
        int rc = psnam_file_create(w->path, &h, NULL, &w->file, reason, sizeof(reason));
        if (rc == PSNAM_E_EXIST)
            snprintf(why, whylen,
                     "region %s exists on %s (psnam_attach=true maps it, psnam free %s removes "
                     "it)",
                     w->name, host, w->name);
        else if (rc != PSNAM_OK)
            snprintf(why, whylen, "region %s on %s: %s", w->name, host, reason);
        return rc == PSNAM_OK ? 0 : MPIDI_PSNAM_class(rc);
    }
    /* a job of another size fails the same way on every rank, whatever its node holds */
    int nseg = -1;
    if (rank == 0 && psnam_file_open(w->path, &w->file, reason, sizeof(reason)) == PSNAM_OK) {
        nseg = (int)w->file.hdr->nseg;
        psnam_file_close(&w->file);
    }
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    if (MPIR_Bcast(&nseg, 1, MPI_INT, 0, comm, &errflag) != MPI_SUCCESS) {
        snprintf(why, whylen, "region %s: MPI_Bcast failed", w->name);
        return MPI_ERR_OTHER;
    }
    if (nseg >= 0 && nseg != w->nseg) {
        snprintf(why, whylen, "region %s has %d segments, the window's communicator has %d ranks",
                 w->name, nseg, w->nseg);
        return MPI_ERR_SIZE;
    }
    int rc = psnam_file_open(w->path, &w->file, reason, sizeof(reason));
    if (rc == PSNAM_E_NOENT) {
        snprintf(why, whylen,
                 "region %s: no segment %d on %s (%s): no such region, or rank %d "
                 "runs on another node than the one that created it",
                 w->name, rank, host, w->path, rank);
        return MPI_ERR_NO_SUCH_FILE;
    }
    if (rc != PSNAM_OK) {
        snprintf(why, whylen, "region %s refused: %s", w->name, reason);
        return MPIDI_PSNAM_class(rc);
    }
    psnam_header_t *h = w->file.hdr;
    const char *bad = NULL;
    if (strcmp(h->name, w->name) != 0 || strcmp(h->manifestation, "shm") != 0 || h->seg != rank)
        bad = "its header names another region or segment";
    if (bad) {
        snprintf(why, whylen, "region %s segment %d on %s: %s", w->name, rank, host, bad);
        psnam_file_close(&w->file);
        return MPI_ERR_IO;
    }
    if ((int)h->nseg != w->nseg) {
        snprintf(why, whylen, "region %s has %u segments, the window's communicator has %d ranks",
                 w->name, h->nseg, w->nseg);
        psnam_file_close(&w->file);
        return MPI_ERR_SIZE;
    }
    if (w->size && (uint64_t)w->size != h->size) {
        snprintf(why, whylen,
                 "region %s segment %d holds %llu bytes, MPI_Win_allocate asked for "
                 "%lld (0 takes the region's size)",
                 w->name, rank, (unsigned long long)h->size, (long long)w->size);
        psnam_file_close(&w->file);
        return MPI_ERR_SIZE;
    }
    w->size = (MPI_Aint)h->size;
    psnam_file_touch(&w->file);
    return 0;
}

void MPIDI_PSNAM_shm_close(MPIDI_PSNAM_win_t *w, int remove)
{
    if (w->peers) {
        for (int r = 0; r < w->nseg; r++)
            psnam_file_close(&w->peers[r]);
        MPL_free(w->peers);
        w->peers = NULL;
    }
    psnam_file_close(&w->file);
    if (remove)
        unlink(w->path);
}

/* rank's segment if it is on this node: mapped once, kept until the window is freed */
int MPIDI_PSNAM_shm_query(MPIDI_PSNAM_win_t *w, int rank, MPI_Aint *size, int *disp_unit,
                          void **base)
{
    if (rank < 0 || rank >= w->nseg)
        return MPIDI_PSNAM_error(MPI_ERR_RANK, "region %s: no rank %d in the window", w->name,
                                 rank);
    psnam_file_t *f = &w->file;
    if (f->hdr->seg != rank) {
        if (!w->peers && !(w->peers = MPL_calloc((size_t)w->nseg, sizeof(*w->peers), MPL_MEM_RMA)))
            return MPIDI_PSNAM_error(MPI_ERR_NO_MEM, "out of memory");
        f = &w->peers[rank];
        if (!f->hdr) {
            char dir[4096], path[4200], why[PSNAM_REASON_MAX + 4200];
            shm_dir(dir, sizeof(dir));
            if (psnam_shm_path(path, sizeof(path), dir, w->name, rank) != 0)
                return MPI_SUCCESS;
            int rc = psnam_file_open(path, f, why, sizeof(why));
            if (rc == PSNAM_E_NOENT)
                return MPI_SUCCESS; /* on another node: no direct access */
            if (rc != PSNAM_OK)
                return MPIDI_PSNAM_error(MPIDI_PSNAM_class(rc), "region %s: %s", w->name, why);
        }
    }
    *size = (MPI_Aint)f->hdr->size;
    *disp_unit = (int)f->hdr->disp_unit;
    *base = f->data;
    return MPI_SUCCESS;
}
