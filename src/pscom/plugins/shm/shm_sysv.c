/* SysV segments and cross-process reads: the OS side of the shm transport. */
#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/uio.h>
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
    /* the size of what we attached (not of an earlier holder of this id) */
    struct shmid_ds ds;
    if (shmctl(shmid, IPC_STAT, &ds) != 0 || ds.shm_segsz < min_size) {
        shmdt(base);
        errno = EINVAL;
        return NULL;
    }
    return base;
}

void shm_sysv_detach(void *base)
{
    if (base)
        shmdt(base);
}

/* process_vm_readv/writev move at most what fits; loop over short transfers */
static int cma_move(pid_t pid, void *local, uint64_t remote, size_t len, int write)
{
    while (len) {
        struct iovec l = {.iov_base = local, .iov_len = len};
        struct iovec r = {.iov_base = (void *)(uintptr_t)remote, .iov_len = len};
        ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                          : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            if (n == 0)
                errno = EFAULT;
            return -1;
        }
        local = (char *)local + n;
        remote += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

int shm_cma_read(pid_t pid, void *dst, uint64_t remote, size_t len)
{
    return cma_move(pid, dst, remote, len, 0);
}

int shm_cma_write(pid_t pid, uint64_t remote, const void *src, size_t len)
{
    return cma_move(pid, (void *)(uintptr_t)src, remote, len, 1);
}
