#pragma once
// Table models over a million rows: no widget or item per row; sorting permutes an
// index vector.
#include "analysis.hpp"

#include <QAbstractTableModel>

#include <memory>
#include <vector>

namespace kembed::inspector {

// The label a row list shows for a row id: "17", or "17 (padding)" for the
// padding row (whose gradient is zero whatever its count).
QString row_label(std::int64_t row, bool padding);

// Rows of a dataset: row id (the padding row labelled), count, row norm, max |value|.
class RowTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { RowId, Count, Norm, MaxAbs, ColumnCount };
  explicit RowTableModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  void setDataset(std::shared_ptr<Dataset const> data);
  void statsArrived();  // the scan filled in the norms: repaint, and re-sort by them
  int rowCount(QModelIndex const& parent = {}) const override;
  int columnCount(QModelIndex const& parent = {}) const override;
  QVariant data(QModelIndex const& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
  void sort(int column, Qt::SortOrder order) override;
  // Only rows whose count is in [min_count, max_count] and, when `ids` is not
  // empty, whose id is among them (sorted ascending); in the table's sort order.
  struct Filter {
    std::int64_t min_count = 0, max_count = INT64_MAX;
    std::vector<std::int64_t> ids;
    bool active() const { return min_count > 0 || max_count < INT64_MAX || !ids.empty(); }
  };
  void setFilter(Filter filter);
  std::int64_t shownRows() const;  // rows that pass the filter (all pages)
  // Rows come in pages of page_rows: a table view keeps a few bytes per row it
  // shows (its header's sections), 80 MB at 10^7 rows.
  static constexpr std::int64_t page_rows = std::int64_t{1} << 20;
  int pages() const;
  int page() const { return int(page_); }
  void setPage(int page);
  std::int64_t rowAt(int view_row) const {
    auto const at = page_ * page_rows + view_row;
    return identity_ ? at : order_.at(std::size_t(at));
  }
  int viewRowOf(std::int64_t row) const;  // -1 if out of range or on another page
  // The view row of `row`, turning to its page first; -1 if out of range.
  int turnTo(std::int64_t row);
  QString csv() const;                    // the table in its current order

 private:
  std::shared_ptr<Dataset const> data_;
  std::vector<std::int64_t> order_;  // the rows shown, in order, unless identity_
  bool identity_ = true;             // every row by id: no 8 bytes per row held for it
  Filter filter_;
  std::int64_t page_ = 0;
  std::int64_t positionOf(std::int64_t row) const;
  int sort_column_ = RowId;
  Qt::SortOrder sort_order_ = Qt::AscendingOrder;
};

// The rows that differ between two datasets: row, columns, max ULPs, max |a-b|,
// and the bits of both values where the ULP distance is largest.
class DiffTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { RowId, Columns, MaxUlp, MaxAbs, BitsA, BitsB, ColumnCount };
  explicit DiffTableModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  // The padding rows of the two datasets (-1: none), labelled in the row column.
  void setDiff(std::vector<RowDifference> rows, std::int64_t padding_a = -1, std::int64_t padding_b = -1);
  int rowCount(QModelIndex const& parent = {}) const override;
  int columnCount(QModelIndex const& parent = {}) const override;
  QVariant data(QModelIndex const& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
  void sort(int column, Qt::SortOrder order) override;
  RowDifference const& at(int view_row) const { return rows_.at(std::size_t(view_row)); }
  int viewRowOf(std::int64_t row) const;
  QString csv() const;

 private:
  QString label(std::int64_t row) const;
  std::vector<RowDifference> rows_;
  std::int64_t padding_a_ = -1, padding_b_ = -1;
};

}  // namespace kembed::inspector
