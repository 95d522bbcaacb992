// The inspector, headless (QT_QPA_PLATFORM=offscreen): its models against a run
// file made by `kembed backward`, exact histograms, diff verdicts, rendered views
// (pixels), bad files, and the time to first paint for a million rows.
#include "main_window.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/run_file.hpp>

#include <gtest/gtest.h>

#include <QApplication>
#include <QImage>
#include <QTableView>

#include <chrono>
#include <cstdlib>
#include <filesystem>

namespace kembed::inspector {
namespace {

namespace fs = std::filesystem;

std::string run_file() {
  char const* path = std::getenv("KEMBED_TEST_RUN");
  return path ? path : "";
}

std::string work_dir() {
  auto dir = fs::temp_directory_path() / ("kembed-inspector-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir.string();
}

// Pixels of an image close to a colour (each channel within `tolerance`).
int pixels_near(QImage const& image, QColor want, int tolerance = 12) {
  int n = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) {
      QColor const c = image.pixelColor(x, y);
      if (std::abs(c.red() - want.red()) <= tolerance && std::abs(c.green() - want.green()) <= tolerance &&
          std::abs(c.blue() - want.blue()) <= tolerance)
        ++n;
    }
  return n;
}

// Pixels with real colour (not white, grey or black): heatmap cells, bars, points.
int coloured_pixels(QImage const& image) {
  int n = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) {
      QColor const c = image.pixelColor(x, y);
      n += std::max({c.red(), c.green(), c.blue()}) - std::min({c.red(), c.green(), c.blue()}) > 40;
    }
  return n;
}

QImage render(MainWindow& window, QString const& view) {
  window.setView(view);
  window.resize(1200, 800);
  window.show();
  QApplication::processEvents();
  window.gradientView()->rebuild();
  QApplication::processEvents();
  return window.currentView()->grab().toImage();
}

class Inspector : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(run_file().empty()) << "KEMBED_TEST_RUN names a run made by kembed backward"; }
  // A copy of the run with one row changed by one ULP in one column, and an identical copy.
  std::pair<std::string, std::string> variants(std::int64_t row) {
    auto run = io::read_run(run_file());
    auto const dir = work_dir();
    io::write_run(dir + "/same.h5", run);
    float& x = run.gradient[std::size_t(row * run.cols + 2)];
    x = std::nextafter(x, 1e30f);
    io::write_run(dir + "/one_row.h5", run);
    return {dir + "/same.h5", dir + "/one_row.h5"};
  }
};

TEST_F(Inspector, ModelsHoldTheRunFilesCountsAndSortRight) {
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A)) << window.lastError().toStdString();
  auto const run = io::read_run(run_file());
  auto* model = window.countsView()->model();
  ASSERT_EQ(model->rowCount(), int(run.rows));
  for (int r = 0; r < model->rowCount(); ++r) {
    ASSERT_EQ(model->rowAt(r), r);
    ASSERT_EQ(model->data(model->index(r, RowTableModel::Count), Qt::DisplayRole).toLongLong(),
              run.counts[std::size_t(r)]);
  }
  model->sort(RowTableModel::Count, Qt::DescendingOrder);
  for (int r = 1; r < model->rowCount(); ++r)
    ASSERT_GE(run.counts[std::size_t(model->rowAt(r - 1))], run.counts[std::size_t(model->rowAt(r))]);
  // Equal counts keep ascending row ids (a stable sort).
  for (int r = 1; r < model->rowCount(); ++r)
    if (run.counts[std::size_t(model->rowAt(r - 1))] == run.counts[std::size_t(model->rowAt(r))])
      ASSERT_LT(model->rowAt(r - 1), model->rowAt(r));
  model->sort(RowTableModel::RowId, Qt::AscendingOrder);
  EXPECT_EQ(model->rowAt(0), 0);
  EXPECT_TRUE(model->csv().startsWith("row,count,row_norm,max_abs\n0,"));
}

TEST(Histogram, BinsAreExactAndHoldEveryRowOnce) {
  auto const ids = synthetic::zipf_ids(1000, 50000, 1.1, 3);
  std::vector<std::int64_t> counts(1000, 0);
  for (auto id : ids) ++counts[std::size_t(id)];
  for (bool logarithmic : {false, true})
    for (int bins : {1, 7, 20, 100}) {
      auto const h = count_histogram(counts, bins, logarithmic);
      std::int64_t total = 0;
      for (std::size_t i = 0; i < h.rows.size(); ++i) {
        total += h.rows[i];
        EXPECT_LT(h.lower[i], h.upper[i]);
        if (i) EXPECT_EQ(h.lower[i], h.upper[i - 1]) << "bins touch";
        std::int64_t in_bin = 0;
        for (auto c : counts) in_bin += c >= h.lower[i] && c < h.upper[i];
        EXPECT_EQ(in_bin, h.rows[i]);
      }
      EXPECT_EQ(total, 1000);
      EXPECT_LE(int(h.rows.size()), bins + 1) << "nothing silently rebinned into more bins";
      EXPECT_EQ(h.lower.front(), 0);
      if (!logarithmic)
        for (std::size_t i = 0; i < h.rows.size(); ++i) EXPECT_EQ(h.upper[i] - h.lower[i], h.upper[0] - h.lower[0]);
    }
}

TEST_F(Inspector, DiffVerdictsForAnIdenticalPairAndAOneRowDifference) {
  auto const [same, one_row] = variants(17);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString(same), MainWindow::Slot::B));
  EXPECT_TRUE(window.diffView()->summary().identical());
  EXPECT_TRUE(window.diffView()->verdict().startsWith("Bit-identical")) << window.diffView()->verdict().toStdString();
  EXPECT_EQ(window.diffView()->model()->rowCount(), 0);

  ASSERT_TRUE(window.open(QString::fromStdString(one_row), MainWindow::Slot::B));
  auto const& s = window.diffView()->summary();
  EXPECT_FALSE(s.identical());
  EXPECT_EQ(s.values.differing_rows, 1);
  EXPECT_EQ(s.values.differing_elements, 1);
  EXPECT_EQ(s.values.max_ulp, 1);
  ASSERT_EQ(window.diffView()->model()->rowCount(), 1);
  EXPECT_EQ(window.diffView()->model()->at(0).row, 17);
  EXPECT_TRUE(window.diffView()->verdict().startsWith("1 of ")) << window.diffView()->verdict().toStdString();
  // F6: the next differing row is selected everywhere, and its bits are shown.
  window.diffView()->nextDifferingRow();
  EXPECT_TRUE(window.diffView()->bitsText().contains("row 17:")) << window.diffView()->bitsText().toStdString();
  EXPECT_TRUE(window.diffView()->bitsText().contains("column    2")) << window.diffView()->bitsText().toStdString();
  EXPECT_TRUE(window.diffView()->bitsText().contains("1 ULPs"));
}

TEST_F(Inspector, RenderedViewsShowTheirContent) {
  auto const [same, one_row] = variants(40);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString(same), MainWindow::Slot::B));
  auto const counts = render(window, "counts");
  EXPECT_GT(pixels_near(counts, QColor(40, 100, 170)), 2000) << "histogram bars";
  auto const gradient = render(window, "gradient");
  EXPECT_GT(coloured_pixels(gradient), 20000) << "heatmap cells";
  auto const identical = render(window, "diff");
  EXPECT_EQ(pixels_near(identical, QColor(200, 0, 0), 30), 0) << "no differing row to mark";
  ASSERT_TRUE(window.open(QString::fromStdString(one_row), MainWindow::Slot::B));
  auto const differing = render(window, "diff");
  EXPECT_GT(pixels_near(differing, QColor(200, 0, 0), 30), 10) << "the differing row is marked";
  EXPECT_TRUE(counts.save(QString::fromStdString(work_dir() + "/counts.png")));
}

TEST_F(Inspector, ABadFileShowsAnErrorAndLeavesTheWindowUsable) {
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  auto const before = window.datasetA();
  auto const truncated = work_dir() + "/truncated.h5";
  fs::copy_file(run_file(), truncated, fs::copy_options::overwrite_existing);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  EXPECT_FALSE(window.open(QString::fromStdString(truncated), MainWindow::Slot::A));
  EXPECT_TRUE(window.lastError().contains("truncated")) << window.lastError().toStdString();
  EXPECT_EQ(window.datasetA(), before) << "the open run stays";
  EXPECT_FALSE(window.open("/no/such/run.h5", MainWindow::Slot::B));
  EXPECT_TRUE(window.lastError().contains("cannot be opened")) << window.lastError().toStdString();
  EXPECT_EQ(window.countsView()->model()->rowCount(), int(before->rows));
  auto const image = render(window, "counts");
  EXPECT_GT(pixels_near(image, QColor(40, 100, 170)), 2000);
}

// Acceptance: a 1,000,000 x 128 run opens and paints in under 2 seconds.
TEST(InspectorScale, AMillionRowsPaintInUnderTwoSeconds) {
  io::RunFile run;
  run.rows = 1000000;
  run.cols = 128;
  run.gradient = synthetic::uniform_floats(run.rows * run.cols, 5);
  auto const ids = synthetic::zipf_ids(run.rows, 2000000, 1.1, 6);
  run.counts.assign(std::size_t(run.rows), 0);
  for (auto id : ids) ++run.counts[std::size_t(id)];
  run.run_id = "million";
  auto const path = work_dir() + "/million.h5";
  io::write_run(path, run);
  run = {};
  double best = 1e9;
  for (int attempt = 0; attempt < 2; ++attempt) {  // the machine is shared: best of two
    auto const t0 = std::chrono::steady_clock::now();
    MainWindow window;
    window.setQuiet(true);
    ASSERT_TRUE(window.open(QString::fromStdString(path), MainWindow::Slot::A));
    window.setView("gradient");
    window.resize(1200, 800);
    window.show();
    QApplication::processEvents();
    QImage const image = window.grab().toImage();
    double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, seconds);
    EXPECT_GT(coloured_pixels(image), 20000);
  }
  std::printf("first paint of a 1,000,000 x 128 run: %.2f s (best of 2)\n", best);
  EXPECT_LT(best, 2.0);
  fs::remove(path);
}

}  // namespace
}  // namespace kembed::inspector

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  int const rc = RUN_ALL_TESTS();
  std::filesystem::remove_all(kembed::inspector::work_dir());
  return rc;
}
