// The inspector, headless (QT_QPA_PLATFORM=offscreen): its models against a run
// file made by `kembed backward`, exact histograms, diff verdicts, rendered views
// (pixels), bad files and damaged runs, and the heatmap's work per paint.
#include "main_window.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/describe.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>

#include <gtest/gtest.h>
#include <qcustomplot.h>

#include <hdf5.h>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QMouseEvent>
#include <QProcess>
#include <QSet>
#include <QSettings>
#include <QTableView>
#include <QTableWidget>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>

namespace kembed::inspector {
namespace {

namespace fs = std::filesystem;

std::string run_file() {
  char const* path = std::getenv("KEMBED_TEST_RUN");
  return path ? path : KEMBED_TEST_RUN_DEFAULT;
}

std::string work_dir() {
  auto dir = fs::temp_directory_path() / ("kembed-inspector-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir.string();
}

std::uint32_t test_bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
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
  // A copy of the run with `by` added to every value: every row differs.
  std::string shifted(std::string const& name, float by) {
    auto run = io::read_run(run_file());
    for (auto& x : run.gradient) x += by;
    io::write_run(work_dir() + "/" + name, run);
    return work_dir() + "/" + name;
  }
};

TEST_F(Inspector, ModelsHoldTheRunFilesCountsAndSortRight) {
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A)) << window.lastError().toStdString();
  window.waitForChecks();  // the window's scan reads through HDF5, which is not thread-safe
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
  EXPECT_TRUE(model->csv().startsWith("row,count,row_norm,max_abs,note\n0,"));
  EXPECT_TRUE(window.countsView()->leaveOutPadding()->isHidden()) << "this run has no padding row";
  auto const& provenance = window.datasetA()->provenance;
  EXPECT_NE(std::find(provenance.begin(), provenance.end(), std::pair<std::string, std::string>{"padding row", "none"}),
            provenance.end());
}

// On real text the padding row holds most positions and no gradient: wherever rows
// are listed or ranked it is named, and the histogram can leave it out.
TEST_F(Inspector, ThePaddingRowIsNamedWhereverRowsAreListed) {
  auto run = io::read_run(run_file());
  std::int64_t top = 0;
  for (std::int64_t r = 0; r < run.rows; ++r)
    if (run.counts[std::size_t(r)] > run.counts[std::size_t(top)]) top = r;
  run.padding_idx = top;
  for (std::int64_t c = 0; c < run.cols; ++c) run.gradient[std::size_t(top * run.cols + c)] = 0.0f;
  auto const padded = work_dir() + "/padded.h5";
  io::write_run(padded, run);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(padded), MainWindow::Slot::A)) << window.lastError().toStdString();
  auto* counts = window.countsView();
  QString const label = QString("%1 (padding)").arg(top);
  EXPECT_TRUE(counts->summaryText().contains(QString("row %1 is the padding row").arg(top)))
      << counts->summaryText().toStdString();
  ASSERT_GE(counts->topRows()->rowCount(), 1);
  EXPECT_EQ(counts->topRows()->item(0, 1)->text(), label) << "the top row by count is the padding row";
  EXPECT_EQ(counts->topRows()->item(0, 1)->data(Qt::UserRole).toLongLong(), top);
  auto* model = counts->model();
  EXPECT_EQ(model->data(model->index(int(top), RowTableModel::RowId), Qt::DisplayRole).toString(), label);
  EXPECT_EQ(model->data(model->index(int(top == 0), RowTableModel::RowId), Qt::DisplayRole).toString(),
            QString::number(top == 0));
  EXPECT_TRUE(model->csv().contains(QString("\n%1,%2,").arg(top).arg(run.counts[std::size_t(top)])));
  EXPECT_TRUE(model->csv().contains(",padding\n"));
  // One click leaves it out of the histogram, and one puts it back.
  ASSERT_FALSE(counts->leaveOutPadding()->isHidden());
  auto rows_in = [&] {
    std::int64_t n = 0;
    for (auto r : counts->histogram().rows) n += r;
    return n;
  };
  EXPECT_EQ(rows_in(), run.rows);
  counts->leaveOutPadding()->click();
  EXPECT_EQ(rows_in(), run.rows - 1);
  counts->leaveOutPadding()->click();
  EXPECT_EQ(rows_in(), run.rows);
  // Picking it marks its bar and says what it is.
  counts->showRow(top);
  ASSERT_EQ(counts->plot()->itemCount(), 2);
  auto* marker_text = qobject_cast<QCPItemText*>(counts->plot()->item(1));
  ASSERT_NE(marker_text, nullptr);
  EXPECT_TRUE(marker_text->text().contains("the padding row")) << marker_text->text().toStdString();
  auto const& provenance = window.datasetA()->provenance;
  EXPECT_NE(std::find(provenance.begin(), provenance.end(),
                      std::pair<std::string, std::string>{"padding row", std::to_string(top)}),
            provenance.end());
  // The diff against the run without a padding row names it in its row list.
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::B));
  window.waitForChecks();
  auto* diff = window.diffView()->model();
  int const at = diff->viewRowOf(top);
  ASSERT_GE(at, 0) << "the padding row differs";
  EXPECT_EQ(diff->data(diff->index(at, DiffTableModel::RowId), Qt::DisplayRole).toString(),
            QString("%1 (padding in a)").arg(top));
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
  window.waitForChecks();  // the verdict comes after both SHA-256 checks
  EXPECT_TRUE(window.diffView()->summary().identical());
  EXPECT_TRUE(window.diffView()->verdict().startsWith("Bit-identical")) << window.diffView()->verdict().toStdString();
  EXPECT_EQ(window.diffView()->model()->rowCount(), 0);

  ASSERT_TRUE(window.open(QString::fromStdString(one_row), MainWindow::Slot::B));
  window.waitForChecks();
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

// Recent files go where the settings say; tests point them at their own folder
// (main() below), so the suite never writes the user's ~/.config.
TEST(InspectorSettings, RecentFilesStayInTheTestsOwnFolder) {
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  EXPECT_TRUE(fs::exists(work_dir() + "/config/kembed/inspector.conf"));
  QSettings settings("kembed", "inspector");
  EXPECT_EQ(fs::path(settings.fileName().toStdString()).parent_path().parent_path(), fs::path(work_dir() + "/config"));
}

// `run` written to `path`, then one value of its gradient rewritten in place as h5py
// would, its gradient_sha256 left as it was: a run edited after it was written.
void write_edited_run(std::string const& path, io::RunFile run) {
  io::write_run(path, run);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "gradient", H5P_DEFAULT);
  run.gradient[0] += 1.0f;
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, run.gradient.data());
  H5Dclose(d);
  H5Fclose(f);
}

// The diff's rule: a run whose gradient no longer matches its stored SHA-256 is
// damaged; it is closed with an error and never given a verdict.
TEST_F(Inspector, ADamagedRunIsClosedAndNeverJudged) {
  auto const good = work_dir() + "/good.h5", edited = work_dir() + "/edited.h5";
  auto run = io::read_run(run_file());
  io::write_run(good, run);
  write_edited_run(edited, run);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(good), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString(edited), MainWindow::Slot::B));
  EXPECT_TRUE(window.diffView()->verdict().contains("Checking")) << window.diffView()->verdict().toStdString();
  window.waitForChecks();
  EXPECT_NE(window.datasetA(), nullptr) << "the good run stays open";
  EXPECT_EQ(window.datasetB(), nullptr) << "the damaged run is closed";
  EXPECT_TRUE(window.lastError().contains("is damaged")) << window.lastError().toStdString();
  EXPECT_FALSE(window.diffView()->verdict().contains("differ")) << window.diffView()->verdict().toStdString();
  EXPECT_FALSE(window.diffView()->verdict().contains("identical")) << window.diffView()->verdict().toStdString();
}

// A sparse run file of the same gradient opens, passes its SHA-256 check (over its
// listed rows), has the dense run's counts, rows and summary, and compares with the
// dense run as bit-identical.
TEST_F(Inspector, ASparseRunIsItsDenseGradient) {
  // The fixture's run references every row: this one leaves its first ten unreferenced.
  auto run = io::read_run(run_file());
  for (std::int64_t r = 0; r < 10; ++r) {
    run.positions -= run.counts[std::size_t(r)];
    run.counts[std::size_t(r)] = 0;
    std::fill_n(run.gradient.begin() + r * run.cols, run.cols, 0.0f);
  }
  auto const dense = work_dir() + "/dense_for_sparse.h5";
  io::write_run(dense, run);
  std::vector<std::int64_t> rows, counts;
  std::vector<float> values;
  for (std::int64_t r = 0; r < run.rows; ++r) {
    if (run.counts[std::size_t(r)] == 0) continue;  // the run's +0.0 rows
    rows.push_back(r);
    counts.push_back(run.counts[std::size_t(r)]);
    values.insert(values.end(), run.gradient.begin() + r * run.cols, run.gradient.begin() + (r + 1) * run.cols);
  }
  ASSERT_LT(rows.size(), std::size_t(run.rows)) << "the fixture's run should leave some rows unreferenced";
  auto sparse = run;
  std::int64_t const n = std::int64_t(rows.size());
  sparse.gradient_sha256 = io::sparse_gradient_sha256(rows.data(), values.data(), n, run.cols);
  auto const path = work_dir() + "/sparse.h5";
  io::write_sparse_run(path, sparse, io::SparseSlab{0, n, n, 0, run.rows, rows.data(), values.data(), counts.data()});
  auto const a = load(dense), b = load(path);
  EXPECT_TRUE(b.is_run());
  EXPECT_EQ(b.counts, a.counts);
  EXPECT_TRUE(scan(b).sha256_ok);
  auto const rows_b = b.read_rows(0, run.rows), rows_a = a.read_rows(0, run.rows);
  ASSERT_EQ(rows_b.size(), rows_a.size());
  EXPECT_EQ(std::memcmp(rows_b.data(), rows_a.data(), rows_a.size() * sizeof(float)), 0);
  EXPECT_TRUE(diff(a, b).identical());
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(dense), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString(path), MainWindow::Slot::B));
  window.waitForChecks();
  EXPECT_NE(window.datasetB(), nullptr) << window.lastError().toStdString();
  EXPECT_TRUE(window.diffView()->verdict().startsWith("Bit-identical")) << window.diffView()->verdict().toStdString();
}

// ---- issue 20's defects, each driven through the widgets as a user would ----------

// A synthetic run of rows x cols with Zipf counts, in the test's own folder; `edit`
// may change it before it is written.
std::string synthetic_run(std::string const& name, std::int64_t rows, std::int64_t cols,
                          std::function<void(io::RunFile&)> const& edit = {}) {
  io::RunFile run;
  run.rows = rows, run.cols = cols;
  run.gradient = synthetic::uniform_floats(rows * cols, 5);
  run.counts.assign(std::size_t(rows), 0);
  for (auto id : synthetic::zipf_ids(rows, 2 * rows, 1.1, 6)) ++run.counts[std::size_t(id)];
  run.run_id = name, run.backend = "Serial", run.threads = 1, run.plan = Plan::automatic, run.plan_used = "scan";
  run.numeric_mode = Mode::identical, run.positions = 2 * rows, run.microbatches = 1, run.microbatch_size = 2 * rows;
  if (edit) edit(run);
  auto const path = work_dir() + "/" + name;
  io::write_run(path, run);
  return path;
}

// In a real X window a resize is a request the window manager answers later.
void resize_now(QWidget& window, QSize size) {
  window.resize(size);
  QElapsedTimer waited;
  waited.start();
  while (window.size() != size && waited.elapsed() < 3000) QApplication::processEvents(QEventLoop::AllEvents, 20);
  QApplication::processEvents();
}

void show(MainWindow& window, QString const& view = "counts") {
  window.resize(1200, 800);
  window.setView(view);
  window.show();
  QApplication::processEvents();
}

// The fixture's run as A and `b` as B, both checked, `view` shown.
void open_pair(MainWindow& window, std::string const& b, QString const& view) {
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString(b), MainWindow::Slot::B));
  window.waitForChecks();
  show(window, view);
}

// Defect 1: switching to the Gradient tab (not --screenshot's forced rebuild) shows
// bands as tall as a pixel, not one band of every row.
TEST(InspectorDefects, TheHeatmapIsRightOnFirstView) {
  auto const path = synthetic_run("tall.h5", 200000, 4);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(path), MainWindow::Slot::A));
  show(window, "counts");
  window.setView("gradient");  // as a click on the tab does
  QApplication::processEvents();
  EXPECT_GT(window.gradientView()->bands(), 200) << window.gradientView()->infoText().toStdString();
  window.waitForChecks();
}

// Defect 2: the picked row's marker moves with its count when the bins change.
TEST_F(Inspector, ThePickedRowsMarkerFollowsTheBins) {
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  show(window);
  auto* counts = window.countsView();
  auto const& data = *window.datasetA();
  // A row whose count falls in different bins with logarithmic and with linear bins.
  auto index_in = [](Histogram const& h, std::int64_t c) {
    return std::upper_bound(h.lower.begin(), h.lower.end(), c) - h.lower.begin();
  };
  auto const log_h = count_histogram(data.counts, 20, true), lin_h = count_histogram(data.counts, 20, false);
  std::int64_t row = -1;
  for (std::int64_t r = 0; r < data.rows && row < 0; ++r)
    if (index_in(log_h, data.counts[std::size_t(r)]) != index_in(lin_h, data.counts[std::size_t(r)])) row = r;
  ASSERT_GE(row, 0);
  auto bin_of = [&](std::int64_t c) {
    auto const& h = counts->histogram();
    return double(std::upper_bound(h.lower.begin(), h.lower.end(), c) - h.lower.begin() - 1);
  };
  window.selectRow(row);
  ASSERT_EQ(counts->markedBin(), bin_of(data.counts[std::size_t(row)]));
  counts->findChild<QCheckBox*>("log_bins")->click();  // unticks "logarithmic bins"
  EXPECT_EQ(counts->markedBin(), bin_of(data.counts[std::size_t(row)]));
  EXPECT_NE(counts->markedBin(), -1.0);
}

// Defect 3: F6 three times leaves one selected (and painted) row in the diff table.
TEST_F(Inspector, F6LeavesOneSelectedRow) {
  auto const dir = work_dir();
  auto run = io::read_run(run_file());
  for (std::int64_t r : {3, 9, 20, 31}) run.gradient[std::size_t(r * run.cols)] += 1.0f;
  io::write_run(dir + "/four_rows.h5", run);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString(dir + "/four_rows.h5"), MainWindow::Slot::B));
  window.waitForChecks();
  show(window, "diff");
  auto* table = window.diffView()->findChild<QTableView*>("differing_rows");
  ASSERT_NE(table, nullptr);
  // The table repaints the rows whose selection changed when its selection model says
  // so; a model that changes silently leaves the old rows painted as selected.
  int told = 0;
  QObject::connect(table->selectionModel(), &QItemSelectionModel::selectionChanged, [&] { ++told; });
  for (int i = 0; i < 3; ++i) window.diffView()->nextDifferingRow();
  QApplication::processEvents();
  EXPECT_EQ(told, 3) << "each F6 tells the table what to repaint";
  auto const selected = table->selectionModel()->selectedRows();
  ASSERT_EQ(selected.size(), 1);
  EXPECT_EQ(window.diffView()->model()->at(selected[0].row()).row, 20);
  // What is painted: a row drawn with the highlight colour is a selected row.
  QImage const image = table->viewport()->grab().toImage();
  QColor const highlight = table->palette().color(QPalette::Active, QPalette::Highlight);
  int painted = 0;
  for (int r = 0; r < table->model()->rowCount(); ++r) {
    int const y = table->rowViewportPosition(r) + table->rowHeight(r) / 2;
    int const x = table->columnViewportPosition(1) + 4;
    if (y >= 0 && y < image.height() && x < image.width())
      painted += pixels_near(image.copy(x, y, 1, 1), highlight, 30) + pixels_near(image.copy(x, y, 1, 1),
                                                                                   table->palette().color(QPalette::Inactive, QPalette::Highlight), 30) > 0;
  }
  EXPECT_EQ(painted, 1);
}

// Defect 8 (the last): the row a person picked stays picked when another B is
// opened. The table is rebuilt for the new comparison and, as the file dialog
// closes, gets the focus back with no current row: Qt then made its first row
// current, and that read as a pick of it.
TEST_F(Inspector, OpeningAnotherBKeepsThePickedRow) {
  QString const b1 = QString::fromStdString(shifted("b1.h5", 1.0f));
  QString const b2 = QString::fromStdString(shifted("b2.h5", 2.0f));
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(b1, MainWindow::Slot::B));
  window.waitForChecks();
  show(window, "diff");
  window.activateWindow();
  QApplication::processEvents();
  auto* table = window.diffView()->findChild<QTableView*>("differing_rows");
  ASSERT_NE(table, nullptr);
  ASSERT_GT(table->model()->rowCount(), 20);
  QPoint const at = table->visualRect(table->model()->index(8, 1)).center();
  QMouseEvent press(QEvent::MouseButtonPress, at, table->viewport()->mapToGlobal(at), Qt::LeftButton, Qt::LeftButton,
                    Qt::NoModifier);
  QMouseEvent release(QEvent::MouseButtonRelease, at, table->viewport()->mapToGlobal(at), Qt::LeftButton, Qt::NoButton,
                      Qt::NoModifier);
  QApplication::sendEvent(table->viewport(), &press);
  QApplication::sendEvent(table->viewport(), &release);
  QApplication::processEvents();
  auto picked = [&] {
    auto const rows = table->selectionModel()->selectedRows();
    return rows.size() == 1 ? window.diffView()->model()->at(rows[0].row()).row : std::int64_t(-1);
  };
  std::int64_t const row = window.diffView()->model()->at(8).row;
  ASSERT_EQ(picked(), row);
  table->setFocus();
  // What Compare with... does: a dialog takes the focus, B is opened, the focus comes back.
  QDialog dialog(&window);
  dialog.show();
  dialog.activateWindow();
  dialog.setFocus();
  QApplication::processEvents();
  ASSERT_TRUE(window.open(b2, MainWindow::Slot::B));
  dialog.hide();
  window.activateWindow();
  table->setFocus();
  window.waitForChecks();
  QApplication::processEvents();
  EXPECT_EQ(picked(), row) << "the picked row, not the table's first";
  EXPECT_TRUE(window.diffView()->bitsText().startsWith(QString("row %1:").arg(row)))
      << window.diffView()->bitsText().toStdString();
  auto* counts = window.countsView()->findChild<QTableView*>("row_table");
  ASSERT_NE(counts, nullptr);
  auto const in_counts = counts->selectionModel()->selectedRows();
  ASSERT_EQ(in_counts.size(), 1);
  EXPECT_EQ(counts->model()->index(in_counts[0].row(), 0).data().toString().section(' ', 0, 0), QString::number(row))
      << "the Counts view follows the same row";
}

// --heatmap in a window: what it asks for is shown once the checks and the
// comparison are made (they run in the background), unless a person chose first.
TEST_F(Inspector, TheHeatmapAskedForIsShownOnceItCanBe) {
  auto const [same, one_row] = variants(17);
  for (bool person_chooses : {false, true}) {
    MainWindow window;
    window.setQuiet(true);
    ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
    ASSERT_TRUE(window.open(QString::fromStdString(one_row), MainWindow::Slot::B));
    auto* view = window.gradientView();
    view->requestShow(GradientView::Show::Difference);
    EXPECT_EQ(view->shown(), GradientView::Show::A) << "no comparison yet";
    if (person_chooses) view->setShow(GradientView::Show::A);
    window.waitForChecks();
    QApplication::processEvents();
    EXPECT_EQ(view->shown(), person_chooses ? GradientView::Show::A : GradientView::Show::Difference);
  }
}

// Defect 8: at the window's least size every view is whole: the Count column holds
// its largest count, the tables keep rows in view (a splitter squeezed the differing
// rows to nothing), and the colour bars' and axes' labels fit along them.
TEST_F(Inspector, AtTheLeastSizeEveryViewIsWhole) {
  MainWindow window;
  open_pair(window, shifted("b.h5", 1.0f), "counts");
  window.resize(100, 100);
  QApplication::processEvents();
  EXPECT_EQ(window.size(), MainWindow::least_size);
  auto rows_in_view = [](QTableView* table) {
    return table->viewport()->height() / table->verticalHeader()->defaultSectionSize();
  };
  auto label_fits = [](QCPAxis* axis, char const* what) {
    int const need = QFontMetrics(axis->labelFont()).horizontalAdvance(axis->label());
    EXPECT_LE(need, axis->axisRect()->height()) << what << ": '" << axis->label().toStdString() << "'";
  };
  auto* counts = window.countsView()->findChild<QTableView*>("row_table");
  ASSERT_NE(counts, nullptr);
  QString const largest =
      QString::number(*std::max_element(window.datasetA()->counts.begin(), window.datasetA()->counts.end()));
  EXPECT_GE(counts->columnWidth(1), counts->fontMetrics().horizontalAdvance(largest));
  EXPECT_LE(counts->columnViewportPosition(1) + counts->columnWidth(1), counts->viewport()->width()) << "Count is cut";
  EXPECT_GE(rows_in_view(counts), 10);

  window.setView("gradient");
  window.gradientView()->setShow(GradientView::Show::SideBySide);
  QApplication::processEvents();
  auto* plot = window.gradientView()->plot();
  plot->replot();
  int scales = 0;
  for (auto* element : plot->plotLayout()->elements(false))
    if (auto* scale = qobject_cast<QCPColorScale*>(element)) label_fits(scale->axis(), "colour bar"), ++scales;
  EXPECT_EQ(scales, 2) << "A and B's, and A - B's";
  EXPECT_GE(plot->axisRect(0)->height(), 200);

  window.setView("diff");
  QApplication::processEvents();
  auto* differing = window.diffView()->findChild<QTableView*>("differing_rows");
  auto* provenance = window.diffView()->findChild<QTableView*>("provenance");
  ASSERT_TRUE(differing && provenance);
  EXPECT_GE(rows_in_view(differing), 4);
  EXPECT_GE(rows_in_view(provenance), 4);
  window.diffView()->plot()->replot();
  label_fits(window.diffView()->plot()->yAxis, "the Diff plot's axis");

  window.setView("columns");
  QApplication::processEvents();
  auto* columns = window.columnsView()->table();
  EXPECT_GE(rows_in_view(columns), 3);
  window.columnsView()->plot()->replot();
  label_fits(window.columnsView()->plot()->yAxis, "the Columns plot's axis");
  window.waitForChecks();
}

// Defect 4: going to a row whose bits fill a page keeps the window's size.
TEST(InspectorDefects, GoingToARowKeepsTheWindowsSize) {
  auto const a = synthetic_run("wide_a.h5", 500, 128);
  auto const b = synthetic_run("wide_b.h5", 500, 128, [](io::RunFile& run) {
    for (std::int64_t c = 0; c < run.cols; ++c) run.gradient[std::size_t(7 * run.cols + c)] *= 2.0f;
  });
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(a), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString(b), MainWindow::Slot::B));
  window.waitForChecks();
  show(window, "diff");
  QSize const before = window.size();
  window.selectRow(7);
  QApplication::processEvents();
  QApplication::processEvents();
  EXPECT_LE(window.minimumSizeHint().height(), 800) << "the bits panel scrolls instead";
  EXPECT_TRUE(window.diffView()->bitsText().contains("column  127") ||
              window.diffView()->bitsText().contains("more columns"));
  EXPECT_EQ(window.size(), before);
}

// Defect 5: a run is not compared with a table (kembed diff refuses the pair too).
TEST_F(Inspector, ARunIsNotComparedWithATable) {
  auto const table = (fs::path(run_file()).parent_path() / "t.h5").string();
  ASSERT_EQ(io::file_format(table), io::table_format);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  EXPECT_FALSE(window.open(QString::fromStdString(table), MainWindow::Slot::B));
  EXPECT_TRUE(window.lastError().contains("a table file")) << window.lastError().toStdString();
  EXPECT_EQ(window.datasetB(), nullptr);
  MainWindow other;
  other.setQuiet(true);
  ASSERT_TRUE(other.open(QString::fromStdString(table), MainWindow::Slot::A));
  EXPECT_FALSE(other.open(QString::fromStdString(run_file()), MainWindow::Slot::B));
  EXPECT_EQ(other.datasetB(), nullptr);
  // A run replacing the table as A closes a B that would no longer match.
  ASSERT_TRUE(other.open(QString::fromStdString(table), MainWindow::Slot::B));
  ASSERT_TRUE(other.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  EXPECT_EQ(other.datasetB(), nullptr);
  other.waitForChecks();
  window.waitForChecks();
}

// Defect 6: the gradient's CSV holds every row in view, with a header of the same width.
TEST(InspectorDefects, GradientCsvHoldsEveryRowAskedFor) {
  std::int64_t const rows = 120000, cols = 3;
  auto const path = synthetic_run("csv.h5", rows, cols);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(path), MainWindow::Slot::A));
  show(window, "gradient");
  auto const out = work_dir() + "/gradient.csv";
  ASSERT_TRUE(window.exportCsvTo(QString::fromStdString(out))) << window.lastError().toStdString();
  window.waitForChecks();  // before reading the file here: HDF5 is not thread-safe
  auto const run = io::read_run(path);
  std::ifstream in(out);
  std::string line;
  std::int64_t n = 0;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(std::count(line.begin(), line.end(), ','), cols) << line;
  while (std::getline(in, line)) {
    ASSERT_EQ(std::count(line.begin(), line.end(), ','), cols) << "line " << n;
    auto const fields = QString::fromStdString(line).split(',');
    ASSERT_EQ(fields[0].toLongLong(), n);
    float const v = fields[2].toFloat();
    ASSERT_EQ(std::memcmp(&v, &run.gradient[std::size_t(n * cols + 1)], 4), 0) << "row " << n;
    ++n;
  }
  EXPECT_EQ(n, rows);
  // Cancelled half way: nothing is left at the path, and a file there stays as it was.
  { std::ofstream(out) << "keep me\n"; }
  EXPECT_FALSE(window.exportCsvTo(QString::fromStdString(out), [](double done) { return done < 0.5; }));
  std::ifstream again(out);
  std::getline(again, line);
  EXPECT_EQ(line, "keep me");
  window.waitForChecks();
}

// Issue 40, defect 6: a CSV export canceled half way is no error (no dialog, no red
// message): the status bar says it was canceled, and nothing is written.
TEST(InspectorDefects, ACanceledExportIsNoError) {
  auto const path = synthetic_run("cancel.h5", 20000, 3);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(path), MainWindow::Slot::A));
  show(window, "gradient");
  auto const out = work_dir() + "/canceled.csv";
  EXPECT_FALSE(window.exportCsvTo(QString::fromStdString(out), [](double done) { return done < 0.5; }));
  EXPECT_TRUE(window.lastError().isEmpty()) << window.lastError().toStdString();
  EXPECT_TRUE(window.statusText().contains("canceled.csv: export canceled, nothing written"))
      << window.statusText().toStdString();
  EXPECT_FALSE(fs::exists(out));
  window.waitForChecks();
}

// Issue 40, defect 5: the recent list keeps only files that open: one gone since
// (opened from the list: "No such file") and one that failed its check leave it.
TEST_F(Inspector, TheRecentListDropsFilesThatFail) {
  auto const gone = work_dir() + "/gone.h5", edited = work_dir() + "/edited_recent.h5";
  auto run = io::read_run(run_file());
  io::write_run(gone, run);
  write_edited_run(edited, run);
  auto recent = [] { return QSettings("kembed", "inspector").value("recent").toStringList(); };
  auto listed = [&](std::string const& p) {
    return recent().contains(QFileInfo(QString::fromStdString(p)).absoluteFilePath());
  };
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(gone), MainWindow::Slot::A));
  window.waitForChecks();
  ASSERT_TRUE(listed(gone));
  fs::remove(gone);
  QAction* again = nullptr;  // File > Open recent > gone.h5
  for (auto* action : window.findChildren<QAction*>())
    if (action->text() == QFileInfo(QString::fromStdString(gone)).absoluteFilePath()) again = action;
  ASSERT_NE(again, nullptr);
  again->trigger();
  EXPECT_FALSE(window.lastError().isEmpty());
  EXPECT_FALSE(listed(gone)) << "a file that is gone leaves the list";
  ASSERT_TRUE(window.open(QString::fromStdString(edited), MainWindow::Slot::A));
  EXPECT_TRUE(listed(edited));
  window.waitForChecks();
  QApplication::processEvents();
  EXPECT_EQ(window.datasetA(), nullptr) << "the edited run failed its check";
  EXPECT_FALSE(listed(edited)) << "a file that failed its check leaves the list";
}

// Issue 40, defect 8: a table's Counts tab has no empty plot with live controls (a
// table has no counts); a run opened after it gets them back.
TEST_F(Inspector, ATablesCountsTabOffersNoCounts) {
  auto const table = (fs::path(run_file()).parent_path() / "t.h5").string();
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(table), MainWindow::Slot::A));
  show(window, "counts");
  auto* counts = window.countsView();
  EXPECT_TRUE(counts->plot()->isHidden());
  EXPECT_TRUE(counts->topRows()->isHidden());
  EXPECT_FALSE(counts->findChild<QCheckBox*>("log_bins")->isEnabled());
  EXPECT_TRUE(counts->summaryText().contains("has no counts")) << counts->summaryText().toStdString();
  window.waitForChecks();
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  QApplication::processEvents();
  EXPECT_FALSE(counts->plot()->isHidden());
  EXPECT_TRUE(counts->findChild<QCheckBox*>("log_bins")->isEnabled());
  window.waitForChecks();
}

// Issue 40, defect 8 (three of its smaller ones): each menu's mnemonics are its own
// (File had two C's), the views have keys (Ctrl+1..5, Ctrl+Tab, Ctrl+Shift+Tab, in
// F1 too), and file dialogs open in the open run's folder.
TEST_F(Inspector, MenusKeysAndDialogsFitTheirUse) {
  MainWindow window;
  window.setQuiet(true);
  auto mnemonic = [](QString const& text) {
    auto const at = text.indexOf('&');
    return at >= 0 && at + 1 < text.size() ? text[at + 1].toLower() : QChar();
  };
  QList<QChar> menus;
  for (auto* action : window.menuBar()->actions()) {
    menus << mnemonic(action->text());
    QList<QChar> seen;
    for (auto* item : action->menu()->actions()) {
      if (item->isSeparator()) continue;
      auto const m = mnemonic(item->text());
      EXPECT_FALSE(m.isNull()) << item->text().toStdString();
      EXPECT_FALSE(seen.contains(m)) << action->text().toStdString() << " > " << item->text().toStdString();
      seen << m;
    }
  }
  EXPECT_EQ(QSet<QChar>(menus.begin(), menus.end()).size(), menus.size());
  auto by_key = [&](QKeySequence key) -> QAction* {
    for (auto* action : window.findChildren<QAction*>())
      if (action->shortcuts().contains(key)) return action;
    return nullptr;
  };
  show(window, "counts");
  QWidget* const order[] = {window.countsView(), window.gradientView(), window.columnsView(), window.diffView(),
                            window.infoView()};
  for (int i = 0; i < 5; ++i) {
    auto* key = by_key(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
    ASSERT_NE(key, nullptr) << "Ctrl+" << i + 1;
    key->trigger();
    EXPECT_EQ(window.currentView(), order[i]) << "Ctrl+" << i + 1;
  }
  auto* next = by_key(QKeySequence(Qt::CTRL | Qt::Key_Tab));
  auto* back = by_key(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Tab));
  ASSERT_NE(next, nullptr);
  ASSERT_NE(back, nullptr);
  next->trigger();
  EXPECT_EQ(window.currentView(), order[0]) << "after the last view, the first";
  back->trigger();
  EXPECT_EQ(window.currentView(), order[4]);
  for (char const* key : {"Ctrl+1..5", "Ctrl+Tab", "Ctrl+Shift+Tab"})
    EXPECT_TRUE(window.keysText().contains(key)) << key;
  EXPECT_TRUE(window.dialogFolder().isEmpty()) << "no file: the working directory";
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  EXPECT_EQ(window.dialogFolder(), QFileInfo(QString::fromStdString(run_file())).absolutePath());
  window.waitForChecks();
  // An exported chart carries a caption: the view and the file with its shape.
  window.setView("gradient");
  QApplication::processEvents();
  auto const name = QFileInfo(QString::fromStdString(run_file())).fileName();
  auto const& a = *window.datasetA();
  EXPECT_EQ(window.chartCaption(),
            QString("kembed inspector, Gradient view: A %1 (%2 x %3)").arg(name).arg(a.rows).arg(a.cols));
  QImage const chart = window.gradientView()->plot()->toPixmap().toImage(), png = window.chartImage();
  EXPECT_EQ(png.width(), chart.width());
  ASSERT_GT(png.height(), chart.height());
  EXPECT_GT(pixels_near(png.copy(0, 0, png.width(), png.height() - chart.height()), QColor(0, 0, 0), 60), 20)
      << "the caption's text";
}

// Defect 7: every histogram bar's range can be read, the row table's columns fit,
// and the heatmap's column ticks are whole columns.
TEST_F(Inspector, LabelsAreWholeAndNothingIsCutOff) {
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  show(window);
  auto* counts = window.countsView();
  // Rotated labels end at their tick, so each seemed to name the bar left of it.
  EXPECT_EQ(counts->plot()->xAxis->tickLabelRotation(), 0.0);
  auto const bars = int(counts->histogram().rows.size());
  counts->plot()->replot();
  auto const shown = counts->plot()->xAxis->tickVectorLabels();
  ASSERT_EQ(shown.size(), counts->plot()->xAxis->tickVector().size());
  EXPECT_EQ(counts->plot()->xAxis->tickVector().last(), double(bars - 1)) << "the last bin is labelled";
  EXPECT_FALSE(shown.last().isEmpty());
  auto* table = counts->findChild<QTableView*>("row_table");
  ASSERT_NE(table, nullptr);
  for (int c = 0; c < table->model()->columnCount(); ++c) {
    auto const text = table->model()->headerData(c, Qt::Horizontal, Qt::DisplayRole).toString();
    int const need = table->horizontalHeader()->fontMetrics().horizontalAdvance(text);
    EXPECT_GE(table->columnWidth(c), need) << text.toStdString();
    EXPECT_LE(table->columnViewportPosition(c) + need, table->viewport()->width()) << text.toStdString() << " is cut off";
  }
  // 20 columns: the automatic ticker put ticks at 2.5, 7.5, ...
  window.waitForChecks();  // before writing a file: HDF5 is not thread-safe
  ASSERT_TRUE(window.open(QString::fromStdString(synthetic_run("cols.h5", 300, 20)), MainWindow::Slot::A));
  window.setView("gradient");
  QApplication::processEvents();
  auto* plot = window.gradientView()->plot();
  plot->replot();
  auto const ticks = plot->xAxis->tickVector();
  ASSERT_FALSE(ticks.isEmpty());
  for (double t : ticks) EXPECT_EQ(t, std::round(t)) << "column tick " << t;
  window.waitForChecks();
}

// Defect 8: nothing is drawn without a file; the status bar names what is shown;
// opening a comparison keeps the heatmap's zoom.
TEST_F(Inspector, TheGradientViewKeepsItsPlaceAndSaysWhatItShows) {
  MainWindow window;
  window.setQuiet(true);
  show(window, "gradient");
  EXPECT_EQ(coloured_pixels(window.gradientView()->plot()->toPixmap().toImage()), 0) << "no file, no heatmap";
  auto const [same, one_row] = variants(5);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  window.waitForChecks();
  QApplication::processEvents();
  auto const a_name = fs::path(run_file()).filename().string();
  EXPECT_TRUE(window.statusText().contains(QString::fromStdString(a_name))) << window.statusText().toStdString();
  auto* axis = window.gradientView()->plot()->yAxis;
  axis->setRange(10, 30);
  ASSERT_TRUE(window.open(QString::fromStdString(one_row), MainWindow::Slot::B));
  window.waitForChecks();
  QApplication::processEvents();
  EXPECT_EQ(axis->range().lower, 10.0);
  EXPECT_EQ(axis->range().upper, 30.0);
  EXPECT_TRUE(window.statusText().contains(QString::fromStdString(a_name))) << window.statusText().toStdString();
  EXPECT_FALSE(window.statusText().contains("one_row.h5: gradient")) << window.statusText().toStdString();
}

// Defect 9 (the window's part): a Help menu with the keys (F1) and the version.
TEST(InspectorDefects, HelpListsTheKeys) {
  MainWindow window;
  window.setQuiet(true);
  QAction* keys = nullptr;
  for (auto* menu : window.menuBar()->findChildren<QMenu*>())
    if (menu->title() == "&Help")
      for (auto* action : menu->actions())
        if (action->shortcut() == QKeySequence(Qt::Key_F1)) keys = action;
  ASSERT_NE(keys, nullptr) << "Help > Keys on F1";
  auto const text = window.keysText();
  for (char const* key : {"F1", "F6", "Ctrl+G", "Ctrl+F", "Ctrl+O", "Ctrl+D", "wheel", "right-click"})
    EXPECT_TRUE(text.contains(key)) << key;
  // Issue 40, defect 8: the list keeps its columns, each line on one line of the dialog.
  window.show();
  keys->trigger();
  QApplication::processEvents();
  auto* dialog = window.findChild<QDialog*>("keys");
  ASSERT_NE(dialog, nullptr);
  auto* label = dialog->findChild<QLabel*>();
  ASSERT_NE(label, nullptr);
  EXPECT_FALSE(label->wordWrap());
  int widest = 0;
  for (auto const& line : text.split('\n')) widest = std::max(widest, label->fontMetrics().horizontalAdvance(line));
  EXPECT_GE(label->width(), widest) << "no line is cut or wrapped";
  EXPECT_EQ(label->text(), text);
  dialog->close();
}

// The heatmap's bands are exactly what folding their rows gives (heat_value of the
// least and greatest, NaN left out), whether they come from the run's summary or
// from rows read when zoomed in; the values read per paint do not grow with the row
// count (the time for 1e7 rows is a benchmark: kembed-inspector-bench); and a file
// without a summary gets the same bands from the one its scan makes.
TEST(HeatBands, WorkPerPaintIsBoundedAndTheBandsAreExact) {
  int const bands = 700;  // a tall window's pixels
  // 1.5 x 2^20 rows of 4: more values than a paint reads (2^22), so the summary paints.
  for (std::int64_t rows : {std::int64_t{1000}, std::int64_t{3} << 19}) {
    SCOPED_TRACE(rows);
    std::int64_t const cols = 4;
    auto const path = synthetic_run("heat-" + std::to_string(rows) + ".h5", rows, cols, [&](io::RunFile& run) {
      auto& g = run.gradient;
      g[std::size_t(rows / 2 * 4)] = 1e30f;       // a hot row
      g[std::size_t(rows / 3 * 4 + 1)] = -1e30f;  // and its tie of the other sign
      g[std::size_t((rows / 3 + 1) * 4 + 1)] = 1e30f;
      g[std::size_t(7 * 4 + 2)] = std::nanf("");
      for (std::int64_t r = 40; r < 48; ++r) g[std::size_t(r * 4 + 3)] = std::nanf("");  // a block of NaN
    });
    auto const g = io::read_run(path).gradient;
    auto d = load(path);
    ASSERT_FALSE(d.summary.empty());
    auto naive = [&](Heat const& h) {
      std::vector<float> out;
      for (int b = 0; b < h.bands(); ++b)
        for (std::int64_t c = 0; c < cols; ++c) {
          float lo = INFINITY, hi = -INFINITY;
          for (std::int64_t r = h.first[std::size_t(b)]; r < h.first[std::size_t(b) + 1]; ++r) {
            float const x = g[std::size_t(r * cols + c)];
            if (std::isnan(x)) continue;
            if (x < lo || (x == lo && std::signbit(x))) lo = x;
            if (x > hi || (x == hi && !std::signbit(x))) hi = x;
          }
          out.push_back(hi < lo ? NAN : heat_value(lo, hi));
        }
      return out;
    };
    std::pair<std::int64_t, std::int64_t> const ranges[] = {
        {0, rows}, {3, 17}, {rows / 3 - 5, rows / 3 + 600}, {rows - 45, rows}, {1, rows - 1}, {rows / 8, rows / 4}};
    for (auto [first, last] : ranges) {
      SCOPED_TRACE(std::to_string(first) + " to " + std::to_string(last));
      auto const h = heat_bands(d, first, last, bands);
      ASSERT_GE(h.bands(), 1);
      EXPECT_LE(h.bands(), bands);
      EXPECT_LE(h.first.front(), first);
      EXPECT_GE(h.first.back(), last);
      auto const want = naive(h);
      ASSERT_EQ(h.values.size(), want.size());
      EXPECT_EQ(std::memcmp(h.values.data(), want.data(), want.size() * sizeof(float)), 0);
      EXPECT_LE(h.values_read, std::max<std::int64_t>(std::int64_t{bands} * cols * 4, std::int64_t{1} << 22));
      if ((last - first) * cols > (std::int64_t{1} << 22)) EXPECT_FALSE(h.from_rows) << "from the summary";
      if (last - first < 700) EXPECT_TRUE(h.from_rows) << "rows read when zoomed in";
    }
    // Without a summary: zoomed out, nothing until the scan has made one; then the same bands.
    auto const stored = heat_bands(d, 0, rows, bands);
    d.reader.reset();  // HDF5 opens a file for writing only where it is not open
    {
      hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      ASSERT_GE(H5Ldelete(f, "/summary", H5P_DEFAULT), 0);
      H5Fclose(f);
    }
    auto bare = load(path);
    ASSERT_TRUE(bare.summary.empty());
    if (rows * cols > (std::int64_t{1} << 22)) EXPECT_EQ(heat_bands(bare, 0, rows, bands).bands(), 0);
    auto s = scan(bare);
    ASSERT_TRUE(s.completed);
    EXPECT_TRUE(s.sha256_ok);
    apply(std::move(s), bare);
    auto const made = heat_bands(bare, 0, rows, bands);
    ASSERT_EQ(made.values.size(), stored.values.size());
    EXPECT_EQ(std::memcmp(made.values.data(), stored.values.data(), made.values.size() * 4), 0);
    EXPECT_EQ(made.first, stored.first);
  }
}

// The verdict explains itself: where the largest difference is and how large
// against the values there, whether the differing rows are the hot ones, and the
// likely reason from the provenance.
TEST_F(Inspector, TheVerdictExplainsItself) {
  auto const base = io::read_run(run_file());
  auto const hot = top_rows(base.counts, 1)[0];
  auto variant = [&](std::string const& name, std::function<void(io::RunFile&)> const& edit) {
    auto run = base;
    edit(run);
    io::write_run(work_dir() + "/" + name, run);
    return load(work_dir() + "/" + name);
  };
  auto const a = load(run_file());
  auto const lines_of = [&](Dataset const& b) { return explain(a, b, diff(a, b)); };
  auto bump = [&](io::RunFile& run) {
    float& x = run.gradient[std::size_t(hot * run.cols + 2)];
    x = x * 1.5f;
  };
  auto const other_mode = lines_of(variant("mode.h5", [&](io::RunFile& run) {
    bump(run);
    run.numeric_mode = Mode::deterministic;
  }));
  ASSERT_EQ(other_mode.size(), 4u);
  EXPECT_EQ(other_mode[0].rfind("1 of ", 0), 0u) << other_mode[0];
  // The headline's largest ULP names its row and column, as kembed diff does (issue 40, defect 8).
  EXPECT_NE(other_mode[0].find("ULPs (row " + std::to_string(hot) + ", column 2)"), std::string::npos) << other_mode[0];
  EXPECT_NE(other_mode[1].find("row " + std::to_string(hot) + ", column 2"), std::string::npos) << other_mode[1];
  EXPECT_NE(other_mode[1].find("relative difference of 0.333"), std::string::npos) << other_mode[1];
  EXPECT_NE(other_mode[2].find("in the hot rows"), std::string::npos) << other_mode[2];
  EXPECT_NE(other_mode[3].find("Numeric modes differ (identical vs deterministic)"), std::string::npos)
      << other_mode[3];
  auto const same_mode = lines_of(variant("same.h5", bump));
  EXPECT_NE(same_mode.back().find("reproducibility failure"), std::string::npos) << same_mode.back();
  auto const scaled = lines_of(variant("scaled.h5", [&](io::RunFile& run) {
    bump(run);
    run.scale_grad_by_freq = FreqScale::batch;
  }));
  EXPECT_NE(scaled.back().find("scale_grad_by_freq differs (none vs batch)"), std::string::npos) << scaled.back();
  auto const threads = lines_of(variant("threads.h5", [](io::RunFile& run) { run.threads += 3; }));
  EXPECT_EQ(threads.front().rfind("Bit-identical", 0), 0u) << threads.front();
  EXPECT_NE(threads.back().find("keeps its promise across different threads"), std::string::npos) << threads.back();
  // The window shows the same lines, the headline first.
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString(work_dir() + "/mode.h5"), MainWindow::Slot::B));
  window.waitForChecks();
  EXPECT_EQ(window.diffView()->verdict().split('\n').size(), 4);
  EXPECT_TRUE(window.diffView()->verdict().contains("Numeric modes differ"));
}

// A bag run (`kembed backward --pooling` on a bag batch, from the CLI fixture) opens
// as any run does, shows its pooling and bags, and two poolings of one batch are told
// apart by that setting (issue 37).
TEST_F(Inspector, ABagRunShowsItsPoolingAndIsToldApartByIt) {
  auto const dir = fs::path(run_file()).parent_path();
  auto const mean = load((dir / "r_bag.h5").string()), sum = load((dir / "r_bag_sum.h5").string());
  auto field = [](Dataset const& d, std::string const& name) {
    for (auto const& [f, value] : d.provenance)
      if (f == name) return value;
    return std::string("(no field " + name + ")");
  };
  EXPECT_EQ(field(mean, "pooling"), "mean");
  EXPECT_EQ(field(mean, "bags"), "200");
  EXPECT_EQ(field(sum, "pooling"), "sum");
  EXPECT_EQ(field(mean, "positions"), "3000");
  EXPECT_EQ(field(load(run_file()), "pooling"), "none (one row per position)");
  EXPECT_EQ(field(load(run_file()), "bags"), "-");
  auto const lines = explain(mean, sum, diff(mean, sum));
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("The poolings differ (mean vs sum)"), std::string::npos) << lines.back();
  auto const same = explain(mean, mean, diff(mean, mean));
  EXPECT_EQ(same.front().rfind("Bit-identical", 0), 0u) << same.front();
  // The window draws every view of a bag run and shows the pooling beside the verdict.
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString((dir / "r_bag.h5").string()), MainWindow::Slot::A));
  ASSERT_TRUE(window.open(QString::fromStdString((dir / "r_bag_sum.h5").string()), MainWindow::Slot::B));
  window.waitForChecks();
  EXPECT_GT(pixels_near(render(window, "counts"), QColor(40, 100, 170)), 2000) << "histogram bars";
  EXPECT_GT(coloured_pixels(render(window, "gradient")), 20000) << "heatmap cells";
  render(window, "diff");
  EXPECT_TRUE(window.diffView()->verdict().contains("The poolings differ (mean vs sum)"))
      << window.diffView()->verdict().toStdString();
}

// Two tables with the same values and different settings: the verdict names every
// setting that differs, torch's options included (issue 36).
TEST_F(Inspector, TablesThatDifferOnlyInSettingsSayWhich) {
  std::vector<float> const values(12, 0.25f);
  Options plain, torch_like;
  torch_like.max_norm = 0.5;
  torch_like.norm_type = std::numeric_limits<double>::infinity();
  torch_like.scale_grad_by_freq = FreqScale::call;
  torch_like.sparse = true;
  io::save_table(work_dir() + "/plain.h5", values.data(), make_config(4, 3, plain));
  io::save_table(work_dir() + "/torch.h5", values.data(), make_config(4, 3, torch_like));
  auto const a = load(work_dir() + "/plain.h5"), b = load(work_dir() + "/torch.h5");
  auto const lines = explain(a, b, diff(a, b));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("Bit-identical", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1],
            "Settings differ: max_norm: none / 0.5; norm_type: 2 / inf; scale_grad_by_freq: none / call; "
            "sparse: false / true");
  EXPECT_NE(std::find(b.provenance.begin(), b.provenance.end(), std::pair<std::string, std::string>{"max_norm", "0.5"}),
            b.provenance.end());
}

// Hover readout: row, column, the values and their bits, the count, the band; the
// Gradient view shows A, B or A - B; each colour scale says what it shows.
TEST_F(Inspector, HoverReadoutAndColourScalesAndTheDifferenceHeatmap) {
  auto const [same, one_row] = variants(17);
  auto const run = io::read_run(run_file());
  auto const changed = io::read_run(one_row);
  MainWindow window;
  open_pair(window, one_row, "gradient");
  auto* view = window.gradientView();
  auto* plot = view->plot();
  plot->replot();
  // A pointer moved over row 17, column 2.
  QPointF const at(plot->xAxis->coordToPixel(2), plot->yAxis->coordToPixel(17));
  QMouseEvent move(QEvent::MouseMove, at, plot->mapToGlobal(at), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
  QApplication::sendEvent(plot, &move);
  auto const text = view->lastHover();
  float const a = run.gradient[std::size_t(17 * run.cols + 2)], b = changed.gradient[std::size_t(17 * run.cols + 2)];
  EXPECT_TRUE(text.startsWith("row 17, column 2: A ")) << text.toStdString();
  EXPECT_TRUE(text.contains(QString::fromStdString(hex_bits(a))) && text.contains(QString::fromStdString(hex_bits(b))))
      << text.toStdString();
  EXPECT_TRUE(text.contains(QString("count %1").arg(run.counts[17]))) << text.toStdString();
  EXPECT_TRUE(text.contains("band of rows 17-17")) << text.toStdString();
  EXPECT_TRUE(view->hoverText(-5, 17).isEmpty()) << "nothing outside the cells";
  // The diff's plot reads out the differing row under the pointer, the histogram its bar.
  window.setView("diff");
  QApplication::processEvents();
  auto* diff_plot = window.diffView()->plot();
  diff_plot->replot();
  auto const& d0 = window.diffView()->summary().values.differences.at(0);
  auto const diff_text = window.diffView()->hoverText(diff_plot->xAxis->coordToPixel(double(d0.row)),
                                                      diff_plot->yAxis->coordToPixel(d0.max_abs));
  EXPECT_TRUE(diff_text.startsWith("row 17: 1 columns differ")) << diff_text.toStdString();
  auto const& h = window.countsView()->histogram();
  EXPECT_TRUE(window.countsView()->hoverText(0).contains(QString("%1 rows").arg(h.rows[0])))
      << window.countsView()->hoverText(0).toStdString();
  window.setView("gradient");
  QApplication::processEvents();
  // A - B: zero everywhere but the changed value.
  ASSERT_FALSE(view->findChild<QComboBox*>("which_run")->isHidden());
  view->setShow(GradientView::Show::Difference);
  EXPECT_TRUE(view->infoText().contains("A - B")) << view->infoText().toStdString();
  EXPECT_TRUE(view->hoverText(2, 17).endsWith(QString("band of rows 17-17: %1").arg(double(a - b), 0, 'g', 9)))
      << view->hoverText(2, 17).toStdString();
  EXPECT_TRUE(view->hoverText(2, 16).endsWith("band of rows 16-16: 0")) << view->hoverText(2, 16).toStdString();
  // Each colour scale names itself on the colour bar.
  std::pair<GradientView::Scale, char const*> const scales[] = {
      {GradientView::Scale::Linear99, "99th percentile"},
      {GradientView::Scale::LinearFull, "full range"},
      {GradientView::Scale::SymmetricLog, "sign(v) log10(1 + |v|/t)"},
      {GradientView::Scale::LogMagnitude, "log10 |v|"}};
  for (auto [scale, words] : scales) {
    view->setScale(scale);
    EXPECT_TRUE(view->scaleLabel().contains(words)) << view->scaleLabel().toStdString();
    EXPECT_TRUE(view->scaleLabel().contains("A - B")) << view->scaleLabel().toStdString();
    EXPECT_GT(coloured_pixels(plot->toPixmap().toImage()), 100) << words;
  }
  view->setShow(GradientView::Show::B);
  EXPECT_TRUE(view->scaleLabel().startsWith("log10 |v| of B")) << view->scaleLabel().toStdString();
  // Side by side: three axis rects whose rows move together; back to one.
  view->setScale(GradientView::Scale::Linear99);
  view->setShow(GradientView::Show::SideBySide);
  ASSERT_EQ(plot->axisRectCount(), 3);
  EXPECT_TRUE(view->infoText().contains("A | B | A - B")) << view->infoText().toStdString();
  plot->axisRect(2)->axis(QCPAxis::atLeft)->setRange(20, 40);  // a zoom in A - B's rect
  EXPECT_EQ(plot->yAxis->range().lower, 20.0);
  EXPECT_EQ(plot->axisRect(1)->axis(QCPAxis::atLeft)->range().upper, 40.0);
  plot->replot();
  QPointF const in_d(plot->axisRect(2)->axis(QCPAxis::atBottom)->coordToPixel(2),
                     plot->axisRect(2)->axis(QCPAxis::atLeft)->coordToPixel(30));
  QMouseEvent over_d(QEvent::MouseMove, in_d, plot->mapToGlobal(in_d), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
  QApplication::sendEvent(plot, &over_d);
  EXPECT_TRUE(view->lastHover().startsWith("row 30, column 2: A ")) << view->lastHover().toStdString();
  EXPECT_GT(coloured_pixels(plot->toPixmap().toImage()), 1000);
  view->setShow(GradientView::Show::A);
  EXPECT_EQ(plot->axisRectCount(), 1);
  EXPECT_EQ(plot->yAxis->range().lower, 20.0) << "the zoom stays";
}

// What a person's mouse does to a plot: a wheel turn (+ zooms in), a drag, a double-click.
void wheel(QWidget* plot, QPointF at, int delta) {
  QWheelEvent e(at, plot->mapToGlobal(at), QPoint(), QPoint(0, delta), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase,
                false);
  QApplication::sendEvent(plot, &e);
}
void drag(QWidget* plot, QPointF from, QPointF to) {
  QMouseEvent press(QEvent::MouseButtonPress, from, plot->mapToGlobal(from), Qt::LeftButton, Qt::LeftButton,
                    Qt::NoModifier);
  QApplication::sendEvent(plot, &press);
  for (int step = 1; step <= 4; ++step) {
    QPointF const at = from + (to - from) * (step / 4.0);
    QMouseEvent move(QEvent::MouseMove, at, plot->mapToGlobal(at), Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(plot, &move);
  }
  QMouseEvent release(QEvent::MouseButtonRelease, to, plot->mapToGlobal(to), Qt::LeftButton, Qt::NoButton,
                      Qt::NoModifier);
  QApplication::sendEvent(plot, &release);
  QApplication::processEvents();
}
void double_click(QWidget* plot, QPointF at) {
  QMouseEvent e(QEvent::MouseButtonDblClick, at, plot->mapToGlobal(at), Qt::LeftButton, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(plot, &e);
  QApplication::processEvents();
}

// Issue 40, defect 2: the heatmap stays on the rows. Zooming out stops at every row,
// a drag stops at either end, going to row 0 while zoomed in shows row 0 at the top
// (not rows -16..0), and Ctrl+0 or a double-click fits every row back (F1 says so).
TEST_F(Inspector, TheHeatmapStaysOnTheRows) {
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  window.waitForChecks();
  show(window, "gradient");
  auto* view = window.gradientView();
  auto* plot = view->plot();
  plot->replot();
  std::int64_t const rows = window.datasetA()->rows;
  auto const all = QCPRange(-0.5, double(rows) - 0.5);
  auto on_the_rows = [&](char const* what) {
    auto const r = plot->yAxis->range();
    EXPECT_GE(r.lower, all.lower) << what;
    EXPECT_LE(r.upper, all.upper) << what;
    auto const first = std::int64_t(std::floor(r.lower + 0.5)), last = std::int64_t(std::ceil(r.upper + 0.5)) - 1;
    EXPECT_TRUE(view->infoText().startsWith(QString("rows %1 to %2 of %3 ").arg(first).arg(last).arg(rows)))
        << what << ": " << view->infoText().toStdString();
    EXPECT_LE(first, last) << what;
  };
  QPointF const centre = plot->axisRect()->center();
  for (int i = 0; i < 40; ++i) wheel(plot, centre, -120);
  on_the_rows("zoomed out 40 turns");
  EXPECT_EQ(plot->yAxis->range(), all) << "zooming out stops at every row";
  for (int i = 0; i < 12; ++i) wheel(plot, centre, 120);
  ASSERT_LT(plot->yAxis->range().size(), 0.3 * double(rows));
  drag(plot, centre, centre + QPointF(0, 12 * plot->axisRect()->height()));
  on_the_rows("dragged down past the top");
  EXPECT_EQ(plot->yAxis->range().lower, all.lower);
  drag(plot, centre, centre - QPointF(0, 24 * plot->axisRect()->height()));
  on_the_rows("dragged up past the end");
  EXPECT_EQ(plot->yAxis->range().upper, all.upper);
  window.selectRow(0);  // Ctrl+G 0
  on_the_rows("went to row 0");
  EXPECT_EQ(plot->yAxis->range().lower, all.lower);
  QAction* fit = nullptr;
  for (auto* action : window.findChildren<QAction*>())
    if (action->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_0)) fit = action;
  ASSERT_NE(fit, nullptr) << "a key that fits every row";
  fit->trigger();
  EXPECT_EQ(plot->yAxis->range(), all) << "Ctrl+0";
  for (int i = 0; i < 12; ++i) wheel(plot, centre, 120);
  ASSERT_NE(plot->yAxis->range(), all);
  double_click(plot, centre);
  EXPECT_EQ(plot->yAxis->range(), all) << "a double-click";
  on_the_rows("fitted");
  EXPECT_TRUE(window.keysText().contains("Ctrl+0")) << window.keysText().toStdString();
  EXPECT_TRUE(window.keysText().contains("double-click")) << window.keysText().toStdString();
}

// Issue 40's sparsity overlay: with "grey: rows with count 0" ticked, the bands whose
// rows no position referenced are grey (NaN's colour), the others as they were.
TEST(InspectorDefects, TheHeatmapCanGreyTheUnreferencedRows) {
  std::int64_t const rows = 200, cols = 4;
  auto const path = synthetic_run("sparse_overlay.h5", rows, cols, [](io::RunFile& run) {
    run.positions = 0;
    for (std::int64_t r = 0; r < run.rows; ++r) run.positions += run.counts[std::size_t(r)] = r < 40 ? 0 : 1 + r % 3;
    run.microbatch_size = run.positions;
  });
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(path), MainWindow::Slot::A));
  window.waitForChecks();
  show(window, "gradient");
  auto* view = window.gradientView();
  auto* map = qobject_cast<QCPColorMap*>(view->plot()->plottable(0));
  ASSERT_NE(map, nullptr);
  auto grey_rows = [&] {  // cell centres' rows whose cells are NaN
    std::vector<std::int64_t> out;
    auto* cells = map->data();
    for (int b = 0; b < cells->valueSize(); ++b) {
      double key = 0, value = 0;
      cells->cellToCoord(0, b, &key, &value);
      if (std::isnan(cells->cell(0, b))) out.push_back(std::llround(value));
    }
    return out;
  };
  ASSERT_TRUE(grey_rows().empty());
  ASSERT_EQ(view->bands(), rows) << "a band per row here";
  view->findChild<QCheckBox*>("unreferenced")->click();
  auto const grey = grey_rows();
  ASSERT_EQ(grey.size(), 40u);
  EXPECT_EQ(grey.front(), 0);
  EXPECT_EQ(grey.back(), 39);
  EXPECT_TRUE(view->infoText().contains("grey: rows with count 0")) << view->infoText().toStdString();
}

// Issue 40, defect 3: A | B | A - B side by side stay in step whichever panel the
// mouse drags or zooms in. Not reproduced on 644f859, where it was reported, here or
// in an Xvfb window driven by xdotool (3,393 and 10^6 rows, zoom then drag in B, A - B
// chosen first): this test guards it, in the real window too.
TEST_F(Inspector, SideBySidePanelsMoveTogether) {
  auto const [same, one_row] = variants(17);
  MainWindow window;
  open_pair(window, one_row, "gradient");
  auto* view = window.gradientView();
  auto* plot = view->plot();
  view->setShow(GradientView::Show::SideBySide);
  plot->replot();
  ASSERT_EQ(plot->axisRectCount(), 3);
  auto in_step = [&](char const* what) {
    auto const a = plot->axisRect(0)->axis(QCPAxis::atLeft)->range();
    for (int i : {1, 2}) {
      auto const r = plot->axisRect(i)->axis(QCPAxis::atLeft)->range();
      EXPECT_EQ(r.lower, a.lower) << what << ", panel " << i;
      EXPECT_EQ(r.upper, a.upper) << what << ", panel " << i;
    }
  };
  for (int panel : {1, 2, 0}) {
    SCOPED_TRACE(panel);
    QPointF const centre = plot->axisRect(panel)->center();
    auto const before = plot->yAxis->range();
    for (int i = 0; i < 6; ++i) wheel(plot, centre, 120);
    in_step("zoomed");
    EXPECT_LT(plot->yAxis->range().size(), before.size());
    auto const zoomed = plot->yAxis->range();
    drag(plot, centre, centre - QPointF(0, plot->axisRect(panel)->height() / 4));
    in_step("dragged");
    EXPECT_NE(plot->yAxis->range().lower, zoomed.lower) << "the drag moved the rows";
    plot->replot();
    in_step("painted");
    view->fitAll();
  }
}

// Issue 40, defect 8 (two more): the readout names what is under the pointer after
// the rows move beneath it (a zoom, a go-to), and over A - B's panel it gives A - B's
// band, not A's.
TEST_F(Inspector, TheReadoutIsWhatIsUnderThePointer) {
  auto const [same, one_row] = variants(17);
  auto const run = io::read_run(run_file()), changed = io::read_run(one_row);
  MainWindow window;
  open_pair(window, one_row, "gradient");
  auto* view = window.gradientView();
  auto* plot = view->plot();
  plot->replot();
  auto move_to = [&](QPointF at) {
    QMouseEvent move(QEvent::MouseMove, at, plot->mapToGlobal(at), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(plot, &move);
  };
  QPointF const still(plot->xAxis->coordToPixel(1), plot->yAxis->coordToPixel(10));
  move_to(still);
  ASSERT_TRUE(view->lastHover().startsWith("row 10, column 1: ")) << view->lastHover().toStdString();
  auto row_under = [&] { return std::llround(plot->yAxis->pixelToCoord(still.y())); };
  for (int i = 0; i < 6; ++i) wheel(plot, plot->axisRect()->center() + QPointF(0, 200), 120);
  ASSERT_NE(row_under(), 10);
  EXPECT_TRUE(view->lastHover().startsWith(QString("row %1, column 1: ").arg(row_under())))
      << "after a zoom: " << view->lastHover().toStdString();
  window.selectRow(95);  // Ctrl+G 95: the rows move under the pointer
  EXPECT_TRUE(view->lastHover().startsWith(QString("row %1, column 1: ").arg(row_under())))
      << "after a go-to: " << view->lastHover().toStdString();
  view->fitAll();
  view->setShow(GradientView::Show::SideBySide);
  plot->replot();
  ASSERT_EQ(plot->axisRectCount(), 3);
  float const a = run.gradient[std::size_t(17 * run.cols + 2)], b = changed.gradient[std::size_t(17 * run.cols + 2)];
  for (int panel : {0, 1, 2}) {
    auto* rect = plot->axisRect(panel);
    move_to(QPointF(rect->axis(QCPAxis::atBottom)->coordToPixel(2), rect->axis(QCPAxis::atLeft)->coordToPixel(17)));
    double const band = panel == 0 ? double(a) : panel == 1 ? double(b) : double(a - b);
    char const* const name[] = {"A", "B", "A - B"};
    EXPECT_TRUE(
        view->lastHover().endsWith(QString("band of rows 17-17 (%1): %2").arg(name[panel]).arg(band, 0, 'g', 9)))
        << panel << ": " << view->lastHover().toStdString();
  }
}

// Issue 40, defect 7 and the Info view: one run alone shows its whole story: what
// `kembed info` prints (format, provenance, every attribute, every dataset with its
// shape, chunks and filters), the window's checks, the summary's levels, with the
// lines that decide its bits highlighted; the Diff tab's provenance lists A's alone.
TEST_F(Inspector, TheInfoViewTellsOneRunsWholeStory) {
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  window.waitForChecks();
  show(window, "info");
  EXPECT_EQ(window.currentView(), static_cast<QWidget*>(window.infoView()));
  auto const text = window.infoView()->text();
  auto const info = io::file_info(run_file());
  EXPECT_TRUE(text.contains(QString::fromStdString(info.headline))) << text.toStdString();
  ASSERT_GE(info.sections.size(), 3u) << "a run: provenance, attributes, datasets";
  int marked = 0;
  for (auto const& section : info.sections) {
    EXPECT_TRUE(text.contains(QString::fromStdString(section.title))) << section.title;
    for (auto const& line : section.lines) {
      EXPECT_TRUE(text.contains(QString::fromStdString(line.key))) << line.key;
      EXPECT_TRUE(text.contains(QString::fromStdString(line.value).simplified().left(40)) ||
                  text.simplified().contains(QString::fromStdString(line.value).simplified()))
          << line.key << ": " << line.value;
      marked += line.decides_bits;
    }
  }
  EXPECT_EQ(marked, 2) << "the microbatch line and the ran line (plan, mode, backend, threads, ranks)";
  EXPECT_TRUE(text.contains("fletcher32")) << "the gradient's filters";
  EXPECT_TRUE(text.contains("SHA-256 verified: gradient")) << text.toStdString();
  EXPECT_TRUE(text.contains("Fletcher-32 on /counts, /gradient and the summary's")) << text.toStdString();
  EXPECT_TRUE(text.contains(QString("%1 levels").arg(window.datasetA()->summary.levels.size()))) << text.toStdString();
  EXPECT_EQ(window.infoView()->html().count(QString("<td bgcolor='%1'>").arg(InfoView::highlight)), 2 * marked)
      << "highlighted, key and value";
  // The Diff tab's provenance table is A's own while B is not open.
  auto* table = window.diffView()->findChild<QTableWidget*>("provenance");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->rowCount(), int(window.datasetA()->provenance.size()));
  EXPECT_EQ(table->horizontalHeaderItem(2)->text(), "B: none open");
}

// Issue 39: a run of many ranks shows each rank's share of the work (the run file's
// /rank_work, as `kembed info` prints it): the busiest rank against the mean, and
// every rank's terms, seconds folding and bytes sent.
TEST_F(Inspector, TheInfoViewShowsEachRanksShareOfTheWork) {
  auto run = io::read_run(run_file());
  std::int64_t const total = std::accumulate(run.counts.begin(), run.counts.end(), std::int64_t{0});
  run.ranks = 3;
  run.rank_work = {{total - 2 * (total / 3), 1000, 2500}, {total / 3, 1200, 2400}, {total / 3, 1100, 2300}};
  auto const path = work_dir() + "/three_ranks.h5";
  io::write_run(path, run);
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(path), MainWindow::Slot::A)) << window.lastError().toStdString();
  window.waitForChecks();
  show(window, "info");
  auto const text = window.infoView()->text().simplified();
  EXPECT_TRUE(text.contains("balance")) << text.toStdString();
  EXPECT_TRUE(text.contains("the mean of 3 ranks")) << text.toStdString();
  for (char const* sent : {"1,000 bytes sent", "1,200 bytes sent", "1,100 bytes sent"})
    EXPECT_TRUE(text.contains(sent)) << sent;
}

// Row search and filters: ids and ranges as pasted, a count range, both with any
// sort; a bad list is refused with its reason and changes nothing.
TEST_F(Inspector, RowSearchAndFilters) {
  auto const run = io::read_run(run_file());
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  window.waitForChecks();
  show(window);
  auto* counts = window.countsView();
  auto* model = counts->model();
  ASSERT_TRUE(counts->setRowFilter("", "", "3, 17\n40-42;  99"));
  ASSERT_EQ(model->rowCount(), 6);
  std::int64_t const want[] = {3, 17, 40, 41, 42, 99};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(model->rowAt(i), want[i]);
  EXPECT_EQ(counts->filterText(), "6 of 100 rows shown");
  EXPECT_TRUE(counts->setRowFilter("2", "", ""));
  std::vector<std::int64_t> hot;
  for (std::int64_t r = 0; r < run.rows; ++r)
    if (run.counts[std::size_t(r)] >= 2) hot.push_back(r);
  ASSERT_EQ(model->rowCount(), int(hot.size()));
  for (int i = 0; i < model->rowCount(); ++i) EXPECT_EQ(model->rowAt(i), hot[std::size_t(i)]);
  model->sort(RowTableModel::Count, Qt::DescendingOrder);  // the filter stays
  ASSERT_EQ(model->rowCount(), int(hot.size()));
  for (int i = 1; i < model->rowCount(); ++i)
    EXPECT_GE(run.counts[std::size_t(model->rowAt(i - 1))], run.counts[std::size_t(model->rowAt(i))]);
  std::pair<char const*, char const*> const refused[] = {
      {"3, x", "'x'"}, {"7-2", "'7-2'"}, {"5, 200", "row 200 is past the last row (99)"}};
  for (auto const& [ids, why] : refused) {
    EXPECT_FALSE(counts->setRowFilter("", "", ids)) << ids;
    EXPECT_TRUE(counts->filterText().contains(why)) << counts->filterText().toStdString();
    EXPECT_EQ(model->rowCount(), int(hot.size())) << "a refused filter changes nothing";
  }
  EXPECT_FALSE(counts->setRowFilter("-1", "", ""));
  EXPECT_TRUE(counts->setRowFilter("", "", ""));
  EXPECT_EQ(model->rowCount(), int(run.rows));
  EXPECT_TRUE(counts->filterText().isEmpty());
}

// Per-column statistics: each percentile is in the bin of the true one (the value
// of that rank among the column's values), min and max exact, the mean the mean.
TEST_F(Inspector, ColumnStatisticsAreTheColumnsOwn) {
  auto const run = io::read_run(run_file());
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  EXPECT_TRUE(window.columnsView()->stateText().contains("comes with the pass")) << "before the scan";
  window.waitForChecks();
  show(window, "columns");
  auto const& cs = window.datasetA()->columns;
  ASSERT_EQ(std::int64_t(cs.percentiles.size()), run.cols);
  for (std::int64_t c = 0; c < run.cols; ++c) {
    std::vector<float> column;
    double sum = 0;
    for (std::int64_t r = 0; r < run.rows; ++r) {
      column.push_back(run.gradient[std::size_t(r * run.cols + c)]);
      sum += column.back();
    }
    std::sort(column.begin(), column.end());
    for (int k = 0; k < 7; ++k) {
      float const truth = column[std::size_t(ColumnStats::levels[k] * double(column.size() - 1))];
      EXPECT_EQ(test_bits(cs.percentiles[std::size_t(c)][std::size_t(k)]), test_bits(column_bin_floor(column_bin(truth))))
          << "column " << c << " level " << ColumnStats::levels[k];
    }
    EXPECT_NEAR(cs.mean[std::size_t(c)], sum / double(run.rows), 1e-12 * (1 + std::fabs(sum)));
    auto* table = window.columnsView()->table();
    EXPECT_EQ(table->item(int(c), 1)->text(), QString::number(double(column.front()), 'g', 6)) << "min";
    EXPECT_EQ(table->item(int(c), 7)->text(), QString::number(double(column.back()), 'g', 6)) << "max";
  }
  EXPECT_TRUE(window.columnsView()->hoverText(3).startsWith("column 3: min ")) << window.columnsView()->hoverText(3).toStdString();
  EXPECT_GT(coloured_pixels(window.columnsView()->plot()->toPixmap().toImage()), 500) << "the bands are drawn";
  // Bins keep the values' order, and a bin's floor is in it.
  for (float x : {-3.5f, -1e-30f, -0.0f, 0.0f, 1e-30f, 2.25f, 1e30f}) {
    EXPECT_LE(column_bin_floor(column_bin(x)), x);
    EXPECT_EQ(column_bin(column_bin_floor(column_bin(x))), column_bin(x));
  }
  EXPECT_LT(column_bin(-1.0f), column_bin(-0.5f));
  EXPECT_LT(column_bin(0.5f), column_bin(1.0f));
}

// Issue 40, defect 4: the Columns view shows every extreme inside its axis, keeps the
// 1-99 % bands readable beside extremes 500 times larger (a symmetric log axis), keeps
// its legend off the columns, grows with the window, can leave out the rows with count
// 0, and draws a second run over the first.
TEST(InspectorDefects, TheColumnsViewIsReadable) {
  std::int64_t const rows = 4000, cols = 8;
  auto extremes = [](io::RunFile& run) {
    run.gradient[std::size_t(17 * run.cols + 3)] = 500.0f;
    run.gradient[std::size_t(29 * run.cols + 7)] = -800.0f;
  };
  auto const a = synthetic_run("columns_a.h5", rows, cols, extremes);
  auto const b = synthetic_run("columns_b.h5", rows, cols, [&](io::RunFile& run) {
    extremes(run);
    for (auto& x : run.gradient) x *= 0.5f;
  });
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(a), MainWindow::Slot::A));
  window.waitForChecks();
  window.resize(1000, 700);
  show(window, "columns");
  window.resize(1000, 700);
  QApplication::processEvents();
  auto* view = window.columnsView();
  auto* plot = view->plot();
  plot->replot();
  auto const& cs = window.datasetA()->columns;
  for (auto axis : {ColumnsView::Axis::Linear, ColumnsView::Axis::SymmetricLog}) {
    view->setAxis(axis);
    plot->replot();
    QRect const inside = plot->axisRect()->rect();
    for (std::int64_t c = 0; c < cols; ++c)
      for (float v : {cs.min[std::size_t(c)], cs.max[std::size_t(c)]}) {
        double const y = plot->yAxis->coordToPixel(view->axisValue(v));
        EXPECT_GE(y, inside.top() + 4) << "column " << c << " value " << v << " (a marker is 6 px)";
        EXPECT_LE(y, inside.bottom() - 4) << "column " << c << " value " << v;
      }
    EXPECT_FALSE(plot->legend->outerRect().intersects(inside)) << "the legend is off the columns";
  }
  // The bands: with the symmetric log axis column 0's 1-99 % band is a sixth of the plot
  // or more (on the linear axis, scaled to -800..500, it was a line).
  auto band_pixels = [&] {
    auto const& p = cs.percentiles[0];
    return std::fabs(plot->yAxis->coordToPixel(view->axisValue(p[6])) -
                     plot->yAxis->coordToPixel(view->axisValue(p[0])));
  };
  EXPECT_GE(band_pixels(), plot->axisRect()->height() / 6.0);
  view->setAxis(ColumnsView::Axis::Linear);
  plot->replot();
  EXPECT_LT(band_pixels(), plot->axisRect()->height() / 50.0) << "why the symmetric log axis is the default";
  view->setAxis(ColumnsView::Axis::SymmetricLog);
  // It grows with the window.
  int const before = plot->height();
  resize_now(window, QSize(1300, 900));
  EXPECT_GT(plot->height(), before + 100);
  // Rows with count 0 left out: the statistics are the counted rows' own.
  auto const run = io::read_run(a);
  std::vector<float> counted;
  for (std::int64_t r = 0; r < rows; ++r)
    if (run.counts[std::size_t(r)] > 0) counted.push_back(run.gradient[std::size_t(r * cols)]);
  ASSERT_LT(counted.size(), std::size_t(rows));
  auto* only = view->findChild<QCheckBox*>("counted_only");
  ASSERT_NE(only, nullptr);
  ASSERT_TRUE(only->isEnabled());
  only->click();
  EXPECT_TRUE(view->stateText().contains(QString("its %1 rows with a count above 0").arg(counted.size())))
      << view->stateText().toStdString();
  std::sort(counted.begin(), counted.end());
  float const median = counted[std::size_t(0.5 * double(counted.size() - 1))];
  EXPECT_EQ(view->table()->item(0, 4)->text(), QString::number(double(column_bin_floor(column_bin(median))), 'g', 6));
  EXPECT_EQ(view->table()->item(0, 1)->text(), QString::number(double(counted.front()), 'g', 6));
  only->click();
  // A second run: its median and band over A's.
  ASSERT_TRUE(window.open(QString::fromStdString(b), MainWindow::Slot::B));
  window.waitForChecks();
  QApplication::processEvents();
  QStringList names;
  for (int i = 0; i < plot->graphCount(); ++i) names << plot->graph(i)->name();
  EXPECT_TRUE(names.contains("B: median")) << names.join(", ").toStdString();
  EXPECT_TRUE(names.contains("A: median")) << names.join(", ").toStdString();
  EXPECT_TRUE(view->stateText().contains("B in orange")) << view->stateText().toStdString();
}

// Defect 10: opening a run and painting it whole reads its counts and summary, not
// its gradient (bytes through read(2), /proc/self/io's rchar, page cache or not).
TEST(InspectorDefects, OpeningAndPaintingReadNoGradient) {
  std::int64_t const rows = 1000000, cols = 16;  // a 64 MB gradient
  auto const path = synthetic_run("unread.h5", rows, cols);
  auto read_so_far = [] {
    std::ifstream io("/proc/self/io");
    std::string key;
    std::int64_t value = 0;
    while (io >> key >> value)
      if (key == "rchar:") return value;
    return std::int64_t{-1};
  };
  auto const before = read_so_far();
  ASSERT_GE(before, 0);
  auto const d = load(path);
  auto const heat = heat_bands(d, 0, rows, 700);
  auto const read = read_so_far() - before;
  EXPECT_FALSE(heat.from_rows);
  EXPECT_GE(heat.bands(), 350) << "bands of whole blocks of 2^k rows, as many as fit";
  EXPECT_LT(read, rows * cols * 4 / 4) << "bytes read to open and paint a " << rows * cols * 4 << "-byte gradient";
  EXPECT_GT(read, rows * 8) << "the counts are read";
}


// ---- files that lie or are damaged (issue: trust, second round) ---------------------

// A copy of `from` with one byte of /gradient's first chunk flipped (its Fletcher-32
// checksum then fails), as h5py's get_chunk_info and a byte edit would.
std::string with_damaged_chunk(std::string const& from, std::string const& name) {
  auto const to = work_dir() + "/" + name;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  hid_t f = H5Fopen(to.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "gradient", H5P_DEFAULT);
  haddr_t address = 0;
  hsize_t size = 0;
  unsigned mask = 0;
  hsize_t offset[2] = {0, 0};
  hid_t space = H5Dget_space(d);
  EXPECT_GE(H5Dget_chunk_info(d, space, 0, offset, &mask, &address, &size), 0);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  std::fstream io(to, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(std::streamoff(address + size / 2));
  char byte = 0;
  io.read(&byte, 1);
  byte ^= 1;
  io.seekp(std::streamoff(address + size / 2));
  io.write(&byte, 1);
  return to;
}

void set_string_attribute(hid_t object, char const* name, std::string const& value) {
  if (H5Aexists(object, name) > 0) H5Adelete(object, name);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  char const* p = value.c_str();
  H5Awrite(attr, type, &p);
  H5Aclose(attr), H5Sclose(space), H5Tclose(type);
}

// A copy of the run whose counts are `edit`ed, with counts_sha256 recomputed so that
// only the counts' own checks can catch it.
std::string with_counts(std::string const& name, std::function<void(std::vector<std::int64_t>&)> const& edit) {
  auto const to = work_dir() + "/" + name;
  fs::copy_file(run_file(), to, fs::copy_options::overwrite_existing);
  hid_t f = H5Fopen(to.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "counts", H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  std::vector<std::int64_t> counts(std::size_t(H5Sget_simple_extent_npoints(space)));
  H5Sclose(space);
  H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counts.data());
  edit(counts);
  H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counts.data());
  H5Dclose(d);
  set_string_attribute(f, "counts_sha256", io::counts_sha256(counts.data(), std::int64_t(counts.size())));
  H5Fclose(f);
  return to;
}

std::string sparse_copy_of_the_run(std::string const& name) {
  auto const run = io::read_run(run_file());
  std::vector<std::int64_t> rows, counts;
  std::vector<float> values;
  for (std::int64_t r = 0; r < run.rows; ++r)
    if (run.counts[std::size_t(r)] > 0) {
      rows.push_back(r), counts.push_back(run.counts[std::size_t(r)]);
      values.insert(values.end(), run.gradient.begin() + r * run.cols, run.gradient.begin() + (r + 1) * run.cols);
    }
  auto sparse = run;
  std::int64_t const n = std::int64_t(rows.size());
  sparse.gradient_sha256 = io::sparse_gradient_sha256(rows.data(), values.data(), n, run.cols);
  sparse.counts_sha256.clear();
  auto const path = work_dir() + "/" + name;
  io::write_sparse_run(path, sparse, io::SparseSlab{0, n, n, 0, run.rows, rows.data(), values.data(), counts.data()});
  return path;
}

// The inspector program next to this test (both are built into gui/).
QString inspector_program() {
  return QString::fromStdString((fs::read_symlink("/proc/self/exe").parent_path() / "kembed-inspector").string());
}

// A damaged chunk, dense or sparse, opened in a window (File > Open, the recent list)
// and rendered by --screenshot: the file is closed with an error naming it, the
// program goes on (a window) or exits 2 (--screenshot), never aborts.
TEST_F(Inspector, ADamagedChunkClosesTheFileAndEndsNothing) {
  auto const dense = with_damaged_chunk(run_file(), "damaged_chunk.h5");
  auto const sparse = with_damaged_chunk(sparse_copy_of_the_run("sparse_for_damage.h5"), "damaged_sparse_chunk.h5");
  std::string const paths[] = {dense, sparse};  // named arrays, not braced lists: nvcc 11.8
  char const* const views[] = {"counts", "gradient"};
  for (auto const& path : paths) {
    for (auto const* view : views) {
      MainWindow window;
      window.setQuiet(true);
      ASSERT_TRUE(window.open(QString::fromStdString(path), MainWindow::Slot::A)) << "it opens: counts and summary are sound";
      render(window, view);  // paints may read the damaged rows: they read as NaN
      window.waitForChecks();
      QApplication::processEvents();
      EXPECT_EQ(window.datasetA(), nullptr) << path << " is closed";
      EXPECT_TRUE(window.lastError().contains("damaged")) << window.lastError().toStdString();
      EXPECT_TRUE(window.lastError().contains(QString::fromStdString(fs::path(path).filename().string())));
      EXPECT_FALSE(window.statusText().contains("verified")) << window.statusText().toStdString();
    }
    QProcess shot;
    shot.start(inspector_program(), {QString::fromStdString(path), "--view", "gradient", "--screenshot",
                                     QString::fromStdString(work_dir() + "/damaged.png")});
    ASSERT_TRUE(shot.waitForFinished(60000));
    EXPECT_EQ(shot.exitStatus(), QProcess::NormalExit) << path << ": no abort, no signal";
    EXPECT_EQ(shot.exitCode(), 2) << path << ": " << shot.readAllStandardError().toStdString();
  }
}

// Counts from a file are refused before any view uses them: negative, more than the
// positions, or not summing to them, even with counts_sha256 recomputed to match.
TEST_F(Inspector, CountsThatNoRunHasAreRefusedAsTheFileOpens) {
  std::pair<char const*, std::function<void(std::vector<std::int64_t>&)>> const edits[] = {
      {"negative", [](std::vector<std::int64_t>& c) { c[0] = -5; }},
      {"huge", [](std::vector<std::int64_t>& c) { c[1] = INT64_MAX; }},
      {"one more", [](std::vector<std::int64_t>& c) { c[2] += 1; }},
  };
  for (auto const& [what, edit] : edits) {
    auto const path = with_counts(std::string("counts_") + what + ".h5", edit);
    MainWindow window;
    window.setQuiet(true);
    EXPECT_FALSE(window.open(QString::fromStdString(path), MainWindow::Slot::A)) << what;
    EXPECT_TRUE(window.lastError().contains("/counts")) << what << ": " << window.lastError().toStdString();
    EXPECT_EQ(window.datasetA(), nullptr);
  }
  // A consistent edit (one occurrence moved to another row) is a different run, and opens.
  auto const moved = with_counts("counts_moved.h5", [](std::vector<std::int64_t>& c) {
    auto const from = std::size_t(std::max_element(c.begin(), c.end()) - c.begin());
    c[from] -= 1, c[(from + 1) % c.size()] += 1;
  });
  MainWindow window;
  window.setQuiet(true);
  EXPECT_TRUE(window.open(QString::fromStdString(moved), MainWindow::Slot::A)) << window.lastError().toStdString();
}

// Whatever counts reach it, the histogram writes inside its bins, and a count of
// 2^63 - 1 makes no more bins than asked.
TEST(Histogram, AnyCountLandsInABinAndTheBinsStayFew) {
  std::vector<std::int64_t> const counts = {-5, 0, 1, 7, INT64_MAX, INT64_MAX - 1, 3};
  for (bool log : {false, true})
    for (int bins : {1, 2, 10, 64}) {
      auto const h = count_histogram(counts, bins, log);
      ASSERT_FALSE(h.rows.empty());
      EXPECT_LE(h.rows.size(), std::size_t(bins) + 1) << bins << (log ? " log" : " linear");
      std::int64_t total = 0;
      for (auto r : h.rows) total += r;
      EXPECT_EQ(total, std::int64_t(counts.size())) << "every row in exactly one bin";
      for (std::size_t i = 0; i + 1 < h.lower.size(); ++i) EXPECT_LT(h.lower[i], h.lower[i + 1]);
    }
}

// A summary edited after the run (min and max scaled by 1000) is refused as the file
// opens (summary_sha256); with the digest recomputed it opens, and the background
// pass, recomputing the summary from the rows, closes it: "verified" is never shown
// for what was painted from it.
TEST_F(Inspector, AnEditedSummaryIsNeverPaintedAsVerified) {
  auto scaled = [](std::string const& name, bool recompute) {
    auto const to = work_dir() + "/" + name;
    fs::copy_file(run_file(), to, fs::copy_options::overwrite_existing);
    auto summary = io::read_summary(to);
    hid_t f = H5Fopen(to.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    for (auto& level : summary.levels) {
      std::pair<char const*, std::vector<float>*> const fields[] = {{"min", &level.min}, {"max", &level.max}};
      for (auto const& field : fields) {
        for (auto& x : *field.second) x *= 1000;
        auto const object = "summary/rows_" + std::to_string(level.block_rows) + "/" + field.first;
        hid_t d = H5Dopen2(f, object.c_str(), H5P_DEFAULT);
        H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, field.second->data());
        H5Dclose(d);
      }
    }
    if (recompute) set_string_attribute(f, "summary_sha256", io::summary_sha256(summary));
    H5Fclose(f);
    return to;
  };
  {
    MainWindow window;
    window.setQuiet(true);
    EXPECT_FALSE(window.open(QString::fromStdString(scaled("summary_scaled.h5", false)), MainWindow::Slot::A));
    EXPECT_TRUE(window.lastError().contains("/summary")) << window.lastError().toStdString();
  }
  MainWindow window;
  window.setQuiet(true);
  ASSERT_TRUE(window.open(QString::fromStdString(scaled("summary_consistent.h5", true)), MainWindow::Slot::A));
  window.waitForChecks();
  QApplication::processEvents();
  EXPECT_EQ(window.datasetA(), nullptr) << "closed once the rows showed the summary is not theirs";
  EXPECT_TRUE(window.lastError().contains("summary")) << window.lastError().toStdString();
  EXPECT_FALSE(window.statusText().contains("verified")) << window.statusText().toStdString();
  // The run itself: every digest verified, and the status bar says what.
  MainWindow good;
  good.setQuiet(true);
  ASSERT_TRUE(good.open(QString::fromStdString(run_file()), MainWindow::Slot::A));
  good.waitForChecks();
  QApplication::processEvents();
  EXPECT_TRUE(good.statusText().contains("verified: gradient, counts, summary")) << good.statusText().toStdString();
}
}  // namespace
}  // namespace kembed::inspector

int main(int argc, char** argv) {
  // Headless wherever it runs (ctest discovers the tests by running it, too).
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) qputenv("XDG_RUNTIME_DIR", KEMBED_TEST_RUNTIME_DIR);
  QApplication app(argc, argv);
  // Settings (the recent-files list) go to the test's own folder, never ~/.config.
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope,
                     QString::fromStdString(kembed::inspector::work_dir() + "/config"));
  ::testing::InitGoogleTest(&argc, argv);
  int const rc = RUN_ALL_TESTS();
  std::filesystem::remove_all(kembed::inspector::work_dir());
  return rc;
}
