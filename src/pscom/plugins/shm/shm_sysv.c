/* SysV segments: the OS side of the shm transport (its single-copy calls are core's
   pscom_cma_read/write). */
#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>
#include "shm_sysv.h"

void *shm_sysv_create(size_t size, int *shmid)
{
    int id = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
    if (id < 0)
        return NULL;
    void *base = shmat(id, NULL, 0);
    int err = errno;
    /* marked for removal at once: no segment outlives its users, even after SIGKILL */
    shmctl(id, IPC_RMID, NULL);
    if (base == (void *)-1) {
        errno = err;
        return NULL;
    }
    *shmid = id;
    return base;
}

void *shm_sysv_attach(int shmid, size_t min_size)
{
    if (shmid < 0) {
        errno = EINVAL;
        return NULL;
    }
    void *base = shmat(shmid, NULL, 0);
    if (base == (void *)-1)
        return NULL;
    /* the size of what we attached (not of an earlier holder of this id), and ours alone: a
       segment of another user, or one that others may read or write, is not a peer's */
    struct shmid_ds ds;
    if (shmctl(shmid, IPC_STAT, &ds) != 0 || ds.shm_segsz < min_size) {
        shmdt(base);
        errno = EINVAL;
        return NULL;
    }
    if (ds.shm_perm.uid != geteuid() || ds.shm_perm.cuid != geteuid() || (ds.shm_perm.mode & 077)) {
        shmdt(base);
        errno = EPERM;
        return NULL;
    }
    return base;
}

void shm_sysv_detach(void *base)
{
    if (base)
        shmdt(base);
}
