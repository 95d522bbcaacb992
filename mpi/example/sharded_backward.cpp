#include <kembed/mpi/sharded_embedding.hpp>  // target kembed::mpi
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    std::int64_t const v = 1000, d = 8;
    using Sharded = kembed::mpi::ShardedEmbedding<Kokkos::DefaultExecutionSpace>;
    auto const mine = kembed::mpi::rows_of(v, ranks, rank);   // this rank's rows of the table
    std::vector<float> rows(mine.size() * d, 0.5f);
    Sharded layer(MPI_COMM_WORLD, Kokkos::DefaultExecutionSpace(), v, d,
                  kembed::FloatsRef(rows.data(), kembed::Shape{mine.size(), d}));
    // This rank's slab of the batch: its positions, in order after the lower ranks'.
    std::vector<std::int64_t> ids = {rank % v, 7, 7};
    std::vector<float> dy(ids.size() * d, 1.0f);
    std::vector<float> y = layer.forward(kembed::IdsRef(ids));   // rows fetched from their owners
    Sharded::matrix_type grad("grad", mine.size(), d);           // this rank's rows of the gradient
    layer.backward(kembed::IdsRef(ids), kembed::FloatsRef(dy.data(), kembed::Shape{3, d}), grad,
                   /*accumulate=*/false);
    auto g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad);
    if (mine.begin <= 7 && 7 < mine.end)  // row 7 got 2 terms from every rank
      std::printf("grad[7][0] = %g on rank %d\n", g(7 - mine.begin, 0), rank);
  }
  MPI_Finalize();
}
