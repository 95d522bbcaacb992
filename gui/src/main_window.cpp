#include "main_window.hpp"

#include <algorithm>

#include <kembed/core/error.hpp>

#include <qcustomplot.h>

#include <QApplication>
#include <QDragEnterEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPointer>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextStream>

#include <thread>

namespace kembed::inspector {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle("kembed inspector");
  setAcceptDrops(true);
  tabs_ = new QTabWidget(this);
  counts_ = new CountsView(tabs_);
  gradient_ = new GradientView(tabs_);
  diff_ = new DiffView(tabs_);
  tabs_->addTab(counts_, "Counts");
  tabs_->addTab(gradient_, "Gradient");
  tabs_->addTab(diff_, "Diff");
  setCentralWidget(tabs_);
  status_ = new QLabel(this);
  statusBar()->addWidget(status_, 1);
  for (View* view : {static_cast<View*>(counts_), static_cast<View*>(gradient_), static_cast<View*>(diff_)})
    connect(view, &View::rowPicked, this, &MainWindow::selectRow);

  auto* file = menuBar()->addMenu("&File");
  file->addAction("&Open run...", QKeySequence::Open, this, [this] {
    auto const path =
        QFileDialog::getOpenFileName(this, "Open a run or table file", {}, "HDF5 (*.h5 *.hdf5);;All files (*)");
    if (!path.isEmpty()) open(path, Slot::A);
  });
  file->addAction("&Compare with...", QKeySequence(Qt::CTRL | Qt::Key_D), this, [this] {
    auto const path =
        QFileDialog::getOpenFileName(this, "Open a second run to compare", {}, "HDF5 (*.h5 *.hdf5);;All files (*)");
    if (!path.isEmpty()) open(path, Slot::B);
  });
  recent_ = file->addMenu("Open &recent");
  file->addSeparator();
  file->addAction("Export chart as &PNG...", QKeySequence(Qt::CTRL | Qt::Key_E), this, &MainWindow::exportPng);
  file->addAction("Export table as &CSV...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E), this,
                  &MainWindow::exportCsv);
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, qApp, &QApplication::quit);
  auto* go = menuBar()->addMenu("&Go");
  go->addAction("&Go to row...", QKeySequence(Qt::CTRL | Qt::Key_G), this, &MainWindow::goToRow);
  go->addAction("&Next differing row", QKeySequence(Qt::Key_F6), diff_, [this] {
    tabs_->setCurrentWidget(diff_);
    diff_->nextDifferingRow();
  });
  rebuildRecentMenu();
  resize(1200, 800);
  refresh();
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
    showError(text);
    return false;
  }
  QApplication::restoreOverrideCursor();
  (slot == Slot::A ? a_ : b_) = data;
  remember(path);
  refresh();
  if (data->is_run()) verifyInBackground(data);
  return true;
}

void MainWindow::refresh() {
  counts_->setDataset(a_);
  gradient_->setDataset(a_);
  diff_->setDatasets(a_, b_);
  bool const unchecked = std::any_of(checking_.begin(), checking_.end(),
                                     [this](Dataset const* d) { return d == a_.get() || d == b_.get(); });
  diff_->setChecking(unchecked);
  QString title = "kembed inspector";
  if (a_) title += " - " + QFileInfo(QString::fromStdString(a_->path)).fileName();
  if (b_) title += " vs " + QFileInfo(QString::fromStdString(b_->path)).fileName();
  setWindowTitle(title);
  if (!a_)
    status_->setText("Open a run file (File > Open, or drop it here)");
  else
    status_->setText(QString("%1: %2 x %3").arg(QString::fromStdString(a_->path)).arg(a_->rows).arg(a_->cols));
}

void MainWindow::verifyInBackground(std::shared_ptr<Dataset const> data) {
  // The SHA-256 of a large gradient takes a while: the views come first, the diff's
  // verdict after the check (DiffView::setChecking).
  checking_.push_back(data.get());
  refresh();
  QPointer<MainWindow> self(this);
  std::thread([self, data] {
    bool const ok = verify_sha256(*data);
    QMetaObject::invokeMethod(qApp, [self, data, ok] {
      if (!self) return;
      auto& pending = self->checking_;
      pending.erase(std::remove(pending.begin(), pending.end(), data.get()), pending.end());
      QString const name = QFileInfo(QString::fromStdString(data->path)).fileName();
      if (ok) {
        self->statusBar()->showMessage(name + ": gradient SHA-256 verified", 5000);
        self->refresh();
        return;
      }
      // A damaged file is never judged: it is closed, as if it had failed to open.
      if (self->a_.get() == data.get()) self->a_ = nullptr;
      if (self->b_.get() == data.get()) self->b_ = nullptr;
      self->refresh();
      self->showError(QString::fromStdString(data->path) +
                      ": is damaged: its gradient does not match its stored SHA-256 (the file was changed after "
                      "the run wrote it), so it was closed and no verdict is given on it");
    });
  }).detach();
}

void MainWindow::waitForChecks() {
  while (checking()) QApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
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
}

QWidget* MainWindow::currentView() const {
  return tabs_->currentWidget();
}

void MainWindow::exportPng() {
  auto* view = qobject_cast<View*>(tabs_->currentWidget());
  if (!view) return;
  auto const path = QFileDialog::getSaveFileName(this, "Export chart as PNG", "chart.png", "PNG (*.png)");
  if (!path.isEmpty() && !view->plot()->savePng(path)) showError(path + ": could not be written");
}

void MainWindow::exportCsv() {
  auto* view = qobject_cast<View*>(tabs_->currentWidget());
  if (!view) return;
  auto const path = QFileDialog::getSaveFileName(this, "Export table as CSV", "table.csv", "CSV (*.csv)");
  if (path.isEmpty()) return;
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) return showError(path + ": " + file.errorString());
  QTextStream(&file) << view->tableCsv();
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

void MainWindow::rebuildRecentMenu() {
  recent_->clear();
  QSettings settings("kembed", "inspector");
  auto const files = settings.value("recent").toStringList();
  for (auto const& f : files) recent_->addAction(f, this, [this, f] { open(f, Slot::A); });
  recent_->setEnabled(!files.isEmpty());
}

}  // namespace kembed::inspector
