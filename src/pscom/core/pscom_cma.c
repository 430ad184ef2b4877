/* Cross-process copies between processes of one node, for transports' single-copy
   rendezvous (process_vm_readv; the kernel checks ptrace permission). */
#include <errno.h>
#include <sys/uio.h>
#include "pscom_priv.h"

int pscom_cma_read(int pid, void *dst, uint64_t remote, size_t len)
{
    /* at most what fits is moved per call: loop over short transfers */
    while (len) {
        struct iovec l = {.iov_base = dst, .iov_len = len};
        struct iovec r = {.iov_base = (void *)(uintptr_t)remote, .iov_len = len};
        ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            if (n == 0)
                errno = EFAULT;
            return -1;
        }
        dst = (char *)dst + n;
        remote += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}
