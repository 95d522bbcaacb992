#include <kembed/io/batch_process.hpp>

#include <hdf5.h>

#include <csignal>

namespace kembed::io {

void set_up_batch_process() {
  std::signal(SIGXFSZ, SIG_IGN);
  H5dont_atexit();  // only takes effect before HDF5's first call
}

}  // namespace kembed::io
