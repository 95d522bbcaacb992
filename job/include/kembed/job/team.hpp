#pragma once
// The Team concept: who runs the batch job. job::OneProcess is the team of one;
// kembed::mpi::Team (<kembed/mpi/team.hpp>) is the ranks of an MPI communicator.
// run_backward checks a team against this list with static_assert, so a new team
// learns at compile time what it lacks (tests/test_job.cpp and tests/mpi/
// test_job_team.cpp assert it of both teams).
//
// A Team `T`, on every rank (calls are collective unless said otherwise):
//   t.rank(), t.size()                    this rank and how many (int)
//   t.collective()                        io::Collective const* for collective files, or null
//   t.reads_ahead()                       whether file work may run on a thread of its own
//   t.agree(std::exception_ptr)           every rank throws the first error any rank had
//   t.broadcast(std::string)              the first rank's text, on every rank
//   t.sum(n), t.sum_before(n), t.max(n)   of every rank's n; of the ranks before this one; the largest
//   t.all_gather(n)                       every rank's n, in rank order (std::vector<int64_t>)
//   t.sha256_in_rank_order(data, bytes)   SHA-256 of every rank's bytes, in rank order
//   t.gather_bytes(std::string)           every rank's (small) bytes, in rank order, on every rank
//   t.sum_rows(counts, first_row, rows)   per-row counts summed to the rows' range owner (the files')
//   t.exchange_bytes(to_each)             to_each[r] to rank r; what every rank sent here, in rank order
//   t.own_rows_for(counts)                the fold's Ownership (kembed/core/ownership.hpp) for a batch
//                                         whose ids this rank counted (V entries)
//   T::Layer<Space>(t, space, Ownership, d, Options), with config(), ownership(), row_count() (its slots),
//     backward(...), backward_sparse(...), last_path(), last_positions(),
//     exchange_seconds(), bytes_sent(): the layer of this rank's rows.
//   Bag batches need a layer that also has use_bags(space, Pooling, FloatsRef const*),
//     backward_bags(space, BagCall, grad, tally, batch_counts) and backward_bags_sparse
//     (has_bag_layer_v); a team whose layer lacks them refuses bag batches by name.
//   T::Lookup<Space>(t, space, V, d, FloatsRef rows, Options, std::optional<Pooling>), the
//     forward's: `rows` are the table's rows this rank owns (Ownership::ranges(V, size)),
//     and lookup(space, ForwardBlock&, n, float* y) is this rank's part of one forward
//     call (n positions or bags into y, n x d on the host); every rank's parts, in rank
//     order, are one process's call (is_forward_team_v). A team may refuse bag batches.
#include <kembed/core/arrays.hpp>
#include <kembed/core/bags.hpp>
#include <kembed/core/options.hpp>
#include <kembed/core/ownership.hpp>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kembed::io {
struct Collective;
}

namespace kembed::job {

// One bag call's host arrays: `bags` bags whose positions are offsets[b] ..
// offsets[b + 1] (offsets[0] = 0, offsets[bags] = positions), dy (bags, d), and a
// weight per position (null: none).
struct BagCall {
  std::int64_t const* ids = nullptr;
  std::int64_t const* offsets = nullptr;
  float const* dy = nullptr;
  float const* weights = nullptr;
  std::int64_t bags = 0, positions = 0;
  bool weighted = false;  // the batch's (the same on every rank, also where this part is empty)
};

// One block of a forward's batch on the host: its ids and, of a bag batch, its bags'
// offsets (global first positions, one more than its bags) and weights.
struct ForwardBlock {
  std::vector<std::int64_t> ids, offsets;
  std::vector<float> weights;
};

namespace detail {

template <class L, class = void>
struct bag_layer : std::false_type {};
template <class L>
struct bag_layer<L, std::void_t<decltype(std::declval<L const&>().backward_bags(
                        std::declval<typename L::execution_space const&>(), BagCall(),
                        std::declval<typename L::matrix_type const&>(), nullptr,
                        std::declval<typename L::batch_counts_type const&>()))>> : std::true_type {};

template <class T, class = void>
struct team_members : std::false_type {};
template <class T>
struct team_members<
    T, std::void_t<decltype(int(std::declval<T const&>().rank())), decltype(int(std::declval<T const&>().size())),
                   decltype(static_cast<io::Collective const*>(std::declval<T const&>().collective())),
                   decltype(bool(std::declval<T const&>().reads_ahead())),
                   decltype(std::declval<T const&>().agree(std::exception_ptr())),
                   decltype(std::string(std::declval<T const&>().broadcast(std::string()))),
                   decltype(std::int64_t(std::declval<T const&>().sum(std::int64_t()))),
                   decltype(std::int64_t(std::declval<T const&>().sum_before(std::int64_t()))),
                   decltype(std::int64_t(std::declval<T const&>().max(std::int64_t()))),
                   decltype(std::vector<std::int64_t>(std::declval<T const&>().all_gather(std::int64_t()))),
                   decltype(std::string(std::declval<T const&>().sha256_in_rank_order(nullptr, std::size_t()))),
                   decltype(std::string(std::declval<T const&>().gather_bytes(std::string()))),
                   decltype(std::string(std::declval<T const&>().exchange_bytes(std::vector<std::string>()))),
                   decltype(Ownership(std::declval<T const&>().own_rows_for(std::vector<std::int64_t>()))),
                   decltype(std::vector<std::int64_t>(std::declval<T const&>().sum_rows(
                       std::vector<std::int64_t>(), std::int64_t(), std::int64_t())))>> : std::true_type {};

template <class T, class Space, class = void>
struct team_layer : std::false_type {};
template <class T, class Space>
struct team_layer<
    T, Space,
    std::void_t<decltype(typename T::template Layer<Space>(std::declval<T const&>(), std::declval<Space const&>(),
                                                           Ownership(), std::int64_t(), Options())),
                decltype(static_cast<Config const&>(std::declval<typename T::template Layer<Space> const&>().config())),
                decltype(Ownership(std::declval<typename T::template Layer<Space> const&>().ownership())),
                decltype(std::int64_t(std::declval<typename T::template Layer<Space> const&>().row_count())),
                decltype(BackwardPath(std::declval<typename T::template Layer<Space> const&>().last_path())),
                decltype(std::int64_t(std::declval<typename T::template Layer<Space> const&>().last_positions())),
                decltype(double(std::declval<typename T::template Layer<Space> const&>().exchange_seconds())),
                decltype(std::int64_t(std::declval<typename T::template Layer<Space> const&>().bytes_sent()))>>
    : std::true_type {};

}  // namespace detail

// Whether T runs the forward job on Space (T::Lookup above).
template <class T, class Space>
inline constexpr bool is_forward_team_v =
    std::is_constructible_v<typename T::template Lookup<Space>, T const&, Space const&, std::int64_t, std::int64_t,
                            FloatsRef const&, Options const&, std::optional<Pooling>>;

// Whether a team's layer folds bag batches.
template <class Layer>
inline constexpr bool has_bag_layer_v = detail::bag_layer<Layer>::value;

// Whether T is a Team whose layers run on Space (the list above).
template <class T, class Space>
inline constexpr bool is_team_v = detail::team_members<T>::value&& detail::team_layer<T, Space>::value;

}  // namespace kembed::job
