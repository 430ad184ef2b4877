! The mpi_f08 module (Fortran 2008 bindings), built by fortran.t with install/bin/mpifort:
! handle types (TYPE(MPI_Comm), TYPE(MPI_Status), ...), optional ierror, a struct datatype of a
! bind(C) derived type, status fields. TAP from rank 0; each check is ANDed over all ranks.
! Exits 1 when a check failed.
program fortran_f08
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use mpi_f08
    implicit none

    type, bind(C) :: particle
        integer(c_int) :: id
        real(c_double) :: x(3)
    end type particle

    integer, parameter :: n = 1000
    integer :: rank, nprocs, next, prev, i, cnt, ierr, nfail, ntest, sum, len
    double precision :: dval, dmax
    double precision, allocatable :: sbuf(:), rbuf(:)
    integer :: strided(20), packed(10)
    type(particle) :: ps(3), pr(3)
    type(MPI_Status) :: status
    type(MPI_Request) :: req
    type(MPI_Datatype) :: vec, ptype, ptmp, types(2)
    integer :: blocklens(2)
    integer(MPI_ADDRESS_KIND) :: displs(2), base, addr2
    type(MPI_Comm) :: half
    character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: version
    logical :: ok

    nfail = 0
    ntest = 0
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
    next = mod(rank + 1, nprocs)
    prev = mod(rank + nprocs - 1, nprocs)
    if (rank == 0) print '(a)', '1..6'

    ! 1. the library is ours, and ierror comes back as MPI_SUCCESS
    call MPI_Get_library_version(version, len, ierr)
    call check(ierr == MPI_SUCCESS .and. index(version(1:len), 'ch4:pscom') > 0, &
        'mpi_f08: MPI_Get_library_version names ch4:pscom, ierror = MPI_SUCCESS')

    ! 2. allreduce: integer sum and double max
    call MPI_Allreduce(rank, sum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    dval = rank + 0.5d0
    call MPI_Allreduce(dval, dmax, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD)
    call check(sum == nprocs * (nprocs - 1) / 2 .and. dmax == nprocs - 0.5d0, &
        'mpi_f08: MPI_Allreduce integer SUM and double precision MAX')

    ! 3. ring: Isend to next, Recv from any source/tag, TYPE(MPI_Status) fields and MPI_Get_count
    allocate(sbuf(n), rbuf(n))
    do i = 1, n
        sbuf(i) = rank * 10000 + i
    end do
    rbuf = -1
    call MPI_Isend(sbuf, n, MPI_DOUBLE_PRECISION, next, 100 + rank, MPI_COMM_WORLD, req)
    call MPI_Recv(rbuf, n, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status)
    call MPI_Wait(req, MPI_STATUS_IGNORE)
    call MPI_Get_count(status, MPI_DOUBLE_PRECISION, cnt)
    ok = status%MPI_SOURCE == prev .and. status%MPI_TAG == 100 + prev .and. cnt == n
    do i = 1, n
        ok = ok .and. rbuf(i) == prev * 10000 + i
    end do
    call check(ok, 'mpi_f08: ring Isend/Recv of 1000 doubles, status%MPI_SOURCE, %MPI_TAG, Get_count')

    ! 4. a vector type (every other pair of a 20-integer array) into 10 contiguous integers
    strided = [(rank * 100 + i, i = 1, 20)]
    packed = -1
    call MPI_Type_vector(5, 2, 4, MPI_INTEGER, vec)
    call MPI_Type_commit(vec)
    call MPI_Sendrecv(strided, 1, vec, next, 7, packed, 10, MPI_INTEGER, prev, 7, &
        MPI_COMM_WORLD, status)
    call MPI_Get_count(status, MPI_INTEGER, cnt)
    ok = cnt == 10
    do i = 0, 4
        ok = ok .and. packed(2 * i + 1) == prev * 100 + 4 * i + 1 &
            .and. packed(2 * i + 2) == prev * 100 + 4 * i + 2
    end do
    call MPI_Type_free(vec)
    call check(ok .and. vec == MPI_DATATYPE_NULL, &
        'mpi_f08: MPI_Type_vector send, contiguous receive, Type_free gives MPI_DATATYPE_NULL')

    ! 5. a struct type of a bind(C) derived type (MPI_Get_address, resized to the element)
    call MPI_Get_address(ps(1)%id, base)
    call MPI_Get_address(ps(1)%x, displs(2))
    call MPI_Get_address(ps(2)%id, addr2)
    displs(1) = 0
    displs(2) = displs(2) - base
    blocklens = [1, 3]
    types(1) = MPI_INTEGER
    types(2) = MPI_DOUBLE_PRECISION
    call MPI_Type_create_struct(2, blocklens, displs, types, ptmp)
    call MPI_Type_create_resized(ptmp, 0_MPI_ADDRESS_KIND, addr2 - base, ptype)
    call MPI_Type_commit(ptype)
    do i = 1, 3
        ps(i)%id = rank * 10 + i
        ps(i)%x = [rank + 0.25d0 * i, -dble(i), 1d10 + i]
        pr(i)%id = -1
        pr(i)%x = 0
    end do
    call MPI_Sendrecv(ps, 3, ptype, next, 8, pr, 3, ptype, prev, 8, MPI_COMM_WORLD, status)
    ok = .true.
    do i = 1, 3
        ok = ok .and. pr(i)%id == prev * 10 + i .and. pr(i)%x(1) == prev + 0.25d0 * i &
            .and. pr(i)%x(2) == -dble(i) .and. pr(i)%x(3) == 1d10 + i
    end do
    call MPI_Type_free(ptype)
    call MPI_Type_free(ptmp)
    call check(ok, 'mpi_f08: struct type of a bind(C) derived type (3 elements around the ring)')

    ! 6. communicator split and a nonblocking broadcast on it
    call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half)
    sum = -1
    if (rank < 2) sum = 4242 + rank
    call MPI_Ibcast(sum, 1, MPI_INTEGER, 0, half, req)
    call MPI_Wait(req, MPI_STATUS_IGNORE)
    call check(sum == 4242 + mod(rank, 2) .and. req == MPI_REQUEST_NULL, &
        'mpi_f08: MPI_Comm_split (even/odd) and MPI_Ibcast + MPI_Wait on it')
    call MPI_Comm_free(half)

    deallocate(sbuf, rbuf) ! a main program's arrays are not freed at its end (leak checkers)
    call MPI_Finalize()
    if (nfail > 0) stop 1

contains

    subroutine check(mine, what)
        logical, intent(in) :: mine
        character(len=*), intent(in) :: what
        logical :: all
        call MPI_Allreduce(mine, all, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD)
        ntest = ntest + 1
        if (.not. all) nfail = nfail + 1
        if (rank == 0) then
            if (all) then
                write (*, '(a,i0,a,a)') 'ok ', ntest, ' - ', what
            else
                write (*, '(a,i0,a,a)') 'not ok ', ntest, ' - ', what
            end if
            flush (6)
        end if
    end subroutine check

end program fortran_f08
