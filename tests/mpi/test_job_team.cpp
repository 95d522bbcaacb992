// The batch job (job::run_backward) on a team of P MPI ranks (mpiexec -n P, P =
// 1..4), as C++ unit tests: the run file's gradient is the one process's, bit for
// bit, dense and sparse, with and without checkpoints; so is the forward's y
// (job::run_forward); every rank runs the job's
// phases in order; a bad id in the last rank's part stops every rank with the one
// process's message and leaves no run file. (tests/mpi/job_ranks.sh covers the same
// job through `mpiexec kembed backward`, killed ranks and resumes.)
#include "mpi/ranks.hpp"
#include "support/test_support.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/row_reader.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/backward.hpp>
#include <kembed/job/forward.hpp>
#include <kembed/job/one_process.hpp>
#include <kembed/job/team.hpp>
#include <kembed/mpi/sharded_embedding.hpp>
#include <kembed/mpi/team.hpp>

#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kembed {
namespace {

namespace fs = std::filesystem;
using Space = Kokkos::DefaultHostExecutionSpace;

static_assert(job::is_team_v<mpi::Team, Space>);
static_assert(job::is_forward_team_v<mpi::Team, Space>);

using test::my_rank;
using test::rank_count;

// Rank 0's text on every rank.
std::string from_rank_0(std::string text) {
  return mpi::Team(MPI_COMM_WORLD).broadcast(std::move(text));
}

std::vector<std::string>& phases_seen() {
  static std::vector<std::string> names;
  return names;
}
void on_region(char const* name) {
  std::string const s(name);
  if (s.rfind("kembed::job::", 0) == 0) phases_seen().push_back(s.substr(13));
}

// One folder for the whole team (rank 0 names it), the inputs written by rank 0.
class TeamJob : public ::testing::Test {
 protected:
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = from_rank_0(
        (fs::temp_directory_path() / ("kembed-team-job-" + std::to_string(::getpid()) + "-" + info->name())).string());
    if (my_rank() == 0) fs::create_directories(dir_);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (my_rank() == 0) fs::remove_all(dir_);
  }
  std::string path(std::string const& name) const { return (dir_ / name).string(); }

  // A table of V rows (d = 5) and a batch of these ids; settings that name them.
  job::BackwardSettings inputs(std::int64_t v, std::vector<std::int64_t> const& ids) const {
    std::int64_t const t = static_cast<std::int64_t>(ids.size()), d = 5;
    if (my_rank() == 0) {
      auto const table = test::table_for(v, d);
      io::save_table(path("t.h5"), table.data(), make_config(v, d, Options{}));
      auto const dy = synthetic::uniform_floats(t * d, 8);
      io::BatchWriter out(path("b.h5"), t, d, io::BatchMeta{v, "test", 8});
      out.write(0, t, ids.data(), dy.data());
      out.commit();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    job::BackwardSettings s;
    s.table = path("t.h5");
    s.batch = path("b.h5");
    return s;
  }

  // The gradient's SHA-256 of the job run by rank 0 alone, on every rank.
  std::string one_process_sha(job::BackwardSettings s, std::string const& out) const {
    std::string sha;
    if (my_rank() == 0) {
      s.out = path(out);
      sha = job::run_backward(Space(), job::OneProcess(), s).gradient_sha256;
    }
    return from_rank_0(sha);
  }

  fs::path dir_;
};

// Row 667 starts rank 2's rows at P = 3 and 4; V = 3 leaves ranks without rows at
// P = 4; T = 2 leaves ranks without positions. Each with the next block read on the
// I/O thread (its files on a communicator of their own) and without.
TEST_F(TeamJob, GradientIsTheOneProcessGradient) {
  struct Case {
    std::int64_t v, t;
  };
  int checked = 0;
  for (auto c : {Case{1001, 3000}, Case{3, 300}, Case{50, 2}}) {
    auto s = inputs(c.v, synthetic::zipf_ids(c.v, c.t, 1.1, 3));
    for (auto mode : {Mode::identical, Mode::deterministic})
      for (bool sparse : {false, true})
        for (std::int64_t checkpoint_every : {std::int64_t{0}, std::int64_t{1000}})
          for (auto read_ahead : {mpi::ReadAhead::off, mpi::ReadAhead::on}) {
            std::string const what = "V " + std::to_string(c.v) + " T " + std::to_string(c.t) + " " +
                                     std::string(to_string(mode)) + (sparse ? " sparse" : " dense") +
                                     " checkpoint_every " + std::to_string(checkpoint_every) +
                                     (read_ahead == mpi::ReadAhead::on ? ", reading ahead" : "");
            SCOPED_TRACE(what);
            s.mode = mode;
            s.sparse = sparse;
            s.microbatch = 97;
            s.checkpoint_every = checkpoint_every;
            std::string const name = "r" + std::to_string(checked++);
            s.out = path(name + ".h5");
            mpi::Team const team(MPI_COMM_WORLD, read_ahead);
            EXPECT_EQ(team.reads_ahead(), read_ahead == mpi::ReadAhead::on);
            auto const report = job::run_backward(Space(), team, s);
            EXPECT_EQ(report.ranks, rank_count());
            EXPECT_EQ(report.gradient_sha256, from_rank_0(report.gradient_sha256));  // one answer on every rank
            EXPECT_EQ(report.gradient_sha256, one_process_sha(s, name + "_one.h5"));
          }
  }
  EXPECT_EQ(checked, 48);
}

// Issue 39: the run file records each rank's share of the work: the terms its rows
// received (the sum of its rows' counts, under the ownership the job ran), the bytes
// it sent (summing to the report's) and its seconds folding; one process records
// none. Owned in ranges, the Zipf head puts most terms on the first rank; spread
// (the default), no rank holds more than 1.25x the mean.
TEST_F(TeamJob, EachRanksShareOfTheWorkIsRecorded) {
  std::int64_t const v = 1001, t = 3000;
  auto s = inputs(v, synthetic::zipf_ids(v, t, 1.1, 3));
  for (auto [sparse, owners] : {std::pair{false, job::RowOwners::spread}, std::pair{true, job::RowOwners::spread},
                                std::pair{false, job::RowOwners::ranges}}) {
    SCOPED_TRACE(std::string(sparse ? "sparse, " : "dense, ") + std::string(to_string(owners)));
    s.sparse = sparse, s.owners = owners;
    s.out = path(std::string(sparse ? "sparse" : "dense") + std::string(to_string(owners)) + ".h5");
    auto const report = job::run_backward(Space(), mpi::Team(MPI_COMM_WORLD), s);
    auto const run = io::read_run(s.out);  // the counts of every row, and the header
    if (rank_count() == 1) {
      EXPECT_TRUE(run.rank_work.empty());
      continue;
    }
    ASSERT_EQ(run.rank_work.size(), std::size_t(rank_count()));
    auto const ownership = owners == job::RowOwners::spread ? Ownership::spread(run.counts, rank_count())
                                                            : Ownership::ranges(v, rank_count());
    std::int64_t terms = 0, sent = 0, busiest = 0;
    for (int r = 0; r < rank_count(); ++r) {
      std::int64_t own = 0;
      for (std::int64_t row = 0; row < v; ++row)
        if (ownership.owner_of(row) == r) own += run.counts[std::size_t(row)];
      EXPECT_EQ(run.rank_work[std::size_t(r)].terms, own) << "rank " << r;
      busiest = std::max(busiest, own);
      EXPECT_GE(run.rank_work[std::size_t(r)].fold_microseconds, 0) << "rank " << r;
      terms += run.rank_work[std::size_t(r)].terms;
      sent += run.rank_work[std::size_t(r)].bytes_sent;
    }
    EXPECT_EQ(terms, t);
    EXPECT_EQ(sent, report.bytes_exchanged);
    if (owners == job::RowOwners::ranges)
      EXPECT_GT(run.rank_work[0].terms, t / 2) << "Zipf ids: the first rank owns the hot rows";
    else
      EXPECT_LE(busiest * rank_count() * 4, t * 5) << "spread: the busiest rank within 1.25x the mean";
  }
}

TEST_F(TeamJob, EveryRankRunsThePhasesInOrder) {
  auto s = inputs(1001, synthetic::zipf_ids(1001, 3000, 1.1, 3));
  s.out = path("r.h5");
  s.microbatch = 97;
  s.mode = Mode::deterministic;
  s.checkpoint_every = 2000;
  phases_seen().clear();
  Kokkos::Tools::Experimental::set_push_region_callback(on_region);
  job::run_backward(Space(), mpi::Team(MPI_COMM_WORLD), s);
  Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
  EXPECT_EQ(phases_seen(),
            (std::vector<std::string>{"resolve", "open_inputs", "resume", "fold", "checkpoint", "publish"}));
}

// Position 118 of 120 lies in the last rank's part for every P here.
// Issue 39, part 4: the forward on P ranks writes the one process's y, bit for bit,
// with max_norm (each block one call over every rank, so a row renormalised in one
// call is renormalised again, or not, as one process's), reading ahead on an I/O
// thread (files on a communicator of their own) and not. V = 3 leaves ranks without
// rows at P = 4, T = 2 ranks without positions.
TEST_F(TeamJob, ForwardIsTheOneProcessForward) {
  struct Case {
    std::int64_t v, t;
  };
  auto const y_bytes = [&](std::string const& file) {
    io::RowReader y(path(file));
    std::vector<float> rows(static_cast<std::size_t>(y.rows() * y.cols()));
    y.read(0, y.rows(), rows.data());
    std::string bytes(rows.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), rows.data(), bytes.size());
    return bytes;
  };
  int checked = 0;
  for (auto c : {Case{1001, 3000}, Case{3, 300}, Case{50, 2}}) {
    auto const b = inputs(c.v, synthetic::zipf_ids(c.v, c.t, 1.1, 3));
    for (std::optional<double> max_norm : {std::optional<double>(), std::optional<double>(0.5)})
      for (auto read_ahead : {mpi::ReadAhead::off, mpi::ReadAhead::on}) {
        SCOPED_TRACE("V " + std::to_string(c.v) + " T " + std::to_string(c.t) + (max_norm ? " max_norm" : "") +
                     (read_ahead == mpi::ReadAhead::on ? ", reading ahead" : ""));
        job::ForwardSettings s;
        s.table = b.table;
        s.ids = b.batch;
        s.microbatch = 97;
        s.max_norm = max_norm;
        std::string const name = "y" + std::to_string(checked++);
        s.out = path(name + ".h5");
        auto const report = job::run_forward(Space(), mpi::Team(MPI_COMM_WORLD, read_ahead), s);
        EXPECT_EQ(report.ranks, rank_count());
        std::string one;
        if (my_rank() == 0) {
          s.out = path(name + "_one.h5");
          job::run_forward(Space(), s);
          one = y_bytes(name + "_one.h5");
          EXPECT_TRUE(y_bytes(name + ".h5") == one);  // memcmp of every float
        }
        MPI_Barrier(MPI_COMM_WORLD);
      }
  }
  EXPECT_EQ(checked, 12);
}

TEST_F(TeamJob, ABadIdStopsEveryRankWithTheOneProcessMessage) {
  std::vector<std::int64_t> ids(120);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i % 3);
  ids[118] = 5;
  auto s = inputs(3, ids);
  auto const message = [&](auto const& team, std::string const& out) {
    s.out = path(out);
    try {
      job::run_backward(Space(), team, s);
    } catch (InvalidArgument const& e) {
      return std::string(e.message());
    }
    return std::string("no error");
  };
  std::string one;
  if (my_rank() == 0) one = message(job::OneProcess(), "one.h5");
  one = from_rank_0(one);
  EXPECT_NE(one.find("holds 5 at position 118,"), std::string::npos) << one;
  EXPECT_EQ(message(mpi::Team(MPI_COMM_WORLD), "many.h5"), one);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(fs::exists(path("many.h5")));
  EXPECT_FALSE(fs::exists(path("one.h5")));
}

}  // namespace
}  // namespace kembed
