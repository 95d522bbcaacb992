// kembed-io-bench: how long saving and loading a table takes, plain and with
// shuffle + deflate, against a baseline measured in the same run: writing the same
// bytes to a raw file (write + fsync) and reading them back.
//   kembed-io-bench [--rows V] [--dim d] [--dir DIR]      (default 1000000 x 128, /tmp)
#include <kembed/core/synthetic.hpp>
#include <kembed/io/table_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

using namespace kembed;
using clock_type = std::chrono::steady_clock;

static double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

static long long file_bytes(std::string const& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_size : -1;
}

// Drops the file's pages from the page cache so that loads read the disk's way.
static void evict(std::string const& p) {
  int fd = ::open(p.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

int main(int argc, char** argv) {
  long long v = 1000000, d = 128;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string const k = argv[i];
    if (k == "--rows")
      v = std::stoll(argv[i + 1]);
    else if (k == "--dim")
      d = std::stoll(argv[i + 1]);
    else if (k == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: kembed-io-bench [--rows V] [--dim d] [--dir DIR]\n");
      return 2;
    }
  }
  auto const table = synthetic::uniform_floats(v * d, 1);
  double const mib = double(v * d * 4) / (1 << 20);
  std::printf("table %lld x %lld float32 (%.0f MiB), files in %s\n", v, d, mib, dir.c_str());

  // Baseline: the same bytes through write + fsync, and read back.
  std::string const raw = dir + "/kembed-io-bench.raw";
  auto t0 = clock_type::now();
  {
    int fd = ::open(raw.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    char const* p = reinterpret_cast<char const*>(table.data());
    std::size_t left = table.size() * 4;
    while (left > 0) {
      auto const n = ::write(fd, p, left);
      if (n <= 0) return 3;
      p += n, left -= std::size_t(n);
    }
    ::fsync(fd);
    ::close(fd);
  }
  double const raw_write = seconds_since(t0);
  evict(raw);
  std::vector<float> back(table.size());
  t0 = clock_type::now();
  {
    int fd = ::open(raw.c_str(), O_RDONLY);
    char* p = reinterpret_cast<char*>(back.data());
    std::size_t left = back.size() * 4;
    while (left > 0) {
      auto const n = ::read(fd, p, left);
      if (n <= 0) return 3;
      p += n, left -= std::size_t(n);
    }
    ::close(fd);
  }
  double const raw_read = seconds_since(t0);
  ::unlink(raw.c_str());
  std::printf("%-26s %8.3f s write %8.3f s read   %7.0f MiB on disk\n", "raw bytes (baseline)", raw_write, raw_read,
              mib);

  for (bool deflate : {false, true}) {
    std::string const path = dir + (deflate ? "/kembed-io-bench-deflate.h5" : "/kembed-io-bench.h5");
    io::SaveOptions so;
    so.deflate = deflate;
    t0 = clock_type::now();
    io::save_table(path, table.data(), make_config(v, d, Options{}), so);
    double const save = seconds_since(t0);
    evict(path);
    t0 = clock_type::now();
    auto const loaded = io::load_table(path);
    double const load = seconds_since(t0);
    bool const same = std::memcmp(loaded.weight.data(), table.data(), table.size() * 4) == 0;
    std::printf("%-26s %8.3f s save  %8.3f s load   %7.0f MiB on disk   save %.2fx, load %.2fx the baseline%s\n",
                deflate ? "kembed table, deflate" : "kembed table, plain", save, load,
                double(file_bytes(path)) / (1 << 20), save / raw_write, load / raw_read, same ? "" : "   BITS DIFFER");
    ::unlink(path.c_str());
    if (!same) return 1;
  }
  return 0;
}
