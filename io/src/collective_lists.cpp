// HDF5 property lists for collective reads and writes (collective_lists.hpp).
#include "collective_lists.hpp"

#include <kembed/core/error.hpp>
#if defined(KEMBED_IO_PARALLEL)
#include <kembed/io/collective.hpp>
#endif

namespace kembed::io::detail {

void require_parallel(Collective const* collective) {
#if !defined(KEMBED_IO_PARALLEL)
  if (collective)
    throw Unsupported("collective", "this kembed_io was built with a serial HDF5; collective files need MPI");
#else
  (void)collective;
#endif
}

h5::Handle access_list(Collective const* collective) {
  require_parallel(collective);
  h5::Handle fapl = h5::compatible_fapl();
#if defined(KEMBED_IO_PARALLEL)
  if (collective) H5Pset_fapl_mpio(fapl, collective->comm, MPI_INFO_NULL);
#endif
  return fapl;
}

h5::Handle transfer_list(Collective const* collective) {
  require_parallel(collective);
  if (!collective) return {};
  h5::Handle dxpl = h5::plist(H5Pcreate(H5P_DATASET_XFER));
#if defined(KEMBED_IO_PARALLEL)
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
#endif
  return dxpl;
}

}  // namespace kembed::io::detail
