/*
 * Dynamic processes: the parents (mpiexec -n N, any N) spawn 2 children of this same program;
 * parents and children exchange over the intercommunicator, merge it and reduce over all.
 * Then MPI_Comm_spawn_multiple starts two commands (1 + 2 processes, told apart by their
 * arguments) into one new world. Then two halves of the world (N >= 2) connect through
 * MPI_Open_port/accept/connect.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "tap_mpi.h"

int main(int argc, char **argv)
{
    MPI_Comm parent, inter, merged;
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (parent != MPI_COMM_NULL && argc > 2 && !strcmp(argv[1], "multi")) {
        /* child of spawn_multiple: world of 3, command "a" (1 process) then "b" (2) */
        int v = 100 + 10 * rank + (argv[2][0] == 'b') + 1000 * (size != 3);
        MPI_Send(&v, 1, MPI_INT, 0, 4, parent);
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    if (parent != MPI_COMM_NULL) { /* child */
        int v = -1;
        if (rank == 0)
            MPI_Recv(&v, 1, MPI_INT, 0, 1, parent, MPI_STATUS_IGNORE);
        MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
        int reply = v + 1 + rank;
        int psize;
        MPI_Comm_remote_size(parent, &psize);
        MPI_Send(&reply, 1, MPI_INT, rank % psize, 2, parent); /* to a parent by remote rank */
        MPI_Intercomm_merge(parent, 1, &merged);
        int one = 1, n = 0;
        MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, merged);
        MPI_Comm_free(&merged);
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }

    if (rank == 0)
        printf("1..4\n");
    int errs[2];
    MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs);
    int rsize;
    MPI_Comm_remote_size(inter, &rsize);
    if (rank == 0) {
        int v = 41;
        MPI_Send(&v, 1, MPI_INT, 0, 1, inter);
    }
    int ok = rsize == 2, got = 0;
    for (int c = rank; c < 2; c += size) { /* child c sends to parent c % size */
        int reply = -1;
        MPI_Recv(&reply, 1, MPI_INT, c, 2, inter, MPI_STATUS_IGNORE);
        ok &= reply == 42 + c;
        got++;
    }
    MPI_Intercomm_merge(inter, 0, &merged);
    int one = 1, n = 0;
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, merged);
    ok &= n == size + 2;
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    check(ok, "MPI_Comm_spawn of 2, intercomm messages, merge + allreduce");

    /* two commands into one new world */
    char *cmds[2] = {argv[0], argv[0]};
    char *args_a[] = {"multi", "a", NULL}, *args_b[] = {"multi", "b", NULL};
    char **argvs[2] = {args_a, args_b};
    int maxprocs[2] = {1, 2}, errs3[3];
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
    MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, 0, MPI_COMM_WORLD, &inter, errs3);
    MPI_Comm_remote_size(inter, &rsize);
    ok = rsize == 3;
    if (rank == 0) {
        const int want[3] = {100, 111, 121}; /* 100 + 10 * child rank + (command b) */
        for (int c = 0; c < 3; c++) {
            int v = -1;
            MPI_Recv(&v, 1, MPI_INT, c, 4, inter, MPI_STATUS_IGNORE);
            if (v != want[c]) {
                printf("# child %d of spawn_multiple sent %d, expected %d\n", c, v, want[c]);
                ok = 0;
            }
        }
    }
    MPI_Comm_disconnect(&inter);
    check(ok, "MPI_Comm_spawn_multiple of 2 commands (1 + 2 processes, own arguments each)");

    /* connect/accept between the two halves of the world */
    if (size < 2) {
        if (rank == 0)
            printf("ok 3 - MPI_Open_port / MPI_Comm_accept / MPI_Comm_connect # SKIP needs 2 "
                   "ranks\nok 4 - disconnect and close port # SKIP needs 2 ranks\n");
        MPI_Finalize();
        return 0;
    }
    MPI_Comm half;
    int color = rank < size / 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
    char port[MPI_MAX_PORT_NAME] = "";
    if (rank == 0)
        MPI_Open_port(MPI_INFO_NULL, port);
    MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (color)
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &inter);
    else
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, half, &inter);
    MPI_Comm_remote_size(inter, &rsize);
    int hsize;
    MPI_Comm_size(half, &hsize);
    ok = rsize == size - hsize;
    int mine = rank, theirs = -1, hrank;
    MPI_Comm_rank(half, &hrank);
    if (hrank < rsize)
        MPI_Sendrecv(&mine, 1, MPI_INT, hrank, 3, &theirs, 1, MPI_INT, hrank, 3, inter,
                     MPI_STATUS_IGNORE);
    if (hrank < rsize)
        ok &= color ? theirs == hrank + size / 2 : theirs == hrank;
    check(ok, "MPI_Open_port / MPI_Comm_accept / MPI_Comm_connect");
    MPI_Comm_disconnect(&inter);
    MPI_Comm_free(&half);
    if (rank == 0)
        MPI_Close_port(port);
    check(1, "disconnect and close port");
    MPI_Finalize();
    return 0;
}
