// kembed-inspector-bench: how long a large run takes to open and paint, against
// reading the same file with kembed::io alone, measured in the same run (the machine
// is shared, so the ratio is the figure to compare).
//   kembed-inspector-bench [ROWS] [COLS]     (default 1,000,000 x 128; headless)
#include "main_window.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/run_file.hpp>

#include <QApplication>
#include <QImage>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", qgetenv("QT_QPA_PLATFORM").isEmpty() ? "offscreen" : qgetenv("QT_QPA_PLATFORM"));
  QApplication app(argc, argv);
  std::int64_t const rows = argc > 1 ? std::atoll(argv[1]) : 1000000, cols = argc > 2 ? std::atoll(argv[2]) : 128;
  namespace fs = std::filesystem;
  auto const dir = fs::temp_directory_path() / ("kembed-inspector-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto const path = (dir / "run.h5").string();
  {
    kembed::io::RunFile run;
    run.rows = rows, run.cols = cols;
    run.gradient = kembed::synthetic::uniform_floats(rows * cols, 5);
    run.counts.assign(std::size_t(rows), 0);
    for (auto id : kembed::synthetic::zipf_ids(rows, 2 * rows, 1.1, 6)) ++run.counts[std::size_t(id)];
    run.run_id = "bench";
    kembed::io::write_run(path, run);
  }
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
  double read_best = 1e9, paint_best = 1e9;
  for (int round = 0; round < 3; ++round) {  // interleaved, best of three each
    auto t0 = clock::now();
    auto const run = kembed::io::read_run(path, true, false);
    read_best = std::min(read_best, seconds(t0));
    t0 = clock::now();
    kembed::inspector::MainWindow window;
    window.setQuiet(true);
    if (!window.open(QString::fromStdString(path), kembed::inspector::MainWindow::Slot::A)) return 1;
    window.setView("gradient");
    window.resize(1200, 800);
    window.show();
    QApplication::processEvents();
    QImage const image = window.grab().toImage();
    if (image.isNull()) return 1;
    paint_best = std::min(paint_best, seconds(t0));
    window.waitForChecks();
  }
  fs::remove_all(dir);
  std::printf("rows,cols,read_run_s,open_and_paint_s,ratio\n%lld,%lld,%.3f,%.3f,%.2f\n", (long long)rows,
              (long long)cols, read_best, paint_best, paint_best / read_best);
  return 0;
}
