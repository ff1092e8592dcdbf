# HCASIM_FUZZ: the libFuzzer build of the port fuzzer (docs/fuzzing.md). Included by the top-level
# CMakeLists.txt before any library is defined, so tlm_if, model, firmware and testbench_lib are
# all built with AddressSanitizer, UBSan (aborting) and libFuzzer's coverage instrumentation.
option(HCASIM_FUZZ "Build port_fuzz (libFuzzer; clang only) and instrument every library for it" OFF)
if(HCASIM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "HCASIM_FUZZ=ON needs clang (libFuzzer); configure a separate build directory with "
                        "CC=clang CXX=clang++, e.g. scripts/fuzz.sh (compiler here: ${CMAKE_CXX_COMPILER_ID})")
  endif()
  add_compile_options(-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -gline-tables-only)
  add_link_options(-fsanitize=address,undefined)
endif()
