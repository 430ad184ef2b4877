/*
 * The fake CUDA driver and libpscom's device-memory layer, without MPI: the CPU cannot touch
 * the fake's device memory (a load through it kills a child with SIGSEGV), the driver's copies
 * can; pscom_is_gpu_mem tells device from host memory with PSP_CUDA=1 and says host without;
 * pscom_gpu_memcpy copies in every direction. Run as: trap [expect_cuda].
 */
#include <pscom.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda_test.h"

static int n;
static void ok(int cond, const char *what)
{
    printf("%s %d - %s\n", cond ? "ok" : "not ok", ++n, what);
}

static int child_signal(void (*fn)(volatile char *), volatile char *p)
{
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        fn(p);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void load(volatile char *p)
{
    (void)p[100];
}

static void store(volatile char *p)
{
    p[0] = 1;
}

int main(int argc, char **argv)
{
    int expect = argc > 1 ? atoi(argv[1]) : 1;
    cuda_test_init();
    size_t len = 1 << 20;
    char *dev = dev_alloc(len), *host = malloc(len), *back = malloc(len);
    for (size_t i = 0; i < len; i++)
        host[i] = (char)(i * 7 + 3);

    ok(child_signal(load, dev) == SIGSEGV, "a CPU load from device memory gets SIGSEGV");
    ok(child_signal(store, dev + len - 1) == SIGSEGV, "a CPU store to device memory gets SIGSEGV");
    to_dev(dev, host, len);
    from_dev(back, dev, len);
    ok(memcmp(host, back, len) == 0, "the driver's copies reach device memory");

    if (pscom_init(PSCOM_VERSION) != PSCOM_SUCCESS)
        return 1;
    ok(pscom_is_cuda_enabled() == expect,
       expect ? "pscom: CUDA enabled (PSP_CUDA=1)" : "pscom: CUDA not enabled");
    ok(pscom_is_gpu_mem(dev) == expect && pscom_is_gpu_mem(dev + len - 1) == expect,
       expect ? "pscom_is_gpu_mem: device memory, first and last byte"
              : "pscom_is_gpu_mem: 0 without CUDA");
    ok(!pscom_is_gpu_mem(host) && !pscom_is_gpu_mem(&len) && !pscom_is_gpu_mem(NULL),
       "pscom_is_gpu_mem: heap, stack and NULL are host memory");
    if (expect) {
        char *dev2 = dev_alloc(len);
        memset(back, 0, len);
        ok(pscom_gpu_memcpy(dev2, dev, len) == PSCOM_SUCCESS &&
               pscom_gpu_memcpy(back, dev2, len) == PSCOM_SUCCESS && !memcmp(back, host, len),
           "pscom_gpu_memcpy device->device->host");
        ok(pscom_gpu_memcpy(dev2 + 1, host, 100) == PSCOM_SUCCESS &&
               pscom_gpu_memcpy(back, dev2 + 1, 100) == PSCOM_SUCCESS && !memcmp(back, host, 100),
           "pscom_gpu_memcpy host->device at an offset");
        size_t cap = 0;
        void *b = pscom_host_buffer_alloc(5000, &cap);
        ok(b && cap >= 5000, "pscom_host_buffer_alloc gives a host buffer");
        memset(b, 1, 5000);
        pscom_host_buffer_free(b, cap);
        void *b2 = pscom_host_buffer_alloc(4500, &cap);
        ok(b2 == b, "a freed host buffer is used again");
        pscom_host_buffer_free(b2, cap);
        dev_free(dev2);
    }
    pscom_cleanup();
    dev_free(dev);
    printf("1..%d\n", n);
    return 0;
}
