#pragma once
// job::OneProcess: the batch job's team of one. It owns every row, reads every
// position, and agrees with itself; kembed::mpi::Team is the same for many ranks.
#include <kembed/core/ownership.hpp>
#include <kembed/embedding.hpp>
#include <kembed/embedding_bag.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/job/detail/support.hpp>
#include <kembed/job/team.hpp>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kembed::io {
struct Collective;
}

namespace kembed::job {

class OneProcess {
 public:
  int rank() const noexcept { return 0; }
  int size() const noexcept { return 1; }
  io::Collective const* collective() const noexcept { return nullptr; }  // files are opened as usual
  bool reads_ahead() const noexcept { return true; }  // file work on a thread of its own
  void agree(std::exception_ptr error) const {
    if (error) std::rethrow_exception(error);
  }
  std::string broadcast(std::string const& text) const { return text; }
  std::int64_t sum(std::int64_t value) const { return value; }
  std::int64_t max(std::int64_t value) const { return value; }
  std::int64_t sum_before(std::int64_t) const { return 0; }
  std::vector<std::int64_t> all_gather(std::int64_t value) const { return {value}; }
  std::string sha256_in_rank_order(void const* mine, std::size_t bytes) const { return io::sha256_hex(mine, bytes); }
  std::string gather_bytes(std::string mine) const { return mine; }
  std::string exchange_bytes(std::vector<std::string> const& to_each) const { return to_each.at(0); }
  Ownership own_rows_for(std::vector<std::int64_t> const& counts) const {
    return Ownership::ranges(std::int64_t(counts.size()), 1);
  }
  // The rows of a V-row table this process owns: all of them (first, count).
  std::pair<std::int64_t, std::int64_t> own_rows(std::int64_t v) const { return {0, v}; }
  // Per-row counts of every rank's positions (V entries each), summed: this rank's rows.
  std::vector<std::int64_t> sum_rows(std::vector<std::int64_t> counts, std::int64_t, std::int64_t) const {
    return counts;
  }

  // The forward's lookups: an Embedding's rows, or a bag batch's bags pooled by an
  // EmbeddingBag (offsets with their last entry), over the whole table.
  template <class Space>
  class Lookup {
   public:
    Lookup(OneProcess const&, Space const& space, std::int64_t v, std::int64_t d, FloatsRef const& table,
           Options const& options, std::optional<Pooling> pooling) {
      if (!pooling) {
        rows_.emplace(space, v, d, table, options);
        return;
      }
      BagOptions o;
      o.embedding = options;
      o.pooling = *pooling;
      o.include_last_offset = true;
      bags_.emplace(space, v, d, table, o);
    }
    // A block's n positions, or its n bags (their offsets made to start from 0), into y
    // (n x d, host): looked up in place where the space's memory is the host's.
    void operator()(Space const& space, ForwardBlock& b, std::int64_t n, float* y) const {
      using memory = typename Space::memory_space;
      using matrix = typename Embedding<Space>::matrix_type;
      using host_matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
      auto const d = rows_ ? rows_->embedding_dim() : bags_->embedding_dim();
      constexpr bool host_y = Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory>::accessible;
      matrix y_n;
      if constexpr (host_y) {
        y_n = matrix(y, n, d);
      } else {
        if (std::int64_t(y_.extent(0)) < n) y_ = matrix("kembed::job::y", n, d);
        y_n = Kokkos::subview(y_, std::make_pair(std::int64_t{0}, n), Kokkos::ALL);
      }
      look_up(space, b, n, y_n);
      if constexpr (!host_y) Kokkos::deep_copy(space, host_matrix(y, n, d), y_n);
      space.fence();
    }

   private:
    template <class Matrix>
    void look_up(Space const& space, ForwardBlock& b, std::int64_t n, Matrix const& y) const {
      using memory = typename Space::memory_space;
      using host_ints = Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
      if (rows_)
        return rows_->forward(space, Kokkos::create_mirror_view_and_copy(memory(), host_ints(b.ids.data(), n)), y);
      auto& o = b.offsets;
      for (std::int64_t i = n; i >= 0; --i) o[std::size_t(i)] -= o[0];
      std::int64_t const positions = o[std::size_t(n)];
      auto const ids_d = Kokkos::create_mirror_view_and_copy(memory(), host_ints(b.ids.data(), positions));
      auto const offsets_d = Kokkos::create_mirror_view_and_copy(memory(), host_ints(o.data(), n + 1));
      typename EmbeddingBag<Space>::weights_type weights_d;
      if (!b.weights.empty())
        weights_d = Kokkos::create_mirror_view_and_copy(
            memory(),
            Kokkos::View<float const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.weights.data(), positions));
      bags_->forward(space, ids_d, offsets_d, y, weights_d);
    }

    std::optional<Embedding<Space>> rows_;
    std::optional<EmbeddingBag<Space>> bags_;
    mutable typename Embedding<Space>::matrix_type y_;  // a device's y, reused by each block
  };

  // The backward of a whole table's rows, on positions this process read.
  template <class ExecutionSpace>
  class Layer {
   public:
    using execution_space = ExecutionSpace;
    using matrix_type = typename Embedding<ExecutionSpace>::matrix_type;
    using batch_counts_type = typename Embedding<ExecutionSpace>::batch_counts_type;
    using sparse_type = typename Embedding<ExecutionSpace>::sparse_type;
    using sparse_carry_type = typename Embedding<ExecutionSpace>::sparse_carry_type;
    Layer(OneProcess const&, ExecutionSpace const& space, Ownership const& owners, std::int64_t cols,
          Options const& options)
        : layer_(Embedding<ExecutionSpace>::backward_only(space, owners.rows(), cols, options)),
          options_(options),
          owners_(owners) {}
    Config const& config() const noexcept { return layer_.config(); }
    Plan plan_for(std::int64_t positions) const { return layer_.plan_for(positions); }
    // The path this rank's last backward call took (Embedding::path_for), and the
    // positions it folded.
    BackwardPath last_path() const noexcept { return last_path_; }
    std::int64_t last_positions() const noexcept { return last_positions_; }
    double exchange_seconds() const noexcept { return 0; }  // nothing to exchange
    std::int64_t bytes_sent() const noexcept { return 0; }
    Ownership const& ownership() const noexcept { return owners_; }  // every row
    std::int64_t row_count() const noexcept { return layer_.num_embeddings(); }
    // Folds positions (ids, dy n x d, host) into `grad`, continuing it; adds each
    // row's occurrences to `tally`. `batch_counts`: this rank's rows' whole-batch
    // counts, for scale_grad_by_freq=batch (else empty).
    void backward(ExecutionSpace const& space, std::int64_t const* ids, float const* dy, std::int64_t n,
                  matrix_type const& grad, std::int64_t* tally,
                  batch_counts_type const& batch_counts) const {
      auto const in = upload(ids, dy, n, tally);
      last_path_ = layer_.path_for(space, n, true);
      last_positions_ = n;
      layer_.backward(space, in.first, in.second, grad, grad, {}, batch_counts);
    }
    // The same into a row-sparse gradient, continuing `carry` in place.
    void backward_sparse(ExecutionSpace const& space, std::int64_t const* ids, float const* dy, std::int64_t n,
                         sparse_carry_type& carry, std::int64_t* tally, batch_counts_type const& batch_counts) const {
      auto const in = upload(ids, dy, n, tally);
      layer_.backward_sparse(space, in.first, in.second, carry, batch_counts);
    }
    // A bag batch's layer (EmbeddingBag, offsets with their last entry), set once
    // before backward_bags: max's argmax reads `table` (the whole table), the other
    // poolings read no table (null).
    void use_bags(ExecutionSpace const& space, Pooling pooling, FloatsRef const* table) {
      BagOptions o;
      o.embedding = options_;
      o.pooling = pooling;
      o.include_last_offset = true;
      auto const v = layer_.num_embeddings(), d = layer_.embedding_dim();
      if (table)
        bags_.emplace(space, v, d, *table, o);
      else
        bags_.emplace(EmbeddingBag<ExecutionSpace>::backward_only(space, v, d, o));
    }
    // Folds bags (host: ids and `weights` (null: none) of `positions` positions,
    // offsets[0 .. bags] from 0, dy bags x d) into `grad` or the sparse `carry`,
    // continuing it; adds each position's row to `tally`.
    void backward_bags(ExecutionSpace const& space, BagCall const& in, matrix_type const& grad, std::int64_t* tally,
                       batch_counts_type const& batch_counts) const {
      auto const up = upload_bags(in, tally);
      last_path_ = layer_.path_for(
          space, CallShape{in.positions, in.bags, true, bags_->pooling() == Pooling::mean || in.weighted,
                           bags_->pooling() == Pooling::max});
      last_positions_ = in.positions;
      bags_->backward(space, up.ids, up.offsets, up.dy, grad, grad, {}, up.weights, batch_counts);
    }
    void backward_bags_sparse(ExecutionSpace const& space, BagCall const& in, sparse_carry_type& carry,
                              std::int64_t* tally, batch_counts_type const& batch_counts) const {
      auto const up = upload_bags(in, tally);
      bags_->backward_sparse(space, up.ids, up.offsets, up.dy, carry, up.weights, batch_counts);
    }
    sparse_carry_type sparse_carry(ExecutionSpace const& space) const { return layer_.sparse_carry(space); }
    sparse_carry_type sparse_carry(ExecutionSpace const& space, sparse_type const& from) const {
      return layer_.sparse_carry(space, from);
    }
    sparse_type listed(ExecutionSpace const& space, sparse_carry_type const& carry) const {
      return layer_.listed(space, carry);
    }

   private:
    struct Uploaded {
      typename Embedding<ExecutionSpace>::ids64_type ids;
      typename EmbeddingBag<ExecutionSpace>::offsets_type offsets;
      typename Embedding<ExecutionSpace>::const_matrix_type dy;
      typename EmbeddingBag<ExecutionSpace>::weights_type weights;
    };
    // A bag call's arrays in the space's memory (no copy where that is the host's).
    Uploaded upload_bags(BagCall const& in, std::int64_t* tally) const {
      using memory = typename ExecutionSpace::memory_space;
      using host_ints = Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
      using host_floats = Kokkos::View<float const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
      Uploaded up;
      up.ids = Kokkos::create_mirror_view_and_copy(memory(), host_ints(in.ids, in.positions));
      up.offsets = Kokkos::create_mirror_view_and_copy(memory(), host_ints(in.offsets, in.bags + 1));
      up.dy = Kokkos::create_mirror_view_and_copy(
          memory(), Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                        in.dy, in.bags, layer_.embedding_dim()));
      if (in.weighted)
        up.weights = Kokkos::create_mirror_view_and_copy(memory(), host_floats(in.weights, in.positions));
      for (std::int64_t p = 0; p < in.positions; ++p) ++tally[in.ids[p]];
      return up;
    }
    // The positions in the space's memory; each row's occurrences added to `tally`.
    std::pair<typename Embedding<ExecutionSpace>::ids64_type, typename Embedding<ExecutionSpace>::const_matrix_type>
    upload(std::int64_t const* ids, float const* dy, std::int64_t n, std::int64_t* tally) const {
      using memory = typename ExecutionSpace::memory_space;
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids_h(ids, n);
      Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> dy_h(
          dy, n, layer_.embedding_dim());
      for (std::int64_t p = 0; p < n; ++p) ++tally[ids[p]];
      return {Kokkos::create_mirror_view_and_copy(memory(), ids_h), Kokkos::create_mirror_view_and_copy(memory(), dy_h)};
    }

    Embedding<ExecutionSpace> layer_;
    Options options_;
    Ownership owners_;
    std::optional<EmbeddingBag<ExecutionSpace>> bags_;  // a bag batch's
    mutable BackwardPath last_path_;  // what backward() last ran, for the run file
    mutable std::int64_t last_positions_ = 0;
  };
};

}  // namespace kembed::job
