#pragma once
// Allocation of kembed's large host buffers.
#include <Kokkos_Core.hpp>

#include <kembed/core/arrays.hpp>
#include <kembed/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kembed::detail {

// The transparent huge page size on x86-64 Linux; buffers smaller than two of
// them hold no whole aligned page worth advising.
inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

// Asks Linux to back [data, data + bytes) with 2 MiB pages where it can. The forward
// reads table rows and the bucket plan dy rows in random order: with 4 KiB pages
// nearly every row read misses the TLB (docs/PERFORMANCE.md). Only pages not yet
// touched are affected, so this comes between allocation and the first write.
// Advice only: failures (no THP, other systems) leave ordinary pages.
inline void advise_huge_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes < 2 * huge_page_bytes) return;
  auto const begin = (reinterpret_cast<std::uintptr_t>(data) + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
  auto const end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(huge_page_bytes - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

// A (rows, cols) LayoutRight float matrix in the space's memory, not yet written:
// on the host with huge pages advised. The caller writes it first (in parallel, on
// `space`, so that each thread's pages come from its own memory).
template <class ExecutionSpace>
Kokkos::View<float**, Kokkos::LayoutRight, typename ExecutionSpace::memory_space> uninitialized_matrix(
    ExecutionSpace const& space, std::string const& label, std::int64_t rows, std::int64_t cols) {
  Kokkos::View<float**, Kokkos::LayoutRight, typename ExecutionSpace::memory_space> m(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label), rows, cols);
  if constexpr (std::is_same<typename ExecutionSpace::memory_space, Kokkos::HostSpace>::value)
    advise_huge_pages(m.data(), m.span() * sizeof(float));
  return m;
}

// Runs f on the caller's host ids as a view in MemorySpace, in their own integer type
// (int32 or int64; no copy where MemorySpace is the host's).
template <class MemorySpace, class F>
void with_ids_in(IdsRef const& ids, F&& f) {
  auto const t = ids.size();
  if (ids.data() == nullptr) throw InvalidArgument("ids", "ids has no data (a null pointer)");
  auto const in = [&](auto const* data) {
    using Id = std::remove_const_t<std::remove_pointer_t<decltype(data)>>;
    Kokkos::View<Id const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(data, t);
    Kokkos::View<Id const*, MemorySpace> d = Kokkos::create_mirror_view_and_copy(MemorySpace(), h);
    f(d);
  };
  if (ids.type() == IdType::int32)
    in(static_cast<std::int32_t const*>(ids.data()));
  else
    in(static_cast<std::int64_t const*>(ids.data()));
}

}  // namespace kembed::detail
