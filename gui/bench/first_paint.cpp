// kembed-inspector-bench: how long a large run takes to open and paint, and how much
// memory the inspector holds, against reading the same gradient with kembed::io (what
// the inspector did before it painted from the run's summary), measured in the same
// run: the machine is shared, so the ratio is the figure to compare.
//   kembed-inspector-bench [ROWS COLS]...   (default 1000000 128 10000000 128; headless)
// Each step runs in a process of its own, so that each peak RSS is that step's alone.
// Prints CSV: rows, cols, gradient_gib, read_gradient_s, first_paint_s, ratio,
// rss_at_paint_mib, rss_after_scan_mib, scan_s.
#include "main_window.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/run_file.hpp>

#include <QApplication>
#include <QImage>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double peak_rss_mib() {  // VmHWM: the most this process has held
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  return -1;
}

// Runs `step` in a child process and returns what it wrote to its pipe.
template <class Step>
std::string in_child(Step&& step) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("no pipe");
  std::fflush(stdout);
  pid_t const pid = fork();
  if (pid == 0) {
    close(fds[0]);
    try {  // the child never unwinds into the parent's code (nor removes its folder)
      std::string const out = step();
      if (write(fds[1], out.data(), out.size()) < 0) _exit(1);
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buffer[256];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, std::size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty()) throw std::runtime_error("a step failed");
  return out;
}

// The bench's own folder, removed however the bench ends (a failed step throws).
struct Scratch {
  std::filesystem::path dir;
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

int bench(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  try {
    return bench(argc, argv);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "kembed-inspector-bench: %s\n", e.what());
    return 1;
  }
}

namespace {

int bench(int argc, char** argv) {
  std::vector<std::pair<std::int64_t, std::int64_t>> sizes;
  for (int i = 1; i + 1 < argc; i += 2) sizes.emplace_back(std::atoll(argv[i]), std::atoll(argv[i + 1]));
  if (sizes.empty()) sizes = {{1000000, 128}, {10000000, 128}};
  namespace fs = std::filesystem;
  Scratch const scratch{fs::temp_directory_path() / ("kembed-inspector-bench-" + std::to_string(::getpid()))};
  auto const& dir = scratch.dir;
  fs::create_directories(dir);
  std::printf("rows,cols,gradient_gib,read_gradient_s,first_paint_s,ratio,rss_at_paint_mib,rss_after_scan_mib,scan_s\n");
  for (auto [rows, cols] : sizes) {
    auto const path = (dir / ("run-" + std::to_string(rows) + "x" + std::to_string(cols) + ".h5")).string();
    in_child([&, rows = rows, cols = cols] {  // a run as kembed backward writes it, summary included
      kembed::io::RunFile run;
      run.rows = rows, run.cols = cols;
      run.gradient = kembed::synthetic::uniform_floats(rows * cols, 5);
      run.counts.assign(std::size_t(rows), 0);
      for (auto id : kembed::synthetic::zipf_ids(rows, 2 * rows, 1.1, 6)) ++run.counts[std::size_t(id)];
      run.positions = 2 * rows;  // every position counts once
      run.run_id = "bench";
      kembed::io::write_run(path, run);
      return std::string("ok");
    });
    double read_best = 1e30, paint_best = 1e30, rss_paint = 0, rss_scan = 0, scan_s = 0;
    for (int round = 0; round < 2; ++round) {  // interleaved, best of two each
      read_best = std::min(read_best, std::atof(in_child([&] {
                                                  auto const t0 = clock_type::now();
                                                  auto const run = kembed::io::read_run(path, true, false);
                                                  return std::to_string(seconds_since(t0));
                                                }).c_str()));
      auto const out = in_child([&] {
        qputenv("QT_QPA_PLATFORM", "offscreen");
        int qargc = 1;
        QApplication app(qargc, argv);
        auto const t0 = clock_type::now();
        kembed::inspector::MainWindow window;
        window.setQuiet(true);
        window.setRemembering(false);  // a bench's temporary run is not the user's recent file
        if (!window.open(QString::fromStdString(path), kembed::inspector::MainWindow::Slot::A)) return std::string();
        window.setView("gradient");
        window.resize(1200, 800);
        window.show();
        QApplication::processEvents();
        QImage const image = window.grab().toImage();
        if (image.isNull() || window.gradientView()->bands() < 100) return std::string();
        double const paint = seconds_since(t0), rss = peak_rss_mib();
        window.waitForChecks();  // the scan: SHA-256 check and per-row norms
        char text[128];
        std::snprintf(text, sizeof text, "%.4f %.1f %.1f %.3f", paint, rss, peak_rss_mib(), seconds_since(t0) - paint);
        return std::string(text);
      });
      double paint = 0, rp = 0, rs = 0, sc = 0;
      if (std::sscanf(out.c_str(), "%lf %lf %lf %lf", &paint, &rp, &rs, &sc) != 4)
        throw std::runtime_error("a paint step printed '" + out + "'");
      if (paint < paint_best) paint_best = paint, scan_s = sc;
      rss_paint = std::max(rss_paint, rp), rss_scan = std::max(rss_scan, rs);
    }
    fs::remove(path);
    std::printf("%lld,%lld,%.2f,%.3f,%.3f,%.3f,%.0f,%.0f,%.2f\n", (long long)rows, (long long)cols,
                double(rows * cols * 4) / double(1 << 30), read_best, paint_best, paint_best / read_best, rss_paint,
                rss_scan, scan_s);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
