#pragma once
// kembed::mpi::ShardedEmbedding: the table's rows sharded over the ranks of an MPI
// communicator, each rank owning one contiguous range, in rank order, or the rows an
// Ownership gives it (kembed/core/ownership.hpp: `spread` puts a Zipf head on
// several ranks), held in its slots' order. Each rank
// passes its own slab of a batch's positions (slabs contiguous, in rank order);
// every (position, id, dy row) goes to the owner of its row, and owners fold what
// they receive with the one-process kernels. Received in source-rank order, each
// row's terms arrive in ascending global position order, so in mode `identical` a
// rank's rows are the one-process gradient's bit for bit, for any number of ranks
// and any slab split; in mode `deterministic` too, when every call is one global
// microbatch (the ranks' slabs of the same range of global positions).
#include <kembed/core/ownership.hpp>
#include <kembed/core/validate.hpp>
#include <kembed/embedding.hpp>
#include <kembed/embedding_bag.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kembed::mpi {

// Rows [begin, end) of a table of `rows` rows that rank `rank` of `ranks` owns.
struct RowRange {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const noexcept { return end - begin; }
};
inline RowRange rows_of(std::int64_t rows, int ranks, int rank) {
  auto const at = [&](int r) { return rows / ranks * r + std::min<std::int64_t>(r, rows % ranks); };
  return {at(rank), at(rank + 1)};
}

namespace detail {

inline void check(int status, char const* what) {
  if (status != MPI_SUCCESS)
    throw Error("mpi", std::string(what) + " failed (MPI error " + std::to_string(status) + ")");
}

// The global position of this rank's first position, and the batch's total.
inline std::pair<std::int64_t, std::int64_t> slab_offset(MPI_Comm comm, std::int64_t local) {
  std::int64_t offset = 0, total = 0;
  check(MPI_Exscan(&local, &offset, 1, MPI_INT64_T, MPI_SUM, comm), "MPI_Exscan");
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) offset = 0;  // MPI leaves rank 0's result undefined
  check(MPI_Allreduce(&local, &total, 1, MPI_INT64_T, MPI_SUM, comm), "MPI_Allreduce");
  return {offset, total};
}

// The smallest `value` over the ranks, and the value of `payload` on the rank that
// holds it (the lowest such rank): so every rank reports the same first offender.
template <class Payload>
std::pair<std::int64_t, Payload> first_over_ranks(MPI_Comm comm, std::int64_t value, Payload payload,
                                                  MPI_Datatype type) {
  std::int64_t lowest = value;
  check(MPI_Allreduce(&value, &lowest, 1, MPI_INT64_T, MPI_MIN, comm), "MPI_Allreduce");
  int rank = 0, holder = 0;
  MPI_Comm_rank(comm, &rank);
  int const mine = value == lowest ? rank : INT32_MAX;
  check(MPI_Allreduce(&mine, &holder, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  check(MPI_Bcast(&payload, 1, type, holder, comm), "MPI_Bcast");
  return {lowest, payload};
}

// Collective. Every rank's counts of V rows summed onto the ranks' row ranges
// (rows_of, in rank order): returns this rank's range of the sums.
inline std::vector<std::int64_t> sum_onto_ranges(MPI_Comm comm, std::vector<std::int64_t> const& counts) {
  int ranks = 1, rank = 0;
  MPI_Comm_size(comm, &ranks);
  MPI_Comm_rank(comm, &rank);
  auto const v = static_cast<std::int64_t>(counts.size());
  std::vector<int> each(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    auto const n = rows_of(v, ranks, r).size();
    if (n > INT32_MAX) throw InvalidArgument("num_embeddings", "a rank's rows exceed MPI's int counts");
    each[std::size_t(r)] = static_cast<int>(n);
  }
  std::vector<std::int64_t> mine(static_cast<std::size_t>(rows_of(v, ranks, rank).size()));
  check(MPI_Reduce_scatter(counts.data(), mine.data(), each.data(), MPI_INT64_T, MPI_SUM, comm), "MPI_Reduce_scatter");
  return mine;
}

// Collective. Every rank's items (a std::string or std::vector of `type`),
// concatenated in rank order, on every rank.
template <class Container>
Container all_gather_in_rank_order(MPI_Comm comm, Container const& mine, MPI_Datatype type) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  std::vector<int> sizes(static_cast<std::size_t>(ranks)), at(static_cast<std::size_t>(ranks), 0);
  int const n = static_cast<int>(mine.size());
  check(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm), "MPI_Allgather");
  for (std::size_t r = 1; r < sizes.size(); ++r) at[r] = at[r - 1] + sizes[r - 1];
  Container all(static_cast<std::size_t>(at.back() + sizes.back()), typename Container::value_type{});
  check(MPI_Allgatherv(mine.data(), n, type, all.data(), sizes.data(), at.data(), type, comm), "MPI_Allgatherv");
  return all;
}

}  // namespace detail

// Collective. The `spread` ownership of a batch's rows over the communicator's ranks
// (kembed/core/ownership.hpp), from each rank's counts of its own positions' ids (V
// entries each): the counts summed onto row ranges, each rank's hot rows and other
// terms gathered, and the same placement made on every rank.
inline Ownership spread_ownership(MPI_Comm comm, std::vector<std::int64_t> const& counts) {
  int ranks = 1, rank = 0;
  MPI_Comm_size(comm, &ranks);
  MPI_Comm_rank(comm, &rank);
  auto const v = std::int64_t(counts.size());
  auto const mine = rows_of(v, ranks, rank);
  auto const summed = detail::sum_onto_ranges(comm, counts);
  std::int64_t local_total = 0, total = 0;
  for (auto c : summed) local_total += c;
  detail::check(MPI_Allreduce(&local_total, &total, 1, MPI_INT64_T, MPI_SUM, comm), "MPI_Allreduce");
  std::vector<std::int64_t> hot_here, base_here(std::size_t(ranks), 0), base(std::size_t(ranks), 0);
  for (std::int64_t i = 0; i < mine.size(); ++i) {
    auto const row = mine.begin + i, c = summed[std::size_t(i)];
    if (Ownership::is_hot(c, total, ranks))
      hot_here.insert(hot_here.end(), {row, c});
    else
      base_here[std::size_t(row % ranks)] += c;
  }
  detail::check(MPI_Allreduce(base_here.data(), base.data(), ranks, MPI_INT64_T, MPI_SUM, comm), "MPI_Allreduce");
  auto const all = detail::all_gather_in_rank_order(comm, hot_here, MPI_INT64_T);  // (row, terms) pairs
  std::vector<Ownership::HotRow> hot;
  for (std::size_t i = 0; i < all.size(); i += 2) hot.push_back({all[i], all[i + 1]});
  return Ownership::spread(v, ranks, std::move(hot), std::move(base));
}

template <class ExecutionSpace = Kokkos::DefaultExecutionSpace>
class ShardedEmbedding {
 public:
  using Local = Embedding<ExecutionSpace>;
  using memory_space = typename Local::memory_space;
  using matrix_type = typename Local::matrix_type;
  using counts_type = typename Local::counts_type;
  using batch_counts_type = typename Local::batch_counts_type;
  using sparse_type = typename Local::sparse_type;
  using sparse_carry_type = typename Local::sparse_carry_type;

  // Collective. `local_rows` holds this rank's rows of the (V, d) table
  // (rows_of(V, ranks, rank)), row-major. Options are the one-process layer's; the
  // padding row, given in [-V, V) as there, is folded (to zero) by its owner.
  ShardedEmbedding(MPI_Comm comm, ExecutionSpace const& space, std::int64_t num_embeddings, std::int64_t embedding_dim,
                   FloatsRef const& local_rows, Options const& options = {})
      : ShardedEmbedding(comm, space, num_embeddings, embedding_dim, &local_rows, nullptr, options) {}
  // Collective. As above, from this rank's rows already in the space's memory (a
  // (rows().size(), d) view, copied as Embedding::from_pretrained copies).
  ShardedEmbedding(MPI_Comm comm, ExecutionSpace const& space, std::int64_t num_embeddings, std::int64_t embedding_dim,
                   typename Local::const_matrix_type const& local_rows, Options const& options = {})
      : ShardedEmbedding(comm, space, num_embeddings, embedding_dim, nullptr, &local_rows, options) {}

  // Collective. Under `ownership` (the same on every rank, for V = ownership.rows()
  // rows over the communicator's ranks): `local_rows` holds this rank's slots'
  // rows (slots() x d, a hole's row unread), and the gradient's rows are its slots.
  ShardedEmbedding(MPI_Comm comm, ExecutionSpace const& space, Ownership const& ownership, std::int64_t embedding_dim,
                   FloatsRef const& local_rows, Options const& options = {})
      : ShardedEmbedding(comm, space, ownership.rows(), embedding_dim, &local_rows, nullptr, options, &ownership) {}

  // Collective. For the backward alone (Embedding::backward_only): no rank holds
  // table rows, and forward() refuses.
  static ShardedEmbedding backward_only(MPI_Comm comm, ExecutionSpace const& space, std::int64_t num_embeddings,
                                        std::int64_t embedding_dim, Options const& options = {}) {
    return ShardedEmbedding(comm, space, num_embeddings, embedding_dim, nullptr, nullptr, options);
  }
  static ShardedEmbedding backward_only(MPI_Comm comm, ExecutionSpace const& space, Ownership const& ownership,
                                        std::int64_t embedding_dim, Options const& options = {}) {
    return ShardedEmbedding(comm, space, ownership.rows(), embedding_dim, nullptr, nullptr, options, &ownership);
  }

 private:
  ShardedEmbedding(MPI_Comm comm, ExecutionSpace const& space, std::int64_t num_embeddings, std::int64_t embedding_dim,
                   FloatsRef const* local_rows, typename Local::const_matrix_type const* local_view,
                   Options const& options, Ownership const* ownership = nullptr)
      : comm_(comm), space_(space), config_(make_config(num_embeddings, embedding_dim, options)) {
    MPI_Comm_size(comm_, &ranks_);
    MPI_Comm_rank(comm_, &rank_);
    if (ownership && ownership->ranks() != ranks_)
      throw InvalidArgument("ownership", "the ownership is for " + std::to_string(ownership->ranks()) +
                                             " ranks; the communicator has " + std::to_string(ranks_));
    own_ = ownership ? *ownership : Ownership::ranges(num_embeddings, ranks_);
    slots_ = own_.slots(rank_);
    rows_ = own_.contiguous() ? RowRange{own_.first_row(rank_), own_.first_row(rank_) + slots_} : RowRange{0, slots_};
    // A bad shard on any rank stops every rank, with that rank's message.
    std::string error;
    try {
      if (local_rows) check_table_shape("local_rows", local_rows->shape, slots_, embedding_dim);
      if (local_view)
        check_table_shape("local_rows", Shape{std::int64_t(local_view->extent(0)), std::int64_t(local_view->extent(1))},
                          slots_, embedding_dim);
      if (slots_ > 0) {
        Options local = options;
        local.padding_idx.reset();
        if (pad_slot() >= 0) local.padding_idx = pad_slot();
        BagOptions bag;  // the owner's fold of positions with factors (backward_factored)
        bag.embedding = local;
        bag.embedding.scale_grad_by_freq = FreqScale::none;  // in the factors, formed by the owner
        bag.pooling = Pooling::sum;
        bag.include_last_offset = true;
        bags_.emplace(EmbeddingBag<ExecutionSpace>::backward_only(space, slots_, embedding_dim, bag));
        if (local_rows)
          layer_.emplace(space, slots_, embedding_dim, *local_rows, local);
        else if (local_view)
          layer_.emplace(Local::from_pretrained(space, *local_view, local));
        else
          layer_.emplace(Local::backward_only(space, slots_, embedding_dim, local));
      }
    } catch (Error const& e) {
      error = e.message();
    }
    agree_on(error);
  }

 public:
  // The plan this rank's own layer runs for `positions` terms (its rows only).
  Plan plan_for(std::int64_t positions) const {
    return layer_ ? layer_->plan_for(positions) : config_.plan == Plan::automatic ? Plan::sort : config_.plan;
  }

  // What this rank's backward calls sent to other ranks, and the time they spent
  // exchanging (routing and MPI_Alltoallv) and folding (since construction).
  struct Traffic {
    std::int64_t rows_sent = 0;   // positions (an id and a dy row each) sent to another rank
    std::int64_t bytes_sent = 0;  // their bytes
    double exchange_seconds = 0, fold_seconds = 0;
  };
  Traffic const& traffic() const noexcept { return traffic_; }

  // What a bag call's positions' factors are formed from (EmbeddingBag::position_terms):
  // one double per position of this rank's slab, its bag's n (mean) or its weight.
  struct FactorInputs {
    bool mean = false;  // the same on every rank
    std::vector<double> values;
  };

  // This rank's rows under contiguous ranges; under another ownership [0, slots()).
  RowRange rows() const noexcept { return rows_; }
  std::int64_t slots() const noexcept { return slots_; }
  Ownership const& ownership() const noexcept { return own_; }
  Config const& config() const noexcept { return config_; }
  // The path this rank's last dense backward took over the positions it received,
  // and how many it received (0: none, and the path is unspecified).
  BackwardPath last_path() const noexcept { return last_path_; }
  std::int64_t last_positions() const noexcept { return last_positions_; }
  int ranks() const noexcept { return ranks_; }

  // Collective. The backward of this rank's slab of positions (ids of global rows,
  // dy (t, d) row-major, both on the host): writes this rank's rows of the gradient
  // into `grad` (rows().size() x d, in the space's memory), continuing what `grad`
  // holds when `accumulate` (a carry in place), and this call's counts of its rows
  // into `counts` if given; `tally` (host, rows().size() entries), if given, has each
  // of its rows' occurrences added. Ids out of range or non-finite dy on any rank stop
  // every rank with the one-process error, naming the position within this call's
  // batch (the ranks' slabs in rank order); nothing is written.
  // `batch_counts` (this rank's rows, in the space's memory) is for
  // scale_grad_by_freq=batch, as Embedding::backward's.
  void backward(IdsRef const& ids, FloatsRef const& dy, matrix_type const& grad, bool accumulate,
                counts_type const& counts = {}, std::int64_t* tally = nullptr,
                batch_counts_type const& batch_counts = {}) const {
    auto const d = config_.embedding_dim;
    std::string const bad_grad =
        std::int64_t(grad.extent(0)) != slots_ || std::int64_t(grad.extent(1)) != d
            ? "grad must be this rank's rows: (" + std::to_string(slots_) + ", " + std::to_string(d) + ")"
            : "";
    exchange_and_fold(
        ids, dy, nullptr, tally, bad_grad,
        [&](std::vector<std::int64_t>& recv_ids, std::vector<float> const& recv_dy, std::vector<double> const&,
            std::int64_t n) { fold(recv_ids, recv_dy, n, grad, accumulate, counts, batch_counts); });
  }

  // Collective. Positions whose terms carry a factor each (EmbeddingBag::position_terms:
  // a bag call as positions), into `grad` (continued in place) or the sparse `carry`.
  // `factors` (null on every rank, or on every rank not) travel with their positions;
  // each owner forms the factors (detail::bag_factor, with its rows' counts under
  // scale_grad_by_freq) and folds fma(term, factor, acc) as the one-process bag call
  // does; with `factors` null, backward's fold of the terms. `refused`: this rank's
  // objection to its part (what forming the terms threw), which stops every rank.
  void backward_factored(IdsRef const& ids, FloatsRef const& dy, FactorInputs const* factors, matrix_type const& grad,
                         std::int64_t* tally, batch_counts_type const& batch_counts,
                         std::string const& refused = {}) const {
    exchange_and_fold(
        ids, dy, factors ? &factors->values : nullptr, tally, refused,
        [&](std::vector<std::int64_t>& recv_ids, std::vector<float> const& recv_dy,
            std::vector<double> const& recv_inputs, std::int64_t n) {
          if (!factors) return fold(recv_ids, recv_dy, n, grad, true, {}, batch_counts);
          last_positions_ = n;
          if (n == 0) return;
          auto const in = factored_upload(recv_ids, recv_dy, recv_inputs, factors->mean, batch_counts, n);
          last_path_ = layer_->path_for(space_, CallShape{n, n, true, true});
          bags_->backward(space_, in.ids, in.offsets, in.dy, grad, grad, {}, in.factors);
          space_.fence();
        },
        true);
  }
  void backward_factored(IdsRef const& ids, FloatsRef const& dy, FactorInputs const* factors, sparse_carry_type& carry,
                         std::int64_t* tally, batch_counts_type const& batch_counts,
                         std::string const& refused = {}) const {
    exchange_and_fold(
        ids, dy, factors ? &factors->values : nullptr, tally, refused,
        [&](std::vector<std::int64_t>& recv_ids, std::vector<float> const& recv_dy,
            std::vector<double> const& recv_inputs, std::int64_t n) {
          if (n == 0) return;
          if (!factors) {
            auto const in = upload(recv_ids, recv_dy, n);
            layer_->backward_sparse(space_, in.first, in.second, carry, batch_counts);
            space_.fence();
            return;
          }
          auto const in = factored_upload(recv_ids, recv_dy, recv_inputs, factors->mean, batch_counts, n);
          bags_->backward_sparse(space_, in.ids, in.offsets, in.dy, carry, in.factors);
          space_.fence();
        },
        true);
  }

  // Collective. As backward, for a row-sparse gradient of this rank's rows: `carry`
  // (row numbers local to this rank, as the result's; empty: none) is continued and
  // not changed; returns the new gradient (Embedding::backward_sparse's).
  sparse_type backward_sparse(IdsRef const& ids, FloatsRef const& dy, sparse_type const& carry,
                              std::int64_t* tally = nullptr, batch_counts_type const& batch_counts = {}) const {
    sparse_type out = carry;
    exchange_and_fold(ids, dy, nullptr, tally, "",
                      [&](std::vector<std::int64_t>& recv_ids, std::vector<float> const& recv_dy,
                          std::vector<double> const&, std::int64_t n) {
                        if (n == 0) return;  // no term for this rank's rows in this call
                        auto const in = upload(recv_ids, recv_dy, n);
                        out = layer_->backward_sparse(space_, in.first, in.second, carry, batch_counts);
                        space_.fence();
                      });
    return out;
  }

  // Collective. As backward_sparse, continuing `carry` in place (Embedding's
  // sparse_carry_type, made by sparse_carry below): a call costs its own rows only.
  void backward_sparse(IdsRef const& ids, FloatsRef const& dy, sparse_carry_type& carry,
                       std::int64_t* tally = nullptr, batch_counts_type const& batch_counts = {}) const {
    exchange_and_fold(ids, dy, nullptr, tally, "",
                      [&](std::vector<std::int64_t>& recv_ids, std::vector<float> const& recv_dy,
                          std::vector<double> const&, std::int64_t n) {
                        if (n == 0) return;
                        auto const in = upload(recv_ids, recv_dy, n);
                        layer_->backward_sparse(space_, in.first, in.second, carry, batch_counts);
                        space_.fence();
                      });
  }
  // An empty carry of this rank's rows, or one continuing `from` (local row numbers).
  sparse_carry_type sparse_carry() const {
    return layer_ ? layer_->sparse_carry(space_) : kembed::detail::make_sparse_carry(space_, 0, config_.embedding_dim);
  }
  sparse_carry_type sparse_carry(sparse_type const& from) const {
    return layer_ ? layer_->sparse_carry(space_, from) : kembed::detail::make_sparse_carry(space_, 0, config_.embedding_dim);
  }
  sparse_type listed(sparse_carry_type const& carry) const { return kembed::detail::listed_of(space_, carry); }

  // Collective. The forward of this rank's positions: each id is sent to its row's
  // owner and the row comes back; returns (t, d) floats in this rank's order.
  std::vector<float> forward(IdsRef const& ids) const {
    std::int64_t t = 0;
    try {
      t = slab_size(ids.shape());
    } catch (Error const&) {  // forward(ids, y) stops every rank with it
    }
    std::vector<float> y(static_cast<std::size_t>(t * config_.embedding_dim));
    forward(ids, y.data());
    return y;
  }
  // Collective. The same into `y` (t x d floats on the host, this rank's order). The
  // buffers it exchanges through are kept for the next call (a job's blocks reuse
  // them), so calls on one layer must not overlap.
  void forward(IdsRef const& ids, float* y) const {
    auto const d = config_.embedding_dim;
    std::string error;
    std::int64_t t = 0;
    try {
      t = slab_size(ids.shape());
      if (t > 0 && (!ids.data() || !y)) throw InvalidArgument("ids", "ids or y has no data (a null pointer)");
    } catch (Error const& e) {
      error = e.message();
    }
    auto const global = checked_slab(ids, nullptr, false, false, error);
    auto const route = route_of(global);
    auto recv_ids = exchange_ids(route, global);
    std::int64_t const received = route.received;
    grow(rows_out_, received * d);
    try {
      if (layer_ && received > 0) {
        for (auto& id : recv_ids) id = local_of(id);
        look_up(recv_ids, received, rows_out_.data());
      }
    } catch (Error const& e) {
      error = e.message();
    }
    agree_on(error);
    grow(rows_back_, t * d);
    exchange_rows(rows_out_, route.recv_rows, route.recv_at, rows_back_, route.send_rows, route.send_at, "rows");
    for (std::int64_t p = 0; p < t; ++p) std::copy_n(rows_back_.data() + route.slot[std::size_t(p)] * d, d, y + p * d);
  }

 private:
  static void grow(std::vector<float>& v, std::int64_t n) {
    if (std::int64_t(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  }
  // This rank's rows of `n` local ids into `out` (n x d, host): in place where the
  // space's memory is the host's.
  void look_up(std::vector<std::int64_t> const& local, std::int64_t n, float* out) const {
    if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecutionSpace::memory_space>::accessible) {
      layer_->forward(space_, typename Local::ids64_type(local.data(), n),
                      typename Local::matrix_type(out, n, config_.embedding_dim));
      space_.fence();
    } else {
      auto const rows = layer_->forward(IdsRef(local));
      std::copy(rows.begin(), rows.end(), out);
    }
  }

  // After every rank's shape checks (`error` is this rank's), the ids and dy checks
  // over all ranks; returns this rank's ids as int64.
  // `allow_empty`: a call with no position on any rank is no error (a bag call whose
  // bags are all empty, as one process allows).
  std::vector<std::int64_t> checked_slab(IdsRef const& ids, float const* dy, bool with_dy, bool allow_empty,
                                         std::string const& error) const {
    agree_on(error);
    std::int64_t const t = slab_size(ids.shape());
    auto const [offset, total] = detail::slab_offset(comm_, t);
    if (total < 1 && !allow_empty)
      throw InvalidArgument("ids", "the batch has no positions on any rank; want at least one id");
    std::vector<std::int64_t> global(static_cast<std::size_t>(t));
    for (std::int64_t p = 0; p < t; ++p) global[std::size_t(p)] = ids.at(p);
    check_ids_and_dy(global, dy, with_dy, offset);
    return global;
  }

  // Where this rank's positions go: each to its row's owner, at `slot` in the send
  // buffer (owners in rank order, positions ascending within each), and how many
  // rows each rank sends and receives (one MPI_Alltoall).
  struct Route {
    std::vector<int> send_rows, recv_rows, send_at, recv_at;
    std::vector<std::int64_t> slot;
    std::int64_t received = 0;
  };
  Route route_of(std::vector<std::int64_t> const& global) const {
    Route r;
    r.send_rows.assign(std::size_t(ranks_), 0);
    r.recv_rows.assign(std::size_t(ranks_), 0);
    std::vector<int> owner(global.size());
    for (std::size_t p = 0; p < global.size(); ++p) ++r.send_rows[std::size_t(owner[p] = owner_of(global[p]))];
    detail::check(MPI_Alltoall(r.send_rows.data(), 1, MPI_INT, r.recv_rows.data(), 1, MPI_INT, comm_), "MPI_Alltoall");
    r.send_at = displacements(r.send_rows);
    r.recv_at = displacements(r.recv_rows);
    r.received = std::int64_t(r.recv_at.back()) + r.recv_rows.back();
    auto next = r.send_at;
    r.slot.resize(global.size());
    for (std::size_t p = 0; p < global.size(); ++p) r.slot[p] = next[std::size_t(owner[p])]++;
    return r;
  }

  // The ids, to their owners (received in source-rank order).
  std::vector<std::int64_t> exchange_ids(Route const& r, std::vector<std::int64_t> const& global) const {
    std::vector<std::int64_t> send(global.size()), recv(static_cast<std::size_t>(r.received));
    for (std::size_t p = 0; p < global.size(); ++p) send[std::size_t(r.slot[p])] = global[p];
    detail::check(MPI_Alltoallv(send.data(), r.send_rows.data(), r.send_at.data(), MPI_INT64_T, recv.data(),
                                r.recv_rows.data(), r.recv_at.data(), MPI_INT64_T, comm_),
                  "MPI_Alltoallv (ids)");
    return recv;
  }

  // Rows of embedding_dim floats, counted in rows (so counts stay ints for any d).
  void exchange_rows(std::vector<float> const& send, std::vector<int> const& send_rows, std::vector<int> const& send_at,
                     std::vector<float>& recv, std::vector<int> const& recv_rows, std::vector<int> const& recv_at,
                     char const* what) const {
    MPI_Datatype row;
    detail::check(MPI_Type_contiguous(int(config_.embedding_dim), MPI_FLOAT, &row), "MPI_Type_contiguous");
    MPI_Type_commit(&row);
    int const status = MPI_Alltoallv(send.data(), send_rows.data(), send_at.data(), row, recv.data(), recv_rows.data(),
                                     recv_at.data(), row, comm_);
    MPI_Type_free(&row);
    detail::check(status, (std::string("MPI_Alltoallv (") + what + ")").c_str());
  }

  // Checks a call (`bad_output`: the caller's objection to its output, or empty),
  // sends each position to its row's owner, adds the received rows' occurrences to
  // `tally`, and lets `fold` fold what arrived (on a rank with rows); every rank
  // throws the first rank's error, or none does.
  // `factors` (null, or this rank's one double per position) travel with their positions.
  template <class Fold>
  void exchange_and_fold(IdsRef const& ids, FloatsRef const& dy, std::vector<double> const* factors,
                         std::int64_t* tally, std::string const& bad_output, Fold&& fold_received,
                         bool allow_empty = false) const {
    auto const d = config_.embedding_dim;
    std::string error;
    std::int64_t t = 0;
    try {
      if (!bad_output.empty()) throw InvalidArgument("grad", bad_output);  // the caller's objection first
      t = slab_size(ids.shape());  // a rank's slab may be empty; the batch may not
      if (dy.shape != ids.shape().appended(d))
        throw InvalidArgument("dy", "dy has shape " + dy.shape.str() + ", want " + ids.shape().appended(d).str() +
                                        " (ids.shape + (embedding_dim,))");
      if (t > 0 && (!ids.data() || !dy.data)) throw InvalidArgument("ids", "ids or dy has no data (a null pointer)");
      if (factors && std::int64_t(factors->size()) != t)
        throw InvalidArgument("factors", "factors has " + std::to_string(factors->size()) + " entries, want " +
                                             std::to_string(t) + " (one per position)");
    } catch (Error const& e) {
      error = e.message();
    }
    auto const global = checked_slab(ids, dy.data, true, allow_empty, error);

    // Positions to their rows' owners, in ascending position order per owner.
    auto const t_exchange = std::chrono::steady_clock::now();
    auto const route = route_of(global);
    auto recv_ids = exchange_ids(route, global);
    std::int64_t const received = route.received;
    std::vector<float> send_dy(static_cast<std::size_t>(t * d)), recv_dy(static_cast<std::size_t>(received * d));
    for (std::int64_t p = 0; p < t; ++p)
      std::copy_n(dy.data + p * d, d, send_dy.data() + route.slot[std::size_t(p)] * d);
    exchange_rows(send_dy, route.send_rows, route.send_at, recv_dy, route.recv_rows, route.recv_at, "dy");
    std::vector<double> recv_factors;
    if (factors) recv_factors = exchange_factors(route, *factors);
    auto const t_fold = std::chrono::steady_clock::now();
    std::int64_t const away = t - route.send_rows[std::size_t(rank_)];
    traffic_.rows_sent += away;
    traffic_.bytes_sent += away * (std::int64_t(sizeof(std::int64_t)) + d * std::int64_t(sizeof(float)) +
                                   (factors ? std::int64_t(sizeof(double)) : 0));
    traffic_.exchange_seconds += std::chrono::duration<double>(t_fold - t_exchange).count();
    // Ids and dy were checked on every rank, so this fails only as the one-process
    // layer would fail on its own (out of memory); still, every rank hears of it.
    if (tally)
      for (auto const id : recv_ids) ++tally[local_of(id)];
    try {
      if (layer_) fold_received(recv_ids, recv_dy, recv_factors, received);  // a rank without rows gets nothing
    } catch (Error const& e) {
      error = e.message();
    }
    traffic_.fold_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fold).count();
    agree_on(error);
  }

  // One double per position, to the positions' owners (as exchange_ids).
  std::vector<double> exchange_factors(Route const& r, std::vector<double> const& factors) const {
    std::vector<double> send(factors.size()), recv(static_cast<std::size_t>(r.received));
    for (std::size_t p = 0; p < factors.size(); ++p) send[std::size_t(r.slot[p])] = factors[p];
    detail::check(MPI_Alltoallv(send.data(), r.send_rows.data(), r.send_at.data(), MPI_DOUBLE, recv.data(),
                                r.recv_rows.data(), r.recv_at.data(), MPI_DOUBLE, comm_),
                  "MPI_Alltoallv (factors)");
    return recv;
  }

  // What arrived with factors, as bags of one position each, weighted by them.
  struct Factored {
    typename Local::ids64_type ids;
    typename EmbeddingBag<ExecutionSpace>::offsets_type offsets;
    typename Local::const_matrix_type dy;
    typename EmbeddingBag<ExecutionSpace>::weights_type factors;
  };
  Factored factored_upload(std::vector<std::int64_t>& recv_ids, std::vector<float> const& recv_dy,
                           std::vector<double> const& recv_inputs, bool mean, batch_counts_type const& batch_counts,
                           std::int64_t n) const {
    Factored f;
    auto const in = upload(recv_ids, recv_dy, n);  // recv_ids are now local rows
    f.ids = in.first;
    f.dy = in.second;
    Kokkos::View<std::int64_t*, Kokkos::HostSpace> offsets("kembed::mpi::one_position_bags", std::size_t(n + 1));
    for (std::int64_t b = 0; b <= n; ++b) offsets(b) = b;
    f.offsets = Kokkos::create_mirror_view_and_copy(memory_space(), offsets);
    // A managed host view: on a host backend the mirror is this view itself.
    f.factors =
        Kokkos::create_mirror_view_and_copy(memory_space(), owner_factors(recv_ids, recv_inputs, mean, batch_counts));
    return f;
  }

  // The factors of what this owner received (local rows, every rank's positions of
  // them in this call): detail::bag_factor of each position's n or weight and, under
  // scale_grad_by_freq, its row's count in this call or in the batch; 0 at the padding row.
  Kokkos::View<float*, Kokkos::HostSpace> owner_factors(std::vector<std::int64_t> const& local,
                                                        std::vector<double> const& inputs, bool mean,
                                                        batch_counts_type const& batch_counts) const {
    std::vector<std::int64_t> count;
    if (config_.scales()) count = row_counts(local, batch_counts);
    std::int64_t const pad = pad_slot();
    Kokkos::View<float*, Kokkos::HostSpace> f(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kembed::mpi::factors"),
                                              local.size());
    for (std::size_t p = 0; p < local.size(); ++p) {
      auto const r = local[p];
      std::int64_t const n = count.empty() ? 0 : count[std::size_t(r)];
      f(p) = r == pad ? 0.0f : ::kembed::detail::bag_factor(n, mean, !mean, inputs[p]);
    }
    return f;
  }
  // Each of this rank's rows' count: its positions in this call, or its batch count
  // (scale_grad_by_freq=batch; never below the call's).
  std::vector<std::int64_t> row_counts(std::vector<std::int64_t> const& local,
                                       batch_counts_type const& batch_counts) const {
    std::vector<std::int64_t> count(std::size_t(slots_), 0);
    for (auto const r : local) ++count[std::size_t(r)];
    if (config_.scale_grad_by_freq != FreqScale::batch) return count;
    if (std::int64_t(batch_counts.extent(0)) != slots_)
      throw InvalidArgument("batch_counts", "scale_grad_by_freq is 'batch': give batch_counts of this rank's " +
                                                std::to_string(slots_) + " rows (has " +
                                                std::to_string(batch_counts.extent(0)) + ")");
    auto const batch = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), batch_counts);
    for (std::int64_t r = 0; r < slots_; ++r) {
      if (std::int64_t(batch(r)) < count[std::size_t(r)])
        throw InvalidArgument("batch_counts", "batch_counts gives row " + std::to_string(own_.row_at(rank_, r)) +
                                                  " fewer positions than this call holds; batch counts are the "
                                                  "whole batch's");
      count[std::size_t(r)] = std::int64_t(batch(r));
    }
    return count;
  }

  // What arrived, as this rank's local rows, in the space's memory.
  std::pair<typename Local::ids64_type, typename Local::const_matrix_type> upload(
      std::vector<std::int64_t>& recv_ids, std::vector<float> const& recv_dy, std::int64_t received) const {
    for (auto& id : recv_ids) id = local_of(id);
    Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids_h(recv_ids.data(),
                                                                                        recv_ids.size());
    Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> dy_h(
        recv_dy.data(), received, config_.embedding_dim);
    return {Kokkos::create_mirror_view_and_copy(memory_space(), ids_h),
            Kokkos::create_mirror_view_and_copy(memory_space(), dy_h)};
  }

  // The owner's part: what it received, in ascending global position order per row.
  void fold(std::vector<std::int64_t>& recv_ids, std::vector<float> const& recv_dy, std::int64_t received,
            matrix_type const& grad, bool accumulate, counts_type const& counts,
            batch_counts_type const& batch_counts) const {
    last_positions_ = received;
    if (received == 0) {  // no term for this rank's rows in this call
      if (!accumulate) Kokkos::deep_copy(space_, grad, 0.0f);
      if (counts.data() != nullptr) Kokkos::deep_copy(space_, counts, std::int64_t{0});
      space_.fence();
      return;
    }
    auto const in = upload(recv_ids, recv_dy, received);
    auto const& ids_d = in.first;
    auto const& dy_d = in.second;
    last_path_ = layer_->path_for(space_, received, accumulate);
    layer_->backward(space_, ids_d, dy_d, grad,
                     accumulate ? typename Local::const_matrix_type(grad) : typename Local::const_matrix_type(),
                     counts, batch_counts);
    space_.fence();
  }

  static std::int64_t slab_size(Shape const& shape) {
    if (shape.rank() == 1 && shape[0] == 0) return 0;
    return shape.numel("ids");
  }

  // Every rank throws the first rank's error, or none does.
  void agree_on(std::string const& error) const {
    int const bad = error.empty() ? INT32_MAX : rank_;
    int first = INT32_MAX;
    detail::check(MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
    if (first == INT32_MAX) return;
    std::int64_t length = first == rank_ ? std::int64_t(error.size()) : 0;
    detail::check(MPI_Bcast(&length, 1, MPI_INT64_T, first, comm_), "MPI_Bcast");
    std::string message = first == rank_ ? error : std::string(std::size_t(length), ' ');
    detail::check(MPI_Bcast(message.data(), int(length), MPI_CHAR, first, comm_), "MPI_Bcast");
    throw InvalidArgument("rank " + std::to_string(first), message);
  }

  // The first id out of range, then the first non-finite dy, over every rank's
  // slab: each rank throws the one-process error for the same global position.
  // `with_dy` (the same on every rank): dy is checked too (a rank with no positions may
  // pass no dy, and still takes part).
  void check_ids_and_dy(std::vector<std::int64_t> const& global, float const* dy, bool with_dy,
                        std::int64_t offset) const {
    auto const v = config_.num_embeddings, d = config_.embedding_dim;
    std::int64_t bad = INT64_MAX, value = 0;
    for (std::size_t p = 0; p < global.size(); ++p)
      if (global[p] < 0 || global[p] >= v) {
        bad = offset + std::int64_t(p), value = global[p];
        break;
      }
    auto const [at, id] = detail::first_over_ranks(comm_, bad, value, MPI_INT64_T);
    if (at != INT64_MAX) throw_id_out_of_range("ids", at, id, v);
    if (!with_dy) return;
    std::int64_t index = INT64_MAX;
    float x = 0;
    for (std::int64_t i = 0; i < std::int64_t(global.size()) * d; ++i)
      if (!(dy[i] - dy[i] == 0.0f)) {
        index = offset * d + i, x = dy[i];
        break;
      }
    auto const [where, what] = detail::first_over_ranks(comm_, index, x, MPI_FLOAT);
    if (where != INT64_MAX) throw_non_finite("dy", where, what, d, "position");
  }

  int owner_of(std::int64_t row) const { return own_.owner_of(row); }
  // A row this rank owns, as its slot.
  std::int64_t local_of(std::int64_t row) const { return own_.contiguous() ? row - rows_.begin : own_.slot_of(row); }
  // The padding row's slot here, or -1 (none, or another rank's).
  std::int64_t pad_slot() const {
    return config_.has_padding() && own_.owner_of(config_.padding_idx) == rank_ ? own_.slot_of(config_.padding_idx)
                                                                                : -1;
  }
  static std::vector<int> displacements(std::vector<int> const& counts) {
    std::vector<int> at(counts.size(), 0);
    for (std::size_t i = 1; i < counts.size(); ++i) at[i] = at[i - 1] + counts[i - 1];
    return at;
  }

  MPI_Comm comm_;
  ExecutionSpace space_;
  Config config_;
  int ranks_ = 1, rank_ = 0;
  Ownership own_;
  std::int64_t slots_ = 0;
  RowRange rows_;  // contiguous ranges: this rank's; else [0, slots_)
  std::optional<Local> layer_;
  std::optional<EmbeddingBag<ExecutionSpace>> bags_;  // bags of one position: a factor per term
  mutable std::vector<float> rows_out_, rows_back_;   // the forward's exchange buffers, reused
  mutable Traffic traffic_;
  mutable BackwardPath last_path_;  // of the last dense fold, for the run file
  mutable std::int64_t last_positions_ = 0;
};

}  // namespace kembed::mpi
