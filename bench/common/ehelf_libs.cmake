# The main build's static libraries as imported targets, for the benchmarks that are projects of
# their own (bench/unwind, bench/table1). In: EHELF_BUILD_DIR and EHELF_LIB_NAMES (without the
# libehelf_ prefix); out: EHELF_LIBS.
set(EHELF_LIBS)
foreach(lib ${EHELF_LIB_NAMES})
  set(path ${EHELF_BUILD_DIR}/lib/libehelf_${lib}.a)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "${path} not found: build the main project first")
  endif()
  add_library(ehelf_${lib} STATIC IMPORTED)
  set_target_properties(ehelf_${lib} PROPERTIES IMPORTED_LOCATION ${path})
  list(APPEND EHELF_LIBS ehelf_${lib})
endforeach()
