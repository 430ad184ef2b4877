/* Cross-process copies between processes of one node, for transports' single-copy
   rendezvous (process_vm_readv/writev; the kernel checks ptrace permission). */
#include <errno.h>
#include <sys/uio.h>
#include "pscom_priv.h"

/* A call moves at most what fits: loop over short transfers */
static int cma_move(int pid, void *local, uint64_t remote, size_t len, int write)
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

int pscom_cma_read(int pid, void *dst, uint64_t remote, size_t len)
{
    return cma_move(pid, dst, remote, len, 0);
}

int pscom_cma_write(int pid, uint64_t remote, const void *src, size_t len)
{
    return cma_move(pid, (void *)(uintptr_t)src, remote, len, 1);
}
