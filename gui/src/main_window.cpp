#include "main_window.hpp"

#include <algorithm>

#include <kembed/core/error.hpp>

#include <qcustomplot.h>

#include <QApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDragEnterEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QPointer>
#include <QProgressDialog>
#include <QSaveFile>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextStream>
#include <QVBoxLayout>

#include <thread>

namespace kembed::inspector {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle("kembed inspector");
  setAcceptDrops(true);
  tabs_ = new QTabWidget(this);
  counts_ = new CountsView(tabs_);
  gradient_ = new GradientView(tabs_);
  diff_ = new DiffView(tabs_);
  columns_ = new ColumnsView(tabs_);
  info_ = new InfoView(tabs_);
  tabs_->addTab(counts_, "Counts");
  tabs_->addTab(gradient_, "Gradient");
  tabs_->addTab(columns_, "Columns");
  tabs_->addTab(diff_, "Diff");
  tabs_->addTab(info_, "Info");
  setCentralWidget(tabs_);
  status_ = new QLabel(this);
  statusBar()->addPermanentWidget(status_, 1);  // stays while a message shows
  for (View* view : {static_cast<View*>(counts_), static_cast<View*>(gradient_), static_cast<View*>(diff_)})
    connect(view, &View::rowPicked, this, &MainWindow::selectRow);

  auto* file = menuBar()->addMenu("&File");
  file->addAction("&Open run...", QKeySequence::Open, this, [this] {
    auto const path = QFileDialog::getOpenFileName(this, "Open a run or table file", dialogFolder(),
                                                   "HDF5 (*.h5 *.hdf5);;All files (*)");
    if (!path.isEmpty()) open(path, Slot::A);
  });
  file->addAction("&Compare with...", QKeySequence(Qt::CTRL | Qt::Key_D), this, [this] {
    auto const path = QFileDialog::getOpenFileName(this, "Open a second run to compare", dialogFolder(),
                                                   "HDF5 (*.h5 *.hdf5);;All files (*)");
    if (!path.isEmpty()) open(path, Slot::B);
  });
  recent_ = file->addMenu("Open &recent");
  file->addSeparator();
  file->addAction("Export chart as &PNG...", QKeySequence(Qt::CTRL | Qt::Key_E), this, &MainWindow::exportPng);
  file->addAction("Export &table as CSV...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E), this,
                  &MainWindow::exportCsv);
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, qApp, &QApplication::quit);
  auto* go = menuBar()->addMenu("&Go");
  go->addAction("&Go to row...", QKeySequence(Qt::CTRL | Qt::Key_G), this, &MainWindow::goToRow);
  go->addAction("&Find rows (ids, count range)", QKeySequence::Find, this, [this] {
    tabs_->setCurrentWidget(counts_);
    counts_->focusRowSearch();
  });
  go->addAction("&Next differing row", QKeySequence(Qt::Key_F6), diff_, [this] {
    tabs_->setCurrentWidget(diff_);
    diff_->nextDifferingRow();
  });
  go->addAction("Fit &all rows", QKeySequence(Qt::CTRL | Qt::Key_0), this, [this] {
    tabs_->setCurrentWidget(gradient_);
    gradient_->fitAll();
  });
  auto* views = menuBar()->addMenu("&View");
  QString const names[] = {"&Counts", "&Gradient", "C&olumns", "&Diff", "&Info"};
  for (int i = 0; i < tabs_->count(); ++i)
    views->addAction(names[i], QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)), this,
                     [this, i] { tabs_->setCurrentIndex(i); });
  views->addSeparator();
  // Window-wide: a table or the plot with the focus would otherwise take Ctrl+Tab.
  views->addAction("&Next view", QKeySequence(Qt::CTRL | Qt::Key_Tab), this,
                   [this] { tabs_->setCurrentIndex((tabs_->currentIndex() + 1) % tabs_->count()); });
  auto* back = views->addAction("&Previous view", this, [this] {
    tabs_->setCurrentIndex((tabs_->currentIndex() + tabs_->count() - 1) % tabs_->count());
  });
  back->setShortcuts(
      {QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Tab), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Backtab)});
  auto* help = menuBar()->addMenu("&Help");
  help->addAction("&Keys and mouse", QKeySequence(Qt::Key_F1), this, &MainWindow::showKeys);
  help->addAction("&About kembed inspector", this, [this] {
    QMessageBox::about(this, "About kembed inspector",
                       QString("kembed inspector %1\nSee where gradients went and why two runs differ.\n"
                               "kembed: reproducible embedding tables (Apache-2.0); this program uses "
                               "QCustomPlot and is GPL-3.")
                           .arg(QApplication::applicationVersion()));
  });
  rebuildRecentMenu();
  setMinimumSize(least_size);
  resize(1200, 800);
  refresh();
}

MainWindow::~MainWindow() {
  // A check still hashing when the window closes stops at its next piece; none may
  // outlive the program's libraries.
  stop_->store(true);
  for (auto& worker : workers_) worker.join();
}

bool MainWindow::open(QString const& path, Slot slot) {
  QApplication::setOverrideCursor(Qt::WaitCursor);
  std::shared_ptr<Dataset> data;
  try {
    data = std::make_shared<Dataset>(load(path.toStdString()));
  } catch (std::exception const& e) {
    QApplication::restoreOverrideCursor();
    QString text = QString::fromUtf8(e.what());
    if (text.startsWith("kembed: ")) text = text.mid(8);
    forget(path);  // a file that cannot be opened (gone, damaged) leaves the recent list
    showError(text);
    return false;
  }
  QApplication::restoreOverrideCursor();
  // Runs are compared with runs and tables with tables, as kembed diff does: a
  // gradient against weights is no comparison.
  auto kind = [](Dataset const& d) { return d.is_run() ? QString("a run file") : QString("a table file"); };
  if (slot == Slot::B && a_ && a_->is_run() != data->is_run()) {
    showError(QString("%1 is %2 and A (%3) is %4: the inspector compares two runs or two tables")
                  .arg(path, kind(*data), QFileInfo(QString::fromStdString(a_->path)).fileName(), kind(*a_)));
    return false;
  }
  if (slot == Slot::A && b_ && b_->is_run() != data->is_run()) b_ = nullptr;  // B no longer matches
  // A read that fails later (a damaged chunk) closes the file on this thread, once
  // the view that read it has finished (queued, also when the view is on this thread).
  QPointer<MainWindow> self(this);
  data->damage->on_damage = [self, d = data.get()](std::string const& why) {
    QMetaObject::invokeMethod(
        qApp, [self, d, text = QString::fromStdString(why)] { if (self) self->closeDamaged(d, text); },
        Qt::QueuedConnection);
  };
  (slot == Slot::A ? a_ : b_) = data;
  if (remembering_) remember(path);
  refresh();
  scanInBackground(data);
  return true;
}

void MainWindow::refresh() {
  // A closed file's check no longer counts (its address may be reused).
  verified_.erase(std::remove_if(verified_.begin(), verified_.end(),
                                 [this](Dataset const* d) { return d != a_.get() && d != b_.get(); }),
                  verified_.end());
  counts_->setDataset(a_);
  gradient_->setDataset(a_);
  columns_->setDataset(a_);
  diff_->setDatasets(a_, b_);
  bool const unchecked = std::any_of(checking_.begin(), checking_.end(),
                                     [this](Dataset const* d) { return d == a_.get() || d == b_.get(); });
  diff_->setChecking(unchecked);
  if (a_ && b_ && !unchecked && (compared_.first != a_.get() || compared_.second != b_.get())) compareInBackground();
  if (!(a_ && b_)) compared_ = {nullptr, nullptr}, comparison_result_ = nullptr;
  bool const made = comparison_result_ && compared_.first == a_.get() && compared_.second == b_.get();
  gradient_->setComparison(unchecked ? nullptr : b_, made ? comparison_result_ : nullptr);
  columns_->setComparison(unchecked ? nullptr : b_);
  QString title = "kembed inspector";
  if (a_) title += " - " + QFileInfo(QString::fromStdString(a_->path)).fileName();
  if (b_) title += " vs " + QFileInfo(QString::fromStdString(b_->path)).fileName();
  setWindowTitle(title);
  info_->setDatasets(a_, b_, a_ ? checkText(*a_) : QString(), b_ ? checkText(*b_) : QString());
  // Which file each slot shows and whether its gradient was checked, always in view.
  auto describe = [this](char const* slot, Dataset const& d) {
    auto const check = checkText(d);
    return QString("%1: %2 (%3 x %4%5)")
        .arg(slot, QFileInfo(QString::fromStdString(d.path)).fileName())
        .arg(d.rows)
        .arg(d.cols)
        .arg(check.isEmpty() ? "" : ", " + check);
  };
  if (!a_)
    status_->setText("Open a run file (File > Open, or drop it here)");
  else
    status_->setText(describe("A", *a_) + (b_ ? "    " + describe("B", *b_) : QString()));
}

QString MainWindow::checkText(Dataset const& d) const {
  if (std::find(checking_.begin(), checking_.end(), &d) != checking_.end()) {
    auto const done = progress_.count(&d) ? progress_.at(&d) : 0;
    return QString(d.is_run() ? "checking SHA-256 %1 %" : "a table, reading it %1 %").arg(done);
  }
  if (!d.is_run()) return QString("a table");
  if (std::find(verified_.begin(), verified_.end(), &d) == verified_.end()) return QString();
  // "verified" only for what was: older runs carry no digest of their counts.
  return QString(d.counts_verified ? "SHA-256 verified: gradient, counts, summary"
                                   : "SHA-256 verified: gradient, summary (counts: no digest, an older run)");
}

void MainWindow::scanInBackground(std::shared_ptr<Dataset> data) {
  // One pass over the rows: the SHA-256 check, the row table's norms, and the summary
  // when the file has none. The views come first; the diff waits for the check
  // (DiffView::setChecking), and a damaged file is closed before it is compared.
  checking_.push_back(data.get());
  refresh();
  QPointer<MainWindow> self(this);
  auto stop = stop_;
  workers_.emplace_back([self, data, stop] {
    int shown = -1;
    auto result = std::make_shared<Scan>();
    try {  // nothing a file holds may end the program from this thread
      *result = scan(*data, [&](double done) {
        if (int(done * 100) != shown) {
          shown = int(done * 100);
          QMetaObject::invokeMethod(qApp, [self, d = data.get(), shown] {
            if (!self) return;
            self->progress_[d] = shown;
            self->refresh();
          });
        }
        return !stop->load();
      });
    } catch (std::exception const& e) {
      result->error = e.what();
      result->completed = true;
    }
    if (stop->load() || !result->completed) return;
    QMetaObject::invokeMethod(qApp, [self, data, result] {
      if (!self) return;
      auto& pending = self->checking_;
      pending.erase(std::remove(pending.begin(), pending.end(), data.get()), pending.end());
      self->progress_.erase(data.get());
      if (!result->error.empty()) {
        self->closeDamaged(data.get(), QString::fromStdString(result->error));
        return;
      }
      if (!result->summary_ok) {
        self->closeDamaged(data.get(), "its stored summary is not its gradient's (recomputed from the rows, the bits "
                                       "differ): the file was changed after the run wrote it");
        return;
      }
      if (result->sha256_ok && !data->damaged()) {
        apply(std::move(*result), *data);
        if (data->is_run()) self->verified_.push_back(data.get());
        if (self->a_ == data) {
          self->counts_->datasetUpdated();
          self->gradient_->datasetUpdated();
        }
        if (self->a_ == data || self->b_ == data) self->columns_->datasetUpdated();  // B's are drawn over A's
        self->refresh();
        return;
      }
      self->closeDamaged(data.get(), "its gradient does not match its stored SHA-256 (the file was changed after "
                                     "the run wrote it)");
    });
  });
}

void MainWindow::closeDamaged(Dataset const* data, QString const& why) {
  bool const open = a_.get() == data || b_.get() == data;
  checking_.erase(std::remove(checking_.begin(), checking_.end(), data), checking_.end());
  progress_.erase(data);
  if (!open) return;  // closed already (a second failure, or another file replaced it)
  QString const path = QString::fromStdString(data->path);
  forget(path);
  if (a_.get() == data) a_ = nullptr;
  if (b_.get() == data) b_ = nullptr;
  refresh();
  QString const text = why.startsWith(path + ":") ? why : path + ": is damaged: " + why;  // a reader's error names it
  showError(text + "; it was closed and no verdict is given on it");
}

void MainWindow::compareInBackground() {
  std::shared_ptr<Dataset const> a = a_, b = b_;
  compared_ = {a.get(), b.get()};
  comparison_result_ = nullptr;
  comparing_ = true;
  int const generation = ++comparison_;
  QPointer<MainWindow> self(this);
  auto stop = stop_;
  workers_.emplace_back([self, a, b, stop, generation] {
    std::shared_ptr<DiffSummary> result;
    try {
      result = std::make_shared<DiffSummary>(diff(*a, *b, [&](double) { return !stop->load(); }));
    } catch (std::exception const&) {  // a file that failed: it is closed (on_damage), not compared
    }
    if (stop->load() || (result && !result->completed)) return;
    bool const usable = result && !a->damaged() && !b->damaged();  // rows that failed read as NaN
    QMetaObject::invokeMethod(qApp, [self, result, generation, a, b, usable] {
      if (!self || generation != self->comparison_) return;  // a newer comparison is under way
      self->comparing_ = false;
      if (usable && self->a_ == a && self->b_ == b) {
        self->comparison_result_ = result;
        self->diff_->setSummary(*result);
        self->refresh();
      }
    });
  });
}

void MainWindow::waitForChecks() {
  while (checking() || comparing_) QApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
}

void MainWindow::selectRow(qint64 row) {
  counts_->showRow(row);
  gradient_->showRow(row);
  diff_->showRow(row);
}

void MainWindow::goToRow() {
  if (!a_) return;
  bool ok = false;
  auto const row = QInputDialog::getInt(this, "Go to row", QString("Row id (0 to %1):").arg(a_->rows - 1), 0, 0,
                                        int(std::min<std::int64_t>(a_->rows - 1, INT32_MAX)), 1, &ok);
  if (ok) selectRow(row);
}

void MainWindow::setView(QString const& name) {
  if (name == "counts")
    tabs_->setCurrentWidget(counts_);
  else if (name == "gradient")
    tabs_->setCurrentWidget(gradient_);
  else if (name == "diff")
    tabs_->setCurrentWidget(diff_);
  else if (name == "columns")
    tabs_->setCurrentWidget(columns_);
  else if (name == "info")
    tabs_->setCurrentWidget(info_);
}

QWidget* MainWindow::currentView() const {
  return tabs_->currentWidget();
}

void MainWindow::exportPng() {
  auto* view = qobject_cast<View*>(tabs_->currentWidget());
  if (!view) return;
  auto const path =
      QFileDialog::getSaveFileName(this, "Export chart as PNG", dialogFolder() + "/chart.png", "PNG (*.png)");
  if (!path.isEmpty() && !chartImage().save(path, "PNG")) showError(path + ": could not be written");
}

QString MainWindow::chartCaption() const {
  auto name = [](Dataset const& d) {
    return QString("%1 (%2 x %3)").arg(QFileInfo(QString::fromStdString(d.path)).fileName()).arg(d.rows).arg(d.cols);
  };
  QString text = "kembed inspector, " + tabs_->tabText(tabs_->currentIndex()) + " view";
  if (a_) text += ": A " + name(*a_);
  if (b_) text += ", B " + name(*b_);
  return text;
}

QImage MainWindow::chartImage() const {
  // The chart with a caption above it: a PNG passed around says what it shows.
  auto* view = qobject_cast<View*>(tabs_->currentWidget());
  if (!view) return {};
  QImage const chart = view->plot()->toPixmap().toImage();
  QFontMetrics const metrics(font());
  int const strip = metrics.height() + 8;
  QImage image(chart.width(), chart.height() + strip, QImage::Format_ARGB32);
  image.fill(Qt::white);
  QPainter painter(&image);
  painter.setFont(font());
  painter.setPen(Qt::black);
  painter.drawText(QRect(6, 0, chart.width() - 12, strip), Qt::AlignVCenter | Qt::AlignLeft,
                   metrics.elidedText(chartCaption(), Qt::ElideMiddle, chart.width() - 12));
  painter.drawImage(0, strip, chart);
  return image;
}

void MainWindow::exportCsv() {
  auto* view = qobject_cast<View*>(tabs_->currentWidget());
  if (!view) return;
  auto const path =
      QFileDialog::getSaveFileName(this, "Export table as CSV", dialogFolder() + "/table.csv", "CSV (*.csv)");
  if (path.isEmpty()) return;
  QProgressDialog dialog("Writing " + QFileInfo(path).fileName() + "...", "Cancel", 0, 1000, this);
  dialog.setWindowModality(Qt::WindowModal);
  dialog.setMinimumDuration(300);
  exportCsvTo(path, [&dialog](double done) {
    dialog.setValue(int(done * 1000));
    QApplication::processEvents();
    return !dialog.wasCanceled();
  });
}

bool MainWindow::exportCsvTo(QString const& path, std::function<bool(double)> const& progress) {
  auto* view = qobject_cast<View*>(tabs_->currentWidget());
  if (!view) return false;
  QSaveFile file(path);  // a temporary beside it, renamed on commit
  if (!file.open(QIODevice::WriteOnly)) {
    showError(path + ": " + file.errorString());
    return false;
  }
  bool canceled = false;  // by the person (the progress dialog's Cancel): no error, nothing written
  auto const going_on = [&](double done) { return !(canceled = progress && !progress(done)); };
  if (!view->writeCsv(file, going_on)) {
    QString const why = file.errorString();
    file.cancelWriting();
    if (canceled)
      statusBar()->showMessage(QFileInfo(path).fileName() + ": export canceled, nothing written", 10000);
    else
      showError(path + ": " + why);
    return false;
  }
  if (!file.commit()) {
    showError(path + ": " + file.errorString());
    return false;
  }
  return true;
}

QString MainWindow::statusText() const {
  auto const message = statusBar()->currentMessage();
  return message.isEmpty() ? status_->text() : message;
}

QString MainWindow::keysText() const {
  return "Keys\n"
         "  Ctrl+O        open a run or table file (as A)\n"
         "  Ctrl+D        open a second file to compare (as B)\n"
         "  Ctrl+G        go to a row\n"
         "  Ctrl+F        find rows: ids and ranges as pasted, or a count range (Counts)\n"
         "  F6            the next differing row (Diff)\n"
         "  Ctrl+0        fit all rows in the heatmap (Gradient)\n"
         "  Ctrl+1..5     the Counts, Gradient, Columns, Diff and Info views\n"
         "  Ctrl+Tab      the next view; Ctrl+Shift+Tab the one before\n"
         "  Ctrl+E        export the chart as PNG\n"
         "  Ctrl+Shift+E  export the table as CSV\n"
         "  F1            this list\n"
         "  Ctrl+Q        quit\n"
         "Mouse\n"
         "  wheel         zoom the heatmap's rows (Gradient)\n"
         "  drag          pan the heatmap's rows\n"
         "  double-click  fit all rows in the heatmap\n"
         "  right-click   pick the row under the pointer (Gradient)\n"
         "  click         pick a row in any table, a bar's row, a differing row's point\n"
         "Files can also be dropped on the window: one becomes A (or B), two become A and B.";
}

void MainWindow::showKeys() {
  // A dialog of its own: QMessageBox wraps long lines, which breaks the list's columns.
  auto* box = new QDialog(this);
  box->setObjectName("keys");
  box->setWindowTitle("Keys and mouse");
  auto* text = new QLabel(keysText(), box);
  text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  text->setWordWrap(false);
  text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* ok = new QDialogButtonBox(QDialogButtonBox::Ok, box);
  connect(ok, &QDialogButtonBox::accepted, box, &QDialog::accept);
  auto* layout = new QVBoxLayout(box);
  layout->addWidget(text);
  layout->addWidget(ok);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  auto const urls = event->mimeData()->urls();
  for (int i = 0; i < urls.size() && i < 2; ++i) {
    // One file: it becomes A, or B when A is there already. Two files: A and B.
    Slot const slot = urls.size() >= 2 ? (i == 0 ? Slot::A : Slot::B) : (a_ ? Slot::B : Slot::A);
    open(urls[i].toLocalFile(), slot);
  }
}

void MainWindow::showError(QString const& text) {
  last_error_ = text;
  statusBar()->showMessage(text, 10000);
  if (quiet_) return;
  auto* box = new QMessageBox(QMessageBox::Critical, "kembed inspector", text, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();  // window-modal, not blocking: the window stays usable behind it
}

void MainWindow::remember(QString const& path) {
  QSettings settings("kembed", "inspector");
  auto files = settings.value("recent").toStringList();
  auto const absolute = QFileInfo(path).absoluteFilePath();
  files.removeAll(absolute);
  files.prepend(absolute);
  while (files.size() > 10) files.removeLast();
  settings.setValue("recent", files);
  rebuildRecentMenu();
}

QString MainWindow::dialogFolder() const {
  auto const& open = a_ ? a_ : b_;
  return open ? QFileInfo(QString::fromStdString(open->path)).absolutePath() : QString();
}

void MainWindow::forget(QString const& path) {
  if (!remembering_) return;
  QSettings settings("kembed", "inspector");
  auto files = settings.value("recent").toStringList();
  if (files.removeAll(QFileInfo(path).absoluteFilePath()) == 0) return;
  settings.setValue("recent", files);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recent_->clear();
  QSettings settings("kembed", "inspector");
  auto const files = settings.value("recent").toStringList();
  for (auto const& f : files) recent_->addAction(f, this, [this, f] { open(f, Slot::A); });
  recent_->setEnabled(!files.isEmpty());
}

}  // namespace kembed::inspector
