/* Peak and current resident memory of this process (kB), from /proc/self/status; -1 where
   there is none. Shared by mpi_pp.c, startup.c and the MPI tests late.c and flood.c. */
#ifndef VMHWM_H_INCLUDED
#define VMHWM_H_INCLUDED

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A "Vm...:" line of /proc/self/status (kB), -1 where there is none */
static inline long proc_status_kb(const char *key)
{
    char line[256];
    long kb = -1;
    size_t n = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            kb = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

static inline long vmhwm_kb(void)
{
    return proc_status_kb("VmHWM");
}

#endif
