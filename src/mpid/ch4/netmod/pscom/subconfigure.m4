[#] start of __file__
dnl ch4:pscom netmod: MPI over libpscom (see README.md next to this file).
dnl MPICH_SUBCFG_AFTER=src/mpid/ch4

AC_DEFUN([PAC_SUBCFG_PREREQ_]PAC_SUBCFG_AUTO_SUFFIX,[
    AM_COND_IF([BUILD_CH4],[
        for net in $ch4_netmods ; do
            if test "$net" = "pscom" ; then
                build_ch4_netmod_pscom=yes
                dnl netmod.h puts MPIDI_PSCOM_Global_t into its union under this macro
                AC_DEFINE(HAVE_CH4_NETMOD_PSCOM,1,[pscom netmod is built])
                dnl direct-netmod mode still needs av->is_local for rank_is_local()
                if test "$build_ch4_locality_info" != "yes" ; then
                    AC_DEFINE(MPIDI_BUILD_CH4_LOCALITY_INFO,1,[CH4 should build locality info])
                    build_ch4_locality_info=yes
                fi
            fi
        done
    ])
    AM_CONDITIONAL([BUILD_CH4_NETMOD_PSCOM],[test "X$build_ch4_netmod_pscom" = "Xyes"])
])dnl

AC_DEFUN([PAC_SUBCFG_BODY_]PAC_SUBCFG_AUTO_SUFFIX,[
AM_COND_IF([BUILD_CH4_NETMOD_PSCOM],[
    AC_MSG_NOTICE([RUNNING CONFIGURE FOR ch4:pscom])
    dnl --with-pscom=DIR (DIR/include/pscom.h, DIR/lib/libpscom.so); adds -lpscom
    PAC_CHECK_HEADER_LIB_FATAL([pscom],[pscom.h],[pscom],[pscom_init])
])dnl end AM_COND_IF(BUILD_CH4_NETMOD_PSCOM,...)
])dnl end _BODY

[#] end of __file__
