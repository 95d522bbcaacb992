#include "common.hpp"
#include "run_checks.hpp"

#include <kembed/io/job_files.hpp>
#include <kembed/io/row_reader.hpp>
#include <kembed/io/run_file.hpp>

#include <algorithm>

namespace kembed::io {

struct RowReader::Impl {
  std::string path, name;
  h5::Handle file;
  detail::FloatMatrix matrix;
  std::vector<std::int64_t> listed;  // a sparse run's rows; matrix holds their values
  std::int64_t rows = 0;
};

RowReader::RowReader(std::string const& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  auto const format = file_format(path);
  if (is_run_format(format))
    impl_->name = "/gradient";
  else if (format == table_format)
    impl_->name = "/weight";
  else if (format == forward_format)
    impl_->name = "/y";
  else
    throw FileError(path, "", "is a '" + format + "' file, neither a run, a table nor a forward output");
  detail::reading(path, [&] {
    impl_->file = detail::open_for_reading(path);
    impl_->matrix = detail::open_float_matrix(impl_->file, path, impl_->name, false);
    detail::check_storage(impl_->matrix.dataset, path, impl_->name);
    impl_->rows = impl_->matrix.rows;
    if (format != sparse_run_format) return;
    // The listed rows alone (8 bytes each), never anything in proportion to V.
    auto const v = detail::required_int64(impl_->file, path, "num_embeddings");
    auto const n = detail::required_int64(impl_->file, path, "listed_rows");
    if (impl_->matrix.rows != n)
      throw FileError(path, impl_->name, "has " + std::to_string(impl_->matrix.rows) +
                                             " rows where listed_rows = " + std::to_string(n));
    impl_->listed = detail::read_listed_rows(impl_->file, path, n, v);
    impl_->rows = v;
  });
}

RowReader::~RowReader() = default;
RowReader::RowReader(RowReader&&) noexcept = default;
RowReader& RowReader::operator=(RowReader&&) noexcept = default;

std::int64_t RowReader::rows() const noexcept {
  return impl_->rows;
}

std::vector<std::int64_t> const& RowReader::listed_rows() const noexcept {
  return impl_->listed;
}
std::int64_t RowReader::cols() const noexcept {
  return impl_->matrix.cols;
}

void RowReader::read(std::int64_t first, std::int64_t count, float* out) const {
  if (first < 0 || count < 0 || first > rows() || count > rows() - first)
    throw InvalidArgument("rows", "rows [" + std::to_string(first) + ", +" + std::to_string(count) +
                                      ") are not within " + impl_->path + "'s " + std::to_string(rows()) + " rows");
  if (count == 0) return;
  if (impl_->listed.empty()) {
    detail::reading(impl_->path,
                    [&] { detail::read_rows(impl_->matrix, impl_->path, impl_->name, first, count, out, false); });
    return;
  }
  // Sparse: +0.0, then the listed rows in range, read as one run of the stored rows.
  auto const d = cols();
  std::fill(out, out + count * d, 0.0f);
  auto const& listed = impl_->listed;
  auto const k0 = std::lower_bound(listed.begin(), listed.end(), first) - listed.begin();
  auto const k1 = std::lower_bound(listed.begin(), listed.end(), first + count) - listed.begin();
  if (k1 == k0) return;
  std::vector<float> values(static_cast<std::size_t>((k1 - k0) * d));
  detail::reading(impl_->path, [&] {
    detail::read_rows(impl_->matrix, impl_->path, impl_->name, k0, k1 - k0, values.data(), false);
  });
  for (auto k = k0; k < k1; ++k)
    std::copy_n(values.data() + (k - k0) * d, d, out + (listed[std::size_t(k)] - first) * d);
}

}  // namespace kembed::io
