// HDF5 files: round trips bit for bit, partial reads, foreign datasets, crash-safe
// saves, and every bad file of the HDF5 issue refused with a message that names
// the file, the dataset and the problem (one table row per case).
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

#include "direct_chunks.hpp"  // io/src
#include "common.hpp"
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

namespace kembed {
namespace {

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

Config config(std::int64_t v, std::int64_t d, std::optional<std::int64_t> pad = std::nullopt,
              Plan plan = Plan::automatic, Mode mode = Mode::identical) {
  Options o;
  o.padding_idx = pad;
  o.plan = plan;
  o.mode = mode;
  return make_config(v, d, o);
}

std::vector<float> Io::save_chunked_table(std::string const& name, std::int64_t v, std::int64_t d,
                                          std::int64_t rows_per_chunk) const {
  auto w = synthetic::uniform_floats(v * d, std::uint64_t(v + d));
  io::SaveOptions so;
  so.rows_per_chunk = rows_per_chunk;
  io::save_table(path(name), w.data(), config(v, d), so);
  return w;
}

std::vector<float> special_table(std::int64_t v, std::int64_t d) {
  auto w = synthetic::uniform_floats(v * d, 17);
  w[0] = -0.0f;
  w[1] = test::from_bits(1u);  // smallest subnormal
  w[2] = std::numeric_limits<float>::max();
  w[3] = -std::numeric_limits<float>::min();
  return w;
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(io::sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(io::sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string const two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(io::sha256_hex(two_blocks.data(), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  io::Sha256 h;
  std::string const a(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(a.data(), a.size());
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_F(Io, TableRoundTripsEverySettingBitForBit) {
  std::int64_t const v = 257, d = 13;
  auto const w = special_table(v, d);
  int k = 0;
  for (auto pad : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{0}, std::optional<std::int64_t>{-1}})
    for (auto plan : {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic})
      for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
        for (bool deflate : {false, true}) {
          auto const c = config(v, d, pad, plan, mode);
          io::SaveOptions so;
          so.deflate = deflate;
          so.rows_per_chunk = deflate ? 16 : 0;
          so.created_by = "test " + std::to_string(k);
          auto const p = path("t" + std::to_string(k++) + ".h5");
          io::save_table(p, w.data(), c, so);
          auto const t = io::load_table(p);
          EXPECT_TRUE(same_bits(t.weight, w));
          EXPECT_EQ(t.config.num_embeddings, v);
          EXPECT_EQ(t.config.embedding_dim, d);
          EXPECT_EQ(t.config.padding_idx, c.padding_idx);
          EXPECT_EQ(t.config.plan, plan);
          EXPECT_EQ(t.config.mode, mode);
          EXPECT_EQ(t.created_by, so.created_by);
          EXPECT_FALSE(t.kembed_version.empty());
        }
  EXPECT_EQ(files().size(), std::size_t(k)) << "no temporary files left behind";
}

// torch's other options come back as saved; a file without them reads as before
// (and is written byte for byte as before: the attributes appear only when set).
TEST_F(Io, TableRoundTripsTorchsOtherOptions) {
  std::int64_t const v = 40, d = 3;
  auto const w = special_table(v, d);
  int k = 0;
  for (auto max_norm : {std::optional<double>{}, std::optional<double>{0.25}})
    for (double p : {2.0, 1.0, std::numeric_limits<double>::infinity(), 0.5})
      for (auto scale : {FreqScale::none, FreqScale::call, FreqScale::batch})
        for (bool sparse : {false, true}) {
          if (!max_norm && p != 2.0) continue;  // refused: norm_type needs max_norm
          Options o;
          o.max_norm = max_norm;
          o.norm_type = p;
          o.scale_grad_by_freq = scale;
          o.sparse = sparse;
          auto const c = make_config(v, d, o);
          auto const path_k = path("o" + std::to_string(k++) + ".h5");
          io::save_table(path_k, w.data(), c);
          auto const t = io::load_table(path_k);
          EXPECT_EQ(t.config.max_norm, c.max_norm);
          EXPECT_EQ(t.config.norm_type, p);
          EXPECT_EQ(t.config.scale_grad_by_freq, scale);
          EXPECT_EQ(t.config.sparse, sparse);
          EXPECT_TRUE(same_bits(t.weight, w));
        }
  auto const plain = path("plain.h5");
  io::save_table(plain, w.data(), config(v, d));
  hid_t const f = H5Fopen(plain.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  for (char const* name : {"max_norm", "norm_type", "scale_grad_by_freq", "sparse"})
    EXPECT_EQ(H5Aexists(f, name), 0) << name << " written for a table without it";
  H5Fclose(f);
}

TEST_F(Io, EmbeddingSaveAndLoad) {
  std::int64_t const v = 40, d = 6;
  auto const w = special_table(v, d);
  Options o;
  o.padding_idx = -3;
  o.mode = Mode::deterministic;
  o.plan = Plan::scan;
  Embedding<Kokkos::DefaultHostExecutionSpace> layer(v, d, FloatsRef(w.data(), Shape{v, d}), o);
  io::save(layer, path("layer.h5"));
  auto const back = io::load<Kokkos::DefaultHostExecutionSpace>(path("layer.h5"));
  EXPECT_TRUE(same_bits(back.weight_host(), w));
  EXPECT_EQ(back.padding_idx(), v - 3);
  EXPECT_EQ(back.mode(), Mode::deterministic);
  EXPECT_EQ(back.plan(), Plan::scan);
}

// torch's other options come back too (io::load once dropped them, and Python's load uses it).
TEST_F(Io, EmbeddingLoadKeepsTorchOptions) {
  std::int64_t const v = 12, d = 3;
  auto const w = special_table(v, d);
  Options o;
  o.max_norm = 1.5;
  o.norm_type = 3.0;
  o.scale_grad_by_freq = FreqScale::batch;
  o.sparse = true;
  Embedding<Kokkos::DefaultHostExecutionSpace> layer(v, d, FloatsRef(w.data(), Shape{v, d}), o);
  io::save(layer, path("options.h5"));
  auto const back = io::load<Kokkos::DefaultHostExecutionSpace>(path("options.h5"));
  EXPECT_EQ(back.config().max_norm, 1.5);
  EXPECT_EQ(back.config().norm_type, 3.0);
  EXPECT_EQ(back.config().scale_grad_by_freq, FreqScale::batch);
  EXPECT_TRUE(back.config().sparse);
}

TEST_F(Io, LoadRowsReadsARowRange) {
  std::int64_t const v = 1000, d = 7;
  auto const w = special_table(v, d);
  io::SaveOptions so;
  so.rows_per_chunk = 64;
  io::save_table(path("t.h5"), w.data(), config(v, d), so);
  // Named arrays, not braced lists, in range-for: nvcc 11.8 cannot deduce those.
  std::pair<std::int64_t, std::int64_t> const good[] = {{0, 1}, {63, 2}, {500, 300}, {999, 1}, {0, 1000}, {1000, 0}};
  for (auto [first, count] : good) {
    auto const t = io::load_rows(path("t.h5"), first, count);
    EXPECT_EQ(t.first_row, first);
    EXPECT_TRUE(same_bits(t.weight, std::vector<float>(w.begin() + first * d, w.begin() + (first + count) * d)));
  }
  std::pair<std::int64_t, std::int64_t> const bad[] = {{-1, 2}, {999, 2}, {1001, 0}, {0, -1}};
  for (auto [first, count] : bad) {
    try {
      io::load_rows(path("t.h5"), first, count);
      ADD_FAILURE() << "rows " << first << " + " << count << " accepted";
    } catch (InvalidArgument const& e) {
      EXPECT_NE(std::string(e.what()).find("are not within the table's 1000 rows"), std::string::npos) << e.what();
    }
  }
}

// ---- files as other tools write them, made with the HDF5 C API ----------------

void write_dataset(std::string const& file, std::string const& name, hid_t file_type, hid_t mem_type, void const* data,
                   std::vector<hsize_t> const& dims, std::vector<hsize_t> const& chunk = {}, bool deflate = false) {
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

TEST_F(Io, ForeignFloat32DatasetsLoadInEveryLayout) {
  std::int64_t const v = 33, d = 5;
  auto const w = special_table(v, d);
  std::vector<hsize_t> const dims{hsize_t(v), hsize_t(d)};
  write_dataset(path("contiguous.h5"), "/emb", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, w.data(), dims);
  write_dataset(path("chunked.h5"), "/model/layer0/emb", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, w.data(), dims, {4, 5},
                true);
  write_dataset(path("bigendian.h5"), "/emb", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, w.data(), dims, {8, 5});
  std::pair<char const*, char const*> const files[] = {
      {"contiguous.h5", "/emb"}, {"chunked.h5", "model/layer0/emb"}, {"bigendian.h5", "emb"}};
  for (auto [file, name] : files) {
    auto const t = io::read_table_dataset(path(file), name);
    EXPECT_TRUE(same_bits(t.weight, w)) << file;
    EXPECT_EQ(t.config.num_embeddings, v);
    EXPECT_FALSE(t.config.has_padding());
  }
}

TEST_F(Io, Float64AndFloat16ConvertOnlyWhenAsked) {
  std::vector<double> w64{1.0, 0.1, -2.5, 1e-3, 3.0, 1.0 / 3.0};
  write_dataset(path("f64.h5"), "/emb", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, w64.data(), {3, 2});
  // IEEE binary16 as h5py writes it: a 16-bit float type derived from float32.
  hid_t half = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(half, 15, 10, 5, 0, 10);
  H5Tset_size(half, 2);
  H5Tset_ebias(half, 15);
  std::vector<float> w16{1.0f, 0.5f, -2.0f, 0.25f};
  write_dataset(path("f16.h5"), "/emb", half, H5T_NATIVE_FLOAT, w16.data(), {2, 2});
  H5Tclose(half);
  std::pair<char const*, char const*> const files[] = {{"f64.h5", "64-bit floats"}, {"f16.h5", "16-bit floats"}};
  for (auto [file, kind] : files) {
    try {
      io::read_table_dataset(path(file), "emb");
      ADD_FAILURE() << file << " loaded without asking";
    } catch (io::FileError const& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("holds ") + kind), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("astype('float32')"), std::string::npos) << e.what();
    }
  }
  auto const t64 = io::read_table_dataset(path("f64.h5"), "emb", true);
  std::vector<float> want64;
  for (double x : w64) want64.push_back(static_cast<float>(x));
  EXPECT_TRUE(same_bits(t64.weight, want64));
  EXPECT_TRUE(same_bits(io::read_table_dataset(path("f16.h5"), "emb", true).weight, w16));
}

// ---- crash safety ----------------------------------------------------------------

// Runs f in a child process and returns its exit status (or 128 + signal).
int in_child(std::function<int()> const& f, int kill_after_ms = -1) {
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

TEST_F(Io, AFailedSaveLeavesTheOldFileAndNoTemporary) {
  std::int64_t const v = 4096, d = 64;  // 1 MiB
  auto const old_table = synthetic::uniform_floats(v * d, 1);
  io::save_table(path("t.h5"), old_table.data(), config(v, d));
  auto const before = bytes_of(path("t.h5"));
  // The file system refuses to grow a file past 64 KiB: the write fails part-way.
  int const rc = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    auto const new_table = synthetic::uniform_floats(v * d, 2);
    try {
      io::save_table(path("t.h5"), new_table.data(), config(v, d));
    } catch (io::IoFailure const& e) {
      return std::string(e.what()).find("the file is unchanged") != std::string::npos ? 0 : 2;
    }
    return 3;  // the save claimed success
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(bytes_of(path("t.h5")), before);
  EXPECT_EQ(files(), std::vector<std::string>{"t.h5"});
  // A refused table (NaN) fails before any file is touched.
  auto bad = old_table;
  bad[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(io::save_table(path("t.h5"), bad.data(), config(v, d)), NonFinite);
  EXPECT_EQ(bytes_of(path("t.h5")), before);
  EXPECT_EQ(files(), std::vector<std::string>{"t.h5"});
}

TEST_F(Io, AKilledSaveNeverLeavesAHalfWrittenTarget) {
  std::int64_t const v = 1 << 16, d = 64;  // 16 MiB, so that kills land mid-write
  auto const old_table = synthetic::uniform_floats(v * d, 1);
  auto const new_table = synthetic::uniform_floats(v * d, 2);
  io::save_table(path("t.h5"), old_table.data(), config(v, d));
  int killed = 0;
  for (int delay : {0, 2, 5, 10, 20, 40, 80}) {
    int const rc = in_child(
        [&] {
          io::save_table(path("t.h5"), new_table.data(), config(v, d));
          return 0;
        },
        delay);
    killed += rc == 128 + SIGKILL;
    auto const t = io::load_table(path("t.h5"));  // whole and readable, old or new
    EXPECT_TRUE(same_bits(t.weight, old_table) || same_bits(t.weight, new_table)) << "kill after " << delay << " ms";
  }
  EXPECT_GT(killed, 0) << "no kill landed during a save";
}

// ---- bad input: one row per case --------------------------------------------------

struct BadFile {
  std::string name;
  std::function<void(std::string const&)> make;  // writes the file at the path
  std::string message;                           // must appear in the error
  std::string dataset = "";                      // FileError::dataset(), where one is named
};

void write_table_with(std::string const& p, std::function<void(hid_t file)> const& edit) {
  std::vector<float> w = synthetic::uniform_floats(20 * 3, 3);
  io::save_table(p, w.data(), config(20, 3, 2));
  hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  edit(f);
  H5Fclose(f);
}

void set_string_attr(hid_t f, char const* name, char const* value) {
  H5Adelete(f, name);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, &value);
  H5Aclose(a), H5Sclose(s), H5Tclose(t);
}

void set_int_attr(hid_t f, char const* name, std::int64_t value) {
  H5Adelete(f, name);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &value);
  H5Aclose(a), H5Sclose(s);
}

void replace_weight(hid_t f, hid_t type, std::vector<hsize_t> const& dims, bool sparse = false) {
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

TEST_F(Io, EveryBadFileIsRefusedByName) {
  auto const nan_table = [](std::string const& p) {
    write_table_with(p, [](hid_t f) {
      hid_t d = H5Dopen2(f, "weight", H5P_DEFAULT);
      std::vector<float> w(60, 1.0f);
      w[3 * 7 + 2] = std::numeric_limits<float>::quiet_NaN();
      H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data());
      H5Dclose(d);
    });
  };
  std::int64_t const huge = std::int64_t{1} << 40;
  std::vector<BadFile> const rows{
      {"missing file", [](std::string const&) {}, "cannot be opened: No such file or directory"},
      {"not HDF5", [](std::string const& p) { std::ofstream(p) << "id,vector\n1,0.5\n"; },
       "is not an HDF5 file (no HDF5 signature)"},
      {"truncated file",
       [](std::string const& p) {
         auto w = synthetic::uniform_floats(20000 * 8, 1);
         io::save_table(p, w.data(), config(20000, 8));
         fs::resize_file(p, fs::file_size(p) / 2);
       },
       "is an HDF5 file but cannot be opened; it is truncated or damaged"},
      {"no format tag", [](std::string const& p) { write_table_with(p, [](hid_t f) { H5Adelete(f, "format"); }); },
       "has no 'format' attribute, so it is not a kembed table file"},
      {"wrong format tag",
       [](std::string const& p) {
         write_table_with(p, [](hid_t f) { set_string_attr(f, "format", "acme-vectors-3"); });
       },
       "has format 'acme-vectors-3', not 'kembed-embedding-1'"},
      {"newer version",
       [](std::string const& p) {
         write_table_with(p, [](hid_t f) { set_string_attr(f, "format", "kembed-embedding-2"); });
       },
       "was written by a newer kembed (format 'kembed-embedding-2'); this kembed reads 'kembed-embedding-1'"},
      {"a run file, not a table",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_string_attr(f, "format", "kembed-run-1"); }); },
       "is a kembed run file (format 'kembed-run-1'), not a table file"},
      {"missing dataset",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { H5Ldelete(f, "weight", H5P_DEFAULT); }); },
       "does not exist", "/weight"},
      {"wrong rank",
       [](std::string const& p) {
         write_table_with(p, [](hid_t f) { replace_weight(f, H5T_IEEE_F32LE, {20, 3, 1}); });
       },
       "has rank 3 (shape (20, 3, 1)); a table has rank 2", "/weight"},
      {"integer table",
       [](std::string const& p) { write_table_with(p, [](hid_t f) {
                                    replace_weight(f, H5T_STD_I32LE, {20, 3});
                                  }); },
       "holds 32-bit integers; a table holds float32 values", "/weight"},
      {"string dataset",
       [](std::string const& p) {
         write_table_with(p, [](hid_t f) {
           hid_t t = H5Tcopy(H5T_C_S1);
           H5Tset_size(t, 8);
           replace_weight(f, t, {20, 3});
           H5Tclose(t);
         });
       },
       "holds strings; a table holds float32 values", "/weight"},
      {"float64 kembed table",
       [](std::string const& p) { write_table_with(p, [](hid_t f) {
                                    replace_weight(f, H5T_IEEE_F64LE, {20, 3});
                                  }); },
       "holds 64-bit floats; kembed tables are float32", "/weight"},
      {"shape disagrees with the attributes",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_int_attr(f, "num_embeddings", 21); }); },
       "has shape (20, 3) but the file's attributes say (21, 3)", "/weight"},
      {"invalid setting",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_string_attr(f, "plan", "fastest"); }); },
       "its settings are invalid: plan must be 'auto', 'scan', 'sort' or 'bucket', got 'fastest'"},
      {"padding_idx out of range",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_int_attr(f, "padding_idx", 20); }); },
       "its padding_idx is 20, but a kembed file stores the padding row as a row number in [0, 20) or -1 for none"},
      {"padding_idx counted from the end (torch's spelling, never stored)",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_int_attr(f, "padding_idx", -2); }); },
       "its padding_idx is -2, but a kembed file stores the padding row as a row number in [0, 20) or -1 for none"},
      {"missing attribute",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { H5Adelete(f, "embedding_dim"); }); },
       "has no attribute 'embedding_dim'"},
      {"attribute of the wrong type",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_string_attr(f, "padding_idx", "none"); }); },
       "attribute 'padding_idx' holds strings, not an integer"},
      {"NaN in the table", nan_table, "holds NaN at row 7, column 2; a table must be finite", "/weight"},
      {"V * d overflows 64 bits",
       [&](std::string const& p) {
         write_table_with(p, [&](hid_t f) {
           replace_weight(f, H5T_IEEE_F32LE, {hsize_t(huge), hsize_t(huge)}, true);
           set_int_attr(f, "num_embeddings", huge);
           set_int_attr(f, "embedding_dim", huge);
         });
       },
       "its settings are invalid: weight: the size 1099511627776 * 1099511627776 does not fit"},
      {"larger than memory",
       [&](std::string const& p) {
         write_table_with(p, [&](hid_t f) {
           replace_weight(f, H5T_IEEE_F32LE, {hsize_t(1) << 31, hsize_t(1) << 12}, true);
           set_int_attr(f, "num_embeddings", std::int64_t{1} << 31);
           set_int_attr(f, "embedding_dim", std::int64_t{1} << 12);
         });
       },
       // The declared size is checked against what the file stores before memory is.
       "stores 0 of the 8796093022208 chunks its shape declares; the missing ones would read as zeros", "/weight"},
  };
  for (auto const& row : rows) {
    SCOPED_TRACE(row.name);
    auto const p = path("bad.h5");
    fs::remove(p);
    row.make(p);
    try {
      io::load_table(p);
      ADD_FAILURE() << row.name << ": loaded";
    } catch (io::FileError const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find(row.message), std::string::npos) << "message: " << what << "\nwant: " << row.message;
      EXPECT_NE(what.find(p), std::string::npos) << "the message names the file: " << what;
      EXPECT_EQ(e.path(), p);
      EXPECT_EQ(e.dataset(), row.dataset) << what;
    }
    EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0) << "every id the refusal opened is closed";
  }
}

// A damaged header (the root attributes' continuation chunk, OCHK, fails its
// checksum) is refused by every reader, and each closes every id it opened: what HDF5
// 1.10.8 still reports at exit ("infinite loop closing library") is its own state
// from the failed lookup, which a plain C program reproduces with the same calls.
TEST_F(Io, ADamagedHeaderIsRefusedAndEveryIdClosed) {
  auto const w = synthetic::uniform_floats(300 * 4, 9);
  io::save_table(path("t.h5"), w.data(), config(300, 4, 2));
  auto bytes = bytes_of(path("t.h5"));
  auto const at = bytes.find("OCHK");
  ASSERT_NE(at, std::string::npos) << "a kembed table's attributes continue in an OCHK chunk";
  bytes[at + 8] = char(bytes[at + 8] ^ 1);
  std::ofstream(path("d.h5"), std::ios::binary) << bytes;
  std::function<void()> const readers[] = {
      [&] { io::load_table(path("d.h5")); },         [&] { io::load_rows(path("d.h5"), 0, 1); },
      [&] { io::check_table_finite(path("d.h5"), 0, 1); }, [&] { io::read_run(path("d.h5")); },
      [&] { io::read_run_header(path("d.h5")); },    [&] { io::read_checkpoint(path("d.h5"), false); },
      [&] { io::read_summary(path("d.h5")); },       [&] { io::check_file(path("d.h5")); },
      [&] { io::describe_file(path("d.h5")); },      [&] { io::RowReader{path("d.h5")}; },
  };
  for (std::size_t i = 0; i < std::size(readers); ++i) {
    EXPECT_THROW(readers[i](), io::FileError) << "reader " << i;
    EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0) << "every id the refusal opened is closed";
  }
}

TEST_F(Io, Fletcher32IsHdf5sBitForBit) {
  std::vector<unsigned char> random_bytes(std::size_t(3) << 20);
  std::uint64_t state = 12345;
  for (auto& b : random_bytes) b = static_cast<unsigned char>((state = state * 6364136223846793005u + 1) >> 56);
  std::vector<unsigned char> ones(random_bytes.size(), 0xff), zeros(random_bytes.size(), 0);
  // Every length up to a few blocks of 360 words (odd ones too), from an odd address as well.
  for (std::size_t n = 0; n <= 2200; ++n)
    for (std::size_t from : {0, 1}) {
      ASSERT_EQ(io::detail::fletcher32(random_bytes.data() + from, n),
                H5_checksum_fletcher32(random_bytes.data() + from, n))
          << n << " bytes from " << from;
      ASSERT_EQ(io::detail::fletcher32(ones.data() + from, n), H5_checksum_fletcher32(ones.data() + from, n)) << n;
    }
  // Chunk-sized inputs; words of 0xffff make the 32-bit sums wrap, which HDF5's own do too.
  for (std::size_t n : {std::size_t(1) << 20, (std::size_t(1) << 20) + 3, random_bytes.size() - 1, random_bytes.size()})
    for (std::vector<unsigned char> const* data : {&random_bytes, &ones, &zeros})
      EXPECT_EQ(io::detail::fletcher32(data->data(), n), H5_checksum_fletcher32(data->data(), n)) << n;
}

TEST_F(Io, ChunksReadPastTheFilterPipelineAreHdf5sValues) {
  // Rows of 28 bytes (odd word counts per chunk) in chunks of 37 rows, and a last chunk
  // that is partly outside the dataset; every range against HDF5's own read.
  std::int64_t const v = 300, d = 7;
  auto const w = save_chunked_table("t.h5", v, d, 37);
  std::vector<float> by_hdf5(std::size_t(v * d));
  {
    hid_t f = H5Fopen(path("t.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    ASSERT_GE(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, by_hdf5.data()), 0);
    std::vector<float> got(std::size_t(v * d) + 1, -7.0f);
    for (auto [first, count] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {0, 300}, {0, 37}, {0, 74}, {37, 37}, {1, 36}, {36, 2}, {5, 290}, {296, 4}, {299, 1}, {259, 41}}) {
      std::fill(got.begin(), got.end(), -7.0f);
      ASSERT_EQ(io::detail::read_rows_direct(dset, H5T_NATIVE_FLOAT, first, count, got.data()),
                io::detail::DirectRead::done)
          << first << " + " << count;
      EXPECT_EQ(std::memcmp(got.data(), by_hdf5.data() + first * d, std::size_t(count * d) * 4), 0)
          << first << " + " << count;
      EXPECT_EQ(got[std::size_t(count * d)], -7.0f) << "nothing written past the range";
    }
    // Not kembed's layout (HDF5's conversion to doubles): left to HDF5, nothing written.
    std::vector<double> doubles(4, -7.0);
    EXPECT_EQ(io::detail::read_rows_direct(dset, H5T_NATIVE_DOUBLE, 0, 1, doubles.data()),
              io::detail::DirectRead::unsuitable);
    EXPECT_EQ(doubles[0], -7.0);
    H5Dclose(dset), H5Fclose(f);
  }
  EXPECT_TRUE(same_bits(io::load_table(path("t.h5")).weight, w));
  // A deflated table has two filters: HDF5 reads it, with the same values.
  io::SaveOptions so;
  so.rows_per_chunk = 37;
  so.deflate = true;
  io::save_table(path("z.h5"), w.data(), config(v, d), so);
  EXPECT_TRUE(same_bits(io::load_table(path("z.h5")).weight, w));
}

TEST_F(Io, ChunksWrittenPastTheFilterPipelineAreTheBytesHdf5Stores) {
  // The same rows written in the same calls (some cutting chunks, one a whole chunk
  // and more, one inside a chunk) once by kembed's writer and once by HDF5's own.
  std::int64_t const v = 300, d = 7;
  auto const w = synthetic::uniform_floats(v * d, 9);
  std::vector<std::pair<std::int64_t, std::int64_t>> const calls{{0, 50}, {50, 100}, {150, 10}, {160, 140}};
  io::SaveOptions so;
  so.rows_per_chunk = 37;
  auto const write = [&](std::string const& name, bool through_hdf5) {
    hid_t f = H5Fcreate(path(name).c_str(), H5F_ACC_TRUNC, io::h5::reproducible_fcpl(), io::h5::compatible_fapl());
    {
      auto dset = io::detail::create_matrix(f, "weight", H5T_IEEE_F32LE, v, d, so);
      hid_t const transfer = through_hdf5 ? H5Pcreate(H5P_DATASET_XFER) : H5P_DEFAULT;  // not the default: HDF5's path
      for (auto [first, count] : calls)
        io::detail::write_block(dset, "weight", H5T_NATIVE_FLOAT, first, count, w.data() + first * d, transfer);
      if (through_hdf5) H5Pclose(transfer);
    }
    H5Fclose(f);
  };
  write("kembeds.h5", false);
  write("hdf5s.h5", true);
  auto const chunks = [&](std::string const& name) {
    std::vector<std::vector<unsigned char>> all;
    hid_t f = H5Fopen(path(name).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    for (std::int64_t row0 = 0; row0 < v; row0 += 37) {
      hsize_t const offset[2] = {hsize_t(row0), 0};
      hsize_t bytes = 0;
      EXPECT_GE(H5Dget_chunk_storage_size(dset, offset, &bytes), 0);
      std::vector<unsigned char> chunk(bytes);
      std::uint32_t skipped = 0;
      EXPECT_GE(H5Dread_chunk(dset, H5P_DEFAULT, offset, &skipped, chunk.data()), 0);
      all.push_back(std::move(chunk));
    }
    H5Dclose(dset), H5Fclose(f);
    return all;
  };
  auto const ours = chunks("kembeds.h5"), theirs = chunks("hdf5s.h5");
  ASSERT_EQ(ours.size(), 9u);
  for (std::size_t c = 0; c < ours.size(); ++c) {
    EXPECT_EQ(ours[c].size(), std::size_t(37 * d * 4 + 4)) << c;
    EXPECT_TRUE(ours[c] == theirs[c]) << "chunk " << c;
  }
  // Each reads back as the rows written, through HDF5's own filter too.
  for (auto const* name : {"kembeds.h5", "hdf5s.h5"}) {
    std::vector<float> back(std::size_t(v * d));
    hid_t f = H5Fopen(path(name).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    EXPECT_GE(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0);
    H5Dclose(dset), H5Fclose(f);
    EXPECT_TRUE(same_bits(back, w)) << name;
  }
}

TEST_F(Io, ACorruptedChunkFailsItsChecksum) {
  std::int64_t const v = 512, d = 16;
  auto const w = save_chunked_table("t.h5", v, d, 64);
  // Where HDF5 stored chunk 3 (rows 192..255), then flip one byte in its middle.
  haddr_t address = 0;
  hsize_t size = 0;
  {
    hid_t f = H5Fopen(path("t.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    hsize_t const offset[2] = {192, 0};
    unsigned mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(dset, offset, &mask, &address, &size), 0);
    H5Dclose(dset), H5Fclose(f);
  }
  ASSERT_GT(size, 100u);
  {
    std::fstream file(path("t.h5"), std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(std::streamoff(address + size / 2));
    char byte = 0;
    file.read(&byte, 1);
    byte = char(byte ^ 0x10);
    file.seekp(std::streamoff(address + size / 2));
    file.write(&byte, 1);
  }
  {  // kembed's chunk reader and HDF5's filter both catch it
    hid_t f = H5Fopen(path("t.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    std::vector<float> rows(std::size_t(v * d));
    EXPECT_EQ(io::detail::read_rows_direct(dset, H5T_NATIVE_FLOAT, 0, v, rows.data()), io::detail::DirectRead::damaged);
    EXPECT_EQ(io::detail::read_rows_direct(dset, H5T_NATIVE_FLOAT, 0, 192, rows.data()), io::detail::DirectRead::done);
    io::h5::Quiet quiet;  // HDF5 would print its report of the failure
    EXPECT_LT(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
    H5Dclose(dset), H5Fclose(f);
  }
  try {
    io::load_table(path("t.h5"));
    ADD_FAILURE() << "a corrupted chunk loaded";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("do not match their checksum"), std::string::npos) << e.what();
    EXPECT_EQ(e.dataset(), "/weight");
  }
  // The rows outside the damaged chunk still read.
  EXPECT_TRUE(
      same_bits(io::load_rows(path("t.h5"), 0, 192).weight, std::vector<float>(w.begin(), w.begin() + 192 * d)));
  EXPECT_THROW(io::load_rows(path("t.h5"), 200, 1), io::FileError);
}

TEST_F(Io, HdfFiveErrorsDoNotReachStderr) {
  std::ofstream(path("junk.h5")) << "not hdf5";
  auto w = synthetic::uniform_floats(20000 * 8, 1);
  io::save_table(path("cut.h5"), w.data(), config(20000, 8));
  fs::resize_file(path("cut.h5"), fs::file_size(path("cut.h5")) / 2);
  std::fflush(stderr);
  int const saved = ::dup(2);
  int const capture = ::open(path("stderr.txt").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ::dup2(capture, 2);
  for (auto const* name : {"junk.h5", "cut.h5", "missing.h5"}) EXPECT_THROW(io::load_table(path(name)), io::FileError);
  EXPECT_THROW(io::read_table_dataset(path("cut.h5"), "nope"), io::FileError);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(capture);
  EXPECT_EQ(bytes_of(path("stderr.txt")), "");
}

// ---- batch files -------------------------------------------------------------------

TEST_F(Io, BatchFilesStreamAndRefuseWhatIsNotABatch) {
  std::int64_t const t = 1000, d = 3;
  auto const ids = synthetic::zipf_ids(50, t, 1.1, 2);
  auto const dy = synthetic::uniform_floats(t * d, 3);
  {
    io::BatchWriter w(path("b.h5"), t, d, io::BatchMeta{50, "test", 3});
    for (std::int64_t p = 0; p < t; p += 300) {
      auto const n = std::min<std::int64_t>(300, t - p);
      w.write(p, n, ids.data() + p, dy.data() + p * d);
    }
    EXPECT_FALSE(fs::exists(path("b.h5"))) << "nothing under the name before commit";
    w.commit();
  }
  io::BatchReader r(path("b.h5"));
  EXPECT_EQ(r.info().positions, t);
  EXPECT_EQ(r.info().dim, d);
  EXPECT_TRUE(r.info().kembed_format);
  EXPECT_EQ(r.info().meta.num_embeddings, 50);
  std::vector<std::int64_t> got_ids(t);
  std::vector<float> got_dy(t * d);
  r.read(0, 400, got_ids.data(), got_dy.data());
  r.read(400, t - 400, got_ids.data() + 400, got_dy.data() + 400 * d);
  EXPECT_EQ(got_ids, ids);
  EXPECT_TRUE(same_bits(got_dy, dy));
  // Float ids are refused rather than truncated; dy rows must match the ids.
  std::vector<float> float_ids{1.0f, 2.5f};
  write_dataset(path("float_ids.h5"), "/ids", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, float_ids.data(), {2});
  try {
    io::BatchReader bad(path("float_ids.h5"), false);
    ADD_FAILURE() << "float ids accepted";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("ids must be integers (a float id is refused rather than truncated)"),
              std::string::npos)
        << e.what();
  }
  std::vector<std::int64_t> two_d(6, 1);
  write_dataset(path("ids2d.h5"), "/ids", H5T_STD_I64LE, H5T_NATIVE_INT64, two_d.data(), {2, 3});
  EXPECT_THROW(io::BatchReader(path("ids2d.h5"), false), io::FileError);
}

// ---- run files -------------------------------------------------------------------

io::RunFile sample_run() {
  io::RunFile run;
  run.rows = 300;
  run.cols = 7;
  run.gradient = special_table(run.rows, run.cols);
  run.gradient[10] = std::numeric_limits<float>::infinity();
  run.counts = synthetic::zipf_ids(1000, run.rows, 1.1, 3);
  run.run_id = "2026-11-30T01:00:00Z-1234";
  run.backend = "OpenMP";
  run.threads = 2;
  run.plan = "auto";
  run.plan_used = "sort";
  run.numeric_mode = "identical";
  run.padding_idx = 0;
  run.positions = std::accumulate(run.counts.begin(), run.counts.end(), std::int64_t{0});  // each counts once
  run.microbatches = 31;
  run.microbatch_size = 4096;
  run.inputs = {{"table", "/data/table.h5", io::sha256_hex("t", 1), 1000},
                {"batch", "batch.h5", io::sha256_hex("b", 1), 2000}};
  run.timings = {{"read_batch_seconds", 0.5}, {"backward_seconds", 2.25}, {"total_seconds", 3.125}};
  run.command_line_json = io::json_array({"kembed", "backward", "--table", "a \"b\"\n"});
  run.configuration_json = "{\"microbatch\": 4096, \"plan\": \"auto\"}";
  return run;
}

// padding_idx in run files and checkpoints: written only normalised (a row in
// [0, V) or -1 for none), and a file holding anything else is refused when read.
TEST_F(Io, PaddingRowsAreStoredNormalisedAndNothingElseIsRead) {
  auto run = sample_run();
  io::Checkpoint ckpt;
  ckpt.rows = run.rows, ckpt.cols = run.cols, ckpt.gradient = run.gradient, ckpt.counts = run.counts;
  ckpt.plan = "auto", ckpt.numeric_mode = "identical", ckpt.microbatch_size = 7;
  for (std::int64_t bad : {std::int64_t{-2}, -run.rows, run.rows}) {
    run.padding_idx = ckpt.padding_idx = bad;
    EXPECT_THROW(io::write_run(path("bad.h5"), run), InvalidArgument) << bad;
    EXPECT_THROW(io::write_checkpoint(path("bad.ckpt"), ckpt), InvalidArgument) << bad;
    EXPECT_FALSE(fs::exists(path("bad.h5")) || fs::exists(path("bad.ckpt"))) << "nothing written for " << bad;
  }
  for (std::int64_t good : {std::int64_t{-1}, std::int64_t{0}, run.rows - 1}) {
    run.padding_idx = ckpt.padding_idx = good;
    io::write_run(path("good.h5"), run);
    io::write_checkpoint(path("good.ckpt"), ckpt);
    EXPECT_EQ(io::read_run(path("good.h5")).padding_idx, good);
    EXPECT_EQ(io::read_checkpoint(path("good.ckpt")).padding_idx, good);
  }
  for (auto const& file : {path("good.h5"), path("good.ckpt")}) {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    set_int_attr(f, "padding_idx", -2);
    H5Fclose(f);
    try {
      if (file.find(".ckpt") != std::string::npos)
        io::read_checkpoint(file);
      else
        io::read_run(file);
      ADD_FAILURE() << file << " with padding_idx -2 was read";
    } catch (io::FileError const& e) {
      EXPECT_NE(std::string(e.what()).find("its padding_idx is -2, but a kembed file stores the padding row as a row "
                                           "number in [0, " +
                                           std::to_string(run.rows) + ") or -1 for none"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(Io, RunFilesRoundTripBitForBit) {
  auto const run = sample_run();
  io::SaveOptions so;
  so.deflate = true;
  io::write_run(path("run.h5"), run, so);
  auto const back = io::read_run(path("run.h5"));
  EXPECT_TRUE(same_bits(back.gradient, run.gradient));
  EXPECT_EQ(back.counts, run.counts);
  EXPECT_EQ(back.gradient_sha256, io::sha256_hex(run.gradient.data(), run.gradient.size() * 4));
  EXPECT_EQ(io::read_run_gradient_sha256(path("run.h5")), back.gradient_sha256);
  EXPECT_EQ(back.run_id, run.run_id);
  EXPECT_EQ(back.backend, run.backend);
  EXPECT_EQ(back.threads, run.threads);
  EXPECT_EQ(back.plan, run.plan);
  EXPECT_EQ(back.plan_used, run.plan_used);
  EXPECT_EQ(back.numeric_mode, run.numeric_mode);
  EXPECT_EQ(back.padding_idx, run.padding_idx);
  EXPECT_EQ(back.positions, run.positions);
  EXPECT_EQ(back.microbatches, run.microbatches);
  EXPECT_EQ(back.microbatch_size, run.microbatch_size);
  ASSERT_EQ(back.inputs.size(), 2u);
  EXPECT_EQ(back.inputs[0].role, "table");  // creation order, not alphabetical
  EXPECT_EQ(back.inputs[1].path, "batch.h5");
  EXPECT_EQ(back.inputs[1].sha256, run.inputs[1].sha256);
  EXPECT_EQ(back.inputs[1].bytes, 2000);
  EXPECT_EQ(back.timings, run.timings);
  EXPECT_EQ(back.command_line_json, "[\"kembed\", \"backward\", \"--table\", \"a \\\"b\\\"\\n\"]");
  EXPECT_EQ(back.configuration_json, run.configuration_json);
  EXPECT_FALSE(back.created.empty());
  EXPECT_EQ(io::file_format(path("run.h5")), "kembed-run-1");
  EXPECT_THROW(io::load_table(path("run.h5")), io::FileError);
}

// A run's recorded settings read back typed; text kembed never writes is damage.
TEST_F(Io, RunSettingsReadBackTypedAndRefuseUnknownText) {
  auto run = sample_run();
  run.scale_grad_by_freq = "batch";
  io::write_run(path("run.h5"), run);
  auto const settings = io::settings_of(io::read_run_header(path("run.h5")), path("run.h5"));
  EXPECT_EQ(settings.mode, parse_mode(run.numeric_mode));
  EXPECT_EQ(settings.plan, parse_plan(run.plan));
  EXPECT_EQ(settings.scale_grad_by_freq, FreqScale::batch);
  EXPECT_EQ(settings.padding_idx, run.padding_idx);
  run.numeric_mode = "exact";
  try {
    io::settings_of(run, "edited.h5");
    FAIL() << "no error";
  } catch (io::FileError const& e) {
    EXPECT_EQ(e.path(), "edited.h5");
    EXPECT_NE(e.problem().find("attribute 'numeric_mode' holds 'exact', which kembed never writes"), std::string::npos)
        << e.what();
  }
}

TEST_F(Io, ATamperedGradientIsCaughtByItsSha256) {
  io::write_run(path("run.h5"), sample_run());
  hid_t f = H5Fopen(path("run.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "gradient", H5P_DEFAULT);
  auto g = sample_run().gradient;
  g[100] = 0.5f;  // a valid write through HDF5: the Fletcher32 checksums agree, the SHA-256 does not
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, g.data());
  H5Dclose(d), H5Fclose(f);
  try {
    io::read_run(path("run.h5"));
    ADD_FAILURE() << "a changed gradient was accepted";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("does not match its SHA-256"), std::string::npos) << e.what();
  }
}

// The gradient's summary (/summary): each level against folding its blocks' rows
// by hand, bit for bit; the same bits whatever order and pieces the rows came in.
// A sparse run file: read back as its dense gradient and counts (what a dense run
// of the same gradient holds), rows by RowReader as from the dense file, the same
// summary as the dense file's, its digest over the listed records checked; bad
// slabs are refused before anything is written, a changed value is caught.
TEST_F(Io, SparseRunFilesReadAsTheirDenseGradient) {
  auto dense = sample_run();
  std::int64_t const v = dense.rows, d = dense.cols;
  // List every 7th row and row 299 (the last block partly listed); unlisted rows +0.0.
  std::vector<std::int64_t> rows, counts;
  std::vector<float> values;
  for (std::int64_t r = 0; r < v; ++r) {
    bool const listed = r % 7 == 3 || r == v - 1;
    if (!listed) {
      std::fill_n(dense.gradient.begin() + r * d, d, 0.0f);
      dense.counts[std::size_t(r)] = 0;
      continue;
    }
    rows.push_back(r);
    counts.push_back(dense.counts[std::size_t(r)]);
    values.insert(values.end(), dense.gradient.begin() + r * d, dense.gradient.begin() + (r + 1) * d);
  }
  std::int64_t const n = std::int64_t(rows.size());
  dense.positions = std::accumulate(dense.counts.begin(), dense.counts.end(), std::int64_t{0});
  io::write_run(path("dense.h5"), dense);
  auto run = dense;
  run.gradient_sha256 = io::sparse_gradient_sha256(rows.data(), values.data(), n, d);
  io::SparseSlab const slab{0, n, n, 0, v, rows.data(), values.data(), counts.data()};
  io::write_sparse_run(path("sparse.h5"), run, slab);
  EXPECT_EQ(io::file_format(path("sparse.h5")), io::sparse_run_format);
  auto const back = io::read_run(path("sparse.h5"));
  EXPECT_TRUE(back.sparse);
  EXPECT_EQ(back.listed_rows, rows);
  EXPECT_TRUE(same_bits(back.gradient, dense.gradient));
  EXPECT_EQ(back.counts, dense.counts);
  EXPECT_EQ(back.gradient_sha256, run.gradient_sha256);
  EXPECT_EQ(io::read_run_gradient_sha256(path("sparse.h5")), run.gradient_sha256);
  EXPECT_EQ(back.numeric_mode, dense.numeric_mode);
  EXPECT_EQ(back.inputs.size(), dense.inputs.size());
  {  // Rows by hyperslab, any range, as from the dense file (the readers close after).
    io::RowReader sparse_rows(path("sparse.h5")), dense_rows(path("dense.h5"));
    EXPECT_EQ(sparse_rows.rows(), v);
    EXPECT_EQ(sparse_rows.listed_rows(), rows);
    EXPECT_TRUE(dense_rows.listed_rows().empty());
    std::pair<std::int64_t, std::int64_t> const ranges[] = {{0, v}, {0, 3}, {3, 1}, {4, 6}, {250, 50}, {299, 1}};
    for (auto const& [first, count] : ranges) {
      std::vector<float> a(std::size_t(count * d)), b(a.size());
      sparse_rows.read(first, count, a.data());
      dense_rows.read(first, count, b.data());
      EXPECT_TRUE(same_bits(a, b)) << first << ", " << count;
    }
  }
  // The same summary, level for level, as the dense file's.
  auto const sa = io::read_summary(path("sparse.h5")), sb = io::read_summary(path("dense.h5"));
  ASSERT_EQ(sa.levels.size(), sb.levels.size());
  for (std::size_t l = 0; l < sa.levels.size(); ++l) {
    EXPECT_EQ(sa.levels[l].counts, sb.levels[l].counts) << l;
    EXPECT_TRUE(same_bits(sa.levels[l].min, sb.levels[l].min)) << l;
    EXPECT_TRUE(same_bits(sa.levels[l].max, sb.levels[l].max)) << l;
    EXPECT_TRUE(same_bits(sa.levels[l].max_abs, sb.levels[l].max_abs)) << l;
  }
  // A sparse checkpoint: each reader gets the listed rows within its row range.
  io::Checkpoint ckpt;
  ckpt.job_id = "sparse", ckpt.position = 10, ckpt.microbatches = 1, ckpt.microbatch_size = 10;
  ckpt.table_sha256 = ckpt.batch_sha256 = std::string(64, '0');
  ckpt.plan = "auto", ckpt.numeric_mode = "identical", ckpt.rows = v, ckpt.cols = d;
  io::write_checkpoint(path("sparse.ckpt"), ckpt, slab);
  std::pair<std::int64_t, std::int64_t> const ranges[] = {{0, v}, {100, 150}, {4, 2}};  // nvcc: no braced list here
  for (auto const& [first, count] : ranges) {
    auto const part = io::read_checkpoint(path("sparse.ckpt"), true, first, count);
    EXPECT_TRUE(part.sparse);
    std::vector<std::int64_t> want_rows;
    std::vector<float> want_values;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (rows[i] >= first && rows[i] < first + count) {
        want_rows.push_back(rows[i]);
        want_values.insert(want_values.end(), values.begin() + std::int64_t(i) * d, values.begin() + std::int64_t(i + 1) * d);
      }
    EXPECT_EQ(part.listed_rows, want_rows) << first;
    EXPECT_TRUE(same_bits(part.gradient, want_values)) << first;
    EXPECT_EQ(part.counts.size(), want_rows.size());
  }
  {
    auto const attributes = io::read_checkpoint(path("sparse.ckpt"), false);
    EXPECT_TRUE(attributes.sparse) << "a sparse checkpoint says so by its attributes";
    EXPECT_EQ(attributes.listed_count, n);
    EXPECT_TRUE(attributes.listed_rows.empty() && attributes.gradient.empty()) << "attributes only: no rows read";
  }

  // Refused: rows not ascending, a wrong digest length; nothing written.
  auto bad_rows = rows;
  std::swap(bad_rows[0], bad_rows[1]);
  io::SparseSlab const bad{0, n, n, 0, v, bad_rows.data(), values.data(), counts.data()};
  EXPECT_THROW(io::write_sparse_run(path("bad.h5"), run, bad), InvalidArgument);
  EXPECT_FALSE(fs::exists(path("bad.h5")));
  // A changed value no longer matches the digest.
  {
    hid_t f = H5Fopen(path("sparse.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Dopen2(f, "gradient", H5P_DEFAULT);
    std::vector<float> stored(std::size_t(n * d));
    H5Dread(g, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, stored.data());
    stored[5] = test::from_bits(test::bits_of(stored[5]) ^ 1u);  // one bit
    H5Dwrite(g, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, stored.data());
    H5Dclose(g);
    H5Fclose(f);
  }
  try {
    io::read_run(path("sparse.h5"));
    ADD_FAILURE() << "a changed sparse gradient was read";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("does not match its SHA-256"), std::string::npos) << e.what();
  }
}

// ---- digests over everything a reader builds on (trust, second round) -----------------

// Writes `values` over the whole of dataset `name` (a valid HDF5 write: the Fletcher32
// checksums agree, the digests do not).
template <class T>
void overwrite(std::string const& file, char const* name, hid_t mem_type, std::vector<T> const& values) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(d), H5Fclose(f);
}

template <class F>
std::string refusal(F&& read) {
  try {
    read();
  } catch (io::FileError const& e) {
    return e.what();
  }
  return "(read)";
}

io::Checkpoint sample_checkpoint() {
  auto const run = sample_run();
  io::Checkpoint c;
  c.job_id = "job-1", c.position = run.positions, c.microbatches = 3, c.microbatch_size = 4096;
  c.table_sha256 = std::string(64, 'a'), c.batch_sha256 = std::string(64, 'b');
  c.plan = "auto", c.numeric_mode = "identical", c.scale_grad_by_freq = "batch", c.padding_idx = 0;
  c.elapsed_seconds = 0.1 + 0.2;  // not a short decimal: the digest's %.17g keeps every bit
  c.rows = run.rows, c.cols = run.cols, c.gradient = run.gradient, c.counts = run.counts;
  return c;
}

// Every attribute a resume builds on is covered by checkpoint_sha256 (each edited in
// turn is refused, also when only the attributes are read), the data by their own
// digests (checked when every row is read; a rank reading part of them leaves that
// to its job), and a checkpoint without the digest is not resumed.
TEST_F(Io, CheckpointsCarryDigestsOverEverythingAResumeUses) {
  auto const c = sample_checkpoint();
  io::write_checkpoint(path("c.h5"), c);
  auto const back = io::read_checkpoint(path("c.h5"));
  EXPECT_EQ(back.gradient_sha256, io::sha256_hex(c.gradient.data(), c.gradient.size() * 4));
  EXPECT_EQ(back.counts_sha256, io::counts_sha256(c.counts.data(), c.rows));
  EXPECT_EQ(back.checkpoint_sha256, io::checkpoint_sha256(back));
  EXPECT_EQ(back.elapsed_seconds, c.elapsed_seconds);
  std::pair<char const*, std::function<void(hid_t)>> const edits[] = {
      {"position", [](hid_t f) { set_int_attr(f, "position", 1); }},
      {"microbatches", [](hid_t f) { set_int_attr(f, "microbatches", 4); }},
      {"microbatch_size", [](hid_t f) { set_int_attr(f, "microbatch_size", 7); }},
      {"padding_idx", [](hid_t f) { set_int_attr(f, "padding_idx", 5); }},
      {"job_id", [](hid_t f) { set_string_attr(f, "job_id", "job-2"); }},
      {"batch_sha256", [](hid_t f) { set_string_attr(f, "batch_sha256", std::string(64, 'c').c_str()); }},
      {"plan", [](hid_t f) { set_string_attr(f, "plan", "scan"); }},
      {"numeric_mode", [](hid_t f) { set_string_attr(f, "numeric_mode", "fast"); }},
      {"scale_grad_by_freq", [](hid_t f) { set_string_attr(f, "scale_grad_by_freq", "call"); }},
      {"counts_sha256", [](hid_t f) { set_string_attr(f, "counts_sha256", std::string(64, '0').c_str()); }},
  };
  for (auto const& [what, edit] : edits) {
    fs::copy_file(path("c.h5"), path("edited.h5"), fs::copy_options::overwrite_existing);
    hid_t f = H5Fopen(path("edited.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    edit(f);
    H5Fclose(f);
    for (bool data : {false, true})
      EXPECT_NE(refusal([&] { io::read_checkpoint(path("edited.h5"), data); }).find("do not match checkpoint_sha256"),
                std::string::npos)
          << what << (data ? " (with data)" : " (attributes)");
  }
  // The data: caught when every row is read, not by a rank reading its part.
  auto g = c.gradient;
  g[3 * c.cols] = 2 * g[3 * c.cols];
  fs::copy_file(path("c.h5"), path("grad.h5"), fs::copy_options::overwrite_existing);
  overwrite(path("grad.h5"), "gradient", H5T_NATIVE_FLOAT, g);
  EXPECT_NE(refusal([&] { io::read_checkpoint(path("grad.h5")); }).find("'/gradient': does not match its SHA-256"),
            std::string::npos);
  EXPECT_EQ(refusal([&] { io::read_checkpoint(path("grad.h5"), true, 0, c.rows - 1); }), "(read)");
  auto n = c.counts;
  n[7] = -3;
  fs::copy_file(path("c.h5"), path("counts.h5"), fs::copy_options::overwrite_existing);
  overwrite(path("counts.h5"), "counts", H5T_NATIVE_INT64, n);
  EXPECT_NE(refusal([&] { io::read_checkpoint(path("counts.h5")); }).find("'/counts': does not match its SHA-256"),
            std::string::npos);
  // No digest: described and identified, never resumed.
  fs::copy_file(path("c.h5"), path("old.h5"), fs::copy_options::overwrite_existing);
  hid_t f = H5Fopen(path("old.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(f, "checkpoint_sha256");
  H5Fclose(f);
  EXPECT_EQ(io::read_checkpoint(path("old.h5"), false).job_id, "job-1");
  EXPECT_NE(refusal([&] { io::read_checkpoint(path("old.h5")); }).find("has no checkpoint_sha256"), std::string::npos);
}

// A run's counts: every reader checks them (digest, range, sum) before anything uses
// them; the writer refuses counts no reader would take; the header alone reads none.
TEST_F(Io, RunCountsAreCheckedByEveryReader) {
  auto run = sample_run();
  auto bad = run;
  bad.positions += 1;
  EXPECT_THROW(io::write_run(path("bad.h5"), bad), InvalidArgument);
  bad = run;
  bad.counts[0] = -1, bad.counts[1] += 1;
  EXPECT_THROW(io::write_run(path("bad.h5"), bad), InvalidArgument);
  EXPECT_FALSE(fs::exists(path("bad.h5")));
  io::write_run(path("r.h5"), run);
  EXPECT_EQ(io::read_run(path("r.h5"), false).counts_sha256, io::counts_sha256(run.counts.data(), run.rows));
  auto const edit = [&](std::vector<std::int64_t> counts, bool redigest) {
    fs::copy_file(path("r.h5"), path("e.h5"), fs::copy_options::overwrite_existing);
    overwrite(path("e.h5"), "counts", H5T_NATIVE_INT64, counts);
    if (redigest) {
      hid_t f = H5Fopen(path("e.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      set_string_attr(f, "counts_sha256", io::counts_sha256(counts.data(), std::int64_t(counts.size())).c_str());
      H5Fclose(f);
    }
    return refusal([&] { io::read_run(path("e.h5"), false, false); });
  };
  auto c = run.counts;
  c[0] = -3;
  EXPECT_NE(edit(c, false).find("holds -3 at entry 0"), std::string::npos);
  c = run.counts;
  c[4] = 0;
  EXPECT_NE(edit(c, false).find("'/counts'"), std::string::npos);
  c = run.counts;
  c[0] += 1;
  EXPECT_NE(edit(c, true).find("sums to more than positions"), std::string::npos) << "digest recomputed";
  c = run.counts;
  c[0] = run.positions, std::fill(c.begin() + 1, c.end(), 0);
  EXPECT_EQ(edit(c, true), "(read)") << "one row holding every position is a run";
  c[0] = INT64_MAX;
  EXPECT_NE(edit(c, true).find("a count is in [0, positions"), std::string::npos);
  EXPECT_EQ(io::read_run_header(path("e.h5")).positions, run.positions) << "the header reads no counts";
}

// The summary: its digest is checked by read_summary, and so are its block counts
// against the run's positions; check_file also recomputes it from the rows.
TEST_F(Io, RunSummariesAreCoveredByTheirDigestAndTheRows) {
  auto const run = sample_run();
  io::write_run(path("r.h5"), run);
  auto summary = io::read_summary(path("r.h5"));
  EXPECT_TRUE(summary.verified);
  auto const report = io::check_file(path("r.h5"));
  EXPECT_TRUE(report.unverified.empty());
  EXPECT_EQ(report.verified.size(), 5u);  // chunks, gradient, counts (range and sum), counts_sha256, summary
  auto const level = "summary/rows_" + std::to_string(summary.levels[0].block_rows) + "/max";
  auto scaled = summary.levels[0].max;
  for (auto& x : scaled) x *= 1000;
  fs::copy_file(path("r.h5"), path("s.h5"));
  overwrite(path("s.h5"), level.c_str(), H5T_NATIVE_FLOAT, scaled);
  EXPECT_NE(refusal([&] { io::read_summary(path("s.h5")); }).find("'/summary': does not match its SHA-256"),
            std::string::npos);
  EXPECT_NE(refusal([&] { io::check_file(path("s.h5")); }).find("/summary"), std::string::npos);
  summary.levels[0].max = scaled;  // the digest recomputed: read_summary takes it, the rows do not
  hid_t f = H5Fopen(path("s.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  set_string_attr(f, "summary_sha256", io::summary_sha256(summary).c_str());
  H5Fclose(f);
  EXPECT_FALSE(io::read_summary(path("s.h5")).empty());
  EXPECT_NE(refusal([&] { io::check_file(path("s.h5")); }).find("is not the summary of this gradient"),
            std::string::npos);
  EXPECT_NE(refusal([&] { io::check_run_summary(path("s.h5"), io::read_run(path("s.h5"))); })
                .find("is not the summary of this gradient"),
            std::string::npos);
  fs::copy_file(path("r.h5"), path("p.h5"));
  f = H5Fopen(path("p.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  set_int_attr(f, "positions", run.positions - 1);
  H5Fclose(f);
  EXPECT_NE(refusal([&] { io::read_summary(path("p.h5")); }).find("the summary is not this run's"), std::string::npos);
}

// check_table_finite reads a table in pieces and names the first NaN or infinity.
TEST_F(Io, TablesAreCheckedFiniteInPieces) {
  auto w = special_table(70000, 64);  // 17 MiB: two pieces
  io::save_table(path("t.h5"), w.data(), config(70000, 64));
  io::check_table_finite(path("t.h5"), 0, 70000);
  hid_t f = H5Fopen(path("t.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "weight", H5P_DEFAULT);
  w[std::size_t(69000 * 64 + 5)] = std::numeric_limits<float>::quiet_NaN();
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data());
  H5Dclose(d), H5Fclose(f);
  EXPECT_NE(refusal([&] { io::check_table_finite(path("t.h5"), 0, 70000); }).find("holds NaN at row 69000, column 5"),
            std::string::npos);
  io::check_table_finite(path("t.h5"), 0, 69000);  // a rank's rows before it
}

TEST(Summary, LevelsAreExactAndIndependentOfTheOrderRowsCameIn) {
  std::int64_t const rows = 70007, cols = 5;  // 70007 rows: blocks of 32, the last holding 23
  auto g = synthetic::uniform_floats(rows * cols, 41);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) counts[std::size_t(r)] = r % 7;
  for (std::int64_t r = 0; r < 32; ++r) g[std::size_t(r * cols)] = r == 1 ? -0.0f : 0.0f;  // block 0, column 0: zeros
  g[7] = std::numeric_limits<float>::infinity();
  for (std::int64_t r = 32; r < 64; ++r) g[std::size_t(r * cols + 1)] = std::nanf("");  // a block of NaN
  g[std::size_t(20 * cols + 2)] = std::nanf("");  // NaN beside numbers: left out
  io::SummaryBuilder whole(rows, cols);
  whole.add(0, rows, g.data(), counts.data());
  auto const s = whole.finish();
  ASSERT_EQ(io::summary_finest_block_rows(rows), 32);
  ASSERT_EQ(s.levels.front().blocks, 2188);
  ASSERT_EQ(s.levels.back().blocks, 1);
  ASSERT_EQ(s.levels.size(), 13u);  // 32, 64, ..., 131072 rows per block
  EXPECT_EQ(io::summary_finest_block_rows(1), 16) << "small gradients: blocks of 16 rows at the least";
  EXPECT_EQ(io::summary_finest_block_rows(65536), 16);
  EXPECT_EQ(io::summary_finest_block_rows(65537), 32);
  auto bits = [](float x) { return test::bits_of(x); };
  for (auto const& level : s.levels) {
    SCOPED_TRACE(level.block_rows);
    for (std::int64_t b = 0; b < level.blocks; ++b) {
      std::int64_t sum = 0;
      for (std::int64_t r = b * level.block_rows; r < std::min(rows, (b + 1) * level.block_rows); ++r)
        sum += counts[std::size_t(r)];
      ASSERT_EQ(level.counts[std::size_t(b)], sum);
      for (std::int64_t c = 0; c < cols; ++c) {
        float lo = 0, hi = 0, top = 0;
        bool any = false;
        for (std::int64_t r = b * level.block_rows; r < std::min(rows, (b + 1) * level.block_rows); ++r) {
          float const x = g[std::size_t(r * cols + c)];
          if (std::isnan(x)) continue;
          if (!any || x < lo || (x == lo && std::signbit(x))) lo = x;
          if (!any || x > hi || (x == hi && !std::signbit(x))) hi = x;
          if (!any || std::fabs(x) > top) top = std::fabs(x);
          any = true;
        }
        auto const i = std::size_t(b * cols + c);
        if (!any) {
          ASSERT_TRUE(std::isnan(level.min[i]) && std::isnan(level.max[i]) && std::isnan(level.max_abs[i]));
          continue;
        }
        ASSERT_EQ(bits(level.min[i]), bits(lo)) << "block " << b << " column " << c;
        ASSERT_EQ(bits(level.max[i]), bits(hi)) << "block " << b << " column " << c;
        ASSERT_EQ(bits(level.max_abs[i]), bits(top)) << "block " << b << " column " << c;
      }
    }
  }
  EXPECT_EQ(bits(s.levels.front().min[0]), bits(-0.0f));
  EXPECT_EQ(bits(s.levels.front().max[0]), bits(0.0f));
  // Rows in reverse pieces of 3, and split over two builders merged: the same bits.
  io::SummaryBuilder reversed(rows, cols), other(rows, cols);
  for (std::int64_t first = rows; first > 0; first -= 3) {
    std::int64_t const from = std::max<std::int64_t>(0, first - 3);
    (from % 2 ? reversed : other).add(from, first - from, g.data() + from * cols, counts.data() + from);
  }
  reversed.merge(other);
  auto const again = reversed.finish();
  ASSERT_EQ(again.levels.size(), s.levels.size());
  for (std::size_t k = 0; k < s.levels.size(); ++k) {
    auto const& x = s.levels[k];
    auto const& y = again.levels[k];
    EXPECT_EQ(x.counts, y.counts);
    EXPECT_EQ(std::memcmp(x.min.data(), y.min.data(), x.min.size() * 4), 0);
    EXPECT_EQ(std::memcmp(x.max.data(), y.max.data(), x.max.size() * 4), 0);
    EXPECT_EQ(std::memcmp(x.max_abs.data(), y.max_abs.data(), x.max_abs.size() * 4), 0);
  }
}

// write_run stores the summary and read_summary gives it back bit for bit; a file
// without one (as runs before it) reads as empty, and a damaged one is refused.
TEST_F(Io, RunFilesCarryTheirGradientsSummary) {
  io::RunFile run;
  run.rows = 300, run.cols = 3;
  run.gradient = synthetic::uniform_floats(run.rows * run.cols, 3);
  run.counts.assign(std::size_t(run.rows), 2);
  run.positions = 2 * run.rows;
  run.run_id = "summary";
  io::write_run(path("r.h5"), run);
  io::SummaryBuilder b(run.rows, run.cols);
  b.add(0, run.rows, run.gradient.data(), run.counts.data());
  auto const want = b.finish();
  auto const got = io::read_summary(path("r.h5"));
  ASSERT_EQ(got.levels.size(), want.levels.size());
  EXPECT_EQ(got.levels.front().block_rows, 16) << "300 rows: blocks of 16, the least";
  for (std::size_t k = 0; k < want.levels.size(); ++k) {
    EXPECT_EQ(got.levels[k].counts, want.levels[k].counts);
    EXPECT_EQ(std::memcmp(got.levels[k].max_abs.data(), want.levels[k].max_abs.data(), want.levels[k].max_abs.size() * 4), 0);
    EXPECT_EQ(std::memcmp(got.levels[k].min.data(), want.levels[k].min.data(), want.levels[k].min.size() * 4), 0);
  }
  auto remove = [&](char const* object) {  // as h5py's `del f[object]`
    hid_t f = H5Fopen(path("r.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(H5Ldelete(f, object, H5P_DEFAULT), 0);
    H5Fclose(f);
  };
  remove("/summary/rows_32/max");
  EXPECT_THROW(
      try { io::read_summary(path("r.h5")); } catch (io::FileError const& e) {
        EXPECT_NE(std::string(e.what()).find("/summary/rows_32/max"), std::string::npos) << e.what();
        throw;
      },
      io::FileError);
  {  // a hostile level list: refused by name, nothing allocated for it
    hid_t f = H5Fopen(path("r.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(H5Ldelete(f, "/summary/block_rows", H5P_DEFAULT), 0);
    hsize_t const n = hsize_t{1} << 40;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t const chunk = 1024;
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t d = H5Dcreate2(f, "/summary/block_rows", H5T_STD_I64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d), H5Pclose(dcpl), H5Sclose(space), H5Fclose(f);
  }
  EXPECT_THROW(
      try { io::read_summary(path("r.h5")); } catch (io::FileError const& e) {
        EXPECT_NE(std::string(e.what()).find("/summary/block_rows"), std::string::npos) << e.what();
        throw;
      },
      io::FileError);
  remove("/summary");  // as a run file from before the summary
  EXPECT_TRUE(io::read_summary(path("r.h5")).empty());
  EXPECT_EQ(io::read_run(path("r.h5")).gradient, run.gradient) << "the run still reads";
}

}  // namespace
}  // namespace kembed
