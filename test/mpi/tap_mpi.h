/*
 * TAP from the MPI test programs: a check passes only if it passed on every rank (an
 * allreduce, so every rank must call it), and rank 0 prints the line.
 */
#ifndef TAP_MPI_H_INCLUDED
#define TAP_MPI_H_INCLUDED

#include <mpi.h>
#include <stdio.h>

static int tap_ntest;

static inline void check_comm(MPI_Comm comm, int ok, const char *what)
{
    int all, r;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    MPI_Comm_rank(comm, &r);
    if (r == 0)
        printf("%s %d - %s\n", all ? "ok" : "not ok", ++tap_ntest, what);
    fflush(stdout);
}

static inline void check(int ok, const char *what)
{
    check_comm(MPI_COMM_WORLD, ok, what);
}

#endif
