/* Partitioned communication (MPI 4): MPIDIG protocol over pscom active messages. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    enum { PARTS = 8, COUNT = 100 };
    int rank, size, ok = 1, all;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..1\n");

    int buf[PARTS * COUNT];
    int peer = rank ^ 1;
    MPI_Request req;
    if (peer < size) {
        for (int round = 0; round < 3; round++) {
            if (rank % 2 == 0) {
                if (round == 0)
                    MPI_Psend_init(buf, PARTS, COUNT, MPI_INT, peer, 0, MPI_COMM_WORLD,
                                   MPI_INFO_NULL, &req);
                MPI_Start(&req);
                for (int p = PARTS - 1; p >= 0; p--) { /* ready in reverse order */
                    for (int i = 0; i < COUNT; i++)
                        buf[p * COUNT + i] = round * 100000 + p * COUNT + i;
                    MPI_Pready(p, req);
                }
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            } else {
                if (round == 0)
                    MPI_Precv_init(buf, PARTS, COUNT, MPI_INT, peer, 0, MPI_COMM_WORLD,
                                   MPI_INFO_NULL, &req);
                MPI_Start(&req);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
                for (int i = 0; i < PARTS * COUNT; i++)
                    ok &= buf[i] == round * 100000 + i;
            }
        }
        MPI_Request_free(&req);
    }
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s 1 - MPI_Psend_init/MPI_Precv_init, 3 rounds, partitions ready out of order\n",
               all ? "ok" : "not ok");
    MPI_Finalize();
    return 0;
}
