// Batch files: streamed in blocks, and whatever is not a batch refused.
#include "io_fixture.hpp"

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

}  // namespace
}  // namespace kembed
