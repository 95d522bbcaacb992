// `kembed info`'s account of a file (describe.hpp): kembed's own formats get their
// meaning spelled out first, a run its provenance, then any HDF5 file's attributes
// and datasets.
#include <kembed/io/check.hpp>
#include <kembed/io/describe.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/optim_file.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>

#include <algorithm>
#include <cstdio>

namespace kembed::io {
namespace {

std::string shape_text(std::vector<std::int64_t> const& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + with_commas(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

char const* meaning(std::string const& format, bool present) {
  if (present && format.empty())
    return "its 'format' attribute is present but empty or not one string: the file is damaged, or not a kembed file";
  if (format == table_format) return "an embedding table and its settings";
  if (format == run_format) return "the result of a backward run: gradient, counts, provenance";
  if (format == sparse_run_format)
    return "the result of a backward run, its gradient row-sparse: the rows it lists, their values and counts";
  if (format == batch_format) return "a batch: ids and dy";
  if (format == forward_format) return "the output of a forward run";
  if (format == checkpoint_format) return "a checkpoint of an unfinished backward run (kembed backward --resume)";
  if (format == optim_state_format) return "an optimizer's state between steps (kembed step --state)";
  if (format.empty()) return "not a kembed file (no 'format' attribute)";
  return "not a format this kembed knows";
}

// How the work was spread over the rows' owners: the busiest rank against the mean,
// then each rank (the first 16; the file lists them all).
void rank_work_lines(std::vector<RankWork> const& work, InfoSection& s) {
  if (work.empty()) return;
  std::int64_t total = 0;
  std::size_t busiest = 0;
  for (std::size_t r = 0; r < work.size(); ++r) {
    total += work[r].terms;
    if (work[r].terms > work[busiest].terms) busiest = r;
  }
  char text[160];
  double const mean = double(total) / double(work.size());
  std::snprintf(text, sizeof text, "rank %zu folds %.1f %% of the %s terms, %.2fx the mean of %zu ranks (1.00x: even)",
                busiest, total ? 100.0 * double(work[busiest].terms) / double(total) : 0.0, with_commas(total).c_str(),
                mean > 0 ? double(work[busiest].terms) / mean : 1.0, work.size());
  s.lines.push_back({"balance", text});
  std::size_t const shown = std::min<std::size_t>(work.size(), 16);
  for (std::size_t r = 0; r < shown; ++r) {
    std::snprintf(text, sizeof text, "%-5zu %s terms (%.1f %%), %s folding, %s bytes sent", r,
                  with_commas(work[r].terms).c_str(), total ? 100.0 * double(work[r].terms) / double(total) : 0.0,
                  seconds_text(double(work[r].fold_microseconds) * 1e-6).c_str(),
                  with_commas(work[r].bytes_sent).c_str());
    s.lines.push_back({"rank", text});
  }
  if (shown < work.size())
    s.lines.push_back(
        {"rank", "... and " + std::to_string(work.size() - shown) + " more (the file's /rank_work holds every rank)"});
}

InfoSection run_section(std::string const& path) {
  auto const run = read_run_header(path);  // nothing in proportion to the rows
  InfoSection s{"run " + run.run_id + ", " + run.created, 10, {}};
  s.lines.push_back({"gradient", with_commas(run.rows) + " x " + with_commas(run.cols) +
                                     (run.sparse ? ", sparse: " + with_commas(run.listed_count) + " rows listed" : "") +
                                     ", SHA-256 " + run.gradient_sha256});
  if (run.pooling)
    s.lines.push_back({"bags",
                       with_commas(run.bags) + " bags of " + with_commas(run.positions) + " positions, pooling " +
                           std::string(to_string(*run.pooling)) + ", in " + with_commas(run.microbatches) +
                           " microbatches of " + with_commas(run.microbatch_size) + " bags",
                       true});
  else
    s.lines.push_back({"positions",
                       with_commas(run.positions) + " in " + with_commas(run.microbatches) + " microbatches of " +
                           with_commas(run.microbatch_size),
                       true});
  s.lines.push_back({"ran",
                     "plan " + run.plan_used + " (asked: " + std::string(to_string(run.plan)) + "), mode " +
                         std::string(to_string(run.numeric_mode)) + ", " + run.backend + " with " +
                         std::to_string(run.threads) + " thread(s)" +
                         (run.ranks > 1 ? " on each of " + std::to_string(run.ranks) + " MPI ranks" : "") +
                         ", kembed " + run.kembed_version,
                     true});
  rank_work_lines(run.rank_work, s);
  s.lines.push_back({"padding", run.padding_idx >= 0
                                    ? "row " + std::to_string(run.padding_idx) +
                                          " is the padding row: its gradient is zero, whatever its count"
                                    : "no padding row"});
  char text[64];
  for (auto const& in : run.inputs) {
    std::snprintf(text, sizeof text, "%-6s ", in.role.c_str());
    s.lines.push_back({"input", text + in.path + " (" + with_commas(in.bytes) + " bytes, SHA-256 " +
                                    (in.fingerprint == Fingerprint::chunks ? "of 16 MiB chunks " : "") + in.sha256 +
                                    ")"});
  }
  for (auto const& [name, seconds] : run.timings) {
    std::snprintf(text, sizeof text, "%-22s ", name.c_str());
    s.lines.push_back({"timing", text + seconds_text(seconds)});
  }
  s.lines.push_back({"command", run.command_line_json});
  s.lines.push_back({"config", run.configuration_json});
  return s;
}

}  // namespace

FileInfo file_info(std::string const& path) {
  auto const d = describe_file(path);
  FileInfo info;
  info.headline = path + ": " + (d.format.empty() ? "HDF5" : d.format) + ", " + with_commas(d.bytes) + " bytes";
  info.meaning = meaning(d.format, d.format_present);
  if (is_run_format(d.format)) info.sections.push_back(run_section(path));
  InfoSection attributes{"attributes", 18, {}};
  for (auto const& [name, value] : d.attributes) attributes.lines.push_back({name, value});
  info.sections.push_back(std::move(attributes));
  InfoSection datasets{"datasets", 28, {}};
  for (auto const& set : d.datasets) {
    std::string filters;
    for (auto const& f : set.filters) filters += (filters.empty() ? "" : "+") + f;
    char text[160];
    std::snprintf(text, sizeof text, "%-26s %-30s ", shape_text(set.shape).c_str(), set.type.c_str());
    datasets.lines.push_back({set.path, text +
                                            (set.chunks.empty() ? "contiguous" : "chunks " + shape_text(set.chunks)) +
                                            (filters.empty() ? "" : ", " + filters)});
  }
  info.sections.push_back(std::move(datasets));
  return info;
}

InfoSection check_section(std::string const& path) {
  auto const report = check_file(path);
  InfoSection s{"check", 10, {}};
  for (auto const& line : report.verified) s.lines.push_back({"ok", line});
  for (auto const& line : report.unverified) s.lines.push_back({"unchecked", line});
  return s;
}

std::string info_text(InfoSection const& section) {
  std::string out = "\n" + section.title + "\n";
  for (auto const& line : section.lines) {
    std::string key = line.key;
    if (int(key.size()) < section.key_width) key.resize(std::size_t(section.key_width), ' ');
    out += "  " + key + " " + line.value + "\n";
  }
  return out;
}

std::string info_text(FileInfo const& info) {
  std::string out = info.headline + "\n  " + info.meaning + "\n";
  for (auto const& section : info.sections) out += info_text(section);
  return out;
}

std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string seconds_text(double s) {
  char text[48];
  if (s < 1)
    std::snprintf(text, sizeof text, "%.1f ms", s * 1e3);
  else if (s < 60)
    std::snprintf(text, sizeof text, "%.2f s", s);
  else if (s < 3600)
    std::snprintf(text, sizeof text, "%d min %02d s", int(s) / 60, int(s) % 60);
  else
    std::snprintf(text, sizeof text, "%d h %02d min", int(s) / 3600, (int(s) % 3600) / 60);
  return text;
}

}  // namespace kembed::io
