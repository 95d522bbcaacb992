#pragma once
// What readers of runs and checkpoints check beyond a dataset's shape: per-row
// counts (never negative, never more than the positions, summing to them), a
// sparse listing's rows, groups that exist but cannot be opened (damage, not
// absence). Shared by read_run, RowReader, read_checkpoint and check_file.
#include "common.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kembed::io::detail {

// Counts read in pieces, in row order: each in [0, positions] (or [1, positions]
// for a sparse listing, whose rows were all referenced), their sum the positions.
class CountsCheck {
 public:
  CountsCheck(std::string path, std::string name, std::int64_t positions, std::int64_t least)
      : path_(std::move(path)), name_(std::move(name)), positions_(positions), least_(least) {}
  // Entries [first, first + n) of the dataset.
  void add(std::int64_t first, std::int64_t const* counts, std::int64_t n);
  // Throws unless the counts summed to the positions.
  void finish() const;

 private:
  std::string path_, name_;
  std::int64_t positions_, least_, sum_ = 0;
};

// All of a run's (or checkpoint's) counts at once.
void check_counts(std::string const& path, std::string const& name, std::int64_t const* counts, std::int64_t n,
                  std::int64_t positions, std::int64_t least);

// The listed rows of a sparse run or checkpoint, /rows: `n` entries, ascending,
// unique, within [0, rows).
std::vector<std::int64_t> read_listed_rows(hid_t file, std::string const& path, std::int64_t n, std::int64_t rows);

// The group `name` (an absolute path) when it exists; a link that exists but whose
// object cannot be opened, or a lookup that fails, is damage (FileError).
std::optional<h5::Handle> open_group_if_present(hid_t file, std::string const& path, std::string const& name);

// A stored digest against the one computed from what was read; throws FileError
// naming `object` and saying the file was damaged or changed after it was written.
void check_digest(std::string const& path, std::string const& object, char const* attribute,
                  std::string const& stored, std::string const& computed);

}  // namespace kembed::io::detail
