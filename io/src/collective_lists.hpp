#pragma once
// HDF5 property lists for reading and writing collectively over an MPI communicator
// (io::Collective), or the defaults where none is given; kembed_io built against a
// serial HDF5 refuses a communicator.
#include "h5.hpp"

namespace kembed::io {
struct Collective;
}
namespace kembed::io::detail {

// Throws Unsupported for a communicator when this kembed_io has no MPI.
void require_parallel(Collective const* collective);
// A file access list for reading `collective`ly (the default one when null), and the
// matching transfer list (H5P_DEFAULT when null).
h5::Handle access_list(Collective const* collective);
h5::Handle transfer_list(Collective const* collective);

}  // namespace kembed::io::detail
