// kembed info: what a file holds, its format and provenance. Any HDF5 file is
// described; kembed's own formats get their meaning spelled out first.
#include "commands.hpp"
#include "console.hpp"

#include <kembed/io/check.hpp>
#include <kembed/io/describe.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/optim_file.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdio>

namespace kembed::cli {
namespace {

std::string shape_text(std::vector<std::int64_t> const& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + with_commas(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

char const* meaning(std::string const& format, bool present) {
  if (present && format.empty())
    return "its 'format' attribute is present but empty or not one string: the file is damaged, or not a kembed file";
  if (format == io::table_format) return "an embedding table and its settings";
  if (format == io::run_format) return "the result of a backward run: gradient, counts, provenance";
  if (format == io::sparse_run_format)
    return "the result of a backward run, its gradient row-sparse: the rows it lists, their values and counts";
  if (format == io::batch_format) return "a batch: ids and dy";
  if (format == io::forward_format) return "the output of a forward run";
  if (format == io::checkpoint_format) return "a checkpoint of an unfinished backward run (kembed backward --resume)";
  if (format == io::optim_state_format) return "an optimizer's state between steps (kembed step --state)";
  if (format.empty()) return "not a kembed file (no 'format' attribute)";
  return "not a format this kembed knows";
}

}  // namespace

int info(std::string const& path, bool check) {
  auto const s = io::describe_file(path);
  std::printf("%s: %s, %s bytes\n", path.c_str(), s.format.empty() ? "HDF5" : s.format.c_str(),
              with_commas(s.bytes).c_str());
  std::printf("  %s\n", meaning(s.format, s.format_present));
  if (io::is_run_format(s.format)) {
    auto const run = io::read_run_header(path);  // nothing in proportion to the rows
    std::printf("\nrun %s, %s\n", run.run_id.c_str(), run.created.c_str());
    std::printf("  gradient   %s x %s%s, SHA-256 %s\n", with_commas(run.rows).c_str(), with_commas(run.cols).c_str(),
                run.sparse ? (", sparse: " + with_commas(run.listed_count) + " rows listed").c_str()
                           : "",
                run.gradient_sha256.c_str());
    if (run.pooling)
      std::printf("  bags       %s bags of %s positions, pooling %s, in %s microbatches of %s bags\n",
                  with_commas(run.bags).c_str(), with_commas(run.positions).c_str(),
                  std::string(to_string(*run.pooling)).c_str(), with_commas(run.microbatches).c_str(),
                  with_commas(run.microbatch_size).c_str());
    else
      std::printf("  positions  %s in %s microbatches of %s\n", with_commas(run.positions).c_str(),
                  with_commas(run.microbatches).c_str(), with_commas(run.microbatch_size).c_str());
    std::printf("  ran        plan %s (asked: %s), mode %s, %s with %lld thread(s)%s, kembed %s\n",
                run.plan_used.c_str(), std::string(to_string(run.plan)).c_str(),
                std::string(to_string(run.numeric_mode)).c_str(), run.backend.c_str(), (long long)run.threads,
                run.ranks > 1 ? (" on each of " + std::to_string(run.ranks) + " MPI ranks").c_str() : "",
                run.kembed_version.c_str());
    if (run.padding_idx >= 0)
      std::printf("  padding    row %lld is the padding row: its gradient is zero, whatever its count\n",
                  (long long)run.padding_idx);
    else
      std::printf("  padding    no padding row\n");
    for (auto const& in : run.inputs)
      std::printf("  input      %-6s %s (%s bytes, SHA-256 %s)\n", in.role.c_str(), in.path.c_str(),
                  with_commas(in.bytes).c_str(), in.sha256.c_str());
    for (auto const& [name, seconds] : run.timings)
      std::printf("  timing     %-22s %s\n", name.c_str(), seconds_text(seconds).c_str());
    std::printf("  command    %s\n", run.command_line_json.c_str());
    std::printf("  config     %s\n", run.configuration_json.c_str());
  }
  std::printf("\nattributes\n");
  for (auto const& [name, value] : s.attributes) std::printf("  %-18s %s\n", name.c_str(), value.c_str());
  std::printf("\ndatasets\n");
  for (auto const& d : s.datasets) {
    std::string filters;
    for (auto const& f : d.filters) filters += (filters.empty() ? "" : "+") + f;
    std::printf("  %-28s %-26s %-30s %s%s\n", d.path.c_str(), shape_text(d.shape).c_str(), d.type.c_str(),
                d.chunks.empty() ? "contiguous" : ("chunks " + shape_text(d.chunks)).c_str(),
                filters.empty() ? "" : (", " + filters).c_str());
  }
  if (check) {
    auto const report = io::check_file(path);  // throws on the first thing that fails
    std::printf("\ncheck\n");
    for (auto const& line : report.verified) std::printf("  ok         %s\n", line.c_str());
    for (auto const& line : report.unverified) std::printf("  unchecked  %s\n", line.c_str());
  }
  return Exit::ok;
}

}  // namespace kembed::cli
