#pragma once
// Writing a run file's /summary group (docs/FORMAT.md); read by read_summary.
#include "h5.hpp"

#include <kembed/io/summary.hpp>
#include <kembed/io/table_file.hpp>

namespace kembed::io::detail {

void write_summary(hid_t file, Summary const& summary, SaveOptions const& options);

// A sparse gradient's summary is its dense form's: after its listed rows (`rows`, n,
// ascending, within [row_begin, row_end)) are added, one +0.0 row (count 0) in each
// finest block of [row_begin, row_end) where not every row is listed.
void add_unlisted_zeros(SummaryBuilder& builder, std::int64_t const* rows, std::int64_t n, std::int64_t row_begin,
                        std::int64_t row_end);

}  // namespace kembed::io::detail
