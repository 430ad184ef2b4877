C     FORTRAN 77 style: include 'mpif.h', fixed form, built by fortran.t
C     with install/bin/mpif77 and again with mpif90. Each MPI routine is
C     called with one argument type only (gfortran >= 10 rejects
C     mismatches without -fallow-argument-mismatch). TAP from rank 0;
C     each check is ANDed over all ranks. Exits 1 when a check failed.
      PROGRAM F77TST
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER RANK, NPROCS, NEXT, PREV, I, CNT, IERR, NFAIL, NTEST
      INTEGER REQ, SUBC, SUBN, SUBR
      INTEGER STATUS(MPI_STATUS_SIZE)
      INTEGER IV(2), IR(2), SBUF(50), RBUF(50)
      DOUBLE PRECISION D(10)
      LOGICAL OK
      COMMON /TAPCNT/ NFAIL, NTEST, RANK
      NFAIL = 0
      NTEST = 0
      CALL MPI_INIT(IERR)
      CALL MPI_COMM_RANK(MPI_COMM_WORLD, RANK, IERR)
      CALL MPI_COMM_SIZE(MPI_COMM_WORLD, NPROCS, IERR)
      NEXT = MOD(RANK + 1, NPROCS)
      PREV = MOD(RANK + NPROCS - 1, NPROCS)
      IF (RANK .EQ. 0) WRITE (*, '(A)') '1..5'

C     1. integer sum of the ranks and of ones
      IV(1) = RANK
      IV(2) = 1
      CALL MPI_ALLREDUCE(IV, IR, 2, MPI_INTEGER, MPI_SUM,
     &                   MPI_COMM_WORLD, IERR)
      OK = IR(1) .EQ. NPROCS * (NPROCS - 1) / 2 .AND. IR(2) .EQ. NPROCS
     &     .AND. IERR .EQ. MPI_SUCCESS
      CALL CHECK(OK, 'mpif.h: MPI_ALLREDUCE integer MPI_SUM')

C     2. MAXLOC over MPI_2INTEGER pairs (value, rank): the largest
C        value is held by the last rank
      IV(1) = MOD(RANK, 3) + 10 * RANK
      IV(2) = RANK
      CALL MPI_ALLREDUCE(IV, IR, 1, MPI_2INTEGER, MPI_MAXLOC,
     &                   MPI_COMM_WORLD, IERR)
      OK = IR(2) .EQ. NPROCS - 1 .AND.
     &     IR(1) .EQ. MOD(NPROCS - 1, 3) + 10 * (NPROCS - 1)
      CALL CHECK(OK, 'mpif.h: MPI_ALLREDUCE MPI_2INTEGER MPI_MAXLOC')

C     3. ring: ISEND to the next rank, RECV from any source and tag
      DO 10 I = 1, 50
         SBUF(I) = RANK * 1000 + I
         RBUF(I) = -1
   10 CONTINUE
      CALL MPI_ISEND(SBUF, 50, MPI_INTEGER, NEXT, 20 + RANK,
     &               MPI_COMM_WORLD, REQ, IERR)
      CALL MPI_RECV(RBUF, 50, MPI_INTEGER, MPI_ANY_SOURCE,
     &              MPI_ANY_TAG, MPI_COMM_WORLD, STATUS, IERR)
      CALL MPI_WAIT(REQ, MPI_STATUS_IGNORE, IERR)
      CALL MPI_GET_COUNT(STATUS, MPI_INTEGER, CNT, IERR)
      OK = STATUS(MPI_SOURCE) .EQ. PREV .AND.
     &     STATUS(MPI_TAG) .EQ. 20 + PREV .AND. CNT .EQ. 50
      DO 20 I = 1, 50
         OK = OK .AND. RBUF(I) .EQ. PREV * 1000 + I
   20 CONTINUE
      CALL CHECK(OK, 'mpif.h: ring ISEND/RECV, STATUS(MPI_SOURCE), '
     &           // 'STATUS(MPI_TAG), MPI_GET_COUNT')

C     4. double precision broadcast from rank 0
      DO 30 I = 1, 10
         D(I) = -1D0
         IF (RANK .EQ. 0) D(I) = I * 0.5D0
   30 CONTINUE
      CALL MPI_BCAST(D, 10, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD,
     &               IERR)
      OK = .TRUE.
      DO 40 I = 1, 10
         OK = OK .AND. D(I) .EQ. I * 0.5D0
   40 CONTINUE
      CALL CHECK(OK, 'mpif.h: MPI_BCAST of DOUBLE PRECISION')

C     5. split into even and odd ranks
      CALL MPI_COMM_SPLIT(MPI_COMM_WORLD, MOD(RANK, 2), RANK, SUBC,
     &                    IERR)
      CALL MPI_COMM_SIZE(SUBC, SUBN, IERR)
      CALL MPI_COMM_RANK(SUBC, SUBR, IERR)
      CNT = (NPROCS + 1 - MOD(RANK, 2)) / 2
      OK = SUBR .EQ. RANK / 2 .AND. SUBN .EQ. CNT
      CALL MPI_COMM_FREE(SUBC, IERR)
      OK = OK .AND. SUBC .EQ. MPI_COMM_NULL
      CALL CHECK(OK, 'mpif.h: MPI_COMM_SPLIT even/odd, MPI_COMM_FREE')

      CALL MPI_FINALIZE(IERR)
      IF (NFAIL .GT. 0) STOP 1
      END

C     one TAP line: OK must hold on every rank (MPI_MIN of 1/0)
      SUBROUTINE CHECK(OK, WHAT)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      LOGICAL OK
      CHARACTER*(*) WHAT
      INTEGER NFAIL, NTEST, RANK, IERR
      INTEGER MINE(2), ALLOK(2)
      COMMON /TAPCNT/ NFAIL, NTEST, RANK
      MINE(1) = 0
      IF (OK) MINE(1) = 1
      MINE(2) = 0
      CALL MPI_ALLREDUCE(MINE, ALLOK, 2, MPI_INTEGER, MPI_MIN,
     &                   MPI_COMM_WORLD, IERR)
      NTEST = NTEST + 1
      IF (ALLOK(1) .EQ. 0) NFAIL = NFAIL + 1
      IF (RANK .EQ. 0) THEN
         IF (ALLOK(1) .EQ. 1) THEN
            WRITE (*, '(A,I0,2A)') 'ok ', NTEST, ' - ', WHAT
         ELSE
            WRITE (*, '(A,I0,2A)') 'not ok ', NTEST, ' - ', WHAT
         END IF
         FLUSH (6)
      END IF
      END
