#pragma once
// What the io tests share: a fixture with a folder of its own, sample files, and
// the raw HDF5 edits that make bad ones. One test file per component (tables,
// saves, chunks, batches, runs, checkpoints), as the io library is split.
#include "support/test_support.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/check.hpp>
#include <kembed/io/describe.hpp>
#include <kembed/io/embedding_io.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/row_reader.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/summary.hpp>
#include <kembed/io/table_file.hpp>

#include "common.hpp"
#include "direct_chunks.hpp"  // io/src
#include "h5.hpp"

#include <hdf5.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>

// HDF5's own checksum, exported by the library though declared only in its private
// headers (at global scope: an extern "C" name in an unnamed namespace is a name of its own to nvcc).
extern "C" std::uint32_t H5_checksum_fletcher32(void const* data, std::size_t bytes);

// In namespace kembed, not an unnamed one: gtest wants one fixture class Io in
// every file of the suite.
namespace kembed {

namespace fs = std::filesystem;
using test::same_bits;

class Io : public ::testing::Test {
 protected:
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("kembed-io-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(std::string const& name) const { return (dir_ / name).string(); }
  // A table of random values saved in chunks of the given rows; returns its values.
  std::vector<float> save_chunked_table(std::string const& name, std::int64_t v, std::int64_t d,
                                        std::int64_t rows_per_chunk) const;
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (auto const& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::string bytes_of(std::string const& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path dir_;
};

inline Config config(std::int64_t v, std::int64_t d, std::optional<std::int64_t> pad = std::nullopt,
                     Plan plan = Plan::automatic, Mode mode = Mode::identical) {
  Options o;
  o.padding_idx = pad;
  o.plan = plan;
  o.mode = mode;
  return make_config(v, d, o);
}

inline std::vector<float> Io::save_chunked_table(std::string const& name, std::int64_t v, std::int64_t d,
                                                 std::int64_t rows_per_chunk) const {
  auto w = synthetic::uniform_floats(v * d, std::uint64_t(v + d));
  io::SaveOptions so;
  so.rows_per_chunk = rows_per_chunk;
  io::save_table(path(name), w.data(), config(v, d), so);
  return w;
}

inline std::vector<float> special_table(std::int64_t v, std::int64_t d) {
  auto w = synthetic::uniform_floats(v * d, 17);
  w[0] = -0.0f;
  w[1] = test::from_bits(1u);  // smallest subnormal
  w[2] = std::numeric_limits<float>::max();
  w[3] = -std::numeric_limits<float>::min();
  return w;
}

// ---- crash safety ----------------------------------------------------------------

// Runs f in a child process and returns its exit status (or 128 + signal).
inline int in_child(std::function<int()> const& f, int kill_after_ms = -1) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = f();
    } catch (...) {
      rc = 99;
    }
    ::_exit(rc);
  }
  if (kill_after_ms >= 0) {
    ::usleep(unsigned(kill_after_ms) * 1000u);
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// ---- bad input: one row per case --------------------------------------------------

struct BadFile {
  std::string name;
  std::function<void(std::string const&)> make;  // writes the file at the path
  std::string message;                           // must appear in the error
  std::string dataset = "";                      // FileError::dataset(), where one is named
};

inline void write_table_with(std::string const& p, std::function<void(hid_t file)> const& edit) {
  std::vector<float> w = synthetic::uniform_floats(20 * 3, 3);
  io::save_table(p, w.data(), config(20, 3, 2));
  hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  edit(f);
  H5Fclose(f);
}

inline void set_string_attr(hid_t f, char const* name, char const* value) {
  H5Adelete(f, name);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, &value);
  H5Aclose(a), H5Sclose(s), H5Tclose(t);
}

inline void set_int_attr(hid_t f, char const* name, std::int64_t value) {
  H5Adelete(f, name);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &value);
  H5Aclose(a), H5Sclose(s);
}

inline void replace_weight(hid_t f, hid_t type, std::vector<hsize_t> const& dims, bool sparse = false) {
  H5Ldelete(f, "weight", H5P_DEFAULT);
  hid_t s = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (sparse) {
    std::vector<hsize_t> chunk(dims.size(), 1);
    H5Pset_chunk(dcpl, int(chunk.size()), chunk.data());
  }
  hid_t d = H5Dcreate2(f, "weight", type, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dclose(d), H5Pclose(dcpl), H5Sclose(s);
}

// ---- run files -------------------------------------------------------------------

inline io::RunFile sample_run() {
  io::RunFile run;
  run.rows = 300;
  run.cols = 7;
  run.gradient = special_table(run.rows, run.cols);
  run.gradient[10] = std::numeric_limits<float>::infinity();
  run.counts = synthetic::zipf_ids(1000, run.rows, 1.1, 3);
  run.run_id = "2026-11-30T01:00:00Z-1234";
  run.backend = "OpenMP";
  run.threads = 2;
  run.plan = Plan::automatic;
  run.plan_used = "sort";
  run.numeric_mode = Mode::identical;
  run.padding_idx = 0;
  run.positions = std::accumulate(run.counts.begin(), run.counts.end(), std::int64_t{0});  // each counts once
  run.microbatches = 31;
  run.microbatch_size = 4096;
  run.inputs = {{"table", "/data/table.h5", io::sha256_hex("t", 1), 1000},
                {"batch", "batch.h5", io::sha256_hex("b", 1), 2000, io::Fingerprint::chunks}};
  run.timings = {{"read_batch_seconds", 0.5}, {"backward_seconds", 2.25}, {"total_seconds", 3.125}};
  run.command_line_json = io::json_array({"kembed", "backward", "--table", "a \"b\"\n"});
  run.configuration_json = "{\"microbatch\": 4096, \"plan\": \"auto\"}";
  return run;
}

// ---- digests over everything a reader builds on (trust, second round) -----------------

// Writes `values` over the whole of dataset `name` (a valid HDF5 write: the Fletcher32
// checksums agree, the digests do not).
template <class T>
inline void overwrite(std::string const& file, char const* name, hid_t mem_type, std::vector<T> const& values) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(d), H5Fclose(f);
}

template <class F>
inline std::string refusal(F&& read) {
  try {
    read();
  } catch (io::FileError const& e) {
    return e.what();
  }
  return "(read)";
}

inline io::Checkpoint sample_checkpoint() {
  auto const run = sample_run();
  io::Checkpoint c;
  c.job_id = "job-1", c.position = run.positions, c.microbatches = 3, c.microbatch_size = 4096;
  c.table_sha256 = std::string(64, 'a'), c.batch_sha256 = std::string(64, 'b');
  c.plan = Plan::automatic, c.numeric_mode = Mode::identical, c.scale_grad_by_freq = FreqScale::batch,
  c.padding_idx = 0;
  c.elapsed_seconds = 0.1 + 0.2;  // not a short decimal: the digest's %.17g keeps every bit
  c.rows = run.rows, c.cols = run.cols, c.gradient = run.gradient, c.counts = run.counts;
  return c;
}

inline void write_dataset(std::string const& file, std::string const& name, hid_t file_type, hid_t mem_type,
                          void const* data, std::vector<hsize_t> const& dims, std::vector<hsize_t> const& chunk = {},
                          bool deflate = false) {
  hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!chunk.empty()) H5Pset_chunk(dcpl, int(chunk.size()), chunk.data());
  if (deflate) H5Pset_deflate(dcpl, 6);
  hid_t space = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  hid_t d = H5Dcreate2(f, name.c_str(), file_type, space, lcpl, dcpl, H5P_DEFAULT);
  if (data) H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d), H5Sclose(space), H5Pclose(dcpl), H5Pclose(lcpl), H5Fclose(f);
}

}  // namespace kembed
