/*
 * Print libpscom's configuration table as an MPI process has it: after MPI_Init the netmod's
 * rows ("mpi", "mpi-msa") are registered beside libpscom's (envtable.t compares this with
 * maint/env-table.sh, which reads the netmod's rows from their source).
 */
#include <mpi.h>
#include <pscom.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    pscom_env_print(stdout, 1);
    MPI_Finalize();
    return 0;
}
