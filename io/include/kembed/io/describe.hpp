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

// `kembed info`'s account of a file, as sections of (key, value) lines: the CLI prints
// it (info_text) and the inspector's Info view shows it. A run's lines that decide its
// bits (plan, numeric mode, backend, threads, ranks; positions per microbatch) are marked.
struct InfoLine {
  std::string key, value;
  bool decides_bits = false;
};
struct InfoSection {
  std::string title;
  int key_width = 10;  // the keys' column, as printed
  std::vector<InfoLine> lines;
};
struct FileInfo {
  std::string headline;               // "PATH: FORMAT, N bytes"
  std::string meaning;                // what the format holds, in words
  std::vector<InfoSection> sections;  // a run's provenance, attributes, datasets
};
// Throws FileError as describe_file does.
FileInfo file_info(std::string const& path);
// What io::check_file verified, as a section ("check"); throws on the first failure.
InfoSection check_section(std::string const& path);
std::string info_text(FileInfo const& info);        // as `kembed info` prints it
std::string info_text(InfoSection const& section);  // one section, its blank line first

std::string with_commas(std::int64_t n);   // 1234567 -> "1,234,567"
std::string seconds_text(double seconds);  // "12.3 ms", "1.23 s", "2 min 05 s", "1 h 02 min"

}  // namespace kembed::io
