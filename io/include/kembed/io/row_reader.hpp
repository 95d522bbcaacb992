#pragma once
// Rows of a run's gradient or a table's weights, read by hyperslab from a file kept
// open: for a viewer that shows a gradient too large to hold (kembed-inspector).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kembed::io {

class RowReader {
 public:
  // Opens `path`'s /gradient (a run file), /weight (a table file) or /y (a forward
  // output); throws FileError on anything else. A sparse run reads as its dense gradient.
  explicit RowReader(std::string const& path);
  ~RowReader();
  RowReader(RowReader&&) noexcept;
  RowReader& operator=(RowReader&&) noexcept;
  std::int64_t rows() const noexcept;
  std::int64_t cols() const noexcept;
  // Rows [first, first + count) into `out` (count x cols floats), as stored (a
  // gradient may hold infinities). One thread at a time: HDF5 is not thread-safe.
  void read(std::int64_t first, std::int64_t count, float* out) const;
  // A sparse run's listed rows (ascending); empty for anything else.
  std::vector<std::int64_t> const& listed_rows() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kembed::io
