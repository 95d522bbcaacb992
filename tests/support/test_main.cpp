// main() for the Kokkos test binaries: Kokkos lives for the whole run.
// KEMBED_TEST_THREADS=N (set by CTest) asks the host backend for N threads; the
// Backend test then checks that the backend really runs with N.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (char const* threads = std::getenv("KEMBED_TEST_THREADS")) {
    // Kokkos reads KOKKOS_NUM_THREADS at initialisation (3.4 and 4.x); OMP_NUM_THREADS
    // would be too late here, as the OpenMP runtime reads it when it loads.
    setenv("KOKKOS_NUM_THREADS", threads, 1);
    setenv("OMP_PROC_BIND", "false", 0);  // no binding: the 3- and 4-thread runs oversubscribe 2 cores
  }
  // CTest discovers the tests from --gtest_list_tests' output at build time, where
  // a Kokkos start-up warning (no OMP_PROC_BIND) would be read as two test names.
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--gtest_list_tests") == 0) setenv("KOKKOS_DISABLE_WARNINGS", "1", 1);
  Kokkos::ScopeGuard guard(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
