#pragma once
// The inspector's window: one run (or table) as A, optionally a second as B, three
// views that follow one selected row, menus, recent files, drag and drop, exports.
#include "analysis.hpp"
#include "views.hpp"

#include <QImage>
#include <QMainWindow>
#include <QSize>

#include <functional>
#include <atomic>
#include <map>
#include <memory>
#include <thread>
#include <vector>

class QLabel;
class QMenu;
class QTabWidget;

namespace kembed::inspector {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum class Slot { A, B };
  explicit MainWindow(QWidget* parent = nullptr);
  // The least size the window takes: every view whole in it (a laptop's 1366 x 768
  // holds it with room for a panel).
  static constexpr QSize least_size{960, 640};
  ~MainWindow() override;  // stops and joins the background checks

  // Opens `path` into slot A or B. On a bad file: an error dialog (unless
  // quiet), the error kept in lastError(), and the window as it was.
  bool open(QString const& path, Slot slot);
  void setQuiet(bool quiet) { quiet_ = quiet; }  // no dialogs (tests, --screenshot)
  // Whether opening a file adds it to the recent list in the user's settings (a
  // headless render changes nothing of the user's).
  void setRemembering(bool remembering) { remembering_ = remembering; }
  QString lastError() const { return last_error_; }
  void setView(QString const& name);  // "counts", "gradient", "columns", "diff" or "info"
  QWidget* currentView() const;

  CountsView* countsView() const { return counts_; }
  GradientView* gradientView() const { return gradient_; }
  DiffView* diffView() const { return diff_; }
  ColumnsView* columnsView() const { return columns_; }
  InfoView* infoView() const { return info_; }
  std::shared_ptr<Dataset const> datasetA() const { return a_; }
  std::shared_ptr<Dataset const> datasetB() const { return b_; }
  // Whether a run's gradient is still being checked against its stored SHA-256.
  // Until both are checked the diff gives no verdict; a run that fails is closed.
  bool checking() const { return !checking_.empty(); }
  // Processes events until no check or comparison is running (--screenshot, tests).
  void waitForChecks();

  // Writes the current view's CSV to `path` through a temporary file: nothing is
  // left there when it fails or `progress` (fraction done) returns false to cancel.
  bool exportCsvTo(QString const& path, std::function<bool(double)> const& progress = {});
  QString statusText() const;  // what the status bar shows now
  QString keysText() const;    // the key list (Help > Keys, F1)
  // Where file dialogs open: the folder of the file open (A, else B), else the
  // working directory (empty).
  QString dialogFolder() const;
  // What Export chart as PNG writes: the current view's chart under a caption naming
  // the view and the files (A, B) with their shapes.
  QImage chartImage() const;
  QString chartCaption() const;

 public slots:
  void selectRow(qint64 row);
  void goToRow();
  void exportPng();
  void exportCsv();
  void showKeys();

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void showError(QString const& text);
  void remember(QString const& path);
  void forget(QString const& path);  // off the recent list: it could not be opened, or failed its check
  void rebuildRecentMenu();
  void refresh();
  // What the window has checked of `d`: "checking SHA-256 40 %", "SHA-256 verified: ...",
  // "a table", or empty.
  QString checkText(Dataset const& d) const;
  void scanInBackground(std::shared_ptr<Dataset> data);
  // Closes a file found damaged (its check failed, or a read of its rows did), as if
  // it had failed to open, and says why: a damaged file is never judged.
  void closeDamaged(Dataset const* data, QString const& why);
  void compareInBackground();

  std::shared_ptr<Dataset> a_, b_;  // filled in by their scans, on this thread only
  std::vector<Dataset const*> checking_, verified_;
  std::map<Dataset const*, int> progress_;  // per cent of a scan done
  std::pair<Dataset const*, Dataset const*> compared_{nullptr, nullptr};
  std::shared_ptr<DiffSummary const> comparison_result_;  // of compared_, once made
  bool comparing_ = false;
  int comparison_ = 0;
  std::vector<std::thread> workers_;
  std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(false);
  QTabWidget* tabs_;
  CountsView* counts_;
  GradientView* gradient_;
  DiffView* diff_;
  ColumnsView* columns_;
  InfoView* info_;
  QMenu* recent_;
  QLabel* status_;
  QString last_error_;
  bool quiet_ = false;
  bool remembering_ = true;
};

}  // namespace kembed::inspector
