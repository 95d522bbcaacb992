#pragma once
// The inspector's three views. Each shows one or two datasets, reports the row a
// user picks (rowPicked) and follows the row picked elsewhere (showRow).
#include "analysis.hpp"
#include "models.hpp"

#include <QColor>
#include <QWidget>

#include <functional>
#include <memory>
#include <optional>

class QCustomPlot;
class QCPBars;
class QCPColorMap;
class QCPColorScale;
class QCPAxisRect;
struct QCPRange;
class QCPGraph;
class QCPItemStraightLine;
class QCheckBox;
class QComboBox;
class QIODevice;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTableView;
class QTableWidget;
class QTextBrowser;

namespace kembed::inspector {

class View : public QWidget {
  Q_OBJECT
 public:
  using QWidget::QWidget;
  virtual QCustomPlot* plot() const = 0;  // the chart that "Export PNG" saves
  virtual QString tableCsv() const = 0;   // the table that "Export CSV" saves
  // Writes what "Export CSV" saves; `progress` gets the fraction done and returns
  // false to cancel (then false is returned). The default writes tableCsv().
  virtual bool writeCsv(QIODevice& out, std::function<bool(double)> const& progress) const;
 public slots:
  virtual void showRow(qint64 row) = 0;
 signals:
  void rowPicked(qint64 row);

 protected:
  // Set while a view follows a row picked elsewhere, so that selecting it in the
  // view's own table does not report it back as a new pick.
  bool following_ = false;
};

// Per-row gradient counts: an exact histogram (bins chosen by the user, linear or
// logarithmic, log-scaled axis on demand), the top rows, and a sortable row table.
class CountsView : public View {
  Q_OBJECT
 public:
  explicit CountsView(QWidget* parent = nullptr);
  void setDataset(std::shared_ptr<Dataset const> data);
  QCustomPlot* plot() const override { return plot_; }
  QString tableCsv() const override { return model_->csv(); }
  RowTableModel* model() const { return model_; }
  void datasetUpdated() { model_->statsArrived(); }  // the scan's norms arrived
  Histogram const& histogram() const { return histogram_; }
  // The padding row (named in the summary, the top rows and the row table) can be
  // left out of the histogram: on real text it holds most positions, no gradient.
  QCheckBox* leaveOutPadding() const { return skip_padding_; }
  QTableWidget* topRows() const { return top_; }
  // Row search and filters: a count range and a list of ids ("3, 17 100-200", as
  // pasted). False, with the reason in filterText(), when the list does not parse.
  bool setRowFilter(QString const& min_count, QString const& max_count, QString const& ids);
  QString filterText() const;
  void focusRowSearch();
  QString summaryText() const;
  double markedBin() const;  // the bin the picked row's marker stands on, or -1
  QString hoverText(double x) const;  // the bar under the pointer, in words
 public slots:
  void showRow(qint64 row) override;
  void rebuildHistogram();

 private:
  void markRow();    // the picked row's bar, after any change of bins
  void labelBins();  // bin labels for the plot's current width
  int labelled_width_ = -1;
  std::shared_ptr<Dataset const> data_;
  std::int64_t picked_ = -1;
  Histogram histogram_;
  QCustomPlot* plot_;
  QCPBars* bars_;
  QSpinBox* bins_;
  QCheckBox* log_bins_;
  QCheckBox* log_axis_;
  QCheckBox* skip_padding_;
  QTableWidget* top_;
  QTableView* table_;
  RowTableModel* model_;
  QSpinBox* page_;  // the row table's page, when it has more than one
  QLineEdit *min_count_, *max_count_, *ids_;
  QLabel* filter_state_;
  void applyFilter();
  QLabel* summary_;
};

// The gradient as a heatmap: rows down, columns across, colour by value with a
// legend. The visible row range is squeezed into bands of whole rows (the value of
// largest magnitude wins), so a million rows render as fast as a thousand; the
// mouse wheel zooms and dragging pans, and each change re-bands the rows shown.
class GradientView : public View {
  Q_OBJECT
 public:
  explicit GradientView(QWidget* parent = nullptr);
  void setDataset(std::shared_ptr<Dataset const> data);
  void datasetUpdated();  // the scan made its summary: new colours, new bands
  // A second run and the comparison of the two: A, B or A - B can then be shown, in
  // the same bands (null: none).
  void setComparison(std::shared_ptr<Dataset const> b, std::shared_ptr<DiffSummary const> diff);
  enum class Show { A, B, Difference, SideBySide };  // the last: A | B | A - B
  void setShow(Show show);
  // As setShow, or, while B or the comparison it needs is not there yet (the checks
  // and the comparison run in the background), as soon as they are: --heatmap.
  void requestShow(Show show);
  Show shown() const { return show_; }
  // How values become colours: the scale's meaning is its label.
  enum class Scale { Linear99, LinearFull, SymmetricLog, LogMagnitude };
  void setScale(Scale scale);
  // What the colour bar's label says (`brief`: the short form, for a short bar).
  QString scaleLabel(bool brief = false) const;
  // What the pointer is over: row, column, the values there (with their bits), the
  // row's count and the band's value, of the panel under it (side by side: 0 is A,
  // 1 B, 2 A - B; else the one shown). Empty outside the cells.
  QString hoverText(double x, double y, int panel = 0) const;
  QString lastHover() const;
  QCustomPlot* plot() const override { return plot_; }
  QString tableCsv() const override;
  // Every row in view, all columns: "row,c0,...,c{d-1}".
  bool writeCsv(QIODevice& out, std::function<bool(double)> const& progress) const override;
  int bands() const { return bands_; }
  QString infoText() const;
 public slots:
  void showRow(qint64 row) override;
  void rebuild();
  void fitAll();  // every row in view (Ctrl+0, a double-click)

 private:
  // `r` moved and shrunk to lie within the rows, [-0.5, rows - 0.5], and at least a
  // row tall: no zoom, pan or go-to shows rows that are not there.
  QCPRange clamped(QCPRange r) const;
  void fill();  // bands for the axis rect's current height, without a replot
  void setColourRange();
  bool canShow(Show show) const;
  QString scaleLabel(QString const& what, float top99, bool brief) const;
  void labelScales();  // whether B, or the comparison, it needs is there
  io::Summary const& shownSummary() const;
  std::shared_ptr<Dataset const> b_;
  std::shared_ptr<DiffSummary const> diff_;
  Show show_ = Show::A;
  std::optional<Show> requested_;  // by requestShow, until it can be shown
  QComboBox* which_;
  QComboBox* colours_;
  QCheckBox* unreferenced_;  // the sparsity overlay: bands of rows with count 0 in grey
  // Whether the overlay is on and rows [first, last) all have count 0 in `counted`.
  bool unreferencedBand(Dataset const* counted, std::int64_t first, std::int64_t last) const;
  QLabel* hover_;
  Scale scale_kind_ = Scale::Linear99;
  float top99_ = 1, top_full_ = 1;  // of the shown summary's finest blocks' max |value|
  double toColour(float value) const { return toColour(value, top99_); }
  double toColour(float value, float top99) const;
  // The colour range of a summary for the chosen scale; `top99` gets its 99th percentile.
  QCPRange colourRange(io::Summary const& summary, float& top99, float& full) const;
  // Paints `heat` into `map` (cell centres on the bands' rows).
  // `counted`: the run whose rows with count 0 the overlay greys (null: none).
  void paint(QCPColorMap* map, Heat const& heat, float top99, Dataset const* counted) const;
  // Side by side: B's and A - B's axis rects beside A's, made on demand.
  void sideBySide(bool on);
  void showAOnly();  // A alone, without re-banding
  QCPAxisRect* rect_b_ = nullptr;
  QCPAxisRect* rect_d_ = nullptr;
  QCPColorMap* map_b_ = nullptr;
  QCPColorMap* map_d_ = nullptr;
  QCPColorScale* scale_d_ = nullptr;
  float top99_d_ = 1, top_full_d_ = 1;
  Heat heat_;             // what is drawn (side by side: A's)
  Heat heat_b_, heat_d_;  // side by side: B's and A - B's
  // The readout of what is under the pointer, kept true when the rows move under a
  // still pointer (a zoom, a go-to); `pointer_` is where it was last seen.
  void updateHover();
  QPoint pointer_{-1, -1};
  std::shared_ptr<Dataset const> data_;
  int filled_height_ = -1;
  QCustomPlot* plot_;
  QCPColorMap* map_;
  QCPColorScale* scale_;
  QCPItemStraightLine* marker_;
  QLabel* info_;
  int bands_ = 0;
  bool rebuilding_ = false;
};

// Per-column statistics: each column's distribution over the rows as bands of
// percentiles (1-99, 10-90, 25-75 and the median, as TensorBoard draws its
// distributions), the least and greatest value, and a table of them. They come with
// the background pass over the rows.
class ColumnsView : public View {
  Q_OBJECT
 public:
  explicit ColumnsView(QWidget* parent = nullptr);
  void setDataset(std::shared_ptr<Dataset const> data);
  // A second run drawn over A's (its median and 1-99 % band, in orange); null: none.
  void setComparison(std::shared_ptr<Dataset const> b);
  void datasetUpdated();  // the scan's statistics arrived
  QCustomPlot* plot() const override { return plot_; }
  QString tableCsv() const override;
  QTableWidget* table() const { return table_; }
  QString hoverText(double x) const;  // the column under the pointer, in words
  QString stateText() const;
  // The value axis: sign(v) log10(1 + |v|/t), which keeps the percentile bands and the
  // extremes both readable, or linear; either way every extreme lies inside it.
  enum class Axis { SymmetricLog, Linear };
  void setAxis(Axis axis);
  void setCountedOnly(bool on);      // leave out the rows with count 0 (runs)
  double axisValue(double v) const;  // where value v is drawn on the axis
 public slots:
  void showRow(qint64) override {}  // a column view follows no row

 private:
  ColumnStats const& stats(Dataset const& d) const;
  void drawDataset(Dataset const& d, QColor colour, QString const& prefix, bool bands);
  void layoutValueAxis();
  void fillTable(ColumnStats const& cs);
  std::shared_ptr<Dataset const> data_, b_;
  Axis axis_ = Axis::SymmetricLog;
  bool counted_only_ = false;
  double t_ = 1;  // the symmetric log's linear width
  QCustomPlot* plot_;
  QTableWidget* table_;
  QComboBox* axis_box_;
  QCheckBox* counted_box_;
  QLabel* state_;
  QLabel* hover_;
};

// One file's whole story, or two files' side by side: what `kembed info` prints (the
// format and what it holds, a run's provenance, every attribute, the datasets with
// their shapes, chunks and filters), the checks the window made, and the summary's
// levels. The lines that decide a run's bits (plan, mode, backend, threads, ranks,
// microbatch) are highlighted.
class InfoView : public QWidget {
  Q_OBJECT
 public:
  explicit InfoView(QWidget* parent = nullptr);
  // `checks`: what the window verified of each (its status text), empty while none.
  void setDatasets(std::shared_ptr<Dataset const> a, std::shared_ptr<Dataset const> b, QString const& checks_a,
                   QString const& checks_b);
  QString text() const;                                // what is shown, as plain text
  QString html() const;                                // what was given to show
  static constexpr char const* highlight = "#fff3c4";  // behind the lines that decide a run's bits

 private:
  QString describe(Dataset const& d, QString const& slot, QString const& checks) const;
  QTextBrowser* browser_;
  QString html_;
};

// Two datasets: the verdict, the differing rows (max ULPs, max |a-b|, bits), the
// difference against row id, the provenance of both side by side (differences in
// bold), and the bits of the selected row.
class DiffView : public View {
  Q_OBJECT
 public:
  explicit DiffView(QWidget* parent = nullptr);
  void setDatasets(std::shared_ptr<Dataset const> a, std::shared_ptr<Dataset const> b);
  // The comparison of the two (made in the background by the window); `ready`
  // false: not yet made.
  void setSummary(DiffSummary summary, bool ready = true);
  // While a run's SHA-256 is being checked the verdict waits (a damaged file gets none).
  void setChecking(bool checking);
  QCustomPlot* plot() const override { return plot_; }
  QString tableCsv() const override { return model_->csv(); }
  DiffSummary const& summary() const { return summary_; }
  QString verdict() const;  // plain text: the headline, then what explains it, a line each
  DiffTableModel* model() const { return model_; }
  QString bitsText() const;
  QString hoverText(double x, double y) const;  // the differing row nearest the pointer
 public slots:
  void showRow(qint64 row) override;
  void nextDifferingRow();

 private:
  std::shared_ptr<Dataset const> a_, b_;
  void showVerdict();
  DiffSummary summary_;
  std::int64_t current_ = -1;
  bool checking_ = false;
  bool ready_ = false;
  QLabel* verdict_;
  QCustomPlot* plot_;
  QCPGraph* points_;
  QCPItemStraightLine* marker_;
  QTableView* table_;
  DiffTableModel* model_;
  QTableWidget* provenance_;
  QLabel* bits_;  // in a scroll area: 64 columns of bits must not grow the window
};

}  // namespace kembed::inspector
