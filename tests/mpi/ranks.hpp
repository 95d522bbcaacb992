#pragma once
// This process's rank and the ranks of MPI_COMM_WORLD, for the MPI tests.
#include <mpi.h>

namespace kembed::test {

inline int my_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int rank_count() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

}  // namespace kembed::test
