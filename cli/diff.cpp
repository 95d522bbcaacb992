// kembed diff: are two run files (or two tables) the same bits, and if not, where
// and by how much: rows that differ, the largest difference in ULPs and in
// absolute value. Exit 0 identical, 1 different, 2 on error (as diff and h5diff).
#include "commands.hpp"
#include "console.hpp"

#include <kembed/io/error.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace kembed::cli {
namespace {

// Floats in the order of their values as integers: adjacent floats are 1 apart,
// -0.0 and +0.0 are both 0, and +-inf are one past +-FLT_MAX.
std::int64_t ordered(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return (b & 0x80000000u) ? -std::int64_t(b & 0x7fffffffu) : std::int64_t(b);
}

struct Compared {
  std::string kind;  // "run" or "table"
  std::int64_t rows = 0, cols = 0;
  bool shapes_differ = false;
  std::vector<std::string> setting_differences;
  std::int64_t differing_elements = 0, differing_rows = 0, counts_differing_rows = 0;
  std::int64_t max_ulp = 0, max_ulp_row = -1, max_ulp_col = -1;
  double max_abs = 0;
  std::int64_t max_abs_row = -1, max_abs_col = -1;
  struct Row {
    std::int64_t row, columns, max_ulp;
    double max_abs;
    std::uint32_t a_bits, b_bits;  // at the row's largest-ULP column
  };
  std::vector<Row> first_rows;
  bool identical() const {
    return !shapes_differ && differing_elements == 0 && counts_differing_rows == 0 && setting_differences.empty();
  }
};

void compare_values(std::vector<float> const& a, std::vector<float> const& b, Compared& out, std::int64_t keep) {
  for (std::int64_t r = 0; r < out.rows; ++r) {
    float const* pa = a.data() + r * out.cols;
    float const* pb = b.data() + r * out.cols;
    if (std::memcmp(pa, pb, std::size_t(out.cols) * 4) == 0) continue;
    Compared::Row row{r, 0, -1, 0.0, 0, 0};
    for (std::int64_t c = 0; c < out.cols; ++c) {
      if (std::memcmp(pa + c, pb + c, 4) == 0) continue;
      ++row.columns;
      std::int64_t const ulp = std::llabs(ordered(pa[c]) - ordered(pb[c]));
      double diff = std::fabs(double(pa[c]) - double(pb[c]));
      if (std::isnan(diff)) diff = INFINITY;  // inf against -inf, or a NaN
      if (ulp > row.max_ulp) {
        row.max_ulp = ulp;
        std::memcpy(&row.a_bits, pa + c, 4);
        std::memcpy(&row.b_bits, pb + c, 4);
      }
      row.max_abs = std::max(row.max_abs, diff);
      if (ulp > out.max_ulp || out.max_ulp_row < 0) out.max_ulp = ulp, out.max_ulp_row = r, out.max_ulp_col = c;
      if (diff > out.max_abs || out.max_abs_row < 0) out.max_abs = diff, out.max_abs_row = r, out.max_abs_col = c;
    }
    out.differing_elements += row.columns;
    ++out.differing_rows;
    if (std::int64_t(out.first_rows.size()) < keep) out.first_rows.push_back(row);
  }
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
      c.identical() ? "true" : "false", q(c.kind).c_str(), q(args.a).c_str(), q(args.b).c_str(), (long long)c.rows,
      (long long)c.cols, c.shapes_differ ? "true" : "false", (long long)c.differing_rows,
      (long long)c.differing_elements, (long long)c.counts_differing_rows, (long long)c.max_ulp,
      (long long)c.max_ulp_row, (long long)c.max_ulp_col, std::isinf(c.max_abs) ? "\"inf\"" : number(c.max_abs).c_str(),
      (long long)c.max_abs_row, (long long)c.max_abs_col);
  for (std::size_t i = 0; i < c.setting_differences.size(); ++i)
    std::printf("%s%s", i ? ", " : "", q(c.setting_differences[i]).c_str());
  std::printf("], \"first_rows\": [");
  for (std::size_t i = 0; i < c.first_rows.size(); ++i) {
    auto const& r = c.first_rows[i];
    std::printf(
        "%s{\"row\": %lld, \"columns\": %lld, \"max_ulp\": %lld, \"max_abs\": %s, \"a_bits\": \"%s\", \"b_bits\": "
        "\"%s\"}",
        i ? ", " : "", (long long)r.row, (long long)r.columns, (long long)r.max_ulp,
        std::isinf(r.max_abs) ? "\"inf\"" : number(r.max_abs).c_str(), hex(r.a_bits).c_str(), hex(r.b_bits).c_str());
  }
  std::printf("]}\n");
}

void print_text(DiffArgs const& args, Compared const& c) {
  auto const& console = Console::get();
  if (c.identical()) {
    std::printf("%s: %s and %s (%s x %s %s)\n", console.paint("identical", "32").c_str(), args.a.c_str(),
                args.b.c_str(), with_commas(c.rows).c_str(), with_commas(c.cols).c_str(),
                c.kind == "run" ? "gradients" : "tables");
    return;
  }
  std::printf("%s: %s and %s\n", console.paint("differ", "31").c_str(), args.a.c_str(), args.b.c_str());
  if (c.shapes_differ) {
    std::printf("  shapes differ\n");
    return;
  }
  for (auto const& s : c.setting_differences) std::printf("  setting %s\n", s.c_str());
  if (c.differing_elements > 0) {
    std::printf("  %s of %s rows differ (%s elements)\n", with_commas(c.differing_rows).c_str(),
                with_commas(c.rows).c_str(), with_commas(c.differing_elements).c_str());
    std::printf(
        "  largest difference: %s ULPs at row %lld, column %lld; %s in absolute value at row %lld, column %lld\n",
        with_commas(c.max_ulp).c_str(), (long long)c.max_ulp_row, (long long)c.max_ulp_col, number(c.max_abs).c_str(),
        (long long)c.max_abs_row, (long long)c.max_abs_col);
    std::printf("  %-10s %-9s %-12s %-12s %s\n", "row", "columns", "max ULPs", "max |a-b|", "bits at the max (a / b)");
    for (auto const& r : c.first_rows)
      std::printf("  %-10lld %-9lld %-12lld %-12s %s / %s\n", (long long)r.row, (long long)r.columns,
                  (long long)r.max_ulp, number(r.max_abs).c_str(), hex(r.a_bits).c_str(), hex(r.b_bits).c_str());
    if (c.differing_rows > std::int64_t(c.first_rows.size()))
      std::printf("  ... and %s more rows (--rows N lists more)\n",
                  with_commas(c.differing_rows - std::int64_t(c.first_rows.size())).c_str());
  } else if (c.counts_differing_rows == 0 && c.setting_differences.empty()) {
    std::printf("  the values are the same bits\n");
  }
  if (c.counts_differing_rows > 0)
    std::printf("  per-row counts differ in %s rows: the runs did not read the same ids\n",
                with_commas(c.counts_differing_rows).c_str());
}

}  // namespace

int diff(DiffArgs const& args) {
  auto const fa = io::file_format(args.a), fb = io::file_format(args.b);
  Compared c;
  if (fa == io::run_format && fb == io::run_format) {
    c.kind = "run";
    auto const sha_a = io::read_run_gradient_sha256(args.a), sha_b = io::read_run_gradient_sha256(args.b);
    // Equal SHA-256s settle the gradients: only the counts are read then.
    bool const same_sha = sha_a == sha_b;
    auto const a = io::read_run(args.a, !same_sha);
    auto const b = io::read_run(args.b, !same_sha);
    c.rows = a.rows, c.cols = a.cols;
    if (a.rows != b.rows || a.cols != b.cols) {
      c.shapes_differ = true;
    } else {
      if (!same_sha) compare_values(a.gradient, b.gradient, c, args.rows);
      for (std::int64_t r = 0; r < c.rows; ++r) c.counts_differing_rows += a.counts[r] != b.counts[r];
    }
  } else if (fa == io::table_format && fb == io::table_format) {
    c.kind = "table";
    auto const a = io::load_table(args.a);
    auto const b = io::load_table(args.b);
    c.rows = a.config.num_embeddings, c.cols = a.config.embedding_dim;
    if (c.rows != b.config.num_embeddings || c.cols != b.config.embedding_dim) {
      c.shapes_differ = true;
    } else {
      compare_values(a.weight, b.weight, c, args.rows);
      if (a.config.padding_idx != b.config.padding_idx)
        c.setting_differences.push_back("padding_idx: " + std::to_string(a.config.padding_idx) + " / " +
                                        std::to_string(b.config.padding_idx));
      if (a.config.plan != b.config.plan)
        c.setting_differences.push_back("plan: " + std::string(to_string(a.config.plan)) + " / " +
                                        std::string(to_string(b.config.plan)));
      if (a.config.mode != b.config.mode)
        c.setting_differences.push_back("numeric_mode: " + std::string(to_string(a.config.mode)) + " / " +
                                        std::string(to_string(b.config.mode)));
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
