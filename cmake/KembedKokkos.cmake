# Finds Kokkos and repairs the one known defect of Debian 12's package, so that
# the top-level build and kembedConfig.cmake share a single workaround.
#
# Debian's libtrilinos-kokkos-dev (Kokkos 3.4.1 inside Trilinos 13.2) declares
# Kokkos::kokkos with INTERFACE_INCLUDE_DIRECTORIES "/usr/lib/include", which does
# not exist; CMake refuses to use a target with a missing include directory. The
# real headers are in Kokkos_INCLUDE_DIRS (/usr/include/trilinos).
include_guard(GLOBAL)

macro(kembed_find_kokkos)
  find_package(Kokkos ${ARGN})
  if(Kokkos_FOUND AND TARGET Kokkos::kokkos)
    get_target_property(_kembed_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
    set(_kembed_kokkos_fixed "")
    set(_kembed_kokkos_changed FALSE)
    foreach(_dir IN LISTS _kembed_kokkos_inc)
      if(EXISTS "${_dir}" OR _dir MATCHES "^\\$<")
        list(APPEND _kembed_kokkos_fixed "${_dir}")
      else()
        set(_kembed_kokkos_changed TRUE)
      endif()
    endforeach()
    if(_kembed_kokkos_changed)
      foreach(_dir IN LISTS Kokkos_INCLUDE_DIRS)
        get_filename_component(_dir "${_dir}" REALPATH)
        if(EXISTS "${_dir}/Kokkos_Core.hpp")
          list(APPEND _kembed_kokkos_fixed "${_dir}")
        endif()
      endforeach()
      if(NOT _kembed_kokkos_fixed)
        message(FATAL_ERROR "kembed: Kokkos::kokkos names include directories that do not exist "
                            "(${_kembed_kokkos_inc}) and Kokkos_INCLUDE_DIRS (${Kokkos_INCLUDE_DIRS}) "
                            "has no Kokkos_Core.hpp")
      endif()
      set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_kembed_kokkos_fixed}")
      message(STATUS "kembed: repaired Kokkos::kokkos include directories -> ${_kembed_kokkos_fixed}")
    endif()
    unset(_kembed_kokkos_inc)
    unset(_kembed_kokkos_fixed)
    unset(_kembed_kokkos_changed)
  endif()
endmacro()
