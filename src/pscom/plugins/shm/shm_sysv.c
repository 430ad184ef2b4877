/* SysV segments and cross-process reads: the OS side of the shm transport. */
#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/uio.h>
#include "shm_sysv.h"

static size_t seg_size(uint32_t nslots, uint32_t slot_size)
{
    return sizeof(shm_seg_t) + 2 * shm_ring_size(nslots, slot_size);
}

shm_seg_t *shm_seg_create(uint32_t nslots, uint32_t slot_size, int *shmid, uint64_t cookie)
{
    int id = shmget(IPC_PRIVATE, seg_size(nslots, slot_size), IPC_CREAT | 0600);
    if (id < 0)
        return NULL;
    shm_seg_t *seg = shmat(id, NULL, 0);
    /* marked for removal at once: no segment outlives its users, even after SIGKILL */
    shmctl(id, IPC_RMID, NULL);
    if (seg == (void *)-1)
        return NULL;
    seg->nslots = nslots;
    seg->slot_size = slot_size;
    seg->cookie = cookie;
    atomic_thread_fence(memory_order_release);
    seg->magic = SHM_SEG_MAGIC;
    *shmid = id;
    return seg;
}

shm_seg_t *shm_seg_attach(int shmid, uint64_t cookie, uint32_t nslots, uint32_t slot_size)
{
    shm_seg_t *seg = shmat(shmid, NULL, 0);
    if (seg == (void *)-1)
        return NULL;
    struct shmid_ds ds;
    if (shmctl(shmid, IPC_STAT, &ds) != 0 || ds.shm_segsz < seg_size(nslots, slot_size) ||
        seg->magic != SHM_SEG_MAGIC || seg->cookie != cookie || seg->nslots != nslots ||
        seg->slot_size != slot_size) {
        shmdt(seg);
        errno = EINVAL;
        return NULL;
    }
    return seg;
}

void shm_seg_detach(shm_seg_t *seg)
{
    if (seg)
        shmdt(seg);
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
