/* Peak resident memory of this process (kB), from /proc/self/status; -1 where there is none.
   Shared by mpi_pp.c and startup.c. */
#ifndef VMHWM_H_INCLUDED
#define VMHWM_H_INCLUDED

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline long vmhwm_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmHWM:", 6)) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

#endif
