#pragma once
// What any HDF5 file holds, in words: the root's attributes and every dataset's
// shape, type, chunking and filters. `kembed info` prints it.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kembed::io {

struct DatasetSummary {
  std::string path;                  // "/weight"
  std::string type;                  // "32-bit floats", "strings", ...
  std::vector<std::int64_t> shape;   // empty for a scalar
  std::vector<std::int64_t> chunks;  // empty when contiguous
  std::vector<std::string> filters;  // "shuffle", "deflate", "fletcher32", ...
};

struct FileSummary {
  std::string format;           // the root's "format" attribute, or "" when it has none or it is not one string
  bool format_present = false;  // a "format" attribute exists (it may still read as "")
  std::int64_t bytes = 0;
  std::vector<std::pair<std::string, std::string>> attributes;  // root attributes, values as text
  std::vector<DatasetSummary> datasets;
};

// Throws FileError for a missing, non-HDF5 or damaged file.
FileSummary describe_file(std::string const& path);

}  // namespace kembed::io
