#pragma once
// For programs that write kembed files and then exit (the batch job): call first in
// main(), before any other kembed::io function.

namespace kembed::io {

// A file-size limit (ulimit -f) then fails a write with EFBIG, reported as an
// IoFailure with the temporary file removed, instead of SIGXFSZ killing the process.
// And HDF5's exit-time clean-up is skipped: after such a failed save HDF5 may hold a
// file it could not close, which that clean-up would crash on (files that were
// saved are complete before then).
void set_up_batch_process();

}  // namespace kembed::io
