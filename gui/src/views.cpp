#include "views.hpp"

#include <qcustomplot.h>

#include <QBuffer>
#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIODevice>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QScopedValueRollback>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableView>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTextStream>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <numeric>
#include <cmath>

namespace kembed::inspector {
namespace {

QColor const marker_red(200, 0, 0);

QTableView* make_table(QAbstractItemModel* model, QWidget* parent) {
  auto* table = new QTableView(parent);
  table->setModel(model);
  table->setSortingEnabled(true);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setSelectionMode(QAbstractItemView::SingleSelection);
  table->verticalHeader()->setVisible(false);
  table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);  // a million rows stay cheap
  table->verticalHeader()->setDefaultSectionSize(20);
  table->horizontalHeader()->setStretchLastSection(true);
  table->horizontalHeader()->setDefaultSectionSize(112);
  return table;
}

// At the window's least size a splitter would squeeze a table to nothing: keep
// `rows` rows of it in view, and its splitter from collapsing it.
void hold_rows(QSplitter* split, QTableView* table, int rows) {
  split->setChildrenCollapsible(false);
  int const row = table->verticalHeader()->defaultSectionSize();
  table->setMinimumHeight(table->horizontalHeader()->sizeHint().height() + rows * row + 2 * table->frameWidth() +
                          table->horizontalScrollBar()->sizeHint().height());
}

QCustomPlot* make_plot(QWidget* parent) {
  auto* plot = new QCustomPlot(parent);
  plot->setMinimumSize(320, 220);
  plot->setNotAntialiasedElements(QCP::aeAll);  // crisp bars and cells, and faster
  return plot;
}

// Selects a row without reporting it as a pick (`following` is the view's guard).
// The selection model's signals stay on: the table repaints from them, and blocked
// they left the rows selected before painted as selected.
void select_view_row(QTableView* table, int view_row, bool& following) {
  if (view_row < 0) return;
  QScopedValueRollback<bool> guard(following, true);
  table->selectRow(view_row);
  table->scrollTo(table->model()->index(view_row, 0), QAbstractItemView::PositionAtCenter);
}

// Calls `picked` with the view row a person selected (a click, the arrow keys). A
// row made current without being selected is no pick: a rebuilt table given the
// focus back makes its first row current so.
void on_pick(QTableView* table, bool const& following, std::function<void(int)> picked) {
  QObject::connect(table->selectionModel(), &QItemSelectionModel::selectionChanged, table,
                   [table, &following, picked = std::move(picked)] {
                     auto const rows = table->selectionModel()->selectedRows();
                     if (rows.size() == 1 && !following) picked(rows[0].row());
                   });
}

// Widths that hold each column's header and its widest likely value.
void fit_columns(QTableView* table, QStringList const& widest) {
  auto const metrics = table->fontMetrics();
  auto const header = table->horizontalHeader()->fontMetrics();
  for (int c = 0; c < table->model()->columnCount(); ++c) {
    auto const title = table->model()->headerData(c, Qt::Horizontal, Qt::DisplayRole).toString();
    int w = header.horizontalAdvance(title) + 28;  // room for the sort arrow
    if (c < widest.size()) w = std::max(w, metrics.horizontalAdvance(widest[c]) + 12);
    table->setColumnWidth(c, w);
  }
}

}  // namespace

// ---- counts ------------------------------------------------------------------------

CountsView::CountsView(QWidget* parent) : View(parent) {
  plot_ = make_plot(this);
  bars_ = new QCPBars(plot_->xAxis, plot_->yAxis);
  bars_->setPen(Qt::NoPen);
  bars_->setBrush(QColor(40, 100, 170));
  bars_->setWidth(0.9);
  plot_->xAxis->setLabel("count of occurrences (bin: lower-upper, inclusive)");
  plot_->yAxis->setLabel("rows");
  bins_ = new QSpinBox(this);
  bins_->setRange(1, 1000);
  bins_->setValue(20);
  bins_->setPrefix("bins: ");
  log_bins_ = new QCheckBox("logarithmic bins", this);
  log_bins_->setChecked(true);
  log_bins_->setObjectName("log_bins");
  log_axis_ = new QCheckBox("log scale (rows)", this);
  log_axis_->setChecked(true);
  skip_padding_ = new QCheckBox("leave out the padding row", this);
  skip_padding_->setToolTip("The padding row's gradient is zero whatever its count; on real text it often holds "
                            "most positions");
  skip_padding_->setVisible(false);
  summary_ = new QLabel(this);
  top_ = new QTableWidget(0, 4, this);
  top_->setHorizontalHeaderLabels({"Rank", "Row", "Count", "Share"});
  top_->verticalHeader()->setVisible(false);
  top_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  top_->setSelectionBehavior(QAbstractItemView::SelectRows);
  model_ = new RowTableModel(this);
  table_ = make_table(model_, this);
  table_->setObjectName("row_table");
  page_ = new QSpinBox(this);
  page_->setObjectName("row_page");
  page_->setPrefix("rows, page ");
  page_->setToolTip(QString("The table shows %1 rows at a time, in its current order").arg(RowTableModel::page_rows));
  page_->setVisible(false);
  connect(page_, qOverload<int>(&QSpinBox::valueChanged), this, [this](int page) { model_->setPage(page - 1); });
  connect(model_, &QAbstractItemModel::modelReset, this, [this] {
    QSignalBlocker block(page_);
    page_->setRange(1, std::max(model_->pages(), 1));
    page_->setSuffix(QString(" of %1").arg(model_->pages()));
    page_->setValue(model_->page() + 1);
    page_->setVisible(model_->pages() > 1);
  });

  auto* controls = new QHBoxLayout;
  controls->addWidget(bins_);
  controls->addWidget(log_bins_);
  controls->addWidget(log_axis_);
  controls->addWidget(skip_padding_);
  controls->addStretch();
  summary_->setWordWrap(true);  // its own line: a long one must not squeeze the row table
  auto* left = new QWidget(this);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addLayout(controls);
  left_layout->addWidget(summary_);
  left_layout->addWidget(plot_, 3);
  left_layout->addWidget(new QLabel("Top rows by count", left));
  left_layout->addWidget(top_, 1);
  auto* split = new QSplitter(this);
  split->addWidget(left);
  min_count_ = new QLineEdit(this);
  min_count_->setPlaceholderText("min count");
  max_count_ = new QLineEdit(this);
  max_count_->setPlaceholderText("max count");
  ids_ = new QLineEdit(this);
  ids_->setObjectName("row_ids");
  ids_->setPlaceholderText("rows: 3, 17 100-200 ... (Ctrl+F)");
  ids_->setToolTip("Row ids to list, as pasted: separated by commas, spaces or lines; a-b is a range");
  for (auto* edit : {min_count_, max_count_}) edit->setMaximumWidth(90);
  filter_state_ = new QLabel(this);
  for (auto* edit : {min_count_, max_count_, ids_}) connect(edit, &QLineEdit::editingFinished, this, &CountsView::applyFilter);
  auto* filters = new QHBoxLayout;
  filters->addWidget(min_count_);
  filters->addWidget(max_count_);
  filters->addWidget(ids_, 1);
  auto* right = new QWidget(this);
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addLayout(filters);
  right_layout->addWidget(filter_state_);
  right_layout->addWidget(page_);
  right_layout->addWidget(table_, 1);
  split->addWidget(right);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setChildrenCollapsible(false);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);

  connect(bins_, qOverload<int>(&QSpinBox::valueChanged), this, &CountsView::rebuildHistogram);
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    auto const text = hoverText(plot_->xAxis->pixelToCoord(e->pos().x()));
    if (!text.isEmpty()) QToolTip::showText(e->globalPosition().toPoint(), text, plot_);
  });
  // How many labels fit is known once the plot is laid out at its real width.
  connect(plot_, &QCustomPlot::afterLayout, this, [this] {
    if (plot_->axisRect()->width() != labelled_width_) labelBins();
  });
  connect(log_bins_, &QCheckBox::toggled, this, &CountsView::rebuildHistogram);
  connect(log_axis_, &QCheckBox::toggled, this, &CountsView::rebuildHistogram);
  connect(skip_padding_, &QCheckBox::toggled, this, &CountsView::rebuildHistogram);
  on_pick(table_, following_, [this](int view_row) { emit rowPicked(model_->rowAt(view_row)); });
  connect(top_, &QTableWidget::cellClicked, this,
          [this](int r, int) { emit rowPicked(top_->item(r, 1)->data(Qt::UserRole).toLongLong()); });
}

void CountsView::setDataset(std::shared_ptr<Dataset const> data) {
  if (data == data_) return;  // another file opened as B: this view keeps its state
  data_ = std::move(data);
  picked_ = -1;
  model_->setDataset(data_);
  for (auto* edit : {min_count_, max_count_, ids_}) edit->clear();
  filter_state_->clear();
  fit_columns(table_, {data_ ? QString::number(data_->rows) + (data_->padding_idx >= 0 ? " (padding)" : "") : "",
                       "99999999", "-1234.56789", "-1234.56789"});
  table_->horizontalHeader()->setSortIndicator(RowTableModel::RowId, Qt::AscendingOrder);
  top_->setRowCount(0);
  if (data_ && data_->is_run()) {
    std::int64_t total = 0;
    for (auto c : data_->counts) total += c;
    auto const top = top_rows(data_->counts, 20);
    top_->setRowCount(int(top.size()));
    for (int i = 0; i < int(top.size()); ++i) {
      auto const r = top[std::size_t(i)];
      top_->setItem(i, 0, new QTableWidgetItem(QString::number(i + 1)));
      auto* row = new QTableWidgetItem(row_label(r, data_->is_padding(r)));
      row->setData(Qt::UserRole, QVariant::fromValue<qlonglong>(r));
      if (data_->is_padding(r)) row->setToolTip("the padding row: its gradient is zero, whatever its count");
      top_->setItem(i, 1, row);
      top_->setItem(i, 2, new QTableWidgetItem(QString::number(data_->counts[r])));
      top_->setItem(
          i, 3,
          new QTableWidgetItem(
              QString::number(100.0 * double(data_->counts[r]) / double(std::max<std::int64_t>(total, 1)), 'f', 2) +
              " %"));
    }
    QString text = QString("%1 rows, %2 positions").arg(data_->rows).arg(total);
    if (data_->padding_idx >= 0) {
      auto const c = data_->counts[std::size_t(data_->padding_idx)];
      text += QString("; row %1 is the padding row (%2 positions, %3 %; its gradient is zero)")
                  .arg(data_->padding_idx)
                  .arg(c)
                  .arg(100.0 * double(c) / double(std::max<std::int64_t>(total, 1)), 0, 'f', 1);
    }
    summary_->setText(text);
  } else {
    summary_->setText(data_ ? "a table file has no counts" : "");
  }
  skip_padding_->setVisible(data_ && data_->is_run() && data_->padding_idx >= 0);
  if (!skip_padding_->isVisible()) skip_padding_->setChecked(false);
  // A table has no counts: no histogram, no top rows, no count controls (its rows,
  // their norms and the id search stay).
  bool const counts = !data_ || data_->is_run();
  plot_->setVisible(counts);
  top_->setVisible(counts);
  for (QWidget* control : std::initializer_list<QWidget*>{bins_, log_bins_, log_axis_, min_count_, max_count_})
    control->setEnabled(counts);
  if (!counts) summary_->setText("a table file has no counts: its rows and their norms are in the table below");
  rebuildHistogram();
}

void CountsView::applyFilter() {
  setRowFilter(min_count_->text(), max_count_->text(), ids_->text());
}

void CountsView::focusRowSearch() {
  ids_->setFocus();
  ids_->selectAll();
}

QString CountsView::filterText() const {
  return filter_state_->text();
}

bool CountsView::setRowFilter(QString const& min_count, QString const& max_count, QString const& ids) {
  if (min_count_->text() != min_count) min_count_->setText(min_count);
  if (max_count_->text() != max_count) max_count_->setText(max_count);
  if (ids_->text() != ids) ids_->setText(ids);
  auto refuse = [&](QString const& why) {
    filter_state_->setText(why);
    filter_state_->setStyleSheet("color: #b00000;");
    return false;
  };
  RowTableModel::Filter f;
  bool ok = true;
  if (!min_count.trimmed().isEmpty() && ((f.min_count = min_count.trimmed().toLongLong(&ok)), !ok || f.min_count < 0))
    return refuse("min count: not a count: '" + min_count.trimmed() + "'");
  if (!max_count.trimmed().isEmpty() && ((f.max_count = max_count.trimmed().toLongLong(&ok)), !ok || f.max_count < 0))
    return refuse("max count: not a count: '" + max_count.trimmed() + "'");
  std::int64_t const rows = data_ ? data_->rows : 0;
  for (auto const& token : ids.split(QRegularExpression("[,;\\s]+"), Qt::SkipEmptyParts)) {
    auto const ends = token.split('-');
    bool ok_lo = false, ok_hi = false;
    std::int64_t const lo = ends[0].toLongLong(&ok_lo), hi = ends.size() == 2 ? ends[1].toLongLong(&ok_hi) : lo;
    if (ends.size() > 2 || !ok_lo || (ends.size() == 2 && !ok_hi) || lo < 0 || hi < lo)
      return refuse("not a row id or range: '" + token + "'");
    if (hi >= rows) return refuse(QString("row %1 is past the last row (%2)").arg(hi).arg(rows - 1));
    if (hi - lo > 100000000) return refuse("range too long: '" + token + "'");
    for (std::int64_t r = lo; r <= hi; ++r) f.ids.push_back(r);
  }
  model_->setFilter(std::move(f));
  filter_state_->setStyleSheet("");
  filter_state_->setText(min_count.trimmed().isEmpty() && max_count.trimmed().isEmpty() && ids.trimmed().isEmpty()
                             ? QString()
                             : QString("%1 of %2 rows shown").arg(model_->shownRows()).arg(rows));
  return true;
}

QString CountsView::hoverText(double x) const {
  auto const bin = std::llround(x);
  if (bin < 0 || bin >= std::int64_t(histogram_.rows.size())) return {};
  auto const lo = histogram_.lower[std::size_t(bin)], hi = histogram_.upper[std::size_t(bin)] - 1;
  auto const rows = histogram_.rows[std::size_t(bin)];
  return QString("%1 %2: %3 rows (%4 % of the rows shown)")
      .arg(lo == hi ? "count" : "counts")
      .arg(lo == hi ? QString::number(lo) : QString("%1 to %2").arg(lo).arg(hi))
      .arg(rows)
      .arg(100.0 * double(rows) / double(std::max<std::int64_t>(1, std::accumulate(histogram_.rows.begin(),
                                                                                     histogram_.rows.end(),
                                                                                     std::int64_t{0}))),
           0, 'f', 2);
}

double CountsView::markedBin() const {
  for (int i = 0; i < plot_->itemCount(); ++i)
    if (auto* line = qobject_cast<QCPItemStraightLine*>(plot_->item(i))) return line->point1->coords().x();
  return -1;
}

QString CountsView::summaryText() const {
  return summary_->text();
}

void CountsView::labelBins() {
  // Upright labels, centred under their bars (rotated ones ended at their tick and
  // seemed to name the bar to their left), as many as fit, the last bar always.
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  int const n = int(histogram_.rows.size());
  auto label = [&](int i) {
    auto const lo = histogram_.lower[std::size_t(i)], hi = histogram_.upper[std::size_t(i)];
    return hi - lo == 1 ? QString::number(lo) : QString("%1-\n%2").arg(lo).arg(hi - 1);
  };
  QFontMetrics const metrics(plot_->xAxis->tickLabelFont());
  int widest = 1;
  for (int i = 0; i < n; ++i)
    for (auto const& part : label(i).split('\n')) widest = std::max(widest, metrics.horizontalAdvance(part) + 8);
  labelled_width_ = plot_->axisRect()->width();
  int const room = std::max(1, labelled_width_ / std::max(n, 1));
  int const label_every = std::max(1, (widest + room - 1) / room);
  for (int i = 0; i < n; ++i)
    if (i == n - 1 || (i % label_every == 0 && n - 1 - i >= label_every)) ticker->addTick(double(i), label(i));
  plot_->xAxis->setTicker(ticker);
}

void CountsView::rebuildHistogram() {
  QVector<double> keys, values;
  histogram_ = {};
  if (data_ && data_->is_run()) {
    if (skip_padding_->isChecked() && data_->padding_idx >= 0) {
      auto counts = data_->counts;
      counts.erase(counts.begin() + std::ptrdiff_t(data_->padding_idx));
      histogram_ = count_histogram(counts, bins_->value(), log_bins_->isChecked());
    } else {
      histogram_ = count_histogram(data_->counts, bins_->value(), log_bins_->isChecked());
    }
  }
  int const n = int(histogram_.rows.size());
  for (int i = 0; i < n; ++i) {
    keys << double(i);
    values << double(histogram_.rows[std::size_t(i)]);
  }
  labelBins();
  bars_->setData(keys, values);
  plot_->xAxis->setRange(-0.6, std::max<double>(double(keys.size()) - 0.4, 0.6));
  bool const log_axis = log_axis_->isChecked();
  plot_->yAxis->setScaleType(log_axis ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (log_axis)
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  else
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  double const top = values.isEmpty() ? 1.0 : *std::max_element(values.begin(), values.end());
  plot_->yAxis->setRange(log_axis ? 0.8 : 0.0, std::max(1.0, top * (log_axis ? 2.0 : 1.05)));
  markRow();
  plot_->replot();
}

void CountsView::showRow(qint64 row) {
  if (!data_ || row < 0 || row >= data_->rows) return;
  picked_ = row;
  select_view_row(table_, model_->turnTo(row), following_);
  QSignalBlocker block(page_);
  page_->setValue(model_->page() + 1);
  markRow();
  plot_->replot();
}

void CountsView::markRow() {
  for (int i = plot_->itemCount() - 1; i >= 0; --i) plot_->removeItem(i);
  std::int64_t const row = picked_;
  // Mark the bar that holds this row's count (none for a padding row left out),
  // naming the padding row.
  if (row >= 0 && !histogram_.rows.empty() && data_ && data_->is_run()) {
    if (!(data_->is_padding(row) && skip_padding_->isChecked())) {
      auto const c = data_->counts[row];
      auto const it = std::upper_bound(histogram_.lower.begin(), histogram_.lower.end(), c);
      int const bin = int(it - histogram_.lower.begin()) - 1;
      auto* line = new QCPItemStraightLine(plot_);
      line->setPen(QPen(marker_red, 2));
      line->point1->setCoords(bin, 0);
      line->point2->setCoords(bin, 1);
      if (data_->is_padding(row)) {
        auto* label = new QCPItemText(plot_);
        label->setText(QString("row %1: the padding row (gradient zero)").arg(row));
        label->setColor(marker_red);
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
        label->position->setTypeX(QCPItemPosition::ptPlotCoords);
        label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        label->position->setCoords(bin + 0.3, 0.05);
      }
    }
  }
}

// ---- gradient ----------------------------------------------------------------------

GradientView::GradientView(QWidget* parent) : View(parent) {
  plot_ = make_plot(this);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeDrag(Qt::Vertical);
  plot_->axisRect()->setRangeZoom(Qt::Vertical);
  plot_->xAxis->setLabel("column");
  QSharedPointer<QCPAxisTickerFixed> whole(new QCPAxisTickerFixed);  // columns are whole numbers
  whole->setTickStep(1.0);
  whole->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  plot_->xAxis->setTicker(whole);
  plot_->yAxis->setLabel("row");
  plot_->yAxis->setRangeReversed(true);  // row 0 at the top, as in a table
  map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  map_->setInterpolate(false);
  scale_ = new QCPColorScale(plot_);
  plot_->plotLayout()->addElement(0, 1, scale_);
  map_->setColorScale(scale_);
  QCPColorGradient diverging;  // blue negative, white zero, red positive
  diverging.setColorStopAt(0.0, QColor(5, 48, 97));
  diverging.setColorStopAt(0.25, QColor(67, 147, 195));
  diverging.setColorStopAt(0.5, QColor(247, 247, 247));
  diverging.setColorStopAt(0.75, QColor(214, 96, 77));
  diverging.setColorStopAt(1.0, QColor(103, 0, 31));
  diverging.setNanHandling(QCPColorGradient::nhNanColor);  // NaN (inf - inf) in grey
  diverging.setNanColor(QColor(150, 150, 150));
  map_->setGradient(diverging);
  auto* margins = new QCPMarginGroup(plot_);
  plot_->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  scale_->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  marker_ = new QCPItemStraightLine(plot_);
  marker_->setPen(QPen(QColor(0, 0, 0), 1, Qt::DashLine));
  marker_->setVisible(false);
  info_ = new QLabel(this);
  info_->setWordWrap(true);
  which_ = new QComboBox(this);
  which_->setObjectName("which_run");
  which_->addItems({"A", "B", "A - B", "A | B | A - B"});
  which_->setToolTip("Which gradient the heatmap shows; A - B only once the comparison is made");
  which_->setVisible(false);
  connect(which_, qOverload<int>(&QComboBox::activated), this, [this](int i) { setShow(Show(i)); });
  colours_ = new QComboBox(this);
  colours_->setObjectName("colour_scale");
  colours_->addItems({"linear, 99th percentile", "linear, full range", "symmetric log", "log |value|"});
  colours_->setToolTip("How values become colours; the colour bar's label says what it shows");
  connect(colours_, qOverload<int>(&QComboBox::activated), this, [this](int i) { setScale(Scale(i)); });
  unreferenced_ = new QCheckBox("grey: rows with count 0", this);
  unreferenced_->setObjectName("unreferenced");
  unreferenced_->setToolTip(
      "Bands whose rows no position referenced (their gradient is zero) in grey, so that "
      "they are told apart from small values");
  connect(unreferenced_, &QCheckBox::toggled, this, [this] { rebuild(); });
  hover_ = new QLabel(this);
  hover_->setObjectName("hover");
  hover_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  hover_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  hover_->setWordWrap(true);  // unwrapped, a long readout set the window's least width
  auto* top = new QHBoxLayout;
  top->addWidget(which_);
  top->addWidget(colours_);
  top->addWidget(unreferenced_);
  top->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(info_);  // its own line: beside the controls a narrow window made it a column
  layout->addWidget(plot_, 1);
  layout->addWidget(hover_);
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    pointer_ = e->pos();
    updateHover();
    if (!hover_->text().isEmpty()) QToolTip::showText(e->globalPosition().toPoint(), hover_->text(), plot_);
  });
  connect(plot_->yAxis, qOverload<QCPRange const&>(&QCPAxis::rangeChanged), this, [this](QCPRange const& r) {
    if (rebuilding_ || !data_) return;
    if (auto const in = clamped(r); in != r)
      plot_->yAxis->setRange(in);  // changes the range again, and that re-bands
    else
      rebuild();
  });
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this] { fitAll(); });
  // Bands are as tall as a pixel of the axis rect, whose height is known only once
  // the plot is laid out: a tab shown for the first time gets its size then, after
  // this view's own resize. Re-band inside that replot, before it draws.
  connect(plot_, &QCustomPlot::afterLayout, this, [this] {
    if (data_ && !rebuilding_ && plot_->axisRect()->height() != filled_height_) fill();
    if (data_) labelScales();  // the bars' length is known now
  });
  map_->setVisible(false);  // no file, no heatmap
  scale_->setVisible(false);
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
    if (!data_ || e->button() != Qt::RightButton) return;
    emit rowPicked(qint64(std::llround(plot_->yAxis->pixelToCoord(e->pos().y()))));
  });
}

void GradientView::setDataset(std::shared_ptr<Dataset const> data) {
  if (data == data_) return;  // another file opened as B: the zoom stays
  data_ = std::move(data);
  b_ = nullptr, diff_ = nullptr;
  showAOnly();
  which_->setVisible(false);
  unreferenced_->setEnabled(data_ && data_->is_run());
  map_->setVisible(bool(data_));
  scale_->setVisible(bool(data_));
  marker_->setVisible(false);
  rebuilding_ = true;
  if (data_) {
    setColourRange();
    plot_->xAxis->setRange(-0.5, double(data_->cols) - 0.5);
    plot_->yAxis->setRange(-0.5, double(data_->rows) - 0.5);
  }
  rebuilding_ = false;
  if (data_) {
    rebuild();
  } else {
    map_->data()->clear();
    info_->setText("Open a run file to see its gradient (File > Open)");
    plot_->replot();
  }
}

io::Summary const& GradientView::shownSummary() const {
  if (show_ == Show::B && b_) return b_->summary;
  if (show_ == Show::Difference && diff_) return diff_->difference;
  return data_->summary;
}

void GradientView::setComparison(std::shared_ptr<Dataset const> b, std::shared_ptr<DiffSummary const> diff) {
  bool const comparable = b && data_ && b->rows == data_->rows && b->cols == data_->cols;
  if (!comparable) b = nullptr, diff = nullptr;
  if (b == b_ && diff == diff_) return;
  b_ = std::move(b);
  diff_ = std::move(diff);
  which_->setVisible(bool(b_));
  auto* items = qobject_cast<QStandardItemModel*>(which_->model());
  if (items) items->item(int(Show::Difference))->setEnabled(bool(diff_));
  if (!b_ || (show_ == Show::Difference && !diff_)) showAOnly();
  if (requested_ && canShow(*requested_)) show_ = *std::exchange(requested_, std::nullopt);
  which_->setCurrentIndex(int(show_));
  datasetUpdated();
}

bool GradientView::canShow(Show show) const {
  return show == Show::A || (show == Show::Difference ? bool(diff_) : bool(b_));
}

void GradientView::requestShow(Show show) {
  requested_ = canShow(show) ? std::nullopt : std::optional<Show>(show);
  if (!requested_) setShow(show);
}

void GradientView::showAOnly() {
  sideBySide(false);
  plot_->xAxis->setLabel("column");
  show_ = Show::A;
  which_->setCurrentIndex(0);
}

void GradientView::setShow(Show show) {
  requested_.reset();  // a person's choice wins over a pending --heatmap
  if (!canShow(show)) return;
  if (show != Show::SideBySide) {
    sideBySide(false);
    plot_->xAxis->setLabel("column");
  }
  show_ = show;
  which_->setCurrentIndex(int(show_));
  datasetUpdated();
}

void GradientView::setColourRange() {
  auto const& summary = show_ == Show::SideBySide ? data_->summary : shownSummary();
  map_->setDataRange(colourRange(summary, top99_, top_full_));
  if (map_b_) map_b_->setDataRange(map_->dataRange());  // A and B on one scale
  if (map_d_ && diff_) map_d_->setDataRange(colourRange(diff_->difference, top99_d_, top_full_d_));
  labelScales();
}

QCPRange GradientView::colourRange(io::Summary const& summary, float& top99, float& full_range) const {
  // Zipf-shaped gradients have a few huge rows: colour by the 99th percentile of the
  // largest |value| of the summary's finest blocks (of rows, up to 4096 rows), so the
  // rest stay visible (the hot rows saturate).
  std::vector<float> maxima;
  if (!summary.empty()) {
    auto const& level = summary.levels.front();
    for (std::int64_t b = 0; b < level.blocks; ++b) {
      float m = 0;
      for (std::int64_t c = 0; c < summary.cols; ++c) m = std::max(m, level.max_abs[std::size_t(b * summary.cols + c)]);
      if (std::isfinite(m)) maxima.push_back(m);
    }
  }
  float top = 0, full = 0;
  if (!maxima.empty()) {
    full = *std::max_element(maxima.begin(), maxima.end());
    auto const k = std::size_t(0.99 * double(maxima.size() - 1));
    std::nth_element(maxima.begin(), maxima.begin() + std::ptrdiff_t(k), maxima.end());
    top = maxima[k];
  }
  top99 = std::max(top, 1e-30f), full_range = std::max(full, 1e-30f);
  switch (scale_kind_) {
    case Scale::Linear99:
      return QCPRange(-top99, top99);
    case Scale::LinearFull:
      return QCPRange(-full_range, full_range);
    case Scale::SymmetricLog:
      return QCPRange(-toColour(full_range, top99), toColour(full_range, top99));
    case Scale::LogMagnitude:
      return QCPRange(std::log10(double(full_range)) - 6, std::log10(double(full_range)));
  }
  return {};
}

double GradientView::toColour(float value, float top99) const {
  switch (scale_kind_) {
    case Scale::SymmetricLog:  // linear within t of zero, logarithmic beyond
      return std::copysign(std::log10(1.0 + std::fabs(double(value)) / (1e-3 * double(top99))), double(value));
    case Scale::LogMagnitude:
      return value == 0 ? -1e300 : std::log10(std::fabs(double(value)));
    default:
      return value;
  }
}

QString GradientView::scaleLabel(bool brief) const {
  QString const what = show_ == Show::Difference ? "A - B" : show_ == Show::B ? "B" : show_ == Show::SideBySide ? "A and B" : "A";
  return scaleLabel(what, top99_, brief);
}

// The long form says what a band's colour is; the brief one, for a colour bar too
// short to hold it, keeps what the colours are of and how they are scaled.
QString GradientView::scaleLabel(QString const& what, float top99, bool brief) const {
  QString const band = brief ? "" : ", per band the value of largest |v|";
  switch (scale_kind_) {
    case Scale::Linear99:
      return what + band + (brief ? ", saturates past p99" : "; saturates past the 99th percentile");
    case Scale::LinearFull:
      return what + band + (brief ? ", full range" : "; linear, full range");
    case Scale::SymmetricLog:
      return "sign(v) log10(1 + |v|/t) of " + what + band + QString(", t = %1").arg(1e-3 * double(top99), 0, 'g', 3);
    case Scale::LogMagnitude:
      return "log10 |v| of " + what + band + (brief ? "" : "; 6 decades below the largest");
  }
  return {};
}

// Each colour bar's label in the long form where it fits along the bar, else brief.
void GradientView::labelScales() {
  auto fit = [](QCPColorScale* scale, QString const& full, QString const& brief) {
    int const room = scale->axis()->axisRect()->height();
    bool const fits = room <= 0 || QFontMetrics(scale->axis()->labelFont()).horizontalAdvance(full) <= room;
    scale->setLabel(fits ? full : brief);
  };
  fit(scale_, scaleLabel(false), scaleLabel(true));
  if (scale_d_ && diff_) fit(scale_d_, scaleLabel("A - B", top99_d_, false), scaleLabel("A - B", top99_d_, true));
}

void GradientView::setScale(Scale scale) {
  scale_kind_ = scale;
  colours_->setCurrentIndex(int(scale));
  QCPColorGradient g = map_->gradient();
  if (scale == Scale::LogMagnitude) {  // magnitudes only: one hue, white to dark
    g.clearColorStops();
    g.setColorStopAt(0.0, QColor(247, 247, 247));
    g.setColorStopAt(0.5, QColor(244, 165, 130));
    g.setColorStopAt(1.0, QColor(103, 0, 31));
  } else {
    g.clearColorStops();
    g.setColorStopAt(0.0, QColor(5, 48, 97));
    g.setColorStopAt(0.25, QColor(67, 147, 195));
    g.setColorStopAt(0.5, QColor(247, 247, 247));
    g.setColorStopAt(0.75, QColor(214, 96, 77));
    g.setColorStopAt(1.0, QColor(103, 0, 31));
  }
  map_->setGradient(g);
  for (auto* map : {map_b_, map_d_})
    if (map) map->setGradient(g);
  if (scale_d_) scale_d_->setGradient(g);
  datasetUpdated();
}

QString GradientView::lastHover() const {
  return hover_->text();
}

void GradientView::updateHover() {
  if (pointer_.x() < 0) return;
  auto* rect = plot_->axisRectAt(pointer_);  // side by side: A's, B's or A - B's
  if (!rect) rect = plot_->axisRect();
  int const panel = rect == rect_b_ ? 1 : rect == rect_d_ ? 2 : 0;
  hover_->setText(hoverText(rect->axis(QCPAxis::atBottom)->pixelToCoord(pointer_.x()),
                            rect->axis(QCPAxis::atLeft)->pixelToCoord(pointer_.y()), panel));
}

QString GradientView::hoverText(double x, double y, int panel) const {
  if (!data_ || bands_ < 1) return {};
  std::int64_t const row = std::llround(y), col = std::llround(x);
  if (row < 0 || row >= data_->rows || col < 0 || col >= data_->cols) return {};
  auto value = [&](Dataset const& d) {
    float const v = d.read_rows(row, 1)[std::size_t(col)];
    return QString("%1 (%2)").arg(double(v), 0, 'g', 9).arg(QString::fromStdString(hex_bits(v)));
  };
  QString text = QString("row %1, column %2: ").arg(row).arg(col);
  if (b_) {
    float const a = data_->read_rows(row, 1)[std::size_t(col)], b = b_->read_rows(row, 1)[std::size_t(col)];
    text += "A " + value(*data_) + ", B " + value(*b_) + QString(", A - B %1").arg(double(a - b), 0, 'g', 9);
  } else {
    text += value(*data_);
  }
  if (data_->is_run()) text += QString("; count %1").arg(data_->counts[std::size_t(row)]);
  if (data_->is_padding(row)) text += " (the padding row)";
  bool const side = show_ == Show::SideBySide;
  Heat const& heat = side && panel == 1 ? heat_b_ : side && panel == 2 ? heat_d_ : heat_;
  auto const it = std::upper_bound(heat.first.begin(), heat.first.end(), row);
  auto const b = it - heat.first.begin() - 1;
  if (b >= 0 && b < heat.bands())
    text += QString("; band of rows %1-%2%3: %4")
                .arg(heat.first[std::size_t(b)])
                .arg(heat.first[std::size_t(b) + 1] - 1)
                .arg(side ? (panel == 1   ? " (B)"
                             : panel == 2 ? " (A - B)"
                                          : " (A)")
                          : "")
                .arg(double(heat.values[std::size_t(b * data_->cols + col)]), 0, 'g', 9);
  return text;
}

void GradientView::datasetUpdated() {
  if (!data_) return;
  setColourRange();
  rebuild();
}

bool GradientView::unreferencedBand(Dataset const* counted, std::int64_t first, std::int64_t last) const {
  if (!counted || !unreferenced_->isChecked() || !counted->is_run() ||
      counted->counts.size() != std::size_t(counted->rows))
    return false;
  auto const from = counted->counts.begin() + std::ptrdiff_t(first),
             to = counted->counts.begin() + std::ptrdiff_t(last);
  return std::all_of(from, to, [](std::int64_t c) { return c == 0; });  // stops at the first referenced row
}

QCPRange GradientView::clamped(QCPRange r) const {
  double const lowest = -0.5, highest = double(data_->rows) - 0.5;
  double const size = std::clamp(r.size(), std::min(1.0, highest - lowest), highest - lowest);
  double const lower = std::clamp(r.lower, lowest, highest - size);
  return QCPRange(lower, lower + size);
}

void GradientView::fitAll() {
  if (data_) plot_->yAxis->setRange(-0.5, double(data_->rows) - 0.5);
}

void GradientView::rebuild() {
  if (!data_) return;
  fill();
  plot_->replot();
  updateHover();  // the rows under a still pointer may have moved
}

void GradientView::fill() {
  rebuilding_ = true;
  auto range = plot_->yAxis->range();
  std::int64_t first = std::max<std::int64_t>(0, std::int64_t(std::floor(range.lower + 0.5)));
  std::int64_t last = std::min<std::int64_t>(data_->rows, std::int64_t(std::ceil(range.upper + 0.5)));
  if (last <= first) last = std::min<std::int64_t>(data_->rows, first + 1);
  int const pixels = std::max(1, plot_->axisRect()->height());
  Heat heat;
  if (show_ == Show::B)
    heat = heat_bands(*b_, first, last, pixels);
  else if (show_ == Show::Difference)
    heat = heat_bands(diff_->difference, data_->rows, data_->cols, difference_rows(data_, b_), first, last, pixels);
  else
    heat = heat_bands(*data_, first, last, pixels);
  filled_height_ = plot_->axisRect()->height();
  bands_ = heat.bands();
  auto* cells = map_->data();
  if (bands_ < 1) {  // a large file without a stored summary, before the scan has made one
    cells->clear();
    info_->setText(QString("rows %1 to %2 of %3: summarising the gradient (once, in the background); zoom in to "
                           "%4 rows or fewer to see them now")
                       .arg(first)
                       .arg(last - 1)
                       .arg(data_->rows)
                       .arg(std::max<std::int64_t>(1, (std::int64_t{1} << 22) / data_->cols)));
    rebuilding_ = false;
    return;
  }
  heat_ = heat;
  // The overlay greys a panel's rows by its own run's counts (A - B has none of its own).
  paint(map_, heat, top99_, show_ == Show::B ? b_.get() : show_ == Show::Difference ? nullptr : data_.get());
  if (show_ == Show::SideBySide) {
    sideBySide(true);
    for (auto* rect : {rect_b_, rect_d_})
      if (rect) rect->axis(QCPAxis::atLeft)->setRange(plot_->yAxis->range());
    heat_b_ = heat_bands(*b_, first, last, pixels);
    paint(map_b_, heat_b_, top99_, b_.get());
    heat_d_ = {};
    if (diff_ && map_d_) {
      heat_d_ =
          heat_bands(diff_->difference, data_->rows, data_->cols, difference_rows(data_, b_), first, last, pixels);
      paint(map_d_, heat_d_, top99_d_, nullptr);
    }
  }
  info_->setText(
      QString("rows %1 to %2 of %3 in %4 bands of %5%6 rows (%7); wheel zooms, drag pans, right-click picks a row")
          .arg(first)
          .arg(last - 1)
          .arg(data_->rows)
          .arg(bands_)
          .arg(heat.from_rows ? "about " : "")
          .arg(heat.from_rows ? QString::number(double(last - first) / bands_, 'f', 1)
                              : QString::number(heat.rows_per_band))
          .arg(QString(show_ == Show::Difference   ? "A - B, "
                       : show_ == Show::B          ? "B, "
                       : show_ == Show::SideBySide ? "A | B | A - B, A "
                                                   : "A, ") +
               (heat.from_rows                ? "read from the gradient"
                : show_ == Show::Difference   ? "from the comparison's summary"
                : (show_ == Show::B ? b_ : data_)->summary_stored ? "from the run's summary"
                                                                   : "from the summary made on opening")));
  if (unreferenced_->isChecked() && data_->is_run()) info_->setText(info_->text() + "; grey: rows with count 0");
  rebuilding_ = false;
}

void GradientView::paint(QCPColorMap* map, Heat const& heat, float top99, Dataset const* counted) const {
  auto* cells = map->data();
  int const bands = heat.bands();
  if (bands < 1) {
    cells->clear();
    return;
  }
  auto const& starts = heat.first;
  // Cell centres: column c at x = c; band b at the middle of its rows. A single band
  // is drawn as two equal cells, since a one-cell axis has no extent.
  int const drawn = std::max(bands, 2);
  cells->setSize(int(std::max<std::int64_t>(data_->cols, 2)), drawn);
  double y0 = 0.5 * double(starts[0] + starts[1] - 1), y1 = y0;
  if (!heat.from_rows)  // bands of whole blocks, all as tall as the first
    y1 = y0 + double(heat.rows_per_band) * double(std::max(bands - 1, 0));
  else if (bands > 1)
    y1 = 0.5 * double(starts[std::size_t(bands - 1)] + starts[std::size_t(bands)] - 1);
  if (bands == 1) {
    double const h = double(starts[1] - starts[0]);
    y0 -= 0.25 * h, y1 = y0 + 0.5 * h + 1e-6;
  }
  double const x1 = data_->cols > 1 ? double(data_->cols - 1) : 0.5;
  cells->setRange(QCPRange(data_->cols > 1 ? 0.0 : -0.5, x1), QCPRange(y0, y1));
  for (int b = 0; b < drawn; ++b) {
    auto const sb = std::size_t(std::min(b, bands - 1));
    bool const grey = unreferencedBand(counted, heat.first[sb], heat.first[sb + 1]);
    for (int c = 0; c < cells->keySize(); ++c) {
      auto const sc = std::size_t(std::min<std::int64_t>(c, data_->cols - 1));
      cells->setCell(c, b, grey ? std::nan("") : toColour(heat.values[sb * std::size_t(data_->cols) + sc], top99));
    }
  }
}

void GradientView::sideBySide(bool on) {
  if (!on) {
    if (!rect_b_) return;
    for (auto* map : {map_b_, map_d_})
      if (map) plot_->removePlottable(map);
    for (QCPLayoutElement* e : {static_cast<QCPLayoutElement*>(rect_b_), static_cast<QCPLayoutElement*>(rect_d_),
                                static_cast<QCPLayoutElement*>(scale_d_)})
      if (e) plot_->plotLayout()->remove(e);
    rect_b_ = rect_d_ = nullptr, map_b_ = map_d_ = nullptr, scale_d_ = nullptr;
    plot_->plotLayout()->take(scale_);
    plot_->plotLayout()->simplify();
    plot_->plotLayout()->addElement(0, 1, scale_);
    return;
  }
  if (rect_b_ && (bool(rect_d_) == bool(diff_))) return;
  sideBySide(false);
  // A | B | scale (A and B) | A - B | its scale, rows in step.
  plot_->plotLayout()->take(scale_);
  plot_->plotLayout()->simplify();
  auto make = [&](int column, QString const& title, QCPColorMap*& map) {
    auto* rect = new QCPAxisRect(plot_);
    plot_->plotLayout()->addElement(0, column, rect);
    rect->setRangeDrag(Qt::Vertical);
    rect->setRangeZoom(Qt::Vertical);
    rect->axis(QCPAxis::atLeft)->setRangeReversed(true);
    rect->axis(QCPAxis::atBottom)->setTicker(plot_->xAxis->ticker());
    rect->axis(QCPAxis::atBottom)->setRange(plot_->xAxis->range());
    rect->axis(QCPAxis::atBottom)->setLabel(title);
    rect->setMarginGroup(QCP::msBottom | QCP::msTop, plot_->axisRect()->marginGroup(QCP::msBottom));
    map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    map->setInterpolate(false);
    map->setGradient(map_->gradient());
    connect(rect->axis(QCPAxis::atLeft), qOverload<QCPRange const&>(&QCPAxis::rangeChanged), this,
            [this](QCPRange const& r) {
              if (!rebuilding_) plot_->yAxis->setRange(r);  // re-bands all three
            });
    return rect;
  };
  plot_->xAxis->setLabel("A: column");
  rect_b_ = make(1, "B: column", map_b_);
  plot_->plotLayout()->addElement(0, 2, scale_);
  if (diff_) {
    rect_d_ = make(3, "A - B: column", map_d_);
    scale_d_ = new QCPColorScale(plot_);
    scale_d_->setGradient(map_->gradient());  // a map takes its colour scale's gradient
    plot_->plotLayout()->addElement(0, 4, scale_d_);
    scale_d_->setMarginGroup(QCP::msBottom | QCP::msTop, plot_->axisRect()->marginGroup(QCP::msBottom));
    map_d_->setColorScale(scale_d_);
  }
  map_b_->setColorScale(scale_);
  setColourRange();
}

QString GradientView::infoText() const {
  return info_->text();
}

QString GradientView::tableCsv() const {
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  writeCsv(buffer, {});
  return QString::fromUtf8(bytes);
}

bool GradientView::writeCsv(QIODevice& out, std::function<bool(double)> const& progress) const {
  QTextStream text(&out);
  text << "row";
  if (data_)
    for (std::int64_t c = 0; c < data_->cols; ++c) text << ",c" << c;
  text << "\n";
  if (!data_) return true;
  auto const range = plot_->yAxis->range();
  std::int64_t const first = std::max<std::int64_t>(0, std::int64_t(std::floor(range.lower + 0.5)));
  std::int64_t const last = std::min<std::int64_t>(data_->rows, std::int64_t(std::ceil(range.upper + 0.5)));
  std::int64_t const piece = 4096;  // rows read and written at a time
  for (std::int64_t from = first; from < last; from += piece) {
    std::int64_t const n = std::min(piece, last - from);
    auto const values = data_->read_rows(from, n);
    for (std::int64_t r = 0; r < n; ++r) {
      text << from + r;
      for (std::int64_t c = 0; c < data_->cols; ++c)
        text << ',' << QString::number(values[std::size_t(r * data_->cols + c)], 'g', 9);
      text << '\n';
    }
    if (progress && !progress(double(from + n - first) / double(last - first))) return false;
  }
  text.flush();
  return text.status() == QTextStream::Ok;
}

bool View::writeCsv(QIODevice& out, std::function<bool(double)> const&) const {
  QTextStream text(&out);
  text << tableCsv();
  text.flush();
  return text.status() == QTextStream::Ok;
}

void GradientView::showRow(qint64 row) {
  if (!data_ || row < 0 || row >= data_->rows) return;
  auto const range = plot_->yAxis->range();
  if (row < range.lower || row > range.upper) {
    double const half = std::max(range.size() / 2, 16.0);
    plot_->yAxis->setRange(double(row) - half, double(row) + half);  // re-bands through rangeChanged
  }
  marker_->point1->setCoords(-0.5, double(row));
  marker_->point2->setCoords(double(data_->cols), double(row));
  marker_->setVisible(true);
  plot_->replot();
}

// ---- columns -----------------------------------------------------------------------

ColumnsView::ColumnsView(QWidget* parent) : View(parent) {
  plot_ = make_plot(this);
  plot_->xAxis->setLabel("column");
  QSharedPointer<QCPAxisTickerFixed> whole(new QCPAxisTickerFixed);
  whole->setTickStep(1.0);
  whole->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  plot_->xAxis->setTicker(whole);
  // The legend below the axes, in rows: inside them it covered the last columns.
  auto* under = new QCPLayoutGrid;
  plot_->plotLayout()->addElement(1, 0, under);
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  under->addElement(0, 0, plot_->legend);
  under->setMargins(QMargins(0, 0, 0, 0));
  plot_->legend->setFillOrder(QCPLegend::foColumnsFirst);
  plot_->legend->setWrap(4);
  plot_->plotLayout()->setRowStretchFactor(1, 0.001);
  plot_->legend->setVisible(true);
  state_ = new QLabel(this);
  state_->setWordWrap(true);
  axis_box_ = new QComboBox(this);
  axis_box_->setObjectName("value_axis");
  axis_box_->addItems({"symmetric log axis: bands and extremes", "linear axis"});
  axis_box_->setToolTip("How values are laid out; every least and greatest value stays inside the axis");
  connect(axis_box_, qOverload<int>(&QComboBox::activated), this, [this](int i) { setAxis(Axis(i)); });
  counted_box_ = new QCheckBox("leave out rows with count 0", this);
  counted_box_->setObjectName("counted_only");
  counted_box_->setToolTip(
      "A Zipf run's unreferenced rows are zero and most of its rows: without them, the "
      "distributions are the referenced rows'");
  connect(counted_box_, &QCheckBox::toggled, this, &ColumnsView::setCountedOnly);
  hover_ = new QLabel(this);
  hover_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  hover_->setWordWrap(true);  // unwrapped, a long readout set the window's least width
  table_ = new QTableWidget(0, 11, this);
  table_->setHorizontalHeaderLabels(
      {"Column", "Min", "1 %", "25 %", "Median", "75 %", "99 %", "Max", "Mean", "Std dev", "NaN"});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(plot_);
  split->addWidget(table_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  hold_rows(split, table_, 3);
  auto* controls = new QHBoxLayout;
  controls->addWidget(axis_box_);
  controls->addWidget(counted_box_);
  controls->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(state_);
  layout->addLayout(controls);
  layout->addWidget(split, 1);
  layout->addWidget(hover_);
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    auto const text = hoverText(plot_->xAxis->pixelToCoord(e->pos().x()));
    hover_->setText(text);
    if (!text.isEmpty()) QToolTip::showText(e->globalPosition().toPoint(), text, plot_);
  });
}

void ColumnsView::setDataset(std::shared_ptr<Dataset const> data) {
  if (data == data_) return;
  data_ = std::move(data);
  datasetUpdated();
}

void ColumnsView::setComparison(std::shared_ptr<Dataset const> b) {
  if (b && !(data_ && b->cols == data_->cols)) b = nullptr;  // columns side by side need the same columns
  if (b == b_) return;
  b_ = std::move(b);
  datasetUpdated();
}

void ColumnsView::setAxis(Axis axis) {
  axis_ = axis;
  axis_box_->setCurrentIndex(int(axis));
  datasetUpdated();
}

void ColumnsView::setCountedOnly(bool on) {
  counted_only_ = on;
  if (counted_box_->isChecked() != on) counted_box_->setChecked(on);  // toggles back here once, then returns
  datasetUpdated();
}

QString ColumnsView::stateText() const {
  return state_->text();
}

ColumnStats const& ColumnsView::stats(Dataset const& d) const {
  return counted_only_ && d.is_run() && !d.columns_counted.empty() ? d.columns_counted : d.columns;
}

double ColumnsView::axisValue(double v) const {
  if (axis_ == Axis::Linear || !std::isfinite(v)) return v;
  return std::copysign(std::log10(1.0 + std::fabs(v) / t_), v);  // linear within t of zero
}

void ColumnsView::drawDataset(Dataset const& d, QColor colour, QString const& prefix, bool bands) {
  auto const& cs = stats(d);
  QVector<double> x;
  for (std::int64_t c = 0; c < d.cols; ++c) x << double(c);
  auto series = [&](auto const& value) {
    QVector<double> y;
    for (std::int64_t c = 0; c < d.cols; ++c) y << axisValue(double(value(std::size_t(c))));
    return y;
  };
  auto percentile = [&](int k) { return series([&](std::size_t c) { return cs.percentiles[c][std::size_t(k)]; }); };
  auto add = [&](QVector<double> const& y, QPen pen, QString const& name) {
    auto* g = plot_->addGraph();
    g->setData(x, y, true);
    g->setPen(pen);
    g->setName(name);
    if (name.isEmpty()) g->removeFromLegend();
    return g;
  };
  std::pair<int, int> const ranges[] = {{0, 6}, {1, 5}, {2, 4}};
  int alpha = 40;
  for (auto [lo, hi] : ranges) {
    if (!bands && lo != 0) continue;  // B: its 1-99 % band as two lines
    QColor fill = colour;
    fill.setAlpha(alpha);
    auto const name =
        QString("%1%2-%3 %").arg(prefix).arg(100 * ColumnStats::levels[lo]).arg(100 * ColumnStats::levels[hi]);
    auto* low = add(percentile(lo), QPen(bands ? fill : colour, 1, bands ? Qt::SolidLine : Qt::DashLine), name);
    auto* high = add(percentile(hi), QPen(bands ? fill : colour, 1, bands ? Qt::SolidLine : Qt::DashLine), "");
    if (bands) {
      high->setBrush(fill);
      high->setChannelFillGraph(low);
    }
    alpha += 50;
  }
  add(percentile(3), QPen(colour.darker(150), 2), prefix + "median");
  bool first = true;
  for (auto const* extreme : {&cs.min, &cs.max}) {
    auto* g = add(series([&](std::size_t c) { return (*extreme)[c]; }), QPen(colour.darker(120)),
                  first ? prefix + "min, max" : QString());
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, 6));
    first = false;
  }
}

void ColumnsView::datasetUpdated() {
  plot_->clearGraphs();
  table_->setRowCount(0);
  counted_box_->setEnabled(data_ && data_->is_run());
  axis_box_->setEnabled(bool(data_));
  if (!data_) {
    state_->setText("Open a run file to see its columns");
    plot_->replot();
    return;
  }
  if (data_->columns.empty()) {
    state_->setText(
        "Each column's distribution over the rows comes with the pass over the rows (in the "
        "background; see the status bar)");
    plot_->replot();
    return;
  }
  auto const& cs = stats(*data_);
  bool const with_b = b_ && !b_->columns.empty();
  // The symmetric log's linear width: a tenth of the largest 1-99 % bound, so the bands
  // take a good part of the axis and values a thousand times larger still fit.
  double q = 0;
  for (auto const* d : {data_.get(), with_b ? b_.get() : nullptr})
    if (d)
      for (auto const& p : stats(*d).percentiles)
        for (float v : {p[0], p[6]})
          if (std::isfinite(v)) q = std::max(q, std::fabs(double(v)));
  t_ = q > 0 ? q / 10 : 1e-30;
  QString const rows = counted_only_ && data_->is_run()
                           ? QString("its %1 rows with a count above 0 (of %2)").arg(cs.rows).arg(data_->rows)
                           : QString("its %1 rows").arg(data_->rows);
  state_->setText(QString("Each column over %1: bands of percentiles (1-99, 10-90, 25-75), the median, and the least "
                          "and greatest values%2. Percentiles are within 1/8 of a binary order of magnitude (the lower "
                          "end of their bin); min and max are exact.%3")
                      .arg(rows, with_b ? " (A in blue; B in orange: its median and 1-99 % band)" : "",
                           axis_ == Axis::SymmetricLog
                               ? QString(" Axis: sign(v) log10(1 + |v|/t), t = %1.").arg(t_, 0, 'g', 3)
                               : QString()));
  drawDataset(*data_, QColor(40, 100, 170), with_b ? "A: " : "", true);
  if (with_b) drawDataset(*b_, QColor(230, 120, 20), "B: ", false);
  plot_->yAxis->setLabel(axis_ == Axis::SymmetricLog ? "value (symmetric log)" : "value");
  layoutValueAxis();
  plot_->xAxis->setRange(-0.5, double(data_->cols) - 0.5);
  plot_->replot();
  fillTable(cs);
}

void ColumnsView::layoutValueAxis() {
  // Every point inside, with a margin: the extremes' markers were cut at the edges.
  bool any = false;
  QCPRange all;
  for (int i = 0; i < plot_->graphCount(); ++i) {
    bool found = false;
    auto const r = plot_->graph(i)->getValueRange(found);
    if (found) all = any ? QCPRange(std::min(all.lower, r.lower), std::max(all.upper, r.upper)) : r, any = true;
  }
  if (!any) all = QCPRange(-1, 1);
  double const margin = all.size() > 0 ? 0.06 * all.size() : std::max(1.0, std::fabs(all.lower));
  plot_->yAxis->setRange(all.lower - margin, all.upper + margin);
  if (axis_ == Axis::Linear) {
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    return;
  }
  // Ticks at 0 and at +-10^n, labelled with the values (not their logarithms).
  QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
  ticks->addTick(0, "0");
  double const top = std::pow(10.0, std::fabs(all.lower) > all.upper ? -all.lower : all.upper) * t_;
  // From t up: below it the axis is linear and near-zero ticks would crowd 0's label.
  int const lowest = int(std::ceil(std::log10(t_))), highest = int(std::ceil(std::log10(std::max(top, t_))));
  int const step = std::max(1, (highest - lowest + 1) / 6);  // about six per side
  for (int n = highest; n >= lowest; n -= step)
    for (double sign : {1.0, -1.0}) {
      double const v = sign * std::pow(10.0, n), at = axisValue(v);
      if (at >= all.lower - margin && at <= all.upper + margin) ticks->addTick(at, QString::number(v, 'g', 2));
    }
  plot_->yAxis->setTicker(ticks);
}

void ColumnsView::fillTable(ColumnStats const& cs) {
  table_->setRowCount(int(data_->cols));
  for (int c = 0; c < int(data_->cols); ++c) {
    auto const k = std::size_t(c);
    auto const& p = cs.percentiles[k];
    double const values[] = {double(cs.min[k]), p[0],       p[2],        p[3], p[4], p[6],
                             double(cs.max[k]), cs.mean[k], cs.stddev[k]};
    table_->setItem(c, 0, new QTableWidgetItem(QString::number(c)));
    for (int i = 0; i < 9; ++i) table_->setItem(c, i + 1, new QTableWidgetItem(QString::number(values[i], 'g', 6)));
    table_->setItem(c, 10, new QTableWidgetItem(QString::number(cs.nan[k])));
  }
}

QString ColumnsView::hoverText(double x) const {
  if (!data_ || data_->columns.empty()) return {};
  std::int64_t const c = std::llround(x);
  if (c < 0 || c >= data_->cols) return {};
  auto const& cs = stats(*data_);
  auto const& p = cs.percentiles[std::size_t(c)];
  return QString("column %1: min %2, 1 % %3, 25 % %4, median %5, 75 % %6, 99 % %7, max %8, mean %9")
      .arg(c)
      .arg(double(cs.min[std::size_t(c)]), 0, 'g', 6)
      .arg(double(p[0]), 0, 'g', 4)
      .arg(double(p[2]), 0, 'g', 4)
      .arg(double(p[3]), 0, 'g', 4)
      .arg(double(p[4]), 0, 'g', 4)
      .arg(double(p[6]), 0, 'g', 4)
      .arg(double(cs.max[std::size_t(c)]), 0, 'g', 6)
      .arg(cs.mean[std::size_t(c)], 0, 'g', 6);
}

QString ColumnsView::tableCsv() const {
  QString out = "column,min,p1,p25,median,p75,p99,max,mean,stddev,nan\n";
  for (int r = 0; r < table_->rowCount(); ++r) {
    QStringList fields;
    for (int c = 0; c < table_->columnCount(); ++c) fields << table_->item(r, c)->text();
    out += fields.join(',') + "\n";
  }
  return out;
}

// ---- diff --------------------------------------------------------------------------

DiffView::DiffView(QWidget* parent) : View(parent) {
  verdict_ = new QLabel(this);
  verdict_->setWordWrap(true);
  verdict_->setTextFormat(Qt::RichText);
  verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  plot_ = make_plot(this);
  plot_->xAxis->setLabel("row");
  plot_->yAxis->setLabel("max |a - b| in the row");
  plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  points_ = plot_->addGraph();
  points_->setLineStyle(QCPGraph::lsNone);
  points_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, marker_red, marker_red, 6));
  marker_ = new QCPItemStraightLine(plot_);
  marker_->setPen(QPen(QColor(0, 0, 0), 1, Qt::DashLine));
  marker_->setVisible(false);
  model_ = new DiffTableModel(this);
  table_ = make_table(model_, this);
  table_->setObjectName("differing_rows");
  provenance_ = new QTableWidget(0, 3, this);
  provenance_->setObjectName("provenance");
  provenance_->setHorizontalHeaderLabels({"", "A", "B"});
  provenance_->verticalHeader()->setVisible(false);
  provenance_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  provenance_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  provenance_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  bits_ = new QLabel(this);
  bits_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  bits_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  bits_->setWordWrap(true);
  bits_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  auto* bits_scroll = new QScrollArea(this);
  bits_scroll->setWidget(bits_);
  bits_scroll->setWidgetResizable(true);

  auto* left = new QSplitter(Qt::Vertical, this);
  left->addWidget(plot_);
  left->addWidget(table_);
  auto* right = new QSplitter(Qt::Vertical, this);
  right->addWidget(provenance_);
  right->addWidget(bits_scroll);
  auto* split = new QSplitter(this);
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setChildrenCollapsible(false);
  hold_rows(left, table_, 4);
  hold_rows(right, provenance_, 4);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(verdict_);
  layout->addWidget(split, 1);

  on_pick(table_, following_, [this](int view_row) { emit rowPicked(model_->at(view_row).row); });
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    auto const text = hoverText(e->pos().x(), e->pos().y());
    if (!text.isEmpty()) QToolTip::showText(e->globalPosition().toPoint(), text, plot_);
  });
  connect(plot_, &QCustomPlot::plottableClick, this, [this](QCPAbstractPlottable*, int index, QMouseEvent*) {
    if (index >= 0 && std::size_t(index) < summary_.values.differences.size())
      emit rowPicked(summary_.values.differences[std::size_t(index)].row);
  });
}

void DiffView::setDatasets(std::shared_ptr<Dataset const> a, std::shared_ptr<Dataset const> b) {
  if (a == a_ && b == b_) return;
  a_ = std::move(a);
  b_ = std::move(b);
  setSummary(DiffSummary{}, false);
  provenance_->setRowCount(0);
  if (a_) {  // one run alone shows its own provenance (B's column waits for a file)
    provenance_->setHorizontalHeaderLabels(
        {"", "A: " + QFileInfo(QString::fromStdString(a_->path)).fileName(),
         b_ ? "B: " + QFileInfo(QString::fromStdString(b_->path)).fileName() : QString("B: none open")});
    int i = 0;
    for (auto const& [field, value] : a_->provenance) {
      std::string other = "-";
      if (b_)
        for (auto const& [f, v] : b_->provenance)
          if (f == field) other = v;
      provenance_->insertRow(i);
      auto* name = new QTableWidgetItem(QString::fromStdString(field));
      auto* left = new QTableWidgetItem(QString::fromStdString(value));
      auto* right = new QTableWidgetItem(QString::fromStdString(other));
      if (b_ && value != other) {
        QFont bold = left->font();
        bold.setBold(true);
        for (auto* item : {name, left, right}) item->setFont(bold);
      }
      provenance_->setItem(i, 0, name);
      provenance_->setItem(i, 1, left);
      provenance_->setItem(i, 2, right);
      ++i;
    }
    provenance_->resizeColumnToContents(0);
  }
}

void DiffView::setSummary(DiffSummary summary, bool ready) {
  std::int64_t const picked = current_;  // a person's pick outlives the comparison
  summary_ = std::move(summary);
  ready_ = ready;
  current_ = -1;
  {
    QScopedValueRollback<bool> guard(following_, true);  // a rebuilt table picks nothing
    model_->setDiff(summary_.values.differences, a_ ? a_->padding_idx : -1, b_ ? b_->padding_idx : -1);
    table_->horizontalHeader()->setSortIndicator(DiffTableModel::RowId, Qt::AscendingOrder);
  }
  setChecking(checking_);

  QVector<double> rows, diffs;
  for (auto const& d : summary_.values.differences) {
    rows << double(d.row);
    // Differences of 0 (the sign of a zero) and inf still get a point on a log axis.
    diffs << (d.max_abs > 0 ? std::min(d.max_abs, 1e38) : 1e-45);
  }
  points_->setData(rows, diffs);
  plot_->xAxis->setRange(-0.5, a_ ? double(a_->rows) - 0.5 : 1.0);
  double lo = 1e-8, hi = 1.0;
  if (!diffs.isEmpty()) {
    lo = *std::min_element(diffs.begin(), diffs.end()) / 2;
    hi = *std::max_element(diffs.begin(), diffs.end()) * 2;
  }
  plot_->yAxis->setRange(lo, hi);
  plot_->replot();

  bits_->setText(summary_.values.differences.empty() ? "" : "Pick a differing row (F6: the next one) to see its bits.");
  if (ready_ && picked >= 0)
    showRow(picked);
  else
    current_ = picked;  // shown once the comparison is made (B's rows are not read before its check)
}

void DiffView::setChecking(bool checking) {
  checking_ = checking;
  showVerdict();
  bool const judged = a_ && b_ && !checking_ && ready_;
  verdict_->setStyleSheet(!judged ? "" : summary_.identical() ? "color: #107010;" : "color: #b00000;");
}

QString DiffView::verdict() const {
  if (!(a_ && b_)) return "Open a second run to compare (File > Compare with...)";
  if (checking_) return "Checking each run's gradient against its stored SHA-256 before giving a verdict...";
  if (!ready_) return "Comparing the two gradients...";
  QStringList lines;
  for (auto const& line : explain(*a_, *b_, summary_)) lines << QString::fromStdString(line);
  return lines.join("\n");
}

void DiffView::showVerdict() {
  auto const lines = verdict().split('\n');
  QString html = "<span style='font-size:large; font-weight:bold'>" + lines.front().toHtmlEscaped() + "</span>";
  for (int i = 1; i < lines.size(); ++i) html += "<br>" + lines[i].toHtmlEscaped();
  verdict_->setText(html);
}

QString DiffView::hoverText(double x, double y) const {
  // In pixels: the differing row whose point is nearest, within 10 pixels.
  double best = 100;
  RowDifference const* found = nullptr;
  for (auto const& d : summary_.values.differences) {
    double const dx = plot_->xAxis->coordToPixel(double(d.row)) - x;
    if (std::fabs(dx) > 10) continue;
    double const dy = plot_->yAxis->coordToPixel(d.max_abs > 0 ? std::min(d.max_abs, 1e38) : 1e-45) - y;
    if (dx * dx + dy * dy < best) best = dx * dx + dy * dy, found = &d;
  }
  if (!found) return {};
  return QString("row %1: %2 columns differ, max |a - b| %3, max %4 ULPs (a %5, b %6); click to pick it")
      .arg(found->row)
      .arg(found->columns)
      .arg(found->max_abs, 0, 'g', 6)
      .arg(found->max_ulp)
      .arg(QString::fromStdString(hex_bits(found->a)))
      .arg(QString::fromStdString(hex_bits(found->b)));
}

QString DiffView::bitsText() const {
  return bits_->text();
}

void DiffView::showRow(qint64 row) {
  if (!(a_ && b_) || summary_.shapes_differ || row < 0 || row >= a_->rows) return;
  current_ = row;
  select_view_row(table_, model_->viewRowOf(row), following_);
  marker_->point1->setCoords(double(row), 1e-45);
  marker_->point2->setCoords(double(row), 1.0);
  marker_->setVisible(true);
  plot_->replot();
  QString text = QString("row %1:").arg(row);
  int shown = 0, differing = 0;
  auto const row_a = a_->read_rows(row, 1), row_b = b_->read_rows(row, 1);
  for (std::int64_t c = 0; c < a_->cols; ++c) {
    float const x = row_a[std::size_t(c)], y = row_b[std::size_t(c)];
    if (hex_bits(x) == hex_bits(y)) continue;
    ++differing;
    if (++shown > 64) continue;
    text += QString("\n  column %1: a %2 (%3)  b %4 (%5)  %6 ULPs")
                .arg(c, 4)
                .arg(QString::fromStdString(hex_bits(x)))
                .arg(double(x), 0, 'g', 9)
                .arg(QString::fromStdString(hex_bits(y)))
                .arg(double(y), 0, 'g', 9)
                .arg(ulp_distance(x, y));
  }
  if (differing == 0)
    text += " the same bits in A and B";
  else if (shown > 64)
    text += QString("\n  ... %1 more columns").arg(shown - 64);
  bits_->setText(text);
}

void DiffView::nextDifferingRow() {
  auto const& rows = summary_.values.differences;  // ascending by row
  if (rows.empty()) return;
  auto it = std::upper_bound(rows.begin(), rows.end(), current_,
                             [](std::int64_t r, RowDifference const& d) { return r < d.row; });
  if (it == rows.end()) it = rows.begin();  // wrap around
  emit rowPicked(it->row);
}

// ---- info ----------------------------------------------------------------------------

InfoView::InfoView(QWidget* parent) : QWidget(parent) {
  browser_ = new QTextBrowser(this);
  browser_->setObjectName("info");
  browser_->setOpenLinks(false);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(browser_);
  setDatasets(nullptr, nullptr, {}, {});
}

QString InfoView::text() const {
  return browser_->toPlainText();
}

QString InfoView::html() const {
  return html_;
}

void InfoView::setDatasets(std::shared_ptr<Dataset const> a, std::shared_ptr<Dataset const> b, QString const& checks_a,
                           QString const& checks_b) {
  if (!a && !b) {
    html_ = "<p>Open a run or table file to see what it holds (File &gt; Open)</p>";
    browser_->setHtml(html_);
    return;
  }
  QString html;
  if (a) html += describe(*a, "A", checks_a);
  if (b) html += "<hr>" + describe(*b, "B", checks_b);
  int const scrolled = browser_->verticalScrollBar()->value();  // a check's progress keeps the place
  html_ = html;
  browser_->setHtml(html);
  browser_->verticalScrollBar()->setValue(scrolled);
}

QString InfoView::describe(Dataset const& d, QString const& slot, QString const& checks) const {
  auto esc = [](std::string const& text) { return QString::fromStdString(text).toHtmlEscaped(); };
  auto const& info = d.info;
  QString html = QString("<h3>%1: %2</h3><p><b>%3</b><br>%4</p>")
                     .arg(slot, QFileInfo(QString::fromStdString(d.path)).fileName().toHtmlEscaped(),
                          esc(info.headline), esc(info.meaning));
  // What the window checked: the pass over the rows hashes the gradient, and HDF5
  // tests a Fletcher-32 chunk as it reads it (every chunk of what the pass read).
  QStringList fletcher;
  int summary_sets = 0;  // the summary's many small datasets, counted, not listed
  for (auto const& section : info.sections)
    if (section.title == "datasets")
      for (auto const& line : section.lines)
        if (line.value.find("fletcher32") != std::string::npos) {
          if (line.key.rfind("/summary/", 0) == 0)
            ++summary_sets;
          else
            fletcher << QString::fromStdString(line.key);
        }
  if (summary_sets > 0) fletcher << QString("the summary's %1 datasets").arg(summary_sets);
  QString const fletcher_list = fletcher.size() > 1
                                    ? fletcher.mid(0, fletcher.size() - 1).join(", ") + " and " + fletcher.back()
                                    : fletcher.join("");
  bool const verified = checks.contains("verified");
  html += "<h4>checks</h4><ul>";
  html += "<li>" +
          (checks.isEmpty() ? QString(d.is_run() ? "not checked" : "a table: no digest to check")
                            : checks.toHtmlEscaped()) +
          "</li>";
  if (!fletcher.isEmpty())
    html += QString("<li>Fletcher-32 on %1: %2</li>")
                .arg(fletcher_list.toHtmlEscaped(),
                     verified ? "every chunk passed as it was read (the gradient's by the check, the rest on opening)"
                              : "tested chunk by chunk as they are read");
  html += "</ul>";
  if (!d.summary.empty()) {
    auto const& levels = d.summary.levels;
    html += QString("<h4>summary</h4><p>%1 levels, blocks of %2 to %3 rows (finest first), %4</p>")
                .arg(levels.size())
                .arg(QString::fromStdString(io::with_commas(levels.front().block_rows)))
                .arg(QString::fromStdString(io::with_commas(levels.back().block_rows)))
                .arg(d.summary_stored ? (d.summary.verified ? "stored in the file and matching its summary_sha256"
                                                            : "stored in the file (no digest: an older run)")
                                      : "made on opening (the file holds none)");
  }
  QString const highlight = InfoView::highlight;
  for (auto const& section : info.sections) {
    html += "<h4>" + esc(section.title) + "</h4><table cellspacing='0' cellpadding='2'>";
    for (auto const& line : section.lines) {
      // What decides a run's bits stands out: two runs that differ there may differ in bits.
      QString const key = "<tt>" + esc(line.key) + "</tt>", value = "<tt>" + esc(line.value) + "</tt>";
      if (line.decides_bits)
        html += QString("<tr><td bgcolor='%1'><b>%2</b></td><td bgcolor='%1'><b>%3</b></td></tr>")
                    .arg(highlight, key, value);
      else
        html += QString("<tr><td>%1</td><td>%2</td></tr>").arg(key, value);
    }
    html += "</table>";
  }
  return html;
}

}  // namespace kembed::inspector
