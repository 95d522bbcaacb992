#pragma once
// kembed::Embedding: an embedding table as torch.nn.Embedding, whose backward gives
// the same bits on every Kokkos backend, thread count and plan (../docs/DESIGN.md).
//
// The public functions validate, normalise and dispatch; the kernels are in
// detail/. Operations take the execution space first and run on it; the view
// overloads keep data in that space's memory, the host overloads copy in and out.
#include <Kokkos_Core.hpp>

#include <kembed/core/arrays.hpp>
#include <kembed/core/error.hpp>
#include <kembed/core/options.hpp>
#include <kembed/core/sparse.hpp>
#include <kembed/core/validate.hpp>
#include <kembed/detail/auto_plan.hpp>
#include <kembed/detail/backward_bucket.hpp>
#include <kembed/detail/backward_fast.hpp>
#include <kembed/detail/backward_listed.hpp>
#include <kembed/detail/backward_scan.hpp>
#include <kembed/detail/backward_sparse.hpp>
#include <kembed/detail/checks.hpp>
#include <kembed/detail/fold.hpp>
#include <kembed/detail/forward.hpp>
#include <kembed/detail/memory.hpp>
#include <kembed/detail/renorm.hpp>
#include <kembed/detail/row_index.hpp>
#include <kembed/detail/sparse_carry.hpp>
#include <kembed/optim.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace kembed {

// The host overloads' backward result: the (V, d) gradient and per-row counts.
struct HostGradient {
  Shape shape;                       // (num_embeddings, embedding_dim)
  std::vector<float> values;         // row-major
  std::vector<std::int64_t> counts;  // occurrences of each row among the ids
};

template <class ExecutionSpace>
class EmbeddingBag;

template <class ExecutionSpace = Kokkos::DefaultExecutionSpace>
class Embedding {
  friend class EmbeddingBag<ExecutionSpace>;  // its backward folds through fold_path
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kembed::Embedding<ExecutionSpace>: the argument must be a Kokkos execution space");

 public:
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using matrix_type = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>;
  using const_matrix_type = Kokkos::View<float const**, Kokkos::LayoutRight, memory_space>;
  using ids32_type = Kokkos::View<std::int32_t const*, memory_space>;
  using ids64_type = Kokkos::View<std::int64_t const*, memory_space>;
  using counts_type = Kokkos::View<std::int64_t*, memory_space>;
  // scale_grad_by_freq=batch: each row's occurrences in the whole batch (V entries).
  using batch_counts_type = Kokkos::View<std::int64_t const*, memory_space>;
  using sparse_type = detail::SparseRows<memory_space>;

  // torch.nn.Embedding(num_embeddings, embedding_dim, ..., _weight): the table is
  // required (no random initialisation) and copied; later writes to the caller's
  // buffer do not reach the layer.
  Embedding(ExecutionSpace const& space, std::int64_t num_embeddings, std::int64_t embedding_dim,
            FloatsRef const& weight, Options const& options = {})
      : config_(make_config(num_embeddings, embedding_dim, options)), space_(space) {
    weight_ = upload_table(weight);
  }
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, FloatsRef const& weight,
            Options const& options = {})
      : Embedding(ExecutionSpace(), num_embeddings, embedding_dim, weight, options) {}

  // torch.nn.Embedding.from_pretrained: the shape comes from the table.
  static Embedding from_pretrained(ExecutionSpace const& space, FloatsRef const& weight, Options const& options = {}) {
    if (weight.shape.rank() != 2) {
      throw InvalidArgument("weight", "weight has shape " + weight.shape.str() +
                                          "; from_pretrained wants a 2-D (num_embeddings, embedding_dim) table");
    }
    return Embedding(space, weight.shape[0], weight.shape[1], weight, options);
  }
  static Embedding from_pretrained(FloatsRef const& weight, Options const& options = {}) {
    return from_pretrained(ExecutionSpace(), weight, options);
  }
  // From a table already in this space's memory; it is copied, as from the host.
  static Embedding from_pretrained(ExecutionSpace const& space, const_matrix_type const& weight,
                                   Options const& options = {}) {
    Embedding layer(space, make_config(weight.extent(0), weight.extent(1), options));
    layer.weight_ = layer.copy_table(weight);
    return layer;
  }

  // A layer over a table the caller owns, in this space's memory: not copied and not
  // checked, so that an optimiser's in-place step reaches the next forward (kembed.torch,
  // whose Parameter is the table). The caller keeps it alive, and does not write it
  // while a call runs; with max_norm the forward writes it, as torch's does.
  static Embedding over(ExecutionSpace const& space, matrix_type const& table, Options const& options = {}) {
    Embedding layer(space, make_config(table.extent(0), table.extent(1), options));
    layer.weight_ = table;
    return layer;
  }

  // A layer for the backward alone, holding no table: the gradient does not depend
  // on the table's values, so a job that only folds gradients need not load it.
  // forward() and weight_host() refuse; set_weight() gives it a table.
  static Embedding backward_only(ExecutionSpace const& space, std::int64_t num_embeddings,
                                 std::int64_t embedding_dim, Options const& options = {}) {
    return Embedding(space, make_config(num_embeddings, embedding_dim, options));
  }

  // Reassigns the table (same shape). On any error the old table stays.
  void set_weight(FloatsRef const& weight) { weight_ = upload_table(weight); }
  void set_weight(ExecutionSpace const& space, const_matrix_type const& weight) {
    check_table_shape("weight", Shape{std::int64_t(weight.extent(0)), std::int64_t(weight.extent(1))},
                      config_.num_embeddings, config_.embedding_dim);
    space_ = space;
    weight_ = copy_table(weight);
  }

  std::int64_t num_embeddings() const noexcept { return config_.num_embeddings; }
  std::int64_t embedding_dim() const noexcept { return config_.embedding_dim; }
  // The padding row, normalised to [0, V), or -1 when there is none.
  std::int64_t padding_idx() const noexcept { return config_.padding_idx; }
  Plan plan() const noexcept { return config_.plan; }
  Mode mode() const noexcept { return config_.mode; }
  Config const& config() const noexcept { return config_; }
  // The layer's own table, in the execution space's memory. Read-only.
  const_matrix_type weight() const noexcept { return weight_; }
  std::vector<float> weight_host() const {
    require_table();
    std::vector<float> out(static_cast<std::size_t>(config_.num_embeddings * config_.embedding_dim));
    Kokkos::deep_copy(host_matrix(out.data(), config_.num_embeddings, config_.embedding_dim), weight_);
    return out;
  }
  // One optimizer step on the layer's own table, in its memory (TableOptimizer::step
  // on the table forward reads), so the next forward sees it; a layer `over` a
  // caller's table steps that table. Dense (V, d) or row-sparse gradient; a refused
  // step changes nothing.
  void step(ExecutionSpace const& space, TableOptimizer<ExecutionSpace>& optimizer, const_matrix_type const& grad) {
    require_table();
    optimizer.step(space, weight_, grad);
  }
  void step(ExecutionSpace const& space, TableOptimizer<ExecutionSpace>& optimizer, sparse_type const& grad) {
    require_table();
    optimizer.step(space, weight_, grad);
  }
  // A host row-sparse gradient (backward_sparse's), uploaded first.
  void step(TableOptimizer<ExecutionSpace>& optimizer, SparseGradient const& grad) {
    require_table();
    optimizer.step(space_, weight_, upload_sparse(space_, grad));
    space_.fence();
  }

  // The plan that runs for T positions (`auto` resolved by detail::auto_plan, the
  // rule measured on 2 cores: docs/PERFORMANCE.md).
  Plan plan_for(std::int64_t positions) const { return plan_for(space_, positions); }
  // As above, for the execution space instance a call runs on.
  // (`dy_rows`: the rows of dy its terms read, a bag call's bags; unpooled, T;
  // `factors`: its terms carry their own factors.)
  Plan plan_for(ExecutionSpace const& space, std::int64_t positions, std::int64_t dy_rows = -1,
                bool factors = false) const {
    if (config_.plan != Plan::automatic) return config_.plan;
    return detail::auto_plan(host_memory, space.concurrency(), config_.num_embeddings, config_.embedding_dim, positions,
                             dy_rows < 0 ? positions : dy_rows, factors);
  }

  // The path backward takes for an unpooled call of `positions` on `space`
  // (`in_place`: the carry is the output itself, as a job continues its gradient).
  BackwardPath path_for(ExecutionSpace const& space, std::int64_t positions, bool in_place = false) const {
    return path_for(space, CallShape{positions, positions, in_place, false});
  }
  // The path for any call (a bag call's, or positions with factors). backward decides
  // here and nowhere else, so what a caller reports is what ran.
  BackwardPath path_for(ExecutionSpace const& space, CallShape const& call) const {
    auto const positions = call.positions;
    bool const in_place = call.in_place;
    BackwardPath path;
    path.freq = config_.scales();
    path.scaled = path.freq || call.factors;
    path.mode = path.scaled && config_.mode == Mode::fast ? Mode::identical : config_.mode;
    // Deterministic mode always sorts. Bucket entries pack the position in 40 bits:
    // a larger batch (a terabyte of ids) sorts instead. Scaling by frequency needs
    // each row's count before its first term: the sort's index has it, so every plan
    // runs the sort. Terms with their own factors need no count: every plan folds
    // them, and `auto` weighs them (detail::auto_plan).
    path.plan = config_.mode == Mode::identical ? plan_for(space, positions, call.dy_rows, call.factors) : Plan::sort;
    if (path.plan == Plan::bucket && positions >= detail::bucket_max_positions) path.plan = Plan::sort;
    if (path.freq) path.plan = Plan::sort;
    // A max bag call in mode identical on a host adds each (bag, column)'s one winning
    // term to its row (detail::backward_argmax): the fold's bits from B x d additions.
    // Asked-for plans run as asked.
    path.argmax = call.argmax && path.mode == Mode::identical && !path.scaled && config_.plan == Plan::automatic &&
                  detail::Tiles<ExecutionSpace>::host;
    if (path.argmax) return path;
    // A call continuing its gradient in place on few of its rows folds only those
    // (the sort plan over the listed rows: the same sums, O(T) not O(V) per call).
    path.listed = in_place && path.mode != Mode::fast &&
                  positions <= config_.num_embeddings / detail::listed_rows_ratio &&
                  (path.plan == Plan::sort || config_.plan == Plan::automatic);
    if (path.listed) {
      path.plan = Plan::sort;
      path.on_caller = detail::runs_on_caller(space, positions, config_.embedding_dim);
    }
    return path;
  }

  // ---- forward: y[p, :] = weight[ids[p], :] ----------------------------------
  // With max_norm the forward first renormalises the referenced rows of the layer's
  // own table, as torch does: then it writes the table, and two forwards on one
  // layer must not run at once.
  std::vector<float> forward(IdsRef const& ids) const {
    auto const t = check_ids_shape(ids.shape());
    std::vector<float> y(static_cast<std::size_t>(checked_mul(t, config_.embedding_dim, "y")));
    with_device_ids(ids, [&](auto const& device_ids) {
      auto const out = detail::uninitialized_matrix(space_, "kembed::y", t, config_.embedding_dim);
      forward(space_, device_ids, out);
      Kokkos::deep_copy(space_, host_matrix(y.data(), t, config_.embedding_dim), out);
      space_.fence();
    });
    return y;
  }
  void forward(ExecutionSpace const& space, ids32_type const& ids, matrix_type const& y) const {
    forward_impl(space, ids, y);
  }
  void forward(ExecutionSpace const& space, ids64_type const& ids, matrix_type const& y) const {
    forward_impl(space, ids, y);
  }

  // With max_norm, what the forward does first (torch's embedding_renorm_): each row
  // the ids reference whose norm exceeds max_norm is scaled in the layer's own table.
  // Nothing without max_norm. Checks the ids first: a bad id changes nothing.
  template <class IdView>
  void renormalise(ExecutionSpace const& space, IdView const& ids) const {
    if (!config_.renormalises()) return;
    require_table();
    detail::check_ids(space, ids, config_.num_embeddings);  // before the table changes
    detail::ScopedRegion region("kembed::renorm");
    detail::renorm(space, ids, weight_, config_.max_norm, config_.norm_type);
  }

  // ---- backward: the dense (V, d) gradient -----------------------------------
  // `carry` (optional, shape (V, d)) is the gradient to continue from; it is not
  // modified. Counts include the padding row's occurrences. `batch_counts` (V
  // entries) is required with scale_grad_by_freq=batch and refused otherwise.
  HostGradient backward(IdsRef const& ids, FloatsRef const& dy, FloatsRef const& carry = FloatsRef{},
                        std::int64_t const* batch_counts = nullptr) const {
    auto const t = check_dy_shape(ids.shape(), dy.shape, config_.embedding_dim);
    if (!dy.data) throw InvalidArgument("dy", "dy has no data (a null pointer)");
    auto const v = config_.num_embeddings, d = config_.embedding_dim;
    bool const has_carry = carry.data != nullptr;
    if (has_carry)
      check_table_shape("carry", carry.shape, v, d);
    else if (carry.shape.rank() != 0)
      throw InvalidArgument("carry", "carry has shape " + carry.shape.str() + " but no data (a null pointer)");

    HostGradient out{Shape{v, d}, std::vector<float>(static_cast<std::size_t>(v * d)),
                     std::vector<std::int64_t>(static_cast<std::size_t>(v))};
    auto const dy_d = Kokkos::create_mirror_view_and_copy(memory_space(), host_const_matrix(dy.data, t, d));
    const_matrix_type carry_d;
    if (has_carry) carry_d = Kokkos::create_mirror_view_and_copy(memory_space(), host_const_matrix(carry.data, v, d));
    auto const batch_d = upload_batch_counts(batch_counts);
    auto const grad = detail::uninitialized_matrix(space_, "kembed::gradient", v, d);
    counts_type counts(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "kembed::counts"), v);
    with_device_ids(ids, [&](auto const& device_ids) {
      backward(space_, device_ids, dy_d, grad, carry_d, counts, batch_d);
      copy_to_host(space_, grad, counts, out);
    });
    return out;
  }

  // ---- backward_sparse: the rows the ids reference (and the carry's), coalesced ----
  // Each listed row's values are bit for bit that row of backward()'s dense gradient
  // with to_dense(carry) as its carry; unlisted rows are +0.0 there. Memory and time
  // are O(T + listed rows x d), never O(V x d). The padding row is listed when
  // referenced (+0.0, with its count). `carry` may be null.
  SparseGradient backward_sparse(IdsRef const& ids, FloatsRef const& dy, SparseGradient const* carry = nullptr,
                                 std::int64_t const* batch_counts = nullptr) const {
    auto const t = check_dy_shape(ids.shape(), dy.shape, config_.embedding_dim);
    if (!dy.data) throw InvalidArgument("dy", "dy has no data (a null pointer)");
    auto const v = config_.num_embeddings, d = config_.embedding_dim;
    if (carry) check_sparse("carry", *carry, v, d);
    auto const dy_d = Kokkos::create_mirror_view_and_copy(memory_space(), host_const_matrix(dy.data, t, d));
    auto const carry_d = carry ? upload_sparse(space_, *carry) : sparse_type{};
    auto const batch_d = upload_batch_counts(batch_counts);
    SparseGradient out;
    with_device_ids(ids, [&](auto const& device_ids) {
      out = to_host(space_, backward_sparse(space_, device_ids, dy_d, carry_d, batch_d), v);
    });
    return out;
  }
  // ---- backward_step: backward_sparse and an optimizer step, fused ----
  // Each row the ids list is folded and stepped at once, its gradient never written
  // out: the bits of step(optimizer, backward_sparse(ids, dy)). Where a fold could
  // overflow (detail::folds_stay_finite) it runs as those two calls, which refuse a
  // non-finite gradient with nothing changed.
  void backward_step(IdsRef const& ids, FloatsRef const& dy, TableOptimizer<ExecutionSpace>& optimizer,
                     std::int64_t const* batch_counts = nullptr) {
    auto const t = check_dy_shape(ids.shape(), dy.shape, config_.embedding_dim);
    if (!dy.data) throw InvalidArgument("dy", "dy has no data (a null pointer)");
    auto const dy_d =
        Kokkos::create_mirror_view_and_copy(memory_space(), host_const_matrix(dy.data, t, config_.embedding_dim));
    auto const batch_d = upload_batch_counts(batch_counts);
    with_device_ids(ids,
                    [&](auto const& device_ids) { backward_step_impl(space_, device_ids, dy_d, optimizer, batch_d); });
    space_.fence();
  }
  void backward_step(ExecutionSpace const& space, ids32_type const& ids, const_matrix_type const& dy,
                     TableOptimizer<ExecutionSpace>& optimizer, batch_counts_type const& batch_counts = {}) {
    backward_step_impl(space, ids, dy, optimizer, batch_counts);
  }
  void backward_step(ExecutionSpace const& space, ids64_type const& ids, const_matrix_type const& dy,
                     TableOptimizer<ExecutionSpace>& optimizer, batch_counts_type const& batch_counts = {}) {
    backward_step_impl(space, ids, dy, optimizer, batch_counts);
  }

  // In this space's memory: a new sparse gradient (the carry's views unchanged; an
  // empty carry means none). On an error nothing is returned and nothing changes.
  sparse_type backward_sparse(ExecutionSpace const& space, ids32_type const& ids, const_matrix_type const& dy,
                              sparse_type const& carry = {}, batch_counts_type const& batch_counts = {}) const {
    return backward_sparse_impl(space, ids, dy, carry, batch_counts);
  }
  sparse_type backward_sparse(ExecutionSpace const& space, ids64_type const& ids, const_matrix_type const& dy,
                              sparse_type const& carry = {}, batch_counts_type const& batch_counts = {}) const {
    return backward_sparse_impl(space, ids, dy, carry, batch_counts);
  }

  // ---- a row-sparse gradient continued in place (the batch job's --sparse) ----
  // backward_sparse above returns a new gradient, so a call costs the rows listed
  // so far; a sparse_carry_type is folded in place and a call costs only its own
  // rows (plus a map of V slots, made once). listed() gives the same rows, values
  // and bits as chaining backward_sparse; its counts are every call's together.
  using sparse_carry_type = detail::SparseCarry<memory_space>;
  sparse_carry_type sparse_carry(ExecutionSpace const& space) const {
    return detail::make_sparse_carry(space, config_.num_embeddings, config_.embedding_dim);
  }
  // A carry continuing `from` (checked as backward_sparse checks a carry).
  sparse_carry_type sparse_carry(ExecutionSpace const& space, sparse_type const& from) const {
    detail::check_sparse_rows(space, from, config_.num_embeddings, config_.embedding_dim, "carry");
    return detail::sparse_carry_of(space, from, config_.num_embeddings);
  }
  sparse_type listed(ExecutionSpace const& space, sparse_carry_type const& carry) const {
    return detail::listed_of(space, carry);
  }
  // On an error nothing changes (the carry included).
  void backward_sparse(ExecutionSpace const& space, ids32_type const& ids, const_matrix_type const& dy,
                       sparse_carry_type& carry, batch_counts_type const& batch_counts = {}) const {
    backward_sparse_carry_impl(space, ids, dy, carry, batch_counts);
  }
  void backward_sparse(ExecutionSpace const& space, ids64_type const& ids, const_matrix_type const& dy,
                       sparse_carry_type& carry, batch_counts_type const& batch_counts = {}) const {
    backward_sparse_carry_impl(space, ids, dy, carry, batch_counts);
  }

  // View overloads. `grad` receives the result; it may be the same view as
  // `carry` to continue in place, which then touches only the rows this call's
  // ids hit (plus the padding row), and does not re-check the carry for +-inf
  // (an overflowed sum is a legitimate state). Empty `carry` / `counts` views
  // mean none. On an error nothing is written, except that a NaN or inf in dy is
  // found while folding: then a `grad` that is not the carry holds unspecified
  // values (the carry, the table and the caller's inputs never change).
  void backward(ExecutionSpace const& space, ids32_type const& ids, const_matrix_type const& dy,
                matrix_type const& grad, const_matrix_type const& carry = {}, counts_type const& counts = {},
                batch_counts_type const& batch_counts = {}) const {
    backward_impl(space, ids, dy, grad, carry, counts, batch_counts);
  }
  void backward(ExecutionSpace const& space, ids64_type const& ids, const_matrix_type const& dy,
                matrix_type const& grad, const_matrix_type const& carry = {}, counts_type const& counts = {},
                batch_counts_type const& batch_counts = {}) const {
    backward_impl(space, ids, dy, grad, carry, counts, batch_counts);
  }

  // Occurrences of each row among the ids, without a gradient.
  std::vector<std::int64_t> counts(IdsRef const& ids) const {
    check_ids_shape(ids.shape());
    std::vector<std::int64_t> out(static_cast<std::size_t>(config_.num_embeddings));
    with_device_ids(ids, [&](auto const& device_ids) {
      counts_type c(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "kembed::counts"), config_.num_embeddings);
      counts_impl(space_, device_ids, c);
      Kokkos::deep_copy(
          space_, Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.data(), out.size()), c);
      space_.fence();
    });
    return out;
  }

  // A host sparse gradient (checked) in this space's memory, and back.
  static sparse_type upload_sparse(ExecutionSpace const& space, SparseGradient const& g) {
    auto const n = g.size();
    sparse_type out;
    out.rows = Kokkos::View<std::int64_t*, memory_space>(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::carry_rows"), n);
    out.values = detail::uninitialized_matrix(space, "kembed::carry_values", n, g.embedding_dim);
    Kokkos::deep_copy(space, out.rows,
                      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(g.rows.data(), n));
    Kokkos::deep_copy(space, out.values, host_const_matrix(g.values.data(), n, g.embedding_dim));
    return out;
  }
  static SparseGradient to_host(ExecutionSpace const& space, sparse_type const& g, std::int64_t num_embeddings) {
    auto const n = std::int64_t(g.rows.extent(0)), d = std::int64_t(g.values.extent(1));
    SparseGradient out;
    out.num_embeddings = num_embeddings;
    out.embedding_dim = d;
    out.rows.resize(std::size_t(n));
    out.values.resize(std::size_t(n * d));
    out.counts.resize(std::size_t(n));
    using host_index = Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
    Kokkos::deep_copy(space, host_index(out.rows.data(), n), g.rows);
    Kokkos::deep_copy(space, host_matrix(out.values.data(), n, d), g.values);
    Kokkos::deep_copy(space, host_index(out.counts.data(), n), g.counts);
    space.fence();
    return out;
  }

 private:
  static constexpr bool host_memory = std::is_same<memory_space, Kokkos::HostSpace>::value;
  using host_matrix_type = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using host_const_matrix_type =
      Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

  Embedding(ExecutionSpace const& space, Config const& config) : config_(config), space_(space) {}

  static host_matrix_type host_matrix(float* data, std::int64_t rows, std::int64_t cols) {
    return host_matrix_type(data, rows, cols);
  }
  static host_const_matrix_type host_const_matrix(float const* data, std::int64_t rows, std::int64_t cols) {
    return host_const_matrix_type(data, rows, cols);
  }

  // A gradient and its counts into the host result `out` (sized), then a fence.
  static void copy_to_host(ExecutionSpace const& space, matrix_type const& grad, counts_type const& counts,
                           HostGradient& out) {
    Kokkos::deep_copy(space, host_matrix(out.values.data(), grad.extent(0), grad.extent(1)), grad);
    Kokkos::deep_copy(
        space,
        Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.counts.data(), counts.extent(0)),
        counts);
    space.fence();
  }

  void require_table() const {
    if (weight_.data() == nullptr)
      throw Unsupported("weight", "this layer was made by backward_only and holds no table; give it one with "
                                  "set_weight, or make it with the table");
  }

  // Validates a host table and copies it into a new view (the old one untouched).
  matrix_type upload_table(FloatsRef const& weight) const {
    if (!weight.data) {
      throw InvalidArgument("weight",
                            "weight is required: there is no random initialisation in the contract; "
                            "pass the table, or use Embedding::from_pretrained");
    }
    check_table_shape("weight", weight.shape, config_.num_embeddings, config_.embedding_dim);
    auto const n = config_.num_embeddings * config_.embedding_dim;
    auto const bad = first_non_finite(weight.data, n);
    if (bad < n) throw_non_finite("weight", bad, weight.data[bad], config_.embedding_dim, "row");
    auto const table =
        detail::uninitialized_matrix(space_, "kembed::weight", config_.num_embeddings, config_.embedding_dim);
    Kokkos::deep_copy(space_, table, host_const_matrix(weight.data, config_.num_embeddings, config_.embedding_dim));
    space_.fence();
    return table;
  }

  matrix_type copy_table(const_matrix_type const& weight) const {
    detail::check_finite(space_, weight, "weight", "row");
    auto const table =
        detail::uninitialized_matrix(space_, "kembed::weight", config_.num_embeddings, config_.embedding_dim);
    Kokkos::deep_copy(space_, table, weight);
    space_.fence();
    return table;
  }

  // Runs f on the ids as a view in this space's memory (detail::with_ids_in).
  template <class F>
  void with_device_ids(IdsRef const& ids, F&& f) const {
    detail::with_ids_in<memory_space>(ids, std::forward<F>(f));
  }

  template <class IdView>
  void forward_impl(ExecutionSpace const& space, IdView const& ids, matrix_type const& y) const {
    if (ids.extent(0) < 1) check_ids_shape(Shape{0});  // the message; a Shape allocates
    check_matrix("y", y, ids.extent(0), config_.embedding_dim, "ids.size(), embedding_dim");
    require_table();
    renormalise(space, ids);
    detail::ScopedRegion region("kembed::forward");
    detail::forward(space, ids, weight_, y);  // checks the ids first
  }

  // Device copy of the host batch counts, checked against the option.
  batch_counts_type upload_batch_counts(std::int64_t const* batch_counts) const {
    if (!batch_counts) return {};
    check_batch_option(true);
    return Kokkos::create_mirror_view_and_copy(
        memory_space(),
        Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(batch_counts, config_.num_embeddings));
  }

  void check_batch_option(bool given) const {
    bool const wanted = config_.scale_grad_by_freq == FreqScale::batch;
    if (wanted && !given)
      throw InvalidArgument("batch_counts", "scale_grad_by_freq is 'batch': give batch_counts, each row's "
                                            "occurrences in the whole batch (V entries)");
    if (!wanted && given)
      throw InvalidArgument("batch_counts", "batch_counts given, but scale_grad_by_freq is '" +
                                                std::string(to_string(config_.scale_grad_by_freq)) +
                                                "'; they are for scale_grad_by_freq 'batch' only");
  }

  void check_batch_counts_view(batch_counts_type const& batch_counts) const {
    check_batch_option(batch_counts.data() != nullptr);
    if (batch_counts.data() != nullptr && std::int64_t(batch_counts.extent(0)) != config_.num_embeddings)
      throw InvalidArgument("batch_counts", "batch_counts has " + std::to_string(batch_counts.extent(0)) +
                                                " entries, want " + std::to_string(config_.num_embeddings) +
                                                " (num_embeddings)");
  }

  detail::RowScale<memory_space> row_scale(batch_counts_type const& batch_counts) const {
    detail::RowScale<memory_space> scale;
    scale.kind = config_.scale_grad_by_freq;
    scale.batch = batch_counts;
    return scale;
  }

  // The checks every row-sparse call (new, continued or fused with a step) makes
  // before anything is written.
  template <class IdView>
  void check_sparse_call(IdView const& ids, const_matrix_type const& dy, batch_counts_type const& batch_counts) const {
    std::int64_t const t = ids.extent(0);
    if (t < 1) check_ids_shape(Shape{t});  // the message; a Shape allocates
    check_matrix("dy", dy, t, config_.embedding_dim, "ids.size(), embedding_dim");
    check_batch_counts_view(batch_counts);
  }

  template <class IdView>
  sparse_type backward_sparse_impl(ExecutionSpace const& space, IdView const& ids, const_matrix_type const& dy,
                                   sparse_type const& carry, batch_counts_type const& batch_counts) const {
    check_sparse_call(ids, dy, batch_counts);
    if (carry.values.data() != nullptr || carry.rows.data() != nullptr)
      detail::check_sparse_rows(space, carry, config_.num_embeddings, config_.embedding_dim, "carry");
    detail::check_ids(space, ids, config_.num_embeddings);
    return sparse_fold(space, ids, dy, carry, batch_counts);
  }
  // backward_sparse once its inputs are checked (dy's values: by the fold, which says so).
  template <class IdView>
  sparse_type sparse_fold(ExecutionSpace const& space, IdView const& ids, const_matrix_type const& dy,
                          sparse_type const& carry, batch_counts_type const& batch_counts) const {
    detail::HostIsa const isa = detail::Tiles<ExecutionSpace>::host ? detail::host_isa() : detail::HostIsa::baseline;
    detail::ScopedRegion region(config_.mode == Mode::deterministic ? "kembed::backward_sparse[deterministic]"
                                                                    : "kembed::backward_sparse[identical]");
    auto const result = detail::backward_sparse(space, ids, dy, carry, batch_counts, config_.num_embeddings,
                                                config_.padding_idx, config_.mode, config_.scale_grad_by_freq, isa);
    if (result.second) detail::check_finite(space, dy, "dy", "position");
    return result.first;
  }

  template <class IdView>
  void backward_step_impl(ExecutionSpace const& space, IdView const& ids, const_matrix_type const& dy,
                          TableOptimizer<ExecutionSpace>& optimizer, batch_counts_type const& batch_counts) {
    require_table();
    check_sparse_call(ids, dy, batch_counts);
    auto const v = config_.num_embeddings;
    detail::check_ids(space, ids, v);
    detail::HostIsa const isa = detail::Tiles<ExecutionSpace>::host ? detail::host_isa() : detail::HostIsa::baseline;
    detail::ScopedRegion region(config_.mode == Mode::deterministic ? "kembed::backward_step[deterministic]"
                                                                    : "kembed::backward_step[identical]");
    bool const fused = optimizer.step_by(weight_, [&](auto const& rule, auto const& first, auto const& second) {
      return detail::fused_step(space, ids, dy, batch_counts, v, config_.padding_idx, config_.mode,
                                config_.scale_grad_by_freq, isa, false, rule, weight_, first, second);
    });
    if (!fused) optimizer.step(space, weight_, sparse_fold(space, ids, dy, {}, batch_counts));  // ids checked above
  }

  template <class IdView>
  void backward_sparse_carry_impl(ExecutionSpace const& space, IdView const& ids, const_matrix_type const& dy,
                                  sparse_carry_type& carry, batch_counts_type const& batch_counts) const {
    auto const v = config_.num_embeddings, d = config_.embedding_dim;
    std::int64_t const t = ids.extent(0);
    check_sparse_call(ids, dy, batch_counts);
    if (std::int64_t(carry.slot_of.extent(0)) != v || std::int64_t(carry.values.extent(1)) != d)
      throw InvalidArgument("carry", "the sparse carry was made for another shape than (" + std::to_string(v) + ", " +
                                         std::to_string(d) + ")");
    if constexpr (std::is_same_v<memory_space, Kokkos::HostSpace>)
      if (t <= detail::early_rows) detail::prefetch_first_rows(ids, carry.slot_of);  // as backward_impl's
    detail::check_ids(space, ids, v);
    detail::check_finite(space, dy, "dy", "position");  // folded in place: checked first
    detail::HostIsa const isa = detail::Tiles<ExecutionSpace>::host ? detail::host_isa() : detail::HostIsa::baseline;
    bool const on_caller = detail::runs_on_caller(space, t, d);
    detail::ScopedRegion region(sparse_carry_label(config_.mode, on_caller));
    if (on_caller)  // within this call: views without reference counts
      detail::backward_sparse_carry(space, detail::unmanaged(ids), detail::unmanaged(dy), carry,
                                    detail::unmanaged(batch_counts), v, config_.padding_idx, config_.mode,
                                    config_.scale_grad_by_freq, isa, true);
    else
      detail::backward_sparse_carry(space, ids, dy, carry, batch_counts, v, config_.padding_idx, config_.mode,
                                    config_.scale_grad_by_freq, isa, false);
  }

  template <class IdView>
  void backward_impl(ExecutionSpace const& space, IdView const& ids, const_matrix_type const& dy,
                     matrix_type const& grad, const_matrix_type const& carry, counts_type const& counts,
                     batch_counts_type const& batch_counts) const {
    auto const v = config_.num_embeddings, d = config_.embedding_dim;
    std::int64_t const t = ids.extent(0);
    // Every check runs before anything is written: bad input changes nothing.
    if (t < 1) check_ids_shape(Shape{t});  // the message; a Shape allocates
    check_matrix("dy", dy, t, d, "ids.size(), embedding_dim");
    check_matrix("grad", grad, v, d, "num_embeddings, embedding_dim");
    bool const has_carry = carry.data() != nullptr;
    if (has_carry) check_matrix("carry", carry, v, d, "num_embeddings, embedding_dim");
    if (counts.data() != nullptr && std::int64_t(counts.extent(0)) != v) {
      throw InvalidArgument("counts", "counts has " + std::to_string(counts.extent(0)) + " entries, want " +
                                          std::to_string(v) + " (num_embeddings)");
    }
    check_batch_counts_view(batch_counts);
    if constexpr (std::is_same_v<memory_space, Kokkos::HostSpace>)
      if (carry.data() == grad.data() && t <= detail::early_rows) detail::prefetch_first_rows(ids, grad);
    detail::check_ids(space, ids, v);
    // A carry given as `grad` itself continues this layer's own output, which may
    // hold +-inf where a sum overflowed; only a separate carry is checked.
    bool const in_place = has_carry && carry.data() == grad.data();
    if (has_carry && !in_place) detail::check_finite(space, carry, "carry", "row");
    // dy is checked inside the kernels, which read every term anyway; in place the
    // carry must survive bad input, so there dy is checked first, in its own pass.
    if (in_place) detail::check_finite(space, dy, "dy", "position");

    bool const saw_non_finite = fold_path(space, path_for(space, t, in_place), ids, dy, carry, grad, counts,
                                          config_.scale_grad_by_freq, batch_counts);
    // grad (not the carry) then holds unspecified values, as documented.
    if (saw_non_finite) detail::check_finite(space, dy, "dy", "position");
  }

  // Runs `path` (from path_for) over checked inputs: every plan's kernels, with dy a
  // (T, d) view or a bag's terms (detail::BagTerms); `freq` is the row scaling the
  // folds apply (a bag's terms carry their own factors instead). Returns whether a
  // term or a sum may be NaN or +-inf.
  template <class IdView, class Dy>
  bool fold_path(ExecutionSpace const& space, BackwardPath const& path, IdView const& ids, Dy const& dy,
                 const_matrix_type const& carry, matrix_type const& grad, counts_type const& counts, FreqScale freq,
                 batch_counts_type const& batch_counts) const {
    auto const pad = config_.padding_idx;
    auto const v = config_.num_embeddings, d = config_.embedding_dim;
    auto const concurrency = static_cast<std::int64_t>(space.concurrency());
    Mode const mode = path.mode;
    // Which copy of the host folds runs (same bits either way); named for tools.
    // Mode fast has no copies, so no region (its KEMBED_HOST_ISA is still checked).
    // Devices have one copy, and no such region.
    detail::HostIsa const isa = detail::Tiles<ExecutionSpace>::host ? detail::host_isa() : detail::HostIsa::baseline;
    std::optional<detail::ScopedRegion> isa_region;
    if (mode != Mode::fast && detail::Tiles<ExecutionSpace>::host) isa_region.emplace(isa_label(isa));
    bool saw_non_finite = false;
    detail::ScopedRegion region(label(path));
    if constexpr (detail::HasArgmax<Dy>::value && detail::Tiles<ExecutionSpace>::host) {  // host lambdas
      if (path.argmax) {  // found by argument-dependent lookup: bag_terms.hpp
        backward_argmax(space, ids, dy, carry, grad, pad);
        if (counts.data() != nullptr) counts_impl(space, ids, counts);
        return false;
      }
    }
    if (path.listed) {
      if (path.on_caller)  // within this call: views without reference counts
        detail::backward_listed(space, detail::unmanaged(ids), detail::unmanaged(dy), detail::unmanaged(carry),
                                detail::unmanaged(grad), detail::unmanaged(counts), pad, mode, freq,
                                detail::unmanaged(batch_counts), isa, true);
      else
        detail::backward_listed(space, ids, dy, carry, grad, counts, pad, mode, freq, batch_counts, isa, false);
    } else if (mode == Mode::fast) {
      saw_non_finite = detail::backward_fast(space, ids, dy, carry, grad, counts, pad);
    } else if (path.plan == Plan::scan) {
      saw_non_finite =
          detail::backward_scan(space, ids, dy, carry, grad, counts, pad,
                                detail::scan_split(concurrency < 1 ? 1 : concurrency, v, d, ids.extent(0)), isa);
    } else if (path.plan == Plan::bucket) {
      saw_non_finite = detail::backward_bucket(space, ids, dy, carry, grad, counts, pad, isa);
    } else {
      auto const index = detail::build_row_index(space, ids, v);
      if (freq == FreqScale::batch)
        detail::check_batch_counts(space, index.offsets, detail::IdentityRow{}, batch_counts, v);
      auto const scale = freq == FreqScale::none ? detail::RowScale<memory_space>{} : row_scale(batch_counts);
      saw_non_finite = mode == Mode::identical
                           ? detail::fold_identical(space, index, dy, carry, grad, pad, isa, scale)
                           : detail::fold_pairwise(space, index, dy, carry, grad, pad, isa, scale);
      if (counts.data() != nullptr) detail::counts_from_offsets(space, index.offsets, counts);
    }
    return saw_non_finite;
  }

  // The region a path names: kembed::backward[fast], [identical,scan],
  // [identical,bucket], [<mode>,sort(,scale_grad_by_freq)], and
  // [<mode>,sort,listed(,scale_grad_by_freq)(,caller)] for the sort over the listed
  // rows (on the calling thread for the smallest calls). Made once: building a
  // label cost a small call an allocation.
  static std::string const& label(BackwardPath const& path) {
    static std::string const fixed[3] = {"kembed::backward[fast]", "kembed::backward[identical,scan]",
                                         "kembed::backward[identical,bucket]"};
    static std::string const sorts[4] = {
        "kembed::backward[identical,sort]", "kembed::backward[identical,sort,scale_grad_by_freq]",
        "kembed::backward[deterministic,sort]", "kembed::backward[deterministic,sort,scale_grad_by_freq]"};
    static std::string const listed[8] = {"kembed::backward[identical,sort,listed]",
                                          "kembed::backward[identical,sort,listed,caller]",
                                          "kembed::backward[identical,sort,listed,scale_grad_by_freq]",
                                          "kembed::backward[identical,sort,listed,scale_grad_by_freq,caller]",
                                          "kembed::backward[deterministic,sort,listed]",
                                          "kembed::backward[deterministic,sort,listed,caller]",
                                          "kembed::backward[deterministic,sort,listed,scale_grad_by_freq]",
                                          "kembed::backward[deterministic,sort,listed,scale_grad_by_freq,caller]"};
    static std::string const argmax = "kembed::backward[identical,argmax]";
    if (path.argmax) return argmax;
    int const mode_scaled = (path.mode == Mode::identical ? 0 : 2) + (path.freq ? 1 : 0);
    if (path.listed) return listed[2 * mode_scaled + (path.on_caller ? 1 : 0)];
    if (path.mode == Mode::fast) return fixed[0];
    if (path.plan == Plan::scan) return fixed[1];
    if (path.plan == Plan::bucket) return fixed[2];
    return sorts[mode_scaled];
  }
  static std::string const& isa_label(detail::HostIsa isa) {
    static std::string const labels[2] = {"kembed::host_isa[baseline]", "kembed::host_isa[avx2]"};
    return labels[detail::fold_isa(isa) == detail::HostIsa::avx2 ? 1 : 0];
  }
  static std::string const& sparse_carry_label(Mode mode, bool on_caller) {
    static std::string const labels[4] = {
        "kembed::backward_sparse[identical,carry]", "kembed::backward_sparse[identical,carry,caller]",
        "kembed::backward_sparse[deterministic,carry]", "kembed::backward_sparse[deterministic,carry,caller]"};
    return labels[(mode == Mode::deterministic ? 2 : 0) + (on_caller ? 1 : 0)];
  }

  template <class IdView>
  void counts_impl(ExecutionSpace const& space, IdView const& ids, counts_type const& counts) const {
    detail::check_ids(space, ids, config_.num_embeddings);
    detail::ScopedRegion region("kembed::counts");
    auto const index = detail::build_row_index(space, ids, config_.num_embeddings);
    detail::counts_from_offsets(space, index.offsets, counts);
  }

  template <class Matrix>
  static void check_matrix(char const* argument, Matrix const& m, std::int64_t rows, std::int64_t cols,
                           char const* meaning) {
    if (std::int64_t(m.extent(0)) != rows || std::int64_t(m.extent(1)) != cols) {
      throw InvalidArgument(argument, std::string(argument) + " has shape " +
                                          Shape{std::int64_t(m.extent(0)), std::int64_t(m.extent(1))}.str() +
                                          ", want " + Shape{rows, cols}.str() + " (" + meaning + ")");
    }
  }

  Config config_;
  ExecutionSpace space_;
  matrix_type weight_;
};

// A zeroed (rows, cols) matrix in the space's memory, for dy, y or a gradient.
// On Linux hosts it is backed by transparent huge pages where the system allows:
// the forward and the bucket plan read rows in random order, and with 4 KiB pages
// most of those reads miss the TLB (docs/PERFORMANCE.md). The zero fill runs on
// `space`, so each thread touches its own pages first.
template <class ExecutionSpace>
typename Embedding<ExecutionSpace>::matrix_type make_matrix(ExecutionSpace const& space, std::string const& label,
                                                            std::int64_t rows, std::int64_t cols) {
  if (rows < 0 || cols < 0)
    throw InvalidArgument("shape", "make_matrix(" + std::to_string(rows) + ", " + std::to_string(cols) +
                                       "): the extents must not be negative");
  auto const m = detail::uninitialized_matrix(space, label, rows, cols);
  Kokkos::parallel_for(
      "kembed::make_matrix", detail::Range<ExecutionSpace>(space, 0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        for (std::int64_t c = 0; c < cols; ++c) m(r, c) = 0.0f;
      });
  space.fence();
  return m;
}

}  // namespace kembed
