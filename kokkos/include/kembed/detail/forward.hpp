#pragma once
// The forward: a gather of whole table rows, copied bit for bit.
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

template <class ExecutionSpace, class IdView, class Table, class Out>
void forward(ExecutionSpace const& space, IdView const& ids, Table const& weight, Out const& y) {
  std::int64_t const d = weight.extent(1);
  Kokkos::parallel_for(
      "kembed::forward", Range<ExecutionSpace>(space, 0, ids.extent(0)), KOKKOS_LAMBDA(std::int64_t p) {
        auto const r = static_cast<std::int64_t>(ids(p));
        for (std::int64_t c = 0; c < d; ++c) y(p, c) = weight(r, c);
      });
}

}  // namespace kembed::detail
