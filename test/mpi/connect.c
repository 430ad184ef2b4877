/*
 * Connect/accept between two separately started jobs (connect.t starts both):
 *   connect server PORTFILE NCLIENT   rank 0 opens a port and writes its name to PORTFILE
 *   connect client PORTFILE NSERVER   rank 0 waits for PORTFILE, all connect to the name
 * Over the intercommunicator: messages both ways (small and 1 MiB), intercomm allreduce and
 * bcast, then MPI_Intercomm_merge and collectives on the merged comm, MPI_Comm_disconnect, a
 * second connection on the same port, MPI_Close_port. Each job prints TAP from its rank 0.
 *   connect intruder PORTFILE       a job given the port name without its key: refused
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap_mpi.h"

static int rank, size;

static int write_port(const char *file, const char *port)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", file);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\n", port) < 0 || fclose(f) != 0)
        return 0;
    return rename(tmp, file) == 0; /* the client never sees half a name */
}

static int read_port(const char *file, char *port)
{
    struct timespec d = {0, 20 * 1000 * 1000};
    for (int i = 0; i < 1000; i++) { /* 20 s at most */
        FILE *f = fopen(file, "r");
        if (f) {
            int ok = fgets(port, MPI_MAX_PORT_NAME, f) != NULL;
            fclose(f);
            port[strcspn(port, "\n")] = '\0';
            return ok && port[0];
        }
        nanosleep(&d, NULL);
    }
    return 0;
}

/* the value local rank `from` of side `side` sends to remote rank `to` */
static int msg(int side, int from, int to)
{
    return side * 1000000 + from * 1000 + to;
}

static int exchange(MPI_Comm inter, int side)
{
    /* every local rank sends to remote rank (rank % rsize); receives from each remote rank
     * q with q % size == rank */
    int rsize, ok = 1;
    MPI_Comm_remote_size(inter, &rsize);
    MPI_Request rq;
    int dest = rank % rsize, v = msg(side, rank, dest);
    MPI_Isend(&v, 1, MPI_INT, dest, 1, inter, &rq);
    for (int q = 0; q < rsize; q++) {
        if (q % size != rank)
            continue;
        int got = -1;
        MPI_Status st;
        MPI_Recv(&got, 1, MPI_INT, q, 1, inter, &st);
        ok &= got == msg(!side, q, rank) && st.MPI_SOURCE == q;
    }
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    return ok;
}

/* The port name with the key taken out of the endpoint string in it. MPICH's port name is
   "tag#0$connentry#<hex of the endpoint string, with its NUL>$"; the endpoint string ends in
   "#" and the key. 0 if the name is not of that form. */
static int strip_key(char *port)
{
    char *hex = strstr(port, "connentry#"), ep[MPI_MAX_PORT_NAME], rest[MPI_MAX_PORT_NAME];
    if (!hex)
        return 0;
    hex += strlen("connentry#");
    size_t n = 0;
    unsigned v;
    while (hex[2 * n] && hex[2 * n] != '$' && n < sizeof(ep) - 1 &&
           sscanf(hex + 2 * n, "%2x", &v) == 1)
        ep[n++] = (char)v;
    ep[n] = '\0';
    snprintf(rest, sizeof(rest), "%s", hex + 2 * n);
    char *key = strchr(ep, '#');
    if (!key || strlen(key) != 33)
        return 0;
    *key = '\0';
    for (size_t i = 0; i <= strlen(ep); i++) /* with the NUL, as MPICH encodes it */
        sprintf(hex + 2 * i, "%02X", (unsigned char)ep[i]);
    strcat(hex, rest);
    return 1;
}

/* A job that has the server's port name but not the key in it (the "#" and 32 hex digits at
   the end of every endpoint string): its connect must fail with an error, and never reach
   the server job's ranks. One rank. */
static int intruder(const char *file)
{
    char port[MPI_MAX_PORT_NAME] = "";
    printf("1..1\n");
    fflush(stdout);
    if (!read_port(file, port) || !strip_key(port)) {
        printf("not ok 1 - the server's port name, with a key in it, from %s\n", file);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm inter;
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (rc != MPI_SUCCESS)
        MPI_Error_string(rc, why, &len);

    printf("%s 1 - MPI_Comm_connect to the port name without its key fails: %s\n",
           rc != MPI_SUCCESS ? "ok" : "not ok", why);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 3 && !strcmp(argv[1], "intruder"))
        return intruder(argv[2]);
    if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
        if (rank == 0)
            fprintf(stderr, "usage: %s server|client PORTFILE NPEER | intruder PORTFILE\n",
                    argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int server = strcmp(argv[1], "server") == 0, npeer = atoi(argv[3]), ok;
    char port[MPI_MAX_PORT_NAME] = "";
    if (rank == 0)
        printf("1..7\n");

    /* 1: connect */
    ok = 1;
    if (server) {
        if (rank == 0) {
            MPI_Open_port(MPI_INFO_NULL, port);
            ok = write_port(argv[2], port);
            printf("# port name: %s\n", port);
        }
    } else if (rank == 0) {
        ok = read_port(argv[2], port);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
        if (rank == 0)
            printf("not ok 1 - port name %s %s\n", server ? "written to" : "read from", argv[2]);
        MPI_Abort(MPI_COMM_WORLD, 3); /* the peer job runs into its timeout */
    }
    MPI_Comm inter, merged;
    int flag = 0, rsize = -1;
    if (server)
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    else
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    MPI_Comm_test_inter(inter, &flag);
    MPI_Comm_remote_size(inter, &rsize);
    check(flag && rsize == npeer,
          server ? "MPI_Open_port + MPI_Comm_accept: intercomm to the client job"
                 : "MPI_Comm_connect to the server job's port name");

    /* 2, 3: point-to-point both ways */
    check(exchange(inter, server), "intercomm messages both ways between all ranks");
    enum { BIG = 1 << 20 };
    char *s = malloc(BIG), *r = malloc(BIG);
    ok = 1;
    if (rank == 0) {
        for (int i = 0; i < BIG; i++)
            s[i] = (char)(i * 7 + server);
        MPI_Sendrecv(s, BIG, MPI_CHAR, 0, 2, r, BIG, MPI_CHAR, 0, 2, inter, MPI_STATUS_IGNORE);
        for (int i = 0; i < BIG; i++)
            ok &= r[i] == (char)(i * 7 + !server);
    }
    free(s);
    free(r);
    check(ok, "1 MiB both ways between the rank 0s");

    /* 4: intercomm collectives: each side gets the other side's sum; bcast from server 0 */
    int mine = server ? 1000 + rank : rank, theirs = -1, b = -1;
    MPI_Allreduce(&mine, &theirs, 1, MPI_INT, MPI_SUM, inter);
    int expect = server ? npeer * (npeer - 1) / 2 : 1000 * npeer + npeer * (npeer - 1) / 2;
    ok = theirs == expect;
    if (server) {
        b = 4242;
        MPI_Bcast(&b, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
    } else {
        MPI_Bcast(&b, 1, MPI_INT, 0, inter);
        ok &= b == 4242;
    }
    check(ok, "intercomm MPI_Allreduce and MPI_Bcast");

    /* 5: merged: server ranks first */
    int mrank, msize;
    MPI_Intercomm_merge(inter, !server, &merged);
    MPI_Comm_rank(merged, &mrank);
    MPI_Comm_size(merged, &msize);
    ok = msize == size + npeer && mrank == (server ? rank : npeer + rank);
    int *ids = malloc(msize * sizeof(int)), id = server ? rank : 100 + rank;
    MPI_Allgather(&id, 1, MPI_INT, ids, 1, MPI_INT, merged);
    int nserver = server ? size : npeer;
    for (int i = 0; i < msize; i++)
        ok &= ids[i] == (i < nserver ? i : 100 + i - nserver);
    int sum = -1;
    MPI_Allreduce(&mrank, &sum, 1, MPI_INT, MPI_SUM, merged);
    ok &= sum == msize * (msize - 1) / 2;
    MPI_Barrier(merged);
    free(ids);
    MPI_Comm_free(&merged);
    check(ok, "MPI_Intercomm_merge: rank order, allgather, allreduce, barrier");

    /* 6: disconnect; connect again on the same port */
    ok = MPI_Comm_disconnect(&inter) == MPI_SUCCESS && inter == MPI_COMM_NULL;
    if (server)
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    else
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    ok &= exchange(inter, server);
    ok &= MPI_Comm_disconnect(&inter) == MPI_SUCCESS;
    check(ok, "MPI_Comm_disconnect; a second connection on the same port; disconnect again");

    /* 7: the job's own world is unaffected */
    ok = 1;
    if (server && rank == 0)
        ok = MPI_Close_port(port) == MPI_SUCCESS;
    int n = 0;
    MPI_Allreduce(&rank, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    ok &= n == size * (size - 1) / 2;
    check(ok, server ? "MPI_Close_port; MPI_COMM_WORLD still works"
                     : "MPI_COMM_WORLD still works after the disconnect");
    MPI_Finalize();
    return 0;
}
