#pragma once
// kembed::mpi::Team: the batch job (kembed/job/backward.hpp) over the ranks of an MPI
// communicator. Each rank owns rows_of(V, ranks, rank) of the gradient, reads its
// part of every block of positions collectively (on an I/O thread of its own, with
// files on a duplicate communicator, where ReadAhead allows), folds through
// ShardedEmbedding, and writes its rows of the run file collectively (parallel HDF5).
#include <kembed/io/collective.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/job/failure.hpp>
#include <kembed/job/team.hpp>
#include <kembed/mpi/sharded_embedding.hpp>

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <climits>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kembed::mpi {

// Whether the job reads the next block on a thread of its own while it folds:
// `automatic` where this rank has a core to spare for it (spare_core), `on` wherever
// MPI allows (tests), `off` never. Either way the bits are the same.
enum class ReadAhead { automatic, on, off };

// Collective. Whether each rank has a core beyond its `threads` for an I/O thread:
// the cores it may run on (its affinity mask, or the node's shared by the node's
// ranks where the mask is the whole node). Reading ahead on a core that also folds
// made the job slower (docs/SCALING.md).
inline bool spare_core(MPI_Comm comm, int threads) {
  MPI_Comm node = MPI_COMM_NULL;
  detail::check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int node_ranks = 1;
  MPI_Comm_size(node, &node_ranks);
  MPI_Comm_free(&node);
  cpu_set_t set;
  CPU_ZERO(&set);
  int const mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  int const all = std::max(1, int(std::thread::hardware_concurrency()));
  int const cores = mine < all ? mine : all / std::max(1, node_ranks);
  int spare = cores >= threads + 1, every = 0;
  detail::check(MPI_Allreduce(&spare, &every, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");  // one answer
  return every == 1;
}

class Team {
 public:
  // Collective. Reading ahead (ReadAhead) needs MPI_THREAD_MULTIPLE: files then get a
  // communicator of their own (a duplicate of `comm`), so that the job's I/O thread
  // reads the next block collectively while this thread exchanges and folds; else
  // file work stays on this thread, between folds.
  explicit Team(MPI_Comm comm = MPI_COMM_WORLD, ReadAhead read_ahead = ReadAhead::automatic)
      : comm_(comm), collective_{comm} {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    bool const wanted =
        read_ahead == ReadAhead::on ||
        (read_ahead == ReadAhead::automatic && spare_core(comm, Kokkos::DefaultHostExecutionSpace().concurrency()));
    if (level == MPI_THREAD_MULTIPLE && wanted) {
      auto* io = new MPI_Comm(MPI_COMM_NULL);
      detail::check(MPI_Comm_dup(comm, io), "MPI_Comm_dup");
      io_comm_ = std::shared_ptr<MPI_Comm>(io, [](MPI_Comm* c) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(c);
        delete c;
      });
      collective_.comm = *io_comm_;
    }
  }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  MPI_Comm comm() const noexcept { return comm_; }  // the exchange's and the job's own collectives
  io::Collective const* collective() const noexcept { return &collective_; }
  bool reads_ahead() const noexcept { return io_comm_ != nullptr; }

  // Every rank throws the lowest failing rank's error, as the same kind of kembed
  // error with the same text; or none does.
  void agree(std::exception_ptr error) const {
    auto failure = job::describe(error);
    int const bad = failure.kind < 0 ? INT_MAX : rank_;
    int first = INT_MAX;
    detail::check(MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, comm()), "MPI_Allreduce");
    if (first == INT_MAX) return;
    int kind = failure.kind;
    detail::check(MPI_Bcast(&kind, 1, MPI_INT, first, comm()), "MPI_Bcast");
    failure.kind = kind;
    failure.path = broadcast(failure.path, first);
    failure.message = broadcast(failure.message, first);
    job::rethrow(failure);
  }

  std::int64_t sum(std::int64_t value) const {
    std::int64_t total = 0;
    detail::check(MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, comm()), "MPI_Allreduce");
    return total;
  }

  std::int64_t max(std::int64_t value) const {
    std::int64_t most = 0;
    detail::check(MPI_Allreduce(&value, &most, 1, MPI_INT64_T, MPI_MAX, comm()), "MPI_Allreduce");
    return most;
  }

  // Every rank's `value`, in rank order, on every rank.
  std::vector<std::int64_t> all_gather(std::int64_t value) const {
    std::vector<std::int64_t> all(static_cast<std::size_t>(size_));
    detail::check(MPI_Allgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, comm()), "MPI_Allgather");
    return all;
  }

  // Every rank's bytes, concatenated in rank order, on every rank (small parts: the
  // inputs' chunk digests). On the job's communicator, from the job's thread.
  std::string gather_bytes(std::string const& mine) const {
    return detail::all_gather_in_rank_order(comm(), mine, MPI_CHAR);
  }

  // to_each[r] goes to rank r; returns what every rank sent here, in rank order. On
  // the job's communicator (rows moving between the fold's owners and the files').
  std::string exchange_bytes(std::vector<std::string> const& to_each) const {
    std::vector<int> send(static_cast<std::size_t>(size_)), recv(send.size()), send_at(send.size(), 0),
        recv_at(send.size(), 0);
    std::string out_bytes;
    for (std::size_t r = 0; r < send.size(); ++r) {
      if (to_each[r].size() > std::size_t(INT_MAX))
        throw InvalidArgument("ranks", "a rank's rows for another exceed 2 GiB; run on more ranks");
      send[r] = static_cast<int>(to_each[r].size());
      out_bytes += to_each[r];
    }
    detail::check(MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, comm()), "MPI_Alltoall");
    long long total = 0;
    for (std::size_t r = 0; r < send.size(); ++r) {
      if (r > 0) send_at[r] = send_at[r - 1] + send[r - 1], recv_at[r] = recv_at[r - 1] + recv[r - 1];
      total += recv[r];
    }
    if (total > INT_MAX)
      throw InvalidArgument("ranks", "a rank's rows from the others exceed 2 GiB; run on more ranks");
    std::string in(static_cast<std::size_t>(total), '\0');
    detail::check(MPI_Alltoallv(out_bytes.data(), send.data(), send_at.data(), MPI_CHAR, in.data(), recv.data(),
                                recv_at.data(), MPI_CHAR, comm()),
                  "MPI_Alltoallv (rows)");
    return in;
  }

  // Collective. How the job's ranks own rows for a batch whose ids this rank counted
  // in `counts` (V entries): spread (ShardedEmbedding, kembed/core/ownership.hpp).
  Ownership own_rows_for(std::vector<std::int64_t> const& counts) const { return spread_ownership(comm_, counts); }

  // The sum of `value` over the ranks before this one (0 on the first).
  std::int64_t sum_before(std::int64_t value) const {
    std::int64_t before = 0;
    detail::check(MPI_Exscan(&value, &before, 1, MPI_INT64_T, MPI_SUM, comm()), "MPI_Exscan");
    return rank_ == 0 ? 0 : before;  // MPI leaves the first rank's undefined
  }

  // Per-row counts of each rank's positions (V entries on every rank), summed over
  // the ranks: returns this rank's rows [first_row, first_row + rows) of the sum.
  std::vector<std::int64_t> sum_rows(std::vector<std::int64_t> const& counts, std::int64_t, std::int64_t) const {
    return detail::sum_onto_ranges(comm(), counts);  // rows_of gives the same split, in rank order
  }

  // The rows of a V-row table this rank owns (rows_of: first, count), as its layer's.
  std::pair<std::int64_t, std::int64_t> own_rows(std::int64_t v) const {
    auto const r = rows_of(v, size_, rank_);
    return {r.begin, r.size()};
  }
  std::string broadcast(std::string text, int root = 0) const { return broadcast_on(comm_, std::move(text), root); }

  // SHA-256 of every rank's bytes in rank order, on every rank: the first rank hashes
  // its own, then each other rank's, received in pieces of at most 16 MiB (so no rank
  // ever holds more than its own part and one piece). On the files' communicator: a
  // checkpoint's digests are made on the I/O thread, beside the exchange.
  std::string sha256_in_rank_order(void const* mine, std::size_t bytes) const {
    constexpr std::size_t piece = std::size_t{1} << 24;
    std::string digest;
    if (rank_ == 0) {
      io::Sha256 sha;
      sha.update(mine, bytes);
      std::vector<char> buffer(piece);
      for (int r = 1; r < size_; ++r) {
        unsigned long long left = 0;
        detail::check(MPI_Recv(&left, 1, MPI_UNSIGNED_LONG_LONG, r, tag, collective_.comm, MPI_STATUS_IGNORE),
                      "MPI_Recv");
        while (left > 0) {
          int const n = static_cast<int>(std::min<unsigned long long>(left, piece));
          detail::check(MPI_Recv(buffer.data(), n, MPI_CHAR, r, tag, collective_.comm, MPI_STATUS_IGNORE), "MPI_Recv");
          sha.update(buffer.data(), std::size_t(n));
          left -= std::size_t(n);
        }
      }
      digest = sha.hex_digest();
    } else {
      unsigned long long const total = bytes;
      detail::check(MPI_Send(&total, 1, MPI_UNSIGNED_LONG_LONG, 0, tag, collective_.comm), "MPI_Send");
      auto const* p = static_cast<char const*>(mine);
      for (std::size_t at = 0; at < bytes; at += piece) {
        int const n = static_cast<int>(std::min(piece, bytes - at));
        detail::check(MPI_Send(p + at, n, MPI_CHAR, 0, tag, collective_.comm), "MPI_Send");
      }
    }
    return broadcast_on(collective_.comm, digest, 0);
  }

  // The forward job's lookups (job::is_forward_team_v): this rank holds its range of
  // the table's rows (rows_of), and each rank's part of a block goes to the rows'
  // owners and comes back (ShardedEmbedding::forward); one call per block over every
  // rank, so max_norm renormalises as one process's call does. Bag batches are
  // refused: their pooling would need the rows of a bag gathered first.
  template <class ExecutionSpace>
  class Lookup {
   public:
    Lookup(Team const& team, ExecutionSpace const& space, std::int64_t v, std::int64_t d, FloatsRef const& rows,
           Options const& options, std::optional<Pooling> pooling)
        : sharded_(sharded(team, space, v, d, rows, options, pooling)) {}
    void operator()(ExecutionSpace const&, job::ForwardBlock& b, std::int64_t n, float* y) const {
      sharded_.forward(IdsRef(b.ids.data(), Shape{n}), y);
    }

   private:
    static ShardedEmbedding<ExecutionSpace> sharded(Team const& team, ExecutionSpace const& space, std::int64_t v,
                                                    std::int64_t d, FloatsRef const& rows, Options const& options,
                                                    std::optional<Pooling> pooling) {
      if (pooling)  // the same on every rank: each refuses alike
        throw InvalidArgument("pooling",
                              "the forward of a bag batch runs on one process (kembed forward without "
                              "mpiexec); a batch of positions runs on many ranks");
      return ShardedEmbedding<ExecutionSpace>(team.comm(), space, v, d, rows, options);
    }
    ShardedEmbedding<ExecutionSpace> sharded_;
  };

  // The backward of this rank's rows, on the positions every rank read.
  template <class ExecutionSpace>
  class Layer {
   public:
    using execution_space = ExecutionSpace;
    using matrix_type = typename ShardedEmbedding<ExecutionSpace>::matrix_type;
    using batch_counts_type = typename ShardedEmbedding<ExecutionSpace>::batch_counts_type;
    using sparse_type = typename ShardedEmbedding<ExecutionSpace>::sparse_type;
    using sparse_carry_type = typename ShardedEmbedding<ExecutionSpace>::sparse_carry_type;
    Layer(Team const& team, ExecutionSpace const& space, Ownership const& owners, std::int64_t cols,
          Options const& options)
        : sharded_(ShardedEmbedding<ExecutionSpace>::backward_only(team.comm(), space, owners, cols, options)),
          options_(options) {}
    Config const& config() const noexcept { return sharded_.config(); }
    Plan plan_for(std::int64_t positions) const { return sharded_.plan_for(positions); }
    // The path this rank's last backward call took over the positions it received,
    // and how many those were.
    BackwardPath last_path() const noexcept { return sharded_.last_path(); }
    std::int64_t last_positions() const noexcept { return sharded_.last_positions(); }
    double exchange_seconds() const noexcept { return sharded_.traffic().exchange_seconds; }
    std::int64_t bytes_sent() const noexcept { return sharded_.traffic().bytes_sent; }
    Ownership const& ownership() const noexcept { return sharded_.ownership(); }
    std::int64_t row_count() const noexcept { return sharded_.slots(); }  // this rank's slots
    // Collective: each rank's positions go to their rows' owners, which fold them
    // into `grad` (continuing it) and add their rows' occurrences to `tally`.
    void backward(ExecutionSpace const&, std::int64_t const* ids, float const* dy, std::int64_t n,
                  matrix_type const& grad, std::int64_t* tally,
                  batch_counts_type const& batch_counts) const {
      auto const d = config().embedding_dim;
      sharded_.backward(IdsRef(ids, Shape{n}), FloatsRef(dy, Shape{n, d}), grad, true, {}, tally, batch_counts);
    }
    // The same into a row-sparse gradient of this rank's rows (local row numbers).
    void backward_sparse(ExecutionSpace const&, std::int64_t const* ids, float const* dy, std::int64_t n,
                         sparse_carry_type& carry, std::int64_t* tally, batch_counts_type const& batch_counts) const {
      auto const d = config().embedding_dim;
      sharded_.backward_sparse(IdsRef(ids, Shape{n}), FloatsRef(dy, Shape{n, d}), carry, tally, batch_counts);
    }
    // A bag batch: each rank turns its bags into positions with their terms and
    // factors' inputs (EmbeddingBag::position_terms over the whole table's shape; max over
    // the whole table, for its argmax), which go to their rows' owners.
    void use_bags(ExecutionSpace const& space, Pooling pooling, FloatsRef const* table) {
      BagOptions o;
      o.embedding = options_;
      o.pooling = pooling;
      o.include_last_offset = true;
      auto const v = config().num_embeddings, d = config().embedding_dim;
      if (table)
        reader_.emplace(space, v, d, *table, o);
      else
        reader_.emplace(EmbeddingBag<ExecutionSpace>::backward_only(space, v, d, o));
    }
    // Collective: this rank's bags (job::BagCall) into the owners' `grad` or `carry`.
    void backward_bags(ExecutionSpace const& space, job::BagCall const& in, matrix_type const& grad,
                       std::int64_t* tally, batch_counts_type const& batch_counts) const {
      fold_bags(space, in, grad, tally, batch_counts);
    }
    void backward_bags_sparse(ExecutionSpace const& space, job::BagCall const& in, sparse_carry_type& carry,
                              std::int64_t* tally, batch_counts_type const& batch_counts) const {
      fold_bags(space, in, carry, tally, batch_counts);
    }
    sparse_carry_type sparse_carry(ExecutionSpace const&) const { return sharded_.sparse_carry(); }
    sparse_carry_type sparse_carry(ExecutionSpace const&, sparse_type const& from) const {
      return sharded_.sparse_carry(from);
    }
    sparse_type listed(ExecutionSpace const&, sparse_carry_type const& carry) const { return sharded_.listed(carry); }

   private:
    template <class Gradient>
    void fold_bags(ExecutionSpace const& space, job::BagCall const& in, Gradient& gradient, std::int64_t* tally,
                   batch_counts_type const& batch_counts) const {
      std::string refused;
      auto const t = as_positions(space, in, refused);
      sharded_.backward_factored(IdsRef(in.ids, Shape{in.positions}),
                                 FloatsRef(t.terms.data(), Shape{in.positions, config().embedding_dim}),
                                 t.factored ? &t.factors : nullptr, gradient, tally, batch_counts, refused);
    }

    struct Positions {
      std::vector<float> terms;
      typename ShardedEmbedding<ExecutionSpace>::FactorInputs factors;  // n or w per position
      bool factored = false;  // the same on every rank: mean or weights
    };
    // A bag call's positions on the host: their terms and what their factors are
    // formed from. What this rank alone refuses goes to `refused`, for every rank to
    // hear in the exchange (a throw here would leave the other ranks waiting in it).
    // A rank whose part of the call holds no bag has no terms, and still takes part.
    Positions as_positions(ExecutionSpace const& space, job::BagCall const& in, std::string& refused) const {
      Positions out;
      out.factors.mean = reader_->pooling() == Pooling::mean;
      out.factored = out.factors.mean || in.weighted;
      out.terms.resize(std::size_t(in.positions * config().embedding_dim));
      out.factors.values.resize(out.factored ? std::size_t(in.positions) : 0);
      if (in.bags == 0) return out;
      try {
        form_terms(space, in, out);
      } catch (Error const& e) {
        refused = e.message();
      }
      return out;
    }
    void form_terms(ExecutionSpace const& space, job::BagCall const& in, Positions& out) const {
      using memory = typename ExecutionSpace::memory_space;
      using host_ints = Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
      auto const d = config().embedding_dim;
      auto const ids = Kokkos::create_mirror_view_and_copy(memory(), host_ints(in.ids, in.positions));
      auto const offsets = Kokkos::create_mirror_view_and_copy(memory(), host_ints(in.offsets, in.bags + 1));
      auto const dy = Kokkos::create_mirror_view_and_copy(
          memory(), Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                        in.dy, in.bags, d));
      typename EmbeddingBag<ExecutionSpace>::weights_type weights;
      if (in.weighted)
        weights = Kokkos::create_mirror_view_and_copy(
            memory(), Kokkos::View<float const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(in.weights, in.positions));
      typename ShardedEmbedding<ExecutionSpace>::matrix_type terms("kembed::mpi::terms", in.positions, d);
      typename EmbeddingBag<ExecutionSpace>::factor_inputs_type factor_inputs;
      reader_->position_terms(space, ids, offsets, dy, weights, terms, factor_inputs);
      Kokkos::deep_copy(space,
                        Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            out.terms.data(), in.positions, d),
                        terms);
      if (out.factored) {
        Kokkos::deep_copy(
            space,
            Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.factors.values.data(), in.positions),
            factor_inputs);
      }
      space.fence();
    }

    ShardedEmbedding<ExecutionSpace> sharded_;
    Options options_;
    std::optional<EmbeddingBag<ExecutionSpace>> reader_;  // a bag batch's: its bags as positions
  };

 private:
  static std::string broadcast_on(MPI_Comm comm, std::string text, int root) {
    long long length = static_cast<long long>(text.size());
    detail::check(MPI_Bcast(&length, 1, MPI_LONG_LONG, root, comm), "MPI_Bcast");
    text.resize(static_cast<std::size_t>(length));
    detail::check(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comm), "MPI_Bcast");
    return text;
  }

  static constexpr int tag = 0x6b65;  // "ke"
  MPI_Comm comm_;
  std::shared_ptr<MPI_Comm> io_comm_;  // files' own, with MPI_THREAD_MULTIPLE (freed with the last copy)
  io::Collective collective_;
  int rank_ = 0, size_ = 1;
};

}  // namespace kembed::mpi
