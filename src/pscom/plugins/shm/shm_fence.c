/* The heavy side of the shm ring's asymmetric fence (shm_fence.h). */
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "shm_fence.h"

static int membarrier(int cmd)
{
#ifdef __NR_membarrier
    return (int)syscall(__NR_membarrier, cmd, 0u, 0);
#else
    (void)cmd;
    return -1;
#endif
}

int shm_fence_init(void)
{
    int cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
        !(cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED))
        return 0;
    return membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
}

int shm_fence_heavy(void)
{
    return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
}
