#include "common.hpp"
#include "sharded_file.hpp"

#include <kembed/core/validate.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/table_file.hpp>

#include <algorithm>
#include <stdexcept>

namespace kembed::io {
namespace {

constexpr char const* weight_dataset = "/weight";

// Opens a kembed table file and reads its settings; the weight dataset is checked
// against them but not read.
struct OpenTable {
  h5::Handle file;
  detail::FloatMatrix weight;
  TableFile info;
};

OpenTable open_table(std::string const& path) {
  OpenTable t;
  t.file = detail::open_for_reading(path);
  detail::check_format(t.file, path, "kembed-embedding", 1, "table");
  auto const v = detail::required_int64(t.file, path, "num_embeddings");
  auto const d = detail::required_int64(t.file, path, "embedding_dim");
  auto const pad = detail::stored_padding_idx(path, detail::required_int64(t.file, path, "padding_idx"), v);
  Options o;
  if (pad != -1) o.padding_idx = pad;
  try {
    o.plan = parse_plan(detail::required_string(t.file, path, "plan"));
    o.mode = parse_mode(detail::required_string(t.file, path, "numeric_mode"));
    // torch's other options: written only when set, so a file without them is as before.
    o.max_norm = h5::read_double(t.file, "max_norm");
    o.norm_type = h5::read_double(t.file, "norm_type").value_or(2.0);
    if (auto scale = h5::read_string(t.file, "scale_grad_by_freq")) o.scale_grad_by_freq = parse_freq_scale(*scale);
    if (auto sparse = h5::read_int64(t.file, "sparse")) {
      if (*sparse != 0 && *sparse != 1)
        throw FileError(path, "", "its attribute 'sparse' is " + std::to_string(*sparse) + "; want 0 or 1");
      o.sparse = *sparse == 1;
    }
    t.info.config = make_config(v, d, o);
  } catch (FileError const&) {
    throw;
  } catch (Error const& e) {
    std::string what = e.what();
    throw FileError(path, "", "its settings are invalid: " + what.substr(what.find(": ") + 2));
  }
  t.info.kembed_version = h5::read_string(t.file, "kembed_version").value_or("");
  t.info.created_by = h5::read_string(t.file, "created_by").value_or("");
  t.info.provenance = h5::read_string(t.file, "provenance").value_or("");
  t.weight = detail::open_float_matrix(t.file, path, weight_dataset, false);
  if (t.weight.rows != v || t.weight.cols != d) {
    throw FileError(path, weight_dataset,
                    "has shape (" + std::to_string(t.weight.rows) + ", " + std::to_string(t.weight.cols) +
                        ") but the file's attributes say (" + std::to_string(v) + ", " + std::to_string(d) + ")");
  }
  return t;
}

}  // namespace

void save_table(std::string const& path, float const* weight, Config const& config, SaveOptions const& options) {
  if (!weight) throw InvalidArgument("weight", "weight has no data (a null pointer)");
  save_table(path, weight, 0, config.num_embeddings, config, options);
}

void save_table(std::string const& path, float const* rows, std::int64_t first_row, std::int64_t row_count,
                Config const& config, SaveOptions const& options, Collective const* collective) {
  // Everything is checked before the temporary file exists.
  auto const checked = make_config(config.num_embeddings, config.embedding_dim, options_of(config));
  auto const v = checked.num_embeddings, d = checked.embedding_dim;
  if (first_row < 0 || row_count < 0 || first_row > v || row_count > v - first_row)
    throw InvalidArgument("rows", "rows [" + std::to_string(first_row) + ", +" + std::to_string(row_count) +
                                      ") are not rows of a table of " + std::to_string(v));
  if (!collective && (first_row != 0 || row_count != v))
    throw InvalidArgument("rows", "one process saves the whole table: rows [0, " + std::to_string(v) + ")");
  auto check_rows = [&] {
    if (row_count > 0 && !rows) throw InvalidArgument("weight", "weight has no data (a null pointer)");
    auto const n = row_count * d;
    auto const bad = n > 0 ? first_non_finite(rows, n) : n;
    if (bad < n) throw_non_finite("weight", first_row * d + bad, rows[bad], d, "row");
  };
  std::string bad_input;  // many ranks: every rank learns of any rank's bad rows
  if (!collective) check_rows();
  try {
    if (collective) check_rows();
  } catch (Error const& e) {
    bad_input = e.message();
  }
  auto header = [&](hid_t file) {
    detail::write_identity(file, table_format, &options);
    h5::write_int64(file, "num_embeddings", v);
    h5::write_int64(file, "embedding_dim", d);
    h5::write_int64(file, "padding_idx", checked.padding_idx);
    h5::write_string(file, "plan", std::string(to_string(checked.plan)));
    h5::write_string(file, "numeric_mode", std::string(to_string(checked.mode)));
    if (checked.renormalises()) {
      h5::write_double(file, "max_norm", checked.max_norm);
      h5::write_double(file, "norm_type", checked.norm_type);
    }
    if (checked.scales()) h5::write_string(file, "scale_grad_by_freq", std::string(to_string(checked.scale_grad_by_freq)));
    if (checked.sparse) h5::write_int64(file, "sparse", 1);
  };
  detail::write_slabs(path, "saving failed, the file is unchanged", header,
                      {detail::float_rows("weight", v, d, rows)},
                      RowSlab{first_row, row_count, rows, nullptr}, options, collective, bad_input);
}

TableFile load_table(std::string const& path) {
  return detail::reading(path, [&] {
    auto t = open_table(path);
    auto const v = t.info.config.num_embeddings, d = t.info.config.embedding_dim;
    detail::check_size(path, weight_dataset, v, d, 4);
    t.info.weight.resize(static_cast<std::size_t>(v * d));
    detail::read_rows(t.weight, path, weight_dataset, 0, v, t.info.weight.data());
    return std::move(t.info);
  });
}

TableFile load_rows(std::string const& path, std::int64_t first, std::int64_t count) {
  return detail::reading(path, [&] {
    auto t = open_table(path);
    auto const v = t.info.config.num_embeddings, d = t.info.config.embedding_dim;
    if (first < 0 || count < 0 || first > v || count > v - first) {
      throw InvalidArgument("rows", "rows [" + std::to_string(first) + ", " + std::to_string(first) + " + " +
                                        std::to_string(count) + ") are not within the table's " + std::to_string(v) +
                                        " rows (" + path + ")");
    }
    detail::check_size(path, weight_dataset, count, d, 4);
    t.info.first_row = first;
    t.info.weight.resize(static_cast<std::size_t>(count * d));
    detail::read_rows(t.weight, path, weight_dataset, first, count, t.info.weight.data());
    return std::move(t.info);
  });
}

void check_table_finite(std::string const& path, std::int64_t first, std::int64_t count) {
  detail::reading(path, [&] {
    auto t = open_table(path);
    auto const v = t.info.config.num_embeddings, d = t.info.config.embedding_dim;
    if (first < 0 || count < 0 || first > v || count > v - first)
      throw InvalidArgument("rows", "rows [" + std::to_string(first) + ", +" + std::to_string(count) +
                                        ") are not within the table's " + std::to_string(v) + " rows (" + path + ")");
    std::int64_t const piece = std::max<std::int64_t>(1, (std::int64_t{16} << 20) / (4 * d));
    std::vector<float> rows(static_cast<std::size_t>(std::min(piece, count) * d));
    for (std::int64_t at = first; at < first + count; at += piece)  // read_rows refuses what is not finite
      detail::read_rows(t.weight, path, weight_dataset, at, std::min(piece, first + count - at), rows.data());
  });
}

TableFile read_table_dataset(std::string const& path, std::string const& dataset, bool convert) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    std::string const name = dataset.empty() || dataset[0] == '/' ? dataset : "/" + dataset;
    auto m = detail::open_float_matrix(file, path, name, convert);
    if (m.rows < 1 || m.cols < 1) {
      throw FileError(path, name,
                      "has shape (" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
                          "); a table needs at least one row and one column");
    }
    detail::check_size(path, name, m.rows, m.cols, 4);
    TableFile t;
    t.config = make_config(m.rows, m.cols, Options{});
    t.weight.resize(static_cast<std::size_t>(m.rows * m.cols));
    h5::Handle type = h5::datatype(H5Dget_type(m.dataset));
    bool const rounded = H5Tget_size(type) != 4;
    try {
      detail::read_rows(m, path, name, 0, m.rows, t.weight.data());
    } catch (FileError const& e) {
      // A finite float64 beyond float32's range rounds to infinity: say that, not "NaN".
      if (!rounded || std::string(e.what()).find("must be finite") == std::string::npos) throw;
      std::string const what = e.what();
      auto const at = what.find(" at row ");
      throw FileError(path, name,
                      "holds a value" + what.substr(at, what.find(';', at) - at) +
                          " that is not finite or does not fit in float32 (|x| > 3.4028235e38); a table must be "
                          "finite float32");
    }
    return t;
  });
}

}  // namespace kembed::io
