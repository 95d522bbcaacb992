#pragma once
// The forward job's one code path (kembed/job/forward.hpp).
#include <kembed/embedding.hpp>
#include <kembed/embedding_bag.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/detail/io_worker.hpp>
#include <kembed/job/detail/support.hpp>
#include <kembed/job/paths.hpp>
#include <kembed/job/settings.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kembed::job::detail {

// Refuses, before anything is read or written, a microbatch below 1 and an output
// that would replace an input or cannot be written (messages name settings as `o` does).
void check_forward_settings(ForwardSettings const& s, Observer const& o);
// Reads ids [first, first + n) and refuses one outside [0, V) with its position.
void read_ids(io::BatchReader const& batch, ForwardSettings const& s, std::int64_t first, std::int64_t n,
              std::int64_t v, std::vector<std::int64_t>& ids);

// One block of the batch on the host: its ids and, of a bag batch, its bags' offsets
// (global first positions, one more than its bags) and weights.
struct ForwardBlock {
  std::vector<std::int64_t> ids, offsets;
  std::vector<float> weights;
};

// The forward's lookups: an Embedding's rows, or a bag batch's bags pooled by an
// EmbeddingBag (offsets with their last entry), over the same table and options.
template <class Space>
class Lookup {
 public:
  using matrix_type = typename Embedding<Space>::matrix_type;
  Lookup(Space const& space, std::int64_t v, std::int64_t d, FloatsRef const& table, Options const& options,
         std::optional<Pooling> pooling) {
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
  // A block's n positions, or its n bags (their offsets made to start from 0), into y (n x d).
  void operator()(Space const& space, ForwardBlock& b, std::int64_t n, matrix_type const& y) const {
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

 private:
  std::optional<Embedding<Space>> rows_;
  std::optional<EmbeddingBag<Space>> bags_;
};

// The pooling of a forward over `batch`: a bag batch's (sum unless asked); none for
// positions, where asking for one is refused.
std::optional<Pooling> forward_pooling(io::BatchReader const& batch, ForwardSettings const& s, Observer const& o);

// The table's max_norm applies (each microbatch is one forward call, which
// renormalises the rows it references, as torch's forward does), unless the settings
// override it; the other settings do not change a forward.
inline Options forward_options(Config const& table, ForwardSettings const& s) {
  Options options;
  if (table.renormalises()) {
    options.max_norm = table.max_norm;
    options.norm_type = table.norm_type;
  }
  if (s.max_norm) options.max_norm = s.max_norm;
  if (s.norm_type) options.norm_type = *s.norm_type;
  return options;
}

template <class Space>
ForwardReport run_forward(Space const& space, ForwardSettings const& s, Observer const& observer) {
  using clock = std::chrono::steady_clock;
  auto const seconds = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
  auto const t_start = clock::now();
  check_forward_settings(s, observer);
  ForwardReport report;
  auto t0 = clock::now();
  auto table = io::load_table(s.table);
  auto const v = table.config.num_embeddings, d = table.config.embedding_dim;
  auto const options = forward_options(table.config, s);
  io::BatchReader ids(s.ids, false, s.ids_dataset);
  auto const pooling = forward_pooling(ids, s, observer);
  Lookup<Space> const lookup(space, v, d, FloatsRef(table.weight.data(), Shape{v, d}), options, pooling);
  table.weight = {};
  report.read_table_seconds = seconds(t0);
  // The unit: positions, or a bag batch's bags (one output row each).
  auto const t = pooling ? ids.info().bags : ids.info().positions;
  // The inputs are hashed on a thread of their own; ids are read and y written on
  // another (one HDF5 call at a time, in order), while this thread looks up.
  std::string table_sha, ids_sha;
  std::exception_ptr hash_error;
  JoiningThread hasher([&] {
    auto const h0 = clock::now();
    try {
      table_sha = io::sha256_file(s.table);
      ids_sha = io::sha256_file(s.ids);
    } catch (...) {
      hash_error = std::current_exception();
    }
    report.hash_seconds = seconds(h0);
  });
  io::ForwardWriter out(s.out, t, d, "", "", {}, pooling);
  std::int64_t const block = std::min(t, s.microbatch);
  // Two blocks of ids and of y: one being read or written while the other is looked
  // up. Where the space's memory is the host's, y is written from where it was looked
  // up; otherwise it is copied to host buffers first.
  constexpr bool host_y = Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Space::memory_space>::accessible;
  ForwardBlock blocks[2];
  std::vector<float> y_h[2];
  typename Embedding<Space>::matrix_type y[2];
  for (int k = 0; k < 2; ++k) {
    blocks[k].ids.resize(static_cast<std::size_t>(block));
    if (!host_y) y_h[k].resize(static_cast<std::size_t>(block * d));
    if (host_y || k == 0) y[k] = typename Embedding<Space>::matrix_type("kembed::job::y", block, d);
  }
  std::future<void> written[2];
  IoWorker io(true);  // after what its tasks use: joined before they go
  auto read = [&](int k, std::int64_t p) {
    return io.submit([&, k, p] {
      std::int64_t const n = std::min(block, t - p);
      auto& b = blocks[k];
      if (pooling)
        read_bag_block(ids, s.ids, s.ids_dataset, p, n, v, b.offsets, nullptr, b.ids, b.weights);
      else
        read_ids(ids, s, p, n, v, b.ids);
    });
  };
  if (observer.log)
    observer.log("kembed forward: " + with_commas(t) +
                 (pooling ? " bags, pooling " + std::string(to_string(*pooling)) : " positions") +
                 ", V = " + with_commas(v) + ", d = " + std::to_string(d) + ", " + Space::name() + " with " +
                 std::to_string(space.concurrency()) + " thread(s)");
  if (observer.unit) observer.unit(pooling ? "bags" : "positions");
  if (observer.progress) observer.progress(0, t, 0);
  std::future<void> pending = t > 0 ? read(0, 0) : std::future<void>();
  for (std::int64_t p = 0, k = 0; p < t; p += block, k = 1 - k) {
    std::int64_t const n = std::min(block, t - p);
    pending.get();
    if (p + block < t) pending = read(int(1 - k), p + block);
    auto& y_k = y[host_y ? k : 0];
    t0 = clock::now();
    if (host_y && written[k].valid()) written[k].get();  // y_k's last block is in the file
    report.write_seconds += seconds(t0);
    t0 = clock::now();
    auto y_n = Kokkos::subview(y_k, std::make_pair(std::int64_t{0}, n), Kokkos::ALL);
    lookup(space, blocks[k], n, y_n);
    space.fence();
    report.forward_seconds += seconds(t0);
    float const* rows = y_k.data();
    if (!host_y) {
      t0 = clock::now();
      if (written[k].valid()) written[k].get();  // this buffer's last block is in the file
      report.write_seconds += seconds(t0);
      Kokkos::deep_copy(
          Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(y_h[k].data(), n, d),
          y_n);
      rows = y_h[k].data();
    }
    written[k] = io.submit([&out, rows, p, n] { out.write(p, n, rows); });
    if (observer.progress) observer.progress(p + n, t, 0);
  }
  t0 = clock::now();
  // y goes to storage while the hash may still run; commit() then writes little.
  auto synced = io.submit([&] { out.sync_so_far(); });
  for (auto& w : written)
    if (w.valid()) w.get();
  synced.get();
  auto const w0 = clock::now();
  hasher.join();
  report.hash_wait_seconds = seconds(w0);
  if (hash_error) std::rethrow_exception(hash_error);
  out.set_inputs(table_sha, ids_sha);
  out.commit();
  report.write_seconds += seconds(t0);
  report.out = s.out;
  report.backend = Space::name();
  report.positions = t;
  report.pooling = pooling ? std::string(to_string(*pooling)) : std::string();
  report.cols = d;
  report.threads = static_cast<int>(space.concurrency());
  report.total_seconds = seconds(t_start);
  return report;
}

}  // namespace kembed::job::detail
