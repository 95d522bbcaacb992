#include "models.hpp"

#include <algorithm>
#include <numeric>

namespace kembed::inspector {
namespace {
QString number(double x) {
  return std::isinf(x) ? QStringLiteral("inf") : QString::number(x, 'g', 9);
}
}  // namespace

QString row_label(std::int64_t row, bool padding) {
  return padding ? QString("%1 (padding)").arg(row) : QString::number(row);
}

void RowTableModel::setDataset(std::shared_ptr<Dataset const> data) {
  beginResetModel();
  data_ = std::move(data);
  order_.clear();
  order_.shrink_to_fit();
  identity_ = true;
  filter_ = {};
  page_ = 0;
  sort_column_ = RowId, sort_order_ = Qt::AscendingOrder;
  endResetModel();
}

void RowTableModel::setFilter(Filter filter) {
  filter_ = std::move(filter);
  std::sort(filter_.ids.begin(), filter_.ids.end());
  sort(sort_column_, sort_order_);
}

std::int64_t RowTableModel::shownRows() const {
  return !data_ ? 0 : identity_ ? data_->rows : std::int64_t(order_.size());
}

int RowTableModel::pages() const {
  return data_ ? int((shownRows() + page_rows - 1) / page_rows) : 0;
}

void RowTableModel::setPage(int page) {
  page = std::clamp(page, 0, std::max(pages() - 1, 0));
  if (page == page_) return;
  beginResetModel();
  page_ = page;
  endResetModel();
}

std::int64_t RowTableModel::positionOf(std::int64_t row) const {
  if (!data_ || row < 0 || row >= data_->rows) return -1;
  if (identity_) return row;
  auto const it = std::find(order_.begin(), order_.end(), row);
  return it == order_.end() ? -1 : std::int64_t(it - order_.begin());
}

int RowTableModel::turnTo(std::int64_t row) {
  auto const at = positionOf(row);
  if (at < 0) return -1;
  setPage(int(at / page_rows));
  return int(at % page_rows);
}

void RowTableModel::statsArrived() {
  if (sort_column_ == Norm || sort_column_ == MaxAbs)
    sort(sort_column_, sort_order_);
  else if (data_ && data_->rows > 0)
    emit dataChanged(index(0, Norm), index(rowCount() - 1, MaxAbs));
}

int RowTableModel::rowCount(QModelIndex const& parent) const {
  return parent.isValid() || !data_ ? 0 : int(std::min(page_rows, shownRows() - page_ * page_rows));
}
int RowTableModel::columnCount(QModelIndex const& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant RowTableModel::data(QModelIndex const& index, int role) const {
  if (!data_ || !index.isValid()) return {};
  auto const r = rowAt(index.row());
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole && data_->is_padding(r))
    return QString("the padding row: its gradient is zero, whatever its count");
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case RowId:
      return row_label(r, data_->is_padding(r));
    case Count:
      return data_->counts.empty() ? QVariant() : QVariant::fromValue<qlonglong>(data_->counts[r]);
    case Norm:
      return data_->scanned() ? number(data_->row_norm[r]) : QString("...");
    case MaxAbs:
      return data_->scanned() ? number(data_->row_max_abs[r]) : QString("...");
  }
  return {};
}

QVariant RowTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  static char const* names[] = {"Row", "Count", "Row norm", "Max |value|"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

void RowTableModel::sort(int column, Qt::SortOrder order) {
  if (!data_) return;
  sort_column_ = column, sort_order_ = order;
  // Norms come with the scan (statsArrived sorts again); until then, by row id.
  if ((column == Norm || column == MaxAbs) && !data_->scanned()) column = RowId;
  beginResetModel();
  page_ = 0;
  if (column == RowId && order == Qt::AscendingOrder && !filter_.active()) {
    order_.clear();
    order_.shrink_to_fit();
    identity_ = true;
    endResetModel();
    return;
  }
  identity_ = false;
  order_.clear();
  auto const& f = filter_;
  auto passes = [&](std::int64_t r) {
    auto const c = data_->counts.empty() ? 0 : data_->counts[std::size_t(r)];
    return c >= f.min_count && c <= f.max_count;
  };
  if (!f.ids.empty()) {
    for (auto r : f.ids)
      if (r >= 0 && r < data_->rows && passes(r) && (order_.empty() || order_.back() != r)) order_.push_back(r);
  } else {
    for (std::int64_t r = 0; r < data_->rows; ++r)
      if (passes(r)) order_.push_back(r);
  }
  auto key = [&](std::int64_t r) -> double {
    switch (column) {
      case Count:
        return data_->counts.empty() ? 0.0 : double(data_->counts[r]);
      case Norm:
        return data_->scanned() ? data_->row_norm[r] : 0.0;
      case MaxAbs:
        return data_->scanned() ? data_->row_max_abs[r] : 0.0;
      default:
        return double(r);
    }
  };
  std::stable_sort(order_.begin(), order_.end(), [&](std::int64_t a, std::int64_t b) {
    return order == Qt::AscendingOrder ? key(a) < key(b) : key(a) > key(b);
  });
  endResetModel();
}

int RowTableModel::viewRowOf(std::int64_t row) const {
  auto const at = positionOf(row);
  return at < 0 || at / page_rows != page_ ? -1 : int(at % page_rows);
}

QString RowTableModel::csv() const {
  QString out = "row,count,row_norm,max_abs,note\n";
  if (!data_) return out;
  for (std::int64_t i = 0; i < shownRows(); ++i) {  // every page
    auto const r = identity_ ? i : order_[std::size_t(i)];
    out += QString("%1,%2,%3,%4,%5\n")
               .arg(r)
               .arg(data_->counts.empty() ? QString() : QString::number(data_->counts[r]))
               .arg(data_->scanned() ? number(data_->row_norm[r]) : QString())
               .arg(data_->scanned() ? number(data_->row_max_abs[r]) : QString())
               .arg(data_->is_padding(r) ? "padding" : "");
  }
  return out;
}

void DiffTableModel::setDiff(std::vector<RowDifference> rows, std::int64_t padding_a, std::int64_t padding_b) {
  beginResetModel();
  rows_ = std::move(rows);
  padding_a_ = padding_a, padding_b_ = padding_b;
  endResetModel();
}

QString DiffTableModel::label(std::int64_t row) const {
  bool const a = row == padding_a_, b = row == padding_b_;
  if (a && b) return row_label(row, true);
  if (a || b) return QString("%1 (padding in %2)").arg(row).arg(a ? "a" : "b");
  return QString::number(row);
}

int DiffTableModel::rowCount(QModelIndex const& parent) const {
  return parent.isValid() ? 0 : int(rows_.size());
}
int DiffTableModel::columnCount(QModelIndex const& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant DiffTableModel::data(QModelIndex const& index, int role) const {
  if (!index.isValid()) return {};
  auto const& d = rows_[std::size_t(index.row())];
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case RowId:
      return label(d.row);
    case Columns:
      return QVariant::fromValue<qlonglong>(d.columns);
    case MaxUlp:
      return QVariant::fromValue<qlonglong>(d.max_ulp);
    case MaxAbs:
      return number(d.max_abs);
    case BitsA:
      return QString::fromStdString(hex_bits(d.a));
    case BitsB:
      return QString::fromStdString(hex_bits(d.b));
  }
  return {};
}

QVariant DiffTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  static char const* names[] = {"Row", "Columns", "Max ULPs", "Max |a-b|", "a (bits)", "b (bits)"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

void DiffTableModel::sort(int column, Qt::SortOrder order) {
  beginResetModel();
  auto key = [&](RowDifference const& d) -> double {
    switch (column) {
      case Columns:
        return double(d.columns);
      case MaxUlp:
        return double(d.max_ulp);
      case MaxAbs:
        return d.max_abs;
      default:
        return double(d.row);
    }
  };
  std::stable_sort(rows_.begin(), rows_.end(), [&](auto const& a, auto const& b) {
    return order == Qt::AscendingOrder ? key(a) < key(b) : key(a) > key(b);
  });
  endResetModel();
}

int DiffTableModel::viewRowOf(std::int64_t row) const {
  for (std::size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].row == row) return int(i);
  return -1;
}

QString DiffTableModel::csv() const {
  QString out = "row,columns,max_ulp,max_abs,a_bits,b_bits\n";
  for (auto const& d : rows_)
    out += QString("%1,%2,%3,%4,%5,%6\n")
               .arg(d.row)
               .arg(d.columns)
               .arg(d.max_ulp)
               .arg(number(d.max_abs))
               .arg(QString::fromStdString(hex_bits(d.a)))
               .arg(QString::fromStdString(hex_bits(d.b)));
  return out;
}

}  // namespace kembed::inspector
