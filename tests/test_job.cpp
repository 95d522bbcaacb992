// The batch job as a library: the run file's plan_used is the plan whose region the
// kernels announced (Embedding::path_for decides both), for every option.
#include "support/test_support.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/backward.hpp>
#include <kembed/job/one_process.hpp>
#include <kembed/job/team.hpp>

#include <unistd.h>
#include <filesystem>
#include <set>
#include <vector>

namespace kembed {
namespace {

namespace fs = std::filesystem;

std::set<std::string>& plans_seen() {
  static std::set<std::string> names;
  return names;
}

std::vector<std::string>& phases_seen() {
  static std::vector<std::string> names;
  return names;
}

// "kembed::backward[identical,scan]" -> "scan"; "kembed::backward[fast]" -> "atomic";
// the job's phases ("kembed::job::fold") in order.
void on_region(char const* name) {
  std::string const s(name), head = "kembed::backward[";
  if (s.rfind("kembed::job::", 0) == 0) phases_seen().push_back(s.substr(13));
  if (s.rfind(head, 0) != 0) return;
  auto const inside = s.substr(head.size(), s.size() - head.size() - 1);
  if (inside == "fast") {
    plans_seen().insert("atomic");
    return;
  }
  auto const comma = inside.find(',');
  auto const rest = inside.substr(comma + 1);
  plans_seen().insert(rest.substr(0, rest.find(',')));
}

// The Team concept (kembed/job/team.hpp): the team of one is one, and a type that
// lacks a member is not.
static_assert(job::is_team_v<job::OneProcess, TEST_EXECSPACE>);
static_assert(job::is_forward_team_v<job::OneProcess, TEST_EXECSPACE>);
struct NoBroadcast : job::OneProcess {
  void broadcast() const = delete;
};
static_assert(!job::is_team_v<NoBroadcast, TEST_EXECSPACE>);
static_assert(!job::is_team_v<int, TEST_EXECSPACE>);

class Job : public ::testing::Test {
 protected:
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("kembed-job-" + std::to_string(::getpid()) + "-" + info->name());
    fs::create_directories(dir_);
    Kokkos::Tools::Experimental::set_push_region_callback(on_region);
  }
  void TearDown() override {
    Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
    fs::remove_all(dir_);
  }
  std::string path(std::string const& name) const { return (dir_ / name).string(); }
  // A batch of T Zipf positions over V rows, d = 4.
  void write_batch(std::string const& name, std::int64_t v, std::int64_t t) const {
    auto const ids = synthetic::zipf_ids(v, t, 1.1, 3);
    auto const dy = synthetic::uniform_floats(t * 4, 4);
    io::BatchWriter out(path(name), t, 4, io::BatchMeta{v, "test", 3});
    out.write(0, t, ids.data(), dy.data());
    out.commit();
  }
  // A table of V rows and a batch of T positions (d = 4), and settings that name them.
  job::BackwardSettings job_on(std::int64_t v, std::int64_t t) const {
    auto const table = test::table_for(v, 4);
    io::save_table(path("t.h5"), table.data(), make_config(v, 4, Options{}));
    write_batch("b.h5", v, t);
    job::BackwardSettings s;
    s.table = path("t.h5");
    s.batch = path("b.h5");
    s.out = path("r.h5");
    return s;
  }
  fs::path dir_;
};

// Which plan ran is one answer: the run file records the plan of the kernels' regions,
// where the old rule (plan_for(min(microbatch, T))) named scan for scaled and listed
// calls that sorted, and atomic for mode fast with scaling, which runs identical.
TEST_F(Job, PlanUsedIsThePlanTheKernelsRan) {
  std::int64_t const v = 4000, t = 2000;
  auto const table = test::table_for(v, 4);
  io::save_table(path("t.h5"), table.data(), make_config(v, 4, Options{}));
  write_batch("b.h5", v, t);
  int checked = 0;
  for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
    for (auto plan : {Plan::automatic, Plan::scan, Plan::sort, Plan::bucket})
      for (auto scale : {FreqScale::none, FreqScale::call, FreqScale::batch})
        for (std::int64_t microbatch : {t, std::int64_t{250}}) {  // one call; calls of 250 <= V / 8: listed rows
          std::string const what = std::string(to_string(mode)) + " " + std::string(to_string(plan)) + " " +
                                   std::string(to_string(scale)) + " microbatch " + std::to_string(microbatch);
          SCOPED_TRACE(what);
          job::BackwardSettings s;
          s.table = path("t.h5");
          s.batch = path("b.h5");
          s.out = path("r" + std::to_string(checked) + ".h5");
          s.mode = mode;
          s.plan = plan;
          s.scale_grad_by_freq = scale;
          s.microbatch = microbatch;
          plans_seen().clear();
          job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
          auto const run = io::read_run_header(s.out);
          EXPECT_EQ(plans_seen(), std::set<std::string>{run.plan_used});
          ++checked;
        }
  EXPECT_EQ(checked, 72);
}

// The job is its phases, in order, each in a region of its own (Kokkos Tools see them).
TEST_F(Job, RunsItsPhasesInOrder) {
  auto const s = job_on(500, 3000);
  phases_seen().clear();
  job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
  EXPECT_EQ(phases_seen(), (std::vector<std::string>{"resolve", "open_inputs", "resume", "fold", "publish"}));
}

// The report, the run file's header and the checkpoints come from one record: they
// agree, and checkpoints taken on the way change no bit of the result.
TEST_F(Job, ReportRunFileAndCheckpointsAgree) {
  auto s = job_on(500, 200000);
  s.mode = Mode::deterministic;
  s.microbatch = 1000;
  auto const once = job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
  auto const run = io::read_run_header(s.out);
  EXPECT_EQ(once.gradient_sha256, run.gradient_sha256);
  EXPECT_EQ(once.plan_used, run.plan_used);
  EXPECT_EQ(once.mode, to_string(run.numeric_mode));
  EXPECT_EQ(once.backend, run.backend);
  EXPECT_EQ(once.threads, run.threads);
  EXPECT_EQ(once.positions, run.positions);
  EXPECT_EQ(once.microbatches, run.microbatches);
  EXPECT_EQ(once.microbatch_size, run.microbatch_size);
  EXPECT_EQ(once.microbatches, 200);
  s.out = path("r_checkpointed.h5");
  s.checkpoint_every = 70000;
  phases_seen().clear();
  auto const checkpointed = job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
  EXPECT_EQ(phases_seen(), (std::vector<std::string>{"resolve", "open_inputs", "resume", "fold", "checkpoint",
                                                     "checkpoint", "publish"}));  // at 70,000 and 140,000
  EXPECT_EQ(checkpointed.gradient_sha256, once.gradient_sha256);
  EXPECT_EQ(checkpointed.microbatches, once.microbatches);
  EXPECT_FALSE(fs::exists(s.out + ".checkpoint"));  // the finished job removed its own
}

// The job is a library: its errors name settings by their members, or as the
// caller's observer spells them (the CLI: by its flags), and write nothing.
TEST_F(Job, ErrorsNameSettingsAsTheCallerDoes) {
  auto s = job_on(100, 500);
  s.microbatch = 0;
  auto const message = [&](job::Observer const& observer) {
    try {
      job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s, observer);
    } catch (InvalidArgument const& e) {
      EXPECT_EQ(e.argument(), "microbatch");
      return std::string(e.message());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({}), "microbatch must be at least 1, got 0");
  job::Observer flags;
  flags.name = [](std::string const& setting) { return "--" + setting; };
  EXPECT_EQ(message(flags), "--microbatch must be at least 1, got 0");
  s.microbatch = 100;
  s.out = s.table;
  try {
    job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
    ADD_FAILURE() << "an output over the table was accepted";
  } catch (InvalidArgument const& e) {
    EXPECT_EQ(std::string(e.message()).rfind("out " + s.out + " is the same file as table " + s.table, 0), 0u)
        << e.message();
  }
  EXPECT_FALSE(fs::exists(path("r.h5")));
}

}  // namespace
}  // namespace kembed
