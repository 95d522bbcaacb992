#pragma once
// Collective file operations: every rank of an MPI communicator opens the same file
// through parallel HDF5 (MPI-IO) and reads or writes its own rows. Available where
// kembed_io was built with a parallel HDF5 (KEMBED_ENABLE_MPI); the functions that
// take a `Collective const*` run as one process when it is null.
#if !defined(KEMBED_IO_PARALLEL)
#error "<kembed/io/collective.hpp> needs kembed built with MPI and a parallel HDF5 (KEMBED_ENABLE_MPI)"
#endif
#include <mpi.h>

namespace kembed::io {

struct Collective {
  MPI_Comm comm = MPI_COMM_WORLD;
};

}  // namespace kembed::io
