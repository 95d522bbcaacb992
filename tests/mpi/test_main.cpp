// main() of the MPI tests, run under mpiexec: MPI and Kokkos live for the whole run;
// only rank 0 prints, and every rank exits with the worst rank's status, so a
// failure on any rank fails the test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  int provided = 0;  // as kembed's CLI asks: the job reads ahead on a thread of its own
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int failed = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    if (rank != 0) {  // each rank still checks; rank 0 speaks for all
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
    }
    int const mine = RUN_ALL_TESTS();
    MPI_Allreduce(&mine, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && failed && !mine) std::printf("kembed mpi tests: another rank failed\n");
  }
  MPI_Finalize();
  return failed;
}
