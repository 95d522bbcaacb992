#include "run_checks.hpp"

#include <kembed/io/error.hpp>

namespace kembed::io::detail {

void CountsCheck::add(std::int64_t first, std::int64_t const* counts, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    auto const c = counts[i];
    if (c < least_ || c > positions_)
      throw FileError(path_, name_,
                      "holds " + std::to_string(c) + " at entry " + std::to_string(first + i) + "; a count is in [" +
                          std::to_string(least_) + ", positions = " + std::to_string(positions_) +
                          "], so the file is damaged or was edited");
    if (c > positions_ - sum_)  // sum_ <= positions_ throughout, so neither side overflows
      throw FileError(path_, name_,
                      "sums to more than positions = " + std::to_string(positions_) +
                          " by entry " + std::to_string(first + i) +
                          "; every position counts once, so the file is damaged or was edited");
    sum_ += c;
  }
}

void CountsCheck::finish() const {
  if (sum_ != positions_)
    throw FileError(path_, name_,
                    "sums to " + std::to_string(sum_) + " but positions = " + std::to_string(positions_) +
                        "; every position counts once, so the file is damaged or was edited");
}

void check_counts(std::string const& path, std::string const& name, std::int64_t const* counts, std::int64_t n,
                  std::int64_t positions, std::int64_t least) {
  CountsCheck check(path, name, positions, least);
  check.add(0, counts, n);
  check.finish();
}

std::vector<std::int64_t> read_listed_rows(hid_t file, std::string const& path, std::int64_t n, std::int64_t rows) {
  std::int64_t stored = 0;
  auto dataset = open_int_vector(file, path, "/rows", &stored);
  if (n < 0 || n > rows || stored != n)
    throw FileError(path, "/rows",
                    "holds " + std::to_string(stored) + " entries where listed_rows = " + std::to_string(n) +
                        " (at most num_embeddings = " + std::to_string(rows) + ")");
  std::vector<std::int64_t> listed(static_cast<std::size_t>(n));
  read_ints(dataset, path, "/rows", 0, n, listed.data());
  for (std::int64_t i = 0; i < n; ++i) {
    auto const r = listed[std::size_t(i)];
    if (r < 0 || r >= rows || (i > 0 && r <= listed[std::size_t(i - 1)]))
      throw FileError(path, "/rows", "entry " + std::to_string(i) + " = " + std::to_string(r) +
                                         " is not ascending within [0, " + std::to_string(rows) + ")");
  }
  return listed;
}

std::optional<h5::Handle> open_group_if_present(hid_t file, std::string const& path, std::string const& name) {
  htri_t const linked = H5Lexists(file, name.c_str(), H5P_DEFAULT);
  if (linked < 0)
    throw FileError(path, name, "cannot be looked up; the file is damaged (HDF5: " + h5::error_text() + ")");
  if (linked == 0) return std::nullopt;
  h5::Handle group = h5::group(H5Gopen2(file, name.c_str(), H5P_DEFAULT));
  if (!group.valid())
    throw FileError(path, name,
                    "exists but cannot be opened as a group; the file is damaged (HDF5: " + h5::error_text() + ")");
  return group;
}

void check_digest(std::string const& path, std::string const& object, char const* attribute,
                  std::string const& stored, std::string const& computed) {
  if (stored == computed) return;
  throw FileError(path, object,
                  "does not match its SHA-256 (attribute " + std::string(attribute) + " = " + stored +
                      "): the file is damaged, or it was changed after kembed wrote it");
}

}  // namespace kembed::io::detail
