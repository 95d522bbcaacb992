#include "common.hpp"

#include <kembed/io/describe.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/optim_file.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>

#include <sys/stat.h>
#include <sstream>

namespace kembed::io {
namespace {

std::string attribute_text(hid_t obj, char const* name) {
  h5::Handle attr = h5::attribute(H5Aopen(obj, name, H5P_DEFAULT));
  h5::Handle type = h5::datatype(H5Aget_type(attr));
  h5::Handle space = h5::dataspace(H5Aget_space(attr));
  bool const scalar = H5Sget_simple_extent_npoints(space) == 1;
  try {
    switch (H5Tget_class(type)) {
      case H5T_STRING:
        return h5::read_string(obj, name).value_or("");
      case H5T_INTEGER:
        if (scalar) return std::to_string(h5::read_int64(obj, name).value_or(0));
        break;
      case H5T_FLOAT:
        if (scalar) {
          std::ostringstream out;
          out.precision(17);
          out << h5::read_double(obj, name).value_or(0.0);
          return out.str();
        }
        break;
      default:
        break;
    }
  } catch (std::exception const&) {
  }
  return "(" + h5::describe_type(type) + ", " + std::to_string(H5Sget_simple_extent_npoints(space)) + " values)";
}

// The root attributes of each kembed format (docs/FORMAT.md), in the order written.
std::vector<char const*> format_attributes(std::string const& format) {
  if (format == table_format)
    return {"format",    "kembed_version", "created_by", "num_embeddings", "embedding_dim",      "padding_idx",
            "plan",      "numeric_mode",   "max_norm",   "norm_type",      "scale_grad_by_freq", "sparse",
            "provenance"};
  if (format == optim_state_format)
    return {"format",
            "kembed_version",
            "created_by",
            "optimizer",
            "num_embeddings",
            "embedding_dim",
            "step",
            "lr",
            "weight_decay",
            "momentum",
            "dampening",
            "lr_decay",
            "initial_accumulator_value",
            "eps",
            "beta1",
            "beta2",
            "maximize",
            "nesterov",
            "decoupled_weight_decay",
            "table_sha256",
            "state_sha256",
            "settings_sha256",
            "provenance"};
  if (format == sparse_run_format)
    return {"format",
            "kembed_version",
            "run_id",
            "created",
            "backend",
            "threads",
            "ranks",
            "plan",
            "plan_used",
            "numeric_mode",
            "padding_idx",
            "positions",
            "microbatches",
            "microbatch_size",
            "num_embeddings",
            "embedding_dim",
            "listed_rows",
            "gradient_sha256",
            "counts_sha256",
            "summary_sha256",
            "scale_grad_by_freq",
            "pooling",
            "bags"};
  if (format == run_format)
    return {"format",          "kembed_version",
            "run_id",          "created",
            "backend",         "threads",
            "ranks",           "plan",
            "plan_used",       "numeric_mode",
            "padding_idx",     "positions",
            "microbatches",    "microbatch_size",
            "num_embeddings",  "embedding_dim",
            "gradient_sha256", "counts_sha256",
            "summary_sha256",  "scale_grad_by_freq",
            "pooling",         "bags"};
  if (format == batch_format) return {"format", "kembed_version", "created_by", "num_embeddings", "source", "seed"};
  if (format == forward_format)
    return {"format", "kembed_version", "created_by", "table_sha256", "ids_sha256", "pooling", "bags"};
  if (format == checkpoint_format)
    return {"format",
            "kembed_version",
            "job_id",
            "position",
            "microbatches",
            "microbatch_size",
            "table_sha256",
            "batch_sha256",
            "inputs_fingerprint",
            "plan",
            "numeric_mode",
            "padding_idx",
            "elapsed_seconds",
            "num_embeddings",
            "embedding_dim",
            "scale_grad_by_freq",
            "listed_rows",
            "gradient_sha256",
            "counts_sha256",
            "pooling",
            "bags",
            "checkpoint_sha256"};
  return {};
}

struct Visit {
  hid_t file;
  FileSummary* summary;
};

#if H5_VERSION_GE(1, 12, 0)
herr_t add_dataset(hid_t, char const* name, H5L_info2_t const* info, void* data) {
#else
herr_t add_dataset(hid_t, char const* name, H5L_info_t const* info, void* data) {
#endif
  if (info->type != H5L_TYPE_HARD) return 0;
  auto& visit = *static_cast<Visit*>(data);
  h5::Handle object{H5Oopen(visit.file, name, H5P_DEFAULT), H5Oclose};
  if (!object.valid() || H5Iget_type(object) != H5I_DATASET) return 0;
  DatasetSummary d;
  d.path = std::string("/") + name;
  h5::Handle type = h5::datatype(H5Dget_type(object));
  h5::Handle space = h5::dataspace(H5Dget_space(object));
  h5::Handle dcpl = h5::plist(H5Dget_create_plist(object));
  d.type = h5::describe_type(type);
  if (H5Tget_class(type) == H5T_FLOAT || H5Tget_class(type) == H5T_INTEGER)
    d.type += H5Tget_order(type) == H5T_ORDER_BE ? ", big-endian" : ", little-endian";
  int const rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::size_t(rank > 0 ? rank : 0));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  for (auto x : dims) d.shape.push_back(std::int64_t(x));
  if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(dims.size());
    H5Pget_chunk(dcpl, rank, chunk.data());
    for (auto x : chunk) d.chunks.push_back(std::int64_t(x));
  }
  for (auto const& filter : detail::filters_of(dcpl)) d.filters.push_back(filter.name);
  visit.summary->datasets.push_back(std::move(d));
  return 0;
}

}  // namespace

FileSummary describe_file(std::string const& path) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    FileSummary summary;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) summary.bytes = st.st_size;
    summary.format_present = h5::has_attribute(file, "format");  // a header that cannot say is damaged: throws
    try {
      summary.format = h5::read_string(file, "format").value_or("");
    } catch (std::exception const&) {
      summary.format.clear();  // a 'format' that is not one string: not a kembed file, described as HDF5
    }
    // A kembed file's attributes are read by the names its format defines; only a
    // foreign file's are iterated (H5Aiterate2 crashes HDF5 1.10 on crafted headers).
    auto const known = format_attributes(summary.format);
    if (!known.empty()) {
      for (auto const& name : known)
        if (h5::has_attribute(file, name)) summary.attributes.emplace_back(name, attribute_text(file, name));
    } else {
      for (auto const& name : h5::attribute_names(file))
        summary.attributes.emplace_back(name, attribute_text(file, name.c_str()));
    }
    Visit visit{file, &summary};
    if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, add_dataset, &visit) < 0)
      throw FileError(path, "", "its structure cannot be read; the file is damaged (HDF5: " + h5::error_text() + ")");
    return summary;
  });
}

}  // namespace kembed::io
