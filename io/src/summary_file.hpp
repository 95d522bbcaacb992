#pragma once
// Writing a run file's /summary group (docs/FORMAT.md); read by read_summary.
#include "h5.hpp"

#include <kembed/io/summary.hpp>
#include <kembed/io/table_file.hpp>

namespace kembed::io::detail {

void write_summary(hid_t file, Summary const& summary, SaveOptions const& options);

}  // namespace kembed::io::detail
