// Crash-safe saves: a failed or killed save leaves the old file and no temporary.
#include "io_fixture.hpp"

namespace kembed {
namespace {

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

}  // namespace
}  // namespace kembed
