#pragma once
// kembed::EmbeddingBag: pooled lookups as torch.nn.EmbeddingBag (sum, mean, max,
// per-sample weights), over an Embedding's table, settings and checks
// (../docs/CONTRACT.md, "Bags"). The bag kernels are in detail/.
#include <kembed/core/bags.hpp>
#include <kembed/detail/bag_forward.hpp>
#include <kembed/detail/bag_terms.hpp>
#include <kembed/embedding.hpp>

#include <vector>

namespace kembed {

template <class ExecutionSpace = Kokkos::DefaultExecutionSpace>
class EmbeddingBag {
 public:
  using execution_space = ExecutionSpace;
  using embedding_type = Embedding<ExecutionSpace>;
  using memory_space = typename embedding_type::memory_space;
  using matrix_type = typename embedding_type::matrix_type;
  using ids32_type = typename embedding_type::ids32_type;
  using ids64_type = typename embedding_type::ids64_type;
  using const_matrix_type = typename embedding_type::const_matrix_type;
  using counts_type = typename embedding_type::counts_type;
  using batch_counts_type = typename embedding_type::batch_counts_type;
  using sparse_type = typename embedding_type::sparse_type;
  using sparse_carry_type = typename embedding_type::sparse_carry_type;
  using offsets_type = Kokkos::View<std::int64_t const*, memory_space>;
  using weights_type = Kokkos::View<float const*, memory_space>;
  // max's argmax, (B, d): each value's position, -1 for a bag with no position that
  // counts. The forward records it; the backward may take it instead of finding it
  // again (torch's max_indices).
  using argmax_type = Kokkos::View<std::int64_t**, Kokkos::LayoutRight, memory_space>;
  using const_argmax_type = Kokkos::View<std::int64_t const**, Kokkos::LayoutRight, memory_space>;

  // torch.nn.EmbeddingBag(num_embeddings, embedding_dim, ..., _weight): the table is
  // required and copied, as Embedding's.
  EmbeddingBag(ExecutionSpace const& space, std::int64_t num_embeddings, std::int64_t embedding_dim,
               FloatsRef const& weight, BagOptions const& options = {})
      : config_(make_bag_config(num_embeddings, embedding_dim, options)),
        table_(space, num_embeddings, embedding_dim, weight, options.embedding),
        space_(space) {}
  EmbeddingBag(std::int64_t num_embeddings, std::int64_t embedding_dim, FloatsRef const& weight,
               BagOptions const& options = {})
      : EmbeddingBag(ExecutionSpace(), num_embeddings, embedding_dim, weight, options) {}
  // torch.nn.EmbeddingBag.from_pretrained: the shape comes from the table.
  static EmbeddingBag from_pretrained(FloatsRef const& weight, BagOptions const& options = {}) {
    if (weight.shape.rank() != 2)
      throw InvalidArgument("weight", "weight has shape " + weight.shape.str() +
                                          "; from_pretrained wants a 2-D (num_embeddings, embedding_dim) table");
    return EmbeddingBag(weight.shape[0], weight.shape[1], weight, options);
  }

  // Over a table the caller owns (not copied), as Embedding::over: kembed.torch's
  // Parameter. With max_norm the forward writes it.
  static EmbeddingBag over(ExecutionSpace const& space, matrix_type const& table, BagOptions const& options = {}) {
    auto config = make_bag_config(table.extent(0), table.extent(1), options);
    return EmbeddingBag(std::move(config), embedding_type::over(space, table, options.embedding), space);
  }
  // For the backward alone, as Embedding::backward_only: no table, so neither the
  // forward, nor max's backward (its argmax), nor the weights' gradient.
  static EmbeddingBag backward_only(ExecutionSpace const& space, std::int64_t num_embeddings,
                                    std::int64_t embedding_dim, BagOptions const& options = {}) {
    auto config = make_bag_config(num_embeddings, embedding_dim, options);
    return EmbeddingBag(std::move(config),
                        embedding_type::backward_only(space, num_embeddings, embedding_dim, options.embedding), space);
  }

  // Reassigns the table (same shape), as Embedding::set_weight; on error the old stays.
  void set_weight(FloatsRef const& weight) { table_.set_weight(weight); }

  BagConfig const& config() const noexcept { return config_; }
  Pooling pooling() const noexcept { return config_.pooling; }
  std::int64_t num_embeddings() const noexcept { return table_.num_embeddings(); }
  std::int64_t embedding_dim() const noexcept { return table_.embedding_dim(); }
  // The table and the settings a bag shares with an unpooled lookup.
  embedding_type const& embedding() const noexcept { return table_; }
  // One optimizer step on the bag layer's table (Embedding::step).
  template <class Grad>
  void step(ExecutionSpace const& space, TableOptimizer<ExecutionSpace>& optimizer, Grad const& grad) {
    table_.step(space, optimizer, grad);
  }
  void step(TableOptimizer<ExecutionSpace>& optimizer, SparseGradient const& grad) { table_.step(optimizer, grad); }

  // ---- forward: y[b, :] = the bag's rows pooled ------------------------------
  // Host arrays: 1-D ids with `offsets`, or 2-D (B, L) ids without; per_sample_weights
  // (the ids' shape) with mode sum. Returns (B, d), row-major. With max_norm the
  // referenced rows of the layer's table are renormalised first, as torch does.
  std::vector<float> forward(IdsRef const& ids, IdsRef const* offsets = nullptr,
                             FloatsRef const& per_sample_weights = {}) const {
    auto const bags = make_bags(ids.shape(), offsets, config_.include_last_offset);
    check_bag_weights(config_, ids.shape(), per_sample_weights);
    auto const d = embedding_dim();
    std::vector<float> y(std::size_t(checked_mul(bags.count(), d, "y")));
    auto const views = upload(bags, per_sample_weights);
    with_ids64(ids, [&](ids64_type const& device_ids) {
      auto const out = detail::uninitialized_matrix(space_, "kembed::bag_y", bags.count(), d);
      forward_impl(space_, device_ids, views, out);
      Kokkos::deep_copy(space_, host_matrix(y.data(), bags.count(), d), out);
      space_.fence();
    });
    return y;
  }
  // Views in this space's memory: 1-D ids, offsets as torch's (B entries, or B + 1
  // with include_last_offset), weights empty or T long, y (B, d); with max, `argmax`
  // (B, d), where given, receives each value's position for the backward.
  void forward(ExecutionSpace const& space, ids32_type const& ids, offsets_type const& offsets, matrix_type const& y,
               weights_type const& per_sample_weights = {}, argmax_type const& argmax = {}) const {
    forward_impl(space, ids, views_of(ids.extent(0), offsets, per_sample_weights), y, argmax);
  }
  void forward(ExecutionSpace const& space, ids64_type const& ids, offsets_type const& offsets, matrix_type const& y,
               weights_type const& per_sample_weights = {}, argmax_type const& argmax = {}) const {
    forward_impl(space, ids, views_of(ids.extent(0), offsets, per_sample_weights), y, argmax);
  }

  // ---- backward: the table's dense (V, d) gradient ---------------------------
  // dy is (B, d). Each row's terms are folded by the layer's plans and modes exactly
  // as an Embedding folds dy (docs/CONTRACT.md, "Bags"); `carry` continues a gradient
  // (microbatches of whole bags, in order, give the unsplit one). Counts are each
  // row's positions, the padding row's included. Max reads the table (its argmax).
  HostGradient backward(IdsRef const& ids, IdsRef const* offsets, FloatsRef const& dy,
                        FloatsRef const& per_sample_weights = {}, FloatsRef const& carry = {},
                        std::int64_t const* batch_counts = nullptr) const {
    auto const bags = make_bags(ids.shape(), offsets, config_.include_last_offset);
    check_bag_weights(config_, ids.shape(), per_sample_weights);
    auto const v = num_embeddings(), d = embedding_dim();
    check_bag_dy(dy.shape, bags.count(), d);
    if (carry.data) check_table_shape("carry", carry.shape, v, d);
    auto const views = upload(bags, per_sample_weights);
    auto const dy_d = Kokkos::create_mirror_view_and_copy(
        memory_space(), Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            dy.data, bags.count(), d));
    const_matrix_type carry_d;
    if (carry.data)
      carry_d = Kokkos::create_mirror_view_and_copy(
          memory_space(), Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                              carry.data, v, d));
    auto const batch_d = table_.upload_batch_counts(batch_counts);
    HostGradient out{Shape{v, d}, std::vector<float>(std::size_t(v * d)), std::vector<std::int64_t>(std::size_t(v))};
    with_ids64(ids, [&](ids64_type const& device_ids) {
      auto const grad = detail::uninitialized_matrix(space_, "kembed::bag_gradient", v, d);
      counts_type counts(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "kembed::counts"), v);
      backward_impl(space_, device_ids, views, dy_d, grad, carry_d, counts, batch_d);
      embedding_type::copy_to_host(space_, grad, counts, out);
    });
    return out;
  }
  // Views: 1-D ids, offsets as forward's, dy (B, d); `grad` may be `carry` itself to
  // continue in place. Empty views mean none. With max, `argmax` (the forward's, for
  // this table, these ids and offsets) spares finding it again, the table's T x d
  // reads: it is checked to name a position of each bag that counts, not to be the
  // maximum (as torch trusts its max_indices).
  void backward(ExecutionSpace const& space, ids64_type const& ids, offsets_type const& offsets,
                const_matrix_type const& dy, matrix_type const& grad, const_matrix_type const& carry = {},
                counts_type const& counts = {}, weights_type const& per_sample_weights = {},
                batch_counts_type const& batch_counts = {}, const_argmax_type const& argmax = {}) const {
    backward_impl(space, ids, views_of(ids.extent(0), offsets, per_sample_weights), dy, grad, carry, counts,
                  batch_counts, argmax);
  }
  void backward(ExecutionSpace const& space, ids32_type const& ids, offsets_type const& offsets,
                const_matrix_type const& dy, matrix_type const& grad, const_matrix_type const& carry = {},
                counts_type const& counts = {}, weights_type const& per_sample_weights = {},
                batch_counts_type const& batch_counts = {}, const_argmax_type const& argmax = {}) const {
    backward_impl(space, ids, views_of(ids.extent(0), offsets, per_sample_weights), dy, grad, carry, counts,
                  batch_counts, argmax);
  }

  // ---- backward_sparse: the rows the bags reference (and the carry's) ----------
  // Each listed row is bit for bit that row of backward()'s dense gradient with
  // to_dense(carry) as its carry, as Embedding::backward_sparse; counts as backward's.
  SparseGradient backward_sparse(IdsRef const& ids, IdsRef const* offsets, FloatsRef const& dy,
                                 FloatsRef const& per_sample_weights = {}, SparseGradient const* carry = nullptr,
                                 std::int64_t const* batch_counts = nullptr) const {
    auto const bags = make_bags(ids.shape(), offsets, config_.include_last_offset);
    check_bag_weights(config_, ids.shape(), per_sample_weights);
    auto const v = num_embeddings(), d = embedding_dim();
    check_bag_dy(dy.shape, bags.count(), d);
    if (carry) check_sparse("carry", *carry, v, d);
    auto const views = upload(bags, per_sample_weights);
    auto const dy_d = Kokkos::create_mirror_view_and_copy(
        memory_space(), Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            dy.data, bags.count(), d));
    auto const carry_d = carry ? embedding_type::upload_sparse(space_, *carry) : sparse_type{};
    auto const batch_d = table_.upload_batch_counts(batch_counts);
    SparseGradient out;
    with_ids64(ids, [&](ids64_type const& device_ids) {
      out = embedding_type::to_host(space_, backward_sparse_impl(space_, device_ids, views, dy_d, carry_d, batch_d, {}),
                                    v);
    });
    return out;
  }
  // Views: a new sparse gradient (the carry's views unchanged; empty means none).
  sparse_type backward_sparse(ExecutionSpace const& space, ids64_type const& ids, offsets_type const& offsets,
                              const_matrix_type const& dy, sparse_type const& carry = {},
                              weights_type const& per_sample_weights = {}, batch_counts_type const& batch_counts = {},
                              const_argmax_type const& argmax = {}) const {
    return backward_sparse_impl(space, ids, views_of(ids.extent(0), offsets, per_sample_weights), dy, carry,
                                batch_counts, argmax);
  }
  // Continued in place (the batch job's --sparse): `carry` from sparse_carry(), as
  // Embedding's; on an error nothing changes.
  sparse_carry_type sparse_carry(ExecutionSpace const& space) const { return table_.sparse_carry(space); }
  sparse_type listed(ExecutionSpace const& space, sparse_carry_type const& carry) const {
    return table_.listed(space, carry);
  }
  void backward_sparse(ExecutionSpace const& space, ids64_type const& ids, offsets_type const& offsets,
                       const_matrix_type const& dy, sparse_carry_type& carry,
                       weights_type const& per_sample_weights = {}, batch_counts_type const& batch_counts = {},
                       const_argmax_type const& argmax = {}) const {
    backward_sparse_carry_impl(space, ids, views_of(ids.extent(0), offsets, per_sample_weights), dy, carry,
                               batch_counts, argmax);
  }

  // ---- a bag call as positions ------------------------------------------------
  // Each position's term and what its factor is formed from, for routing positions to
  // their rows' owners (kembed::mpi): terms(p, :) is dy of p's bag (max: -0.0 in each
  // column p did not win); factor_inputs(p) is p's bag's n (mean) or p's weight, left
  // empty where the call has no factors (sum and max without weights). An owner forms
  // each factor with detail::bag_factor and its row's count (scale_grad_by_freq), then
  // folds (ids, terms) as bags of one position each weighted by the factors (pooling
  // sum, no scale_grad_by_freq), or unweighted with this layer's settings: this call's
  // gradient bit for bit (CONTRACT.md, "Bags").
  using factor_inputs_type = Kokkos::View<double*, memory_space>;
  void position_terms(ExecutionSpace const& space, ids64_type const& ids, offsets_type const& offsets,
                      const_matrix_type const& dy, weights_type const& per_sample_weights, matrix_type const& terms,
                      factor_inputs_type& factor_inputs) const {
    auto const bags = views_of(ids.extent(0), offsets, per_sample_weights);
    embedding_type::check_matrix("terms", terms, ids.extent(0), embedding_dim(), "positions, embedding_dim");
    check_terms_inputs(space, ids, bags, dy);  // no counts: the owners apply scale_grad_by_freq
    detail::check_finite(space, dy, "dy", "bag");
    detail::ScopedRegion region("kembed::bag_position_terms");
    auto const t = terms_of(space, ids, bags, dy, batch_counts_type{}, false);
    detail::materialize_terms(space, t, terms);
    factor_inputs = detail::bag_factor_inputs(space, ids, bags);
  }

  // ---- the gradient of per_sample_weights (mode sum) --------------------------
  // T values: each position's table row dotted with its bag's dy, columns ascending,
  // one fused multiply-add each; +0.0 at the padding row's positions (CONTRACT.md).
  std::vector<float> per_sample_weights_backward(IdsRef const& ids, IdsRef const* offsets, FloatsRef const& dy) const {
    auto const bags = make_bags(ids.shape(), offsets, config_.include_last_offset);
    check_bag_dy(dy.shape, bags.count(), embedding_dim());
    auto const views = upload(bags, FloatsRef{});
    auto const dy_d = Kokkos::create_mirror_view_and_copy(
        memory_space(), Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            dy.data, bags.count(), embedding_dim()));
    std::vector<float> out(std::size_t(bags.positions()));
    with_ids64(ids, [&](ids64_type const& device_ids) {
      Kokkos::View<float*, memory_space> grad(
          Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "kembed::weights_grad"), out.size());
      weights_backward_impl(space_, device_ids, views, dy_d, grad);
      Kokkos::deep_copy(space_,
                        Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.data(), out.size()), grad);
      space_.fence();
    });
    return out;
  }
  void per_sample_weights_backward(ExecutionSpace const& space, ids64_type const& ids, offsets_type const& offsets,
                                   const_matrix_type const& dy, Kokkos::View<float*, memory_space> const& out) const {
    weights_backward_impl(space, ids, views_of(ids.extent(0), offsets, {}), dy, out);
  }

 private:
  using views_type = detail::BagViews<memory_space>;

  EmbeddingBag(BagConfig config, embedding_type table, ExecutionSpace const& space)
      : config_(std::move(config)), table_(std::move(table)), space_(space) {}
  using host_matrix_type = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

  static host_matrix_type host_matrix(float* data, std::int64_t rows, std::int64_t cols) {
    return host_matrix_type(data, rows, cols);
  }

  // The caller's ids as an int64 view in this space's memory, int32 ids widened on the
  // host: each bag path is compiled once, not per id type (the device test binary, and
  // the GPU bundle that carries it, stay under their size).
  template <class F>
  void with_ids64(IdsRef const& ids, F&& f) const {
    auto const t = ids.size();
    if (ids.data() == nullptr && t > 0) throw InvalidArgument("ids", "ids has no data (a null pointer)");
    std::vector<std::int64_t> wide;
    auto const* data = static_cast<std::int64_t const*>(ids.data());
    if (ids.type() == IdType::int32) {
      wide.resize(std::size_t(t));
      for (std::int64_t p = 0; p < t; ++p) wide[std::size_t(p)] = ids.at(p);
      data = wide.data();
    }
    ids64_type const device = Kokkos::create_mirror_view_and_copy(
        memory_space(), Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(data, t));
    f(device);
  }

  // The checked bags and weights in this space's memory (the weights as the caller's
  // own buffer where that is the host's: they are read during the call only).
  views_type upload(Bags const& bags, FloatsRef const& weights) const {
    views_type v;
    v.padding = config_.embedding.padding_idx;
    v.pooling = config_.pooling;
    // A copy even on the host: the views outlive `bags`.
    Kokkos::View<std::int64_t*, memory_space> bounds(
        Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "kembed::bag_bounds"), bags.bounds.size());
    Kokkos::deep_copy(bounds, Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                  bags.bounds.data(), bags.bounds.size()));
    v.bounds = {bounds, bags.positions()};
    v.bags = bags.count();
    if (weights.data)
      v.weights = Kokkos::create_mirror_view_and_copy(
          memory_space(), Kokkos::View<float const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                              weights.data, std::size_t(bags.positions())));
    return v;
  }

  // Offsets and weights given as views: checked on the host (B + T values at most),
  // then read in place.
  views_type views_of(std::int64_t t, offsets_type const& offsets, weights_type const& weights) const {
    auto const host_offsets = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), offsets);
    IdsRef const ref(host_offsets.data(), Shape{std::int64_t(offsets.extent(0))});
    views_type v;
    v.bags = check_offsets(ref, t, config_.include_last_offset);
    auto const host_weights = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), weights);
    check_bag_weights(
        config_, Shape{t},
        weights.data() ? FloatsRef(host_weights.data(), Shape{std::int64_t(weights.extent(0))}) : FloatsRef{});
    v.padding = config_.embedding.padding_idx;
    v.pooling = config_.pooling;
    v.bounds = {offsets, t};
    v.weights = weights;
    return v;
  }

  template <class IdView>
  void forward_impl(ExecutionSpace const& space, IdView const& ids, views_type const& bags, matrix_type const& y,
                    argmax_type const& argmax = {}) const {
    embedding_type::check_matrix("y", y, bags.count(), embedding_dim(), "bags, embedding_dim");
    if (argmax.data()) check_argmax_shape(argmax, bags);
    table_.require_table();
    table_.renormalise(space, ids);
    detail::ScopedRegion region("kembed::bag_forward");
    detail::bag_forward(space, ids, bags, table_.weight(), y, argmax);  // checks the ids first
  }

  // An argmax is max's, (B, d).
  template <class View>
  void check_argmax_shape(View const& argmax, views_type const& bags) const {
    if (config_.pooling != Pooling::max)
      throw InvalidArgument("argmax", "only mode 'max' has an argmax; this layer's mode is '" +
                                          std::string(to_string(config_.pooling)) + "'");
    embedding_type::check_matrix("argmax", argmax, bags.count(), embedding_dim(), "bags, embedding_dim");
  }
  // A given argmax (its shape checked) names, in each column of each bag, a position
  // of that bag that counts (not the padding row's), or -1 where the bag has none.
  template <class IdView>
  void check_argmax_values(ExecutionSpace const& space, IdView const& ids, views_type const& bags,
                           const_argmax_type const& argmax) const {
    auto const bad = detail::first_bad_argmax(space, ids, bags, argmax);
    if (bad < 0) return;
    auto const b = bad / embedding_dim(), c = bad % embedding_dim();
    throw InvalidArgument("argmax", "argmax(" + std::to_string(b) + ", " + std::to_string(c) +
                                        ") does not name a position of bag " + std::to_string(b) +
                                        " that counts (or -1 for a bag with none): pass the argmax the forward "
                                        "recorded for these ids and offsets");
  }

  // Checks everything before anything is written, then folds the bag's terms
  // (detail::BagTerms) through the layer's own plan dispatch.
  template <class IdView>
  void backward_impl(ExecutionSpace const& space, IdView const& ids, views_type const& bags,
                     const_matrix_type const& dy, matrix_type const& grad, const_matrix_type const& carry,
                     counts_type const& counts, batch_counts_type const& batch_counts,
                     const_argmax_type const& argmax = {}) const {
    auto const& cfg = config_.embedding;
    auto const v = cfg.num_embeddings, d = cfg.embedding_dim;
    std::int64_t const t = ids.extent(0);
    embedding_type::check_matrix("grad", grad, v, d, "num_embeddings, embedding_dim");
    bool const in_place = carry.data() != nullptr && carry.data() == grad.data();
    if (carry.data()) embedding_type::check_matrix("carry", carry, v, d, "num_embeddings, embedding_dim");
    if (counts.data() && std::int64_t(counts.extent(0)) != v)
      throw InvalidArgument("counts", "counts has " + std::to_string(counts.extent(0)) + " entries, want " +
                                          std::to_string(v) + " (num_embeddings)");
    check_backward(space, ids, bags, dy, batch_counts, argmax);
    if (carry.data() && !in_place) detail::check_finite(space, carry, "carry", "row");
    detail::check_finite(space, dy, "dy", "bag");  // B rows: checked first, so the fold need not report
    detail::ScopedRegion region("kembed::bag_backward");
    // Max's winners-only path and the scan plan (detail::WalksBags) read no position's
    // bag: T int64 not written (16 MB a call of 2M positions).
    auto terms = terms_of(space, ids, bags, dy, batch_counts, true, argmax, false);
    auto const path = table_.path_for(space, CallShape{t, std::int64_t(dy.extent(0)), in_place,
                                                       terms.scale.data() != nullptr, config_.pooling == Pooling::max});
    bool const walks_bags = path.argmax || (path.plan == Plan::scan && !path.listed && path.mode != Mode::fast &&
                                            config_.pooling != Pooling::max);
    if (!walks_bags) terms.bag = detail::bag_of_positions(space, bags, t);
    if (cfg.scale_grad_by_freq == FreqScale::batch && t > 0) check_batch_covers(space, ids, batch_counts);
    table_.fold_path(space, path, ids, terms, carry, grad, counts, FreqScale::none, batch_counts_type{});
  }

  // The checks every backward makes before anything is written.
  template <class IdView>
  void check_backward(ExecutionSpace const& space, IdView const& ids, views_type const& bags,
                      const_matrix_type const& dy, batch_counts_type const& batch_counts,
                      const_argmax_type const& argmax) const {
    table_.check_batch_counts_view(batch_counts);
    check_terms_inputs(space, ids, bags, dy, argmax);
  }
  // What forming the terms reads: dy's shape, the table for max, the ids.
  template <class IdView>
  void check_terms_inputs(ExecutionSpace const& space, IdView const& ids, views_type const& bags,
                          const_matrix_type const& dy, const_argmax_type const& argmax = {}) const {
    embedding_type::check_matrix("dy", dy, bags.count(), embedding_dim(), "bags, embedding_dim");
    if (argmax.data()) check_argmax_shape(argmax, bags);
    if (config_.pooling == Pooling::max && !argmax.data()) table_.require_table();  // max finds its argmax
    detail::check_ids(space, ids, num_embeddings());
    if (argmax.data()) check_argmax_values(space, ids, bags, argmax);  // reads the ids: after their check
  }

  template <class IdView>
  sparse_type backward_sparse_impl(ExecutionSpace const& space, IdView const& ids, views_type const& bags,
                                   const_matrix_type const& dy, sparse_type const& carry,
                                   batch_counts_type const& batch_counts, const_argmax_type const& argmax) const {
    auto const& cfg = config_.embedding;
    check_backward(space, ids, bags, dy, batch_counts, argmax);
    if (carry.values.data() != nullptr || carry.rows.data() != nullptr)
      detail::check_sparse_rows(space, carry, cfg.num_embeddings, cfg.embedding_dim, "carry");
    detail::check_finite(space, dy, "dy", "bag");
    detail::ScopedRegion region(cfg.mode == Mode::deterministic ? "kembed::bag_backward_sparse[deterministic]"
                                                                : "kembed::bag_backward_sparse[identical]");
    auto const terms = terms_of(space, ids, bags, dy, batch_counts, true, argmax);
    if (cfg.scale_grad_by_freq == FreqScale::batch && ids.extent(0) > 0) check_batch_covers(space, ids, batch_counts);
    return detail::backward_sparse(space, ids, terms, carry, batch_counts_type{}, cfg.num_embeddings, cfg.padding_idx,
                                   cfg.mode, FreqScale::none, host_isa())
        .first;
  }

  template <class IdView>
  void backward_sparse_carry_impl(ExecutionSpace const& space, IdView const& ids, views_type const& bags,
                                  const_matrix_type const& dy, sparse_carry_type& carry,
                                  batch_counts_type const& batch_counts, const_argmax_type const& argmax) const {
    auto const& cfg = config_.embedding;
    check_backward(space, ids, bags, dy, batch_counts, argmax);
    if (std::int64_t(carry.slot_of.extent(0)) != cfg.num_embeddings ||
        std::int64_t(carry.values.extent(1)) != cfg.embedding_dim)
      throw InvalidArgument("carry", "the sparse carry was made for another shape than (" +
                                         std::to_string(cfg.num_embeddings) + ", " + std::to_string(cfg.embedding_dim) +
                                         ")");
    detail::check_finite(space, dy, "dy", "bag");  // folded in place: checked first
    detail::ScopedRegion region(cfg.mode == Mode::deterministic ? "kembed::bag_backward_sparse[deterministic,carry]"
                                                                : "kembed::bag_backward_sparse[identical,carry]");
    auto const terms = terms_of(space, ids, bags, dy, batch_counts, true, argmax);
    if (cfg.scale_grad_by_freq == FreqScale::batch && ids.extent(0) > 0) check_batch_covers(space, ids, batch_counts);
    detail::backward_sparse_carry(space, ids, terms, carry, batch_counts_type{}, cfg.num_embeddings, cfg.padding_idx,
                                  cfg.mode, FreqScale::none, host_isa(), false);
  }

  static detail::HostIsa host_isa() {
    return detail::Tiles<ExecutionSpace>::host ? detail::host_isa() : detail::HostIsa::baseline;
  }

  template <class IdView>
  void weights_backward_impl(ExecutionSpace const& space, IdView const& ids, views_type const& bags,
                             const_matrix_type const& dy, Kokkos::View<float*, memory_space> const& out) const {
    if (config_.pooling != Pooling::sum)
      throw InvalidArgument("per_sample_weights",
                            "per_sample_weights have a gradient in mode 'sum' only; this "
                            "layer's mode is '" +
                                std::string(to_string(config_.pooling)) + "'");
    embedding_type::check_matrix("dy", dy, bags.count(), embedding_dim(), "bags, embedding_dim");
    if (std::int64_t(out.extent(0)) != std::int64_t(ids.extent(0)))
      throw InvalidArgument("out", "out has " + std::to_string(out.extent(0)) + " entries, want " +
                                       std::to_string(ids.extent(0)) + " (one per position)");
    table_.require_table();
    detail::check_ids(space, ids, num_embeddings());
    detail::check_finite(space, dy, "dy", "bag");
    detail::ScopedRegion region("kembed::bag_weights_backward");
    auto const bag = detail::bag_of_positions(space, bags, ids.extent(0));
    detail::bag_weights_grad(space, ids, bag, config_.embedding.padding_idx, table_.weight(), dy, out);
  }

  // The bag's terms: each position's bag, max's argmax (the given one, else found),
  // each position's factor. `scales` false: no factors (position_terms sends what
  // they are formed from instead).
  template <class IdView>
  detail::BagTerms<memory_space> terms_of(ExecutionSpace const& space, IdView const& ids, views_type const& bags,
                                          const_matrix_type const& dy, batch_counts_type const& batch_counts,
                                          bool scales = true, const_argmax_type const& argmax = {},
                                          bool with_bags = true) const {
    auto const& cfg = config_.embedding;
    std::int64_t const t = ids.extent(0), d = cfg.embedding_dim;
    detail::BagTerms<memory_space> terms;
    terms.dy = dy;
    terms.positions = t;
    terms.bounds = bags.bounds;
    if (with_bags) terms.bag = detail::bag_of_positions(space, bags, t);
    if (config_.pooling == Pooling::max && argmax.data()) {
      terms.won = argmax;
    } else if (config_.pooling == Pooling::max) {
      Kokkos::View<std::int64_t**, Kokkos::LayoutRight, memory_space> won(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::bag_argmax"), bags.count(), d);
      auto const scratch = detail::uninitialized_matrix(space, "kembed::bag_max", bags.count(), d);
      detail::bag_forward(space, ids, bags, table_.weight(), scratch, won);
      terms.won = won;
    }
    bool const freq = cfg.scales();
    if (scales && (freq || config_.pooling == Pooling::mean || bags.weights.extent(0) > 0)) {
      counts_type call_counts;
      if (freq && cfg.scale_grad_by_freq == FreqScale::call) {
        call_counts = counts_type(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::call_counts"),
                                  cfg.num_embeddings);
        table_.counts_impl(space, ids, call_counts);
      }
      batch_counts_type const n = !freq                                        ? batch_counts_type()
                                  : cfg.scale_grad_by_freq == FreqScale::batch ? batch_counts
                                                                               : batch_counts_type(call_counts);
      terms.scale = detail::bag_term_scales(space, ids, bags, n);
    }
    return terms;
  }

  // scale_grad_by_freq=batch: no row's batch count below its count in this call.
  template <class IdView>
  void check_batch_covers(ExecutionSpace const& space, IdView const& ids, batch_counts_type const& batch) const {
    counts_type here(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::call_counts"),
                     config_.embedding.num_embeddings);
    table_.counts_impl(space, ids, here);
    std::int64_t const v = config_.embedding.num_embeddings;
    std::int64_t const first = detail::first_row_below(space, batch, here);
    if (first < v)
      throw InvalidArgument("batch_counts", "batch_counts gives row " + std::to_string(first) +
                                                " fewer positions than this call holds; batch counts are the whole "
                                                "batch's");
  }

  BagConfig config_;
  embedding_type table_;
  ExecutionSpace space_;
};

}  // namespace kembed
