// The batch job on bag batches: its run file holds, bit for bit, the gradient
// EmbeddingBag gives the whole batch (one call, or calls of `microbatch` whole bags
// with a carry in mode deterministic, whose tree depends on the split), for every
// pooling, weighted or not, dense and row-sparse; and it refuses what does not pool.
#include "support/test_support.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/embedding_bag.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/row_reader.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/backward.hpp>
#include <kembed/job/forward.hpp>
#include <kembed/job/one_process.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

namespace kembed {
namespace {

namespace fs = std::filesystem;

static_assert(job::has_bag_layer_v<job::OneProcess::Layer<TEST_EXECSPACE>>);

constexpr std::int64_t V = 300, D = 5, T = 6000, B = 700;

struct BagBatch {
  std::vector<std::int64_t> ids, offsets;  // offsets: B + 1, the last T
  std::vector<float> dy, weights;
};

// Zipf ids cut at random points (some bags empty, some long), dy and weights drawn.
BagBatch make_bag_batch(bool weighted) {
  BagBatch b;
  b.ids = synthetic::zipf_ids(V, T, 1.1, 11);
  synthetic::Rng rng(12);
  b.offsets.push_back(0);
  for (std::int64_t i = 1; i < B; ++i) b.offsets.push_back(rng.below(T + 1));
  std::sort(b.offsets.begin(), b.offsets.end());
  b.offsets.push_back(T);
  b.dy = synthetic::uniform_floats(B * D, 13);
  if (weighted) b.weights = synthetic::uniform_floats(T, 14);
  return b;
}

class BagJob : public ::testing::Test {
 protected:
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("kembed-bag-job-" + std::to_string(::getpid()) + "-" + info->name());
    fs::create_directories(dir_);
    table_ = test::table_for(V, D);
    io::save_table(path("t.h5"), table_.data(), make_config(V, D, Options{}));
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(std::string const& name) const { return (dir_ / name).string(); }

  void write(std::string const& name, BagBatch const& b) const {
    io::BatchWriter out(path(name), T, D, io::BatchMeta{V, "test", 11}, {}, io::BagShape{B, !b.weights.empty()});
    out.write(0, T, b.ids.data(), nullptr);
    out.write_bags(0, B, b.offsets.data(), b.dy.data());
    if (!b.weights.empty()) out.write_weights(0, T, b.weights.data());
    out.commit();
  }
  job::BackwardSettings settings(std::string const& batch, std::string const& out) const {
    job::BackwardSettings s;
    s.table = path("t.h5");
    s.batch = path(batch);
    s.out = path(out);
    return s;
  }

  // What the job must hold: the library's gradient of the whole batch, in calls of
  // `call` whole bags chained through the carry.
  HostGradient expected(BagBatch const& b, Pooling pooling, Mode mode, std::int64_t call) const {
    BagOptions o;
    o.embedding.mode = mode;
    o.pooling = pooling;
    o.include_last_offset = true;
    auto const layer = EmbeddingBag<TEST_EXECSPACE>::from_pretrained(FloatsRef(table_.data(), Shape{V, D}), o);
    HostGradient g{Shape{V, D}, std::vector<float>(std::size_t(V * D), 0.0f), std::vector<std::int64_t>(V, 0)};
    for (std::int64_t first = 0; first < B; first += call) {
      std::int64_t const n = std::min(call, B - first), p = b.offsets[first], q = b.offsets[first + n];
      std::vector<std::int64_t> offsets(b.offsets.begin() + first, b.offsets.begin() + first + n + 1);
      for (auto& x : offsets) x -= p;
      std::vector<std::int64_t> ids(b.ids.begin() + p, b.ids.begin() + q);
      IdsRef const offsets_ref(offsets);
      FloatsRef const weights = b.weights.empty() ? FloatsRef{} : FloatsRef(b.weights.data() + p, Shape{q - p});
      auto const part = layer.backward(IdsRef(ids), &offsets_ref, FloatsRef(b.dy.data() + first * D, Shape{n, D}),
                                       weights, FloatsRef(g.values.data(), Shape{V, D}));
      g.values = part.values;
      for (std::int64_t r = 0; r < V; ++r) g.counts[std::size_t(r)] += part.counts[std::size_t(r)];
    }
    return g;
  }

  std::vector<float> table_;
  fs::path dir_;
};

// Every pooling (sum weighted too), modes identical and deterministic, dense and
// sparse, at microbatches of 1, 7 and 64 Ki bags: the library's bits, memcmp.
TEST_F(BagJob, RunFilesHoldTheLayersGradient) {
  auto const plain = make_bag_batch(false), weighted = make_bag_batch(true);
  write("plain.h5", plain);
  write("weighted.h5", weighted);
  struct Case {
    Pooling pooling;
    bool weighted;
  };
  int checked = 0;
  for (auto c :
       {Case{Pooling::sum, false}, Case{Pooling::mean, false}, Case{Pooling::max, false}, Case{Pooling::sum, true}})
    for (auto mode : {Mode::identical, Mode::deterministic})
      for (std::int64_t microbatch : {std::int64_t{1}, std::int64_t{7}, std::int64_t{65536}})
        for (bool sparse : {false, true}) {
          SCOPED_TRACE(std::string(to_string(c.pooling)) + (c.weighted ? " weighted " : " ") +
                       std::string(to_string(mode)) + " microbatch " + std::to_string(microbatch) +
                       (sparse ? " sparse" : " dense"));
          auto s = settings(c.weighted ? "weighted.h5" : "plain.h5", "r" + std::to_string(checked++) + ".h5");
          s.pooling = c.pooling;
          s.mode = mode;
          s.microbatch = microbatch;
          s.sparse = sparse;
          auto const report = job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
          EXPECT_EQ(report.bags, B);
          EXPECT_EQ(report.pooling, to_string(c.pooling));
          EXPECT_EQ(report.microbatches, (B + microbatch - 1) / microbatch);
          auto const run = io::read_run(s.out);
          ASSERT_TRUE(run.pooling.has_value());
          EXPECT_EQ(*run.pooling, c.pooling);
          EXPECT_EQ(run.bags, B);
          EXPECT_EQ(run.positions, T);
          std::int64_t const call = mode == Mode::deterministic ? microbatch : B;
          auto const want = expected(c.weighted ? weighted : plain, c.pooling, mode, call);
          EXPECT_EQ(0, std::memcmp(run.gradient.data(), want.values.data(), want.values.size() * sizeof(float)));
          EXPECT_EQ(run.counts, want.counts);
        }
  EXPECT_EQ(checked, 48);
}

// kembed forward on a bag batch writes one row per bag: EmbeddingBag's forward of the
// whole batch, bit for bit, whatever the microbatch of bags.
TEST_F(BagJob, ForwardPoolsEachBag) {
  auto const plain = make_bag_batch(false), weighted = make_bag_batch(true);
  write("plain.h5", plain);
  write("weighted.h5", weighted);
  int checked = 0;
  for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max})
    for (bool w : {false, true})
      for (std::int64_t microbatch : {std::int64_t{1}, std::int64_t{64}, std::int64_t{65536}}) {
        if (w && pooling != Pooling::sum) continue;
        SCOPED_TRACE(std::string(to_string(pooling)) + (w ? " weighted" : "") + " microbatch " +
                     std::to_string(microbatch));
        auto const& b = w ? weighted : plain;
        job::ForwardSettings s;
        s.table = path("t.h5");
        s.ids = path(w ? "weighted.h5" : "plain.h5");
        s.out = path("y" + std::to_string(checked++) + ".h5");
        s.pooling = pooling;
        s.microbatch = microbatch;
        auto const report = job::run_forward(TEST_EXECSPACE(), s);
        EXPECT_EQ(report.positions, B);
        EXPECT_EQ(report.pooling, to_string(pooling));
        BagOptions o;
        o.pooling = pooling;
        o.include_last_offset = true;
        auto const layer = EmbeddingBag<TEST_EXECSPACE>::from_pretrained(FloatsRef(table_.data(), Shape{V, D}), o);
        IdsRef const offsets(b.offsets);
        auto const want =
            layer.forward(IdsRef(b.ids), &offsets, w ? FloatsRef(b.weights.data(), Shape{T}) : FloatsRef{});
        io::RowReader y(s.out);
        ASSERT_EQ(y.rows(), B);
        ASSERT_EQ(y.cols(), D);
        std::vector<float> got(std::size_t(B * D));
        y.read(0, B, got.data());
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
      }
  EXPECT_EQ(checked, 12);
}

// A checkpoint taken between bags changes no bit, and the finished job removes it.
TEST_F(BagJob, CheckpointsChangeNoBit) {
  auto const b = make_bag_batch(true);
  write("b.h5", b);
  auto s = settings("b.h5", "once.h5");
  s.mode = Mode::deterministic;
  s.microbatch = 9;
  auto const once = job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
  s.out = path("checkpointed.h5");
  s.checkpoint_every = 100;
  auto const checkpointed = job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
  EXPECT_EQ(checkpointed.gradient_sha256, once.gradient_sha256);
  EXPECT_EQ(checkpointed.microbatches, once.microbatches);
  EXPECT_FALSE(fs::exists(s.out + ".checkpoint"));
}

// What does not pool is refused by name before anything is written.
TEST_F(BagJob, RefusesWhatDoesNotPool) {
  write("weighted.h5", make_bag_batch(true));
  auto const refused = [&](job::BackwardSettings const& s, std::string const& argument, std::string const& says) {
    try {
      job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
      ADD_FAILURE() << "accepted: " << says;
    } catch (InvalidArgument const& e) {
      EXPECT_EQ(e.argument(), argument);
      EXPECT_NE(std::string(e.message()).find(says), std::string::npos) << e.message();
    }
    EXPECT_FALSE(fs::exists(s.out));
  };
  auto s = settings("weighted.h5", "r.h5");
  s.pooling = Pooling::mean;
  refused(s, "pooling", "has per_sample_weights, which pool with pooling sum only");
  s.pooling = Pooling::max;
  refused(s, "pooling", "has per_sample_weights, which pool with pooling sum only");
  // A batch of positions has no bags to pool.
  auto const ids = synthetic::zipf_ids(V, 100, 1.1, 3);
  auto const dy = synthetic::uniform_floats(100 * D, 4);
  io::BatchWriter out(path("positions.h5"), 100, D, io::BatchMeta{V, "test", 3});
  out.write(0, 100, ids.data(), dy.data());
  out.commit();
  auto p = settings("positions.h5", "r.h5");
  p.pooling = Pooling::sum;
  refused(p, "pooling", "is a batch of positions (it has no /offsets)");
}

// A damaged bag batch is refused with the file, the dataset and the entry, and
// leaves no run file: offsets going down, an id outside the table.
TEST_F(BagJob, RefusesADamagedBatch) {
  auto b = make_bag_batch(false);
  std::swap(b.offsets[300], b.offsets[301]);
  b.offsets[300] += 1;  // now above offsets[301]
  write("down.h5", b);
  auto const s = settings("down.h5", "r.h5");
  try {
    job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
    ADD_FAILURE() << "decreasing offsets were accepted";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("/offsets"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("offsets[301]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("non-decreasing"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(s.out));
  auto c = make_bag_batch(false);
  c.ids[4321] = V;
  write("beyond.h5", c);
  auto const t = settings("beyond.h5", "r.h5");
  EXPECT_THROW(job::run_backward(TEST_EXECSPACE(), job::OneProcess(), t), Error);
  EXPECT_FALSE(fs::exists(t.out));
}

}  // namespace
}  // namespace kembed
