// kembed diff: are two run files (or two tables) the same bits, and if not, where
// and by how much: rows that differ, the largest difference in ULPs and in
// absolute value. Exit 0 identical, 1 different, 2 on error (as diff and h5diff).
#include "commands.hpp"
#include "console.hpp"

#include <kembed/core/compare.hpp>
#include <kembed/io/check.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace kembed::cli {
namespace {

struct Compared {
  std::string kind;  // "run" or "table"
  bool shapes_differ = false;
  std::vector<std::string> setting_differences;
  std::int64_t counts_differing_rows = 0;
  Comparison values;
  std::int64_t padding_a = -1, padding_b = -1;  // the padding rows, labelled in row lists
  // "", " (padding)" or " (padding in a)": the padding row's gradient is zero.
  std::string padding_note(std::int64_t row) const {
    bool const a = row == padding_a, b = row == padding_b;
    return a && b ? " (padding)" : a ? " (padding in a)" : b ? " (padding in b)" : "";
  }
  bool identical() const {
    return !shapes_differ && values.identical() && counts_differing_rows == 0 && setting_differences.empty();
  }
};

std::vector<std::string> texts(std::vector<SettingDifference> const& differences) {
  std::vector<std::string> out;
  for (auto const& d : differences) out.push_back(d.text());
  return out;
}

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

std::string hex(std::uint32_t bits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", bits);
  return text;
}

std::string number(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  std::ostringstream out;
  out.precision(9);
  out << x;
  return out.str();
}

void print_json(DiffArgs const& args, Compared const& c) {
  auto q = io::json_quote;
  std::printf(
      "{\"identical\": %s, \"kind\": %s, \"a\": %s, \"b\": %s, \"rows\": %lld, \"cols\": %lld, "
      "\"shapes_differ\": %s, \"differing_rows\": %lld, \"differing_elements\": %lld, "
      "\"counts_differing_rows\": %lld, \"max_ulp\": %lld, \"max_ulp_at\": [%lld, %lld], "
      "\"max_abs\": %s, \"max_abs_at\": [%lld, %lld], \"settings_differ\": [",
      c.identical() ? "true" : "false", q(c.kind).c_str(), q(args.a).c_str(), q(args.b).c_str(),
      (long long)c.values.rows, (long long)c.values.cols, c.shapes_differ ? "true" : "false",
      (long long)c.values.differing_rows, (long long)c.values.differing_elements, (long long)c.counts_differing_rows,
      (long long)c.values.max_ulp, (long long)c.values.max_ulp_row, (long long)c.values.max_ulp_col,
      std::isinf(c.values.max_abs) ? "\"inf\"" : number(c.values.max_abs).c_str(), (long long)c.values.max_abs_row,
      (long long)c.values.max_abs_col);
  for (std::size_t i = 0; i < c.setting_differences.size(); ++i)
    std::printf("%s%s", i ? ", " : "", q(c.setting_differences[i]).c_str());
  std::printf("], \"first_rows\": [");
  for (std::size_t i = 0; i < c.values.differences.size(); ++i) {
    auto const& r = c.values.differences[i];
    std::printf(
        "%s{\"row\": %lld, \"columns\": %lld, \"max_ulp\": %lld, \"max_abs\": %s, \"a_bits\": \"%s\", \"b_bits\": "
        "\"%s\"%s}",
        i ? ", " : "", (long long)r.row, (long long)r.columns, (long long)r.max_ulp,
        std::isinf(r.max_abs) ? "\"inf\"" : number(r.max_abs).c_str(), hex(bits_of(r.a)).c_str(),
        hex(bits_of(r.b)).c_str(), c.padding_note(r.row).empty() ? "" : ", \"padding\": true");
  }
  std::printf("]}\n");
}

void print_text(DiffArgs const& args, Compared const& c) {
  auto const& console = Console::get();
  if (c.identical()) {
    std::printf("%s: %s and %s (%s x %s %s)\n", console.paint("identical", "32").c_str(), args.a.c_str(),
                args.b.c_str(), with_commas(c.values.rows).c_str(), with_commas(c.values.cols).c_str(),
                c.kind == "run" ? "gradients" : "tables");
    return;
  }
  std::printf("%s: %s and %s\n", console.paint("differ", "31").c_str(), args.a.c_str(), args.b.c_str());
  if (c.shapes_differ) {
    std::printf("  shapes differ\n");
    return;
  }
  for (auto const& s : c.setting_differences) std::printf("  setting %s\n", s.c_str());
  if (c.values.differing_elements > 0) {
    std::printf("  %s of %s rows differ (%s elements)\n", with_commas(c.values.differing_rows).c_str(),
                with_commas(c.values.rows).c_str(), with_commas(c.values.differing_elements).c_str());
    std::printf(
        "  largest difference: %s ULPs at row %lld, column %lld; %s in absolute value at row %lld, column %lld\n",
        with_commas(c.values.max_ulp).c_str(), (long long)c.values.max_ulp_row, (long long)c.values.max_ulp_col,
        number(c.values.max_abs).c_str(), (long long)c.values.max_abs_row, (long long)c.values.max_abs_col);
    std::printf("  %-10s %-9s %-12s %-12s %s\n", "row", "columns", "max ULPs", "max |a-b|", "bits at the max (a / b)");
    for (auto const& r : c.values.differences)
      std::printf("  %-10lld %-9lld %-12lld %-12s %s / %s%s\n", (long long)r.row, (long long)r.columns,
                  (long long)r.max_ulp, number(r.max_abs).c_str(), hex(bits_of(r.a)).c_str(),
                  hex(bits_of(r.b)).c_str(), c.padding_note(r.row).c_str());
    if (c.values.differing_rows > std::int64_t(c.values.differences.size()))
      std::printf("  ... and %s more rows (--rows N lists more)\n",
                  with_commas(c.values.differing_rows - std::int64_t(c.values.differences.size())).c_str());
  } else {
    std::printf("  the values are the same bits\n");
  }
  if (c.counts_differing_rows > 0)
    std::printf("  per-row counts differ in %s rows: the runs did not read the same ids\n",
                with_commas(c.counts_differing_rows).c_str());
}

}  // namespace

int diff(DiffArgs const& args) {
  auto const fa = io::file_format(args.a), fb = io::file_format(args.b);
  // By family, so that a newer version of either is refused by name when read.
  auto family = [](std::string const& tag) { return tag.substr(0, tag.rfind('-')); };
  Compared c;
  // A sparse run compares with a dense one row for row (it reads as its dense gradient).
  auto run_family = [&](std::string const& tag) {
    return family(tag) == "kembed-run" || family(tag) == "kembed-sparse-run";
  };
  if (run_family(fa) && run_family(fb)) {
    c.kind = "run";
    // Both runs are held densely at once: refused up front beyond this machine's
    // memory (a small sparse file may declare a huge V), before either is read.
    auto const dense_bytes = [](io::RunFile const& h) { return double(h.rows) * (4.0 * double(h.cols) + 8); };
    io::check_memory(args.a + " and " + args.b, "to compare them: kembed diff holds both gradients and counts",
                     dense_bytes(io::read_run_header(args.a)) + dense_bytes(io::read_run_header(args.b)));
    // Both gradients are read and each is checked against its own stored SHA-256 (a
    // mismatch is a damaged file, exit 2), the counts and the summary against theirs;
    // the verdict then comes from the bits read, never from the stored digests alone.
    auto const a = io::read_run(args.a, true, true);
    auto const b = io::read_run(args.b, true, true);
    io::check_run_summary(args.a, a);
    io::check_run_summary(args.b, b);
    c.values.rows = a.rows, c.values.cols = a.cols;
    c.padding_a = a.padding_idx, c.padding_b = b.padding_idx;
    // Runs differ by the settings their bits depend on (not the plan: a speed choice).
    c.setting_differences = texts(differences(io::settings_of(a), io::settings_of(b), Settings::gradient));
    if (a.pooling != b.pooling) {  // a bag run's pooling: the gradient depends on it
      auto const pooled = [](io::RunFile const& r) { return r.pooling ? std::string(to_string(*r.pooling)) : "none"; };
      c.setting_differences.push_back("pooling: " + pooled(a) + " / " + pooled(b));
    }
    if (a.rows != b.rows || a.cols != b.cols) {
      c.shapes_differ = true;
    } else {
      c.values = compare(a.gradient.data(), b.gradient.data(), a.rows, a.cols, args.rows);
      for (std::int64_t r = 0; r < c.values.rows; ++r) c.counts_differing_rows += a.counts[r] != b.counts[r];
    }
  } else if (family(fa) == "kembed-embedding" && family(fb) == "kembed-embedding") {
    c.kind = "table";
    auto const a = io::load_table(args.a);
    auto const b = io::load_table(args.b);
    c.values.rows = a.config.num_embeddings, c.values.cols = a.config.embedding_dim;
    if (c.values.rows != b.config.num_embeddings || c.values.cols != b.config.embedding_dim) {
      c.shapes_differ = true;
    } else {
      c.values = compare(a.weight.data(), b.weight.data(), c.values.rows, c.values.cols, args.rows);
      c.padding_a = a.config.padding_idx, c.padding_b = b.config.padding_idx;
      c.setting_differences = texts(differences(a.config, b.config));  // a table file holds every setting
    }
  } else {
    throw InvalidArgument("files", "kembed diff compares two run files or two table files; " + args.a + " is '" + fa +
                                       "' and " + args.b + " is '" + fb + "'");
  }
  if (args.json)
    print_json(args, c);
  else
    print_text(args, c);
  return c.identical() ? Exit::ok : Exit::differ;
}

}  // namespace kembed::cli
