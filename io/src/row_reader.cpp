#include "common.hpp"

#include <kembed/io/row_reader.hpp>
#include <kembed/io/run_file.hpp>

namespace kembed::io {

struct RowReader::Impl {
  std::string path, name;
  h5::Handle file;
  detail::FloatMatrix matrix;
};

RowReader::RowReader(std::string const& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  auto const format = file_format(path);
  if (format == run_format)
    impl_->name = "/gradient";
  else if (format == table_format)
    impl_->name = "/weight";
  else
    throw FileError(path, "", "is a '" + format + "' file, neither a run nor a table");
  detail::reading(path, [&] {
    impl_->file = detail::open_for_reading(path);
    impl_->matrix = detail::open_float_matrix(impl_->file, path, impl_->name, false);
    detail::check_storage(impl_->matrix.dataset, path, impl_->name);
  });
}

RowReader::~RowReader() = default;
RowReader::RowReader(RowReader&&) noexcept = default;
RowReader& RowReader::operator=(RowReader&&) noexcept = default;

std::int64_t RowReader::rows() const noexcept {
  return impl_->matrix.rows;
}
std::int64_t RowReader::cols() const noexcept {
  return impl_->matrix.cols;
}

void RowReader::read(std::int64_t first, std::int64_t count, float* out) const {
  if (first < 0 || count < 0 || first > rows() || count > rows() - first)
    throw InvalidArgument("rows", "rows [" + std::to_string(first) + ", +" + std::to_string(count) +
                                      ") are not within " + impl_->path + "'s " + std::to_string(rows()) + " rows");
  if (count == 0) return;
  detail::reading(impl_->path, [&] { detail::read_rows(impl_->matrix, impl_->path, impl_->name, first, count, out, false); });
}

}  // namespace kembed::io
