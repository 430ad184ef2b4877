! The `mpi` module (Fortran 90 bindings, integer handles, ierror arguments), built by fortran.t
! with install/bin/mpifort (and by dropin.t with Debian's mpifort.mpich): status arrays, a user
! reduction op written in Fortran, MPI_IN_PLACE, a character broadcast, a vector type, gather.
! TAP from rank 0; each check is ANDed over all ranks. Exits 1 when a check failed.
module fortran_mpi_ops
    implicit none
contains
    ! a user op: element-wise integer sum, inoutvec = invec + inoutvec
    subroutine addint(invec, inoutvec, len, datatype)
        integer, intent(in) :: len, datatype
        integer, intent(in) :: invec(len)
        integer, intent(inout) :: inoutvec(len)
        integer :: i
        if (datatype < 0) return ! keeps the argument used
        do i = 1, len
            inoutvec(i) = inoutvec(i) + invec(i)
        end do
    end subroutine addint
end module fortran_mpi_ops

program fortran_mpi
    use mpi
    use fortran_mpi_ops
    implicit none

    integer :: rank, nprocs, next, prev, i, cnt, ierr, nfail, ntest, op, vec, tsize, vlen
    integer :: status(MPI_STATUS_SIZE)
    integer :: ival(4), ires(4), sums(4), mat(6, 4), col(6)
    integer, allocatable :: ranks(:)
    double precision :: d(100), dr(100)
    character(len=32) :: word
    character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: version
    logical :: ok

    nfail = 0
    ntest = 0
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
    next = mod(rank + 1, nprocs)
    prev = mod(rank + nprocs - 1, nprocs)
    if (rank == 0) print '(a)', '1..6'

    call MPI_Get_library_version(version, vlen, ierr)
    if (rank == 0) print '(2a)', '# ', version(1:index(version(1:vlen), new_line('a')) - 1)
    call check(ierr == MPI_SUCCESS .and. index(version(1:vlen), 'ch4:pscom') > 0, &
        'use mpi: MPI_Get_library_version names ch4:pscom')

    ! a user-defined (commutative) op in Fortran, and the same sum in place with MPI_SUM
    ival = [rank, 2 * rank, 1, -rank]
    call MPI_Op_create(addint, .true., op, ierr)
    call MPI_Allreduce(ival, ires, 4, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
    call MPI_Op_free(op, ierr)
    sums = ival
    call MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    cnt = nprocs * (nprocs - 1) / 2
    call check(all(ires == [cnt, 2 * cnt, nprocs, -cnt]) .and. all(sums == ires) &
        .and. op == MPI_OP_NULL, 'use mpi: MPI_Allreduce with a Fortran user op and MPI_IN_PLACE')

    ! ring with MPI_Sendrecv, status array fields, MPI_Get_count
    do i = 1, 100
        d(i) = rank + i / 1000d0
    end do
    dr = -1
    call MPI_Sendrecv(d, 100, MPI_DOUBLE_PRECISION, next, 10 + rank, dr, 100, &
        MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
    call MPI_Get_count(status, MPI_DOUBLE_PRECISION, cnt, ierr)
    ok = status(MPI_SOURCE) == prev .and. status(MPI_TAG) == 10 + prev .and. cnt == 100
    do i = 1, 100
        ok = ok .and. dr(i) == prev + i / 1000d0
    end do
    call check(ok, 'use mpi: ring MPI_Sendrecv, status(MPI_SOURCE), status(MPI_TAG), Get_count')

    ! a character string from the last rank
    word = ''
    if (rank == nprocs - 1) word = 'parastation'
    call MPI_Bcast(word, len(word), MPI_CHARACTER, nprocs - 1, MPI_COMM_WORLD, ierr)
    call check(word == 'parastation', 'use mpi: MPI_Bcast of a CHARACTER(32) from the last rank')

    ! a row of a column-major 6x4 matrix (stride 6) to the next rank, received as 4 integers
    mat = reshape([(rank * 100 + i, i = 1, 24)], [6, 4])
    col = -1
    call MPI_Type_vector(4, 1, 6, MPI_INTEGER, vec, ierr)
    call MPI_Type_commit(vec, ierr)
    call MPI_Type_size(vec, tsize, ierr)
    call MPI_Sendrecv(mat(2, 1), 1, vec, next, 3, col, 6, MPI_INTEGER, prev, 3, &
        MPI_COMM_WORLD, status, ierr)
    call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
    call MPI_Type_free(vec, ierr)
    call check(tsize == 16 .and. cnt == 4 .and. all(col(1:4) == prev * 100 + [2, 8, 14, 20]) &
        .and. all(col(5:6) == -1), 'use mpi: a matrix row as MPI_Type_vector (Type_size 16)')

    ! gather of the ranks to rank 0
    allocate(ranks(nprocs))
    ranks = -1
    call MPI_Gather(rank, 1, MPI_INTEGER, ranks, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    ok = .true.
    if (rank == 0) ok = all(ranks == [(i, i = 0, nprocs - 1)])
    call check(ok .and. ierr == MPI_SUCCESS, 'use mpi: MPI_Gather of the ranks to rank 0')

    deallocate(ranks) ! a main program's arrays are not freed at its end (leak checkers)
    call MPI_Finalize(ierr)
    if (nfail > 0) stop 1

contains

    subroutine check(mine, what)
        logical, intent(in) :: mine
        character(len=*), intent(in) :: what
        logical :: all_ok
        integer :: e
        call MPI_Allreduce(mine, all_ok, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, e)
        ntest = ntest + 1
        if (.not. all_ok) nfail = nfail + 1
        if (rank == 0) then
            if (all_ok) then
                write (*, '(a,i0,a,a)') 'ok ', ntest, ' - ', what
            else
                write (*, '(a,i0,a,a)') 'not ok ', ntest, ' - ', what
            end if
            flush (6)
        end if
    end subroutine check

end program fortran_mpi
