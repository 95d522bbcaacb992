// Batch files: streamed in blocks, and whatever is not a batch refused.
#include "io_fixture.hpp"

#include <limits>

namespace kembed {
namespace {

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

// ---- bag batches -------------------------------------------------------------------

// A bag batch written in blocks: ids per position, offsets and dy per bag, weights.
struct BagFile {
  std::int64_t t = 900, b = 120, d = 3;
  std::vector<std::int64_t> ids, offsets;
  std::vector<float> dy, weights;
  BagFile() {
    ids = synthetic::zipf_ids(50, t, 1.1, 2);
    for (std::int64_t i = 0; i < b; ++i) offsets.push_back(i * t / b);
    dy = synthetic::uniform_floats(b * d, 3);
    weights = synthetic::uniform_floats(t, 4);
  }
  void write(std::string const& path) const {
    io::BatchWriter w(path, t, d, io::BatchMeta{50, "test", 3}, {}, io::BagShape{b, true});
    w.write(0, t, ids.data(), nullptr);
    w.write_bags(0, 70, offsets.data(), dy.data());
    w.write_bags(70, b - 70, offsets.data() + 70, dy.data() + 70 * d);
    w.write_weights(0, t, weights.data());
    w.commit();
  }
};

// Overwrites one int64 of a dataset in place (a damaged or hand-made file).
void poke(std::string const& file, char const* name, std::int64_t at, std::int64_t value) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  hsize_t const start = hsize_t(at), one = 1;
  H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &one, nullptr);
  hid_t mem = H5Screate_simple(1, &one, nullptr);
  H5Dwrite(d, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, &value);
  H5Sclose(mem), H5Sclose(space), H5Dclose(d), H5Fclose(f);
}

TEST_F(Io, BagBatchesStreamByBags) {
  BagFile const f;
  f.write(path("bags.h5"));
  io::BatchReader r(path("bags.h5"));
  EXPECT_EQ(r.info().positions, f.t);
  EXPECT_EQ(r.info().bags, f.b);
  EXPECT_TRUE(r.info().weighted);
  EXPECT_EQ(r.info().dim, f.d);
  std::vector<std::int64_t> offsets(f.b + 1), ids(f.t);
  std::vector<float> dy(f.b * f.d), weights(f.t);
  r.read_bags(0, 50, offsets.data(), dy.data());
  r.read_bags(50, f.b - 50, offsets.data() + 50, dy.data() + 50 * f.d);  // offsets[50] read twice
  r.read(0, f.t, ids.data(), nullptr);
  r.read_weights(0, f.t, weights.data());
  auto want = f.offsets;
  want.push_back(f.t);  // commit() wrote offsets[B] = T
  EXPECT_EQ(offsets, want);
  EXPECT_EQ(ids, f.ids);
  EXPECT_TRUE(same_bits(dy, f.dy));
  EXPECT_TRUE(same_bits(weights, f.weights));
  EXPECT_THROW(r.read(0, 1, ids.data(), dy.data()), io::FileError);  // dy is per bag
}

TEST_F(Io, BagBatchesRefuseBadOffsetsAndWeights) {
  auto const message = [&](std::string const& name, auto&& read) {
    try {
      read();
    } catch (io::FileError const& e) {
      return std::string(e.what());
    }
    return std::string("no error: ") + name;
  };
  auto const contains = [](std::string const& text, std::string const& part) {
    return text.find(part) != std::string::npos;
  };
  BagFile f;
  f.offsets[0] = 4;
  f.write(path("start.h5"));
  EXPECT_PRED2(contains, message("start", [&] { io::BatchReader r(path("start.h5")); }),
               "dataset '/offsets': starts at 4; offsets[0] must be 0");
  BagFile const g;
  g.write(path("end.h5"));
  poke(path("end.h5"), "/offsets", g.b, g.t - 1);
  EXPECT_PRED2(contains, message("end", [&] { io::BatchReader r(path("end.h5")); }),
               "ends at 899 but '/ids' has 900 positions; offsets[B] must be T");
  g.write(path("down.h5"));
  poke(path("down.h5"), "/offsets", 80, 10);
  io::BatchReader down(path("down.h5"));
  std::vector<std::int64_t> offsets(g.b + 1);
  EXPECT_PRED2(contains, message("down", [&] { down.read_bags(60, 40, offsets.data(), nullptr); }),
               "offsets[80] = 10 is below offsets[79] = 592; offsets must be non-decreasing");
  BagFile h;
  h.weights[7] = std::numeric_limits<float>::quiet_NaN();
  h.dy[5 * h.d + 1] = std::numeric_limits<float>::infinity();
  h.write(path("nan.h5"));
  io::BatchReader nan(path("nan.h5"));
  std::vector<float> values(h.t);
  EXPECT_PRED2(contains, message("weights", [&] { nan.read_weights(0, h.t, values.data()); }),
               "holds NaN at position 7; per_sample_weights must be finite");
  EXPECT_PRED2(contains, message("dy", [&] { nan.read_bags(0, 10, offsets.data(), values.data()); }),
               "holds +inf at bag 5, column 1; dy must be finite");
}

}  // namespace
}  // namespace kembed
