#!/bin/sh
# MPI_Open_port / MPI_Comm_accept / MPI_Comm_connect between two separately started mpiexec
# jobs: a server job with N ranks (N = 1, 2, 4, 8) and a client job with N/2 (at least 1).
# The port name goes through a file; no name server is needed. Both jobs must exit 0. Before
# the client, a third job tries the port name without its key ("#..."): its connect fails.
. "$(dirname "$0")/mpitest.sh"
mpitest_build connect || mpitest_done

for np in $NPS; do
    cnp=$((np / 2 > 0 ? np / 2 : 1))
    port=$MPITEST_TMP/port.np$np
    (
        mpitest_job "server.np$np" "$np" "$MPITEST_TMP/connect" server "$port" "$cnp"
        echo "$job_rc $job_secs $job_left" >"$job.rc"
    ) &
    server=$!
    # first a job that has the port name without its key: refused, the server unaffected
    mpitest_job "intruder.np$np" 1 "$MPITEST_TMP/connect" intruder "$port"
    mpitest_merge "np=$np intruder" connect
    mpitest_job "client.np$np" "$cnp" "$MPITEST_TMP/connect" client "$port" "$np"
    c_rc=$job_rc c_secs=$job_secs c_left=$job_left
    wait "$server"

    job=$MPITEST_TMP/server.np$np
    read -r job_rc job_secs job_left <"$job.rc"
    mpitest_merge "np=$np server" connect
    job=$MPITEST_TMP/client.np$np job_rc=$c_rc job_secs=$c_secs job_left=$c_left
    mpitest_merge "np=$cnp client" connect
done
mpitest_done
