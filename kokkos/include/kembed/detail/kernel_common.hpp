#pragma once
// What every kembed kernel needs: the range policy, the IEEE guard, and a finite
// test that works on every backend.
#include <Kokkos_Core.hpp>
#include <kembed/core/error.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#if defined(__SSE__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#include <xmmintrin.h>
#define KEMBED_HOST_STREAM_STORES 1
#if defined(__x86_64__) && !defined(__CUDACC__) && !defined(__HIPCC__)  // stream_fill_wide's AVX2 stores
#include <immintrin.h>
#endif
#endif

// The contract needs one IEEE-754 binary32 addition per term, in order. Fast-math
// lets the compiler reassociate and flush subnormals, which changes the bits.
#ifdef __FAST_MATH__
#error "kembed kernels need IEEE-754 semantics: remove -ffast-math / -Ofast from this translation unit"
#endif

namespace kembed::detail {

template <class ExecutionSpace>
using Range = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
// For loops whose iterations differ wildly in cost (rows of Zipf-distributed ids).
// Kokkos' automatic chunk grows with the range (512 rows at V = 1e5 on 2 threads),
// and one chunk of Zipf's first rows then held most of the work; 16 keeps the
// hottest chunk small and the grabs few.
template <class ExecutionSpace>
using DynamicRangePolicy =
    Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>, Kokkos::IndexType<std::int64_t>>;
template <class ExecutionSpace>
DynamicRangePolicy<ExecutionSpace> DynamicRange(ExecutionSpace const& space, std::int64_t begin, std::int64_t end,
                                                std::int64_t chunk = 16) {
  return DynamicRangePolicy<ExecutionSpace>(space, begin, end, Kokkos::ChunkSize(chunk));
}

// Grabs for the folds over (row, tile) items: with few rows of many positions, one
// row's tiles per grab, since Zipf's first 16 rows hold 60% of the positions at
// V = 1e3 and one thread took them all (the sort 1.1-1.2x slower than with uniform
// ids). With few positions per row the grabs themselves cost more than that (V = 1e3,
// T = 1e3: 40 -> 60 us). A row's tiles stay together: split over threads, each read
// half of every dy row and the hardware prefetchers fetched the rest (d = 512 1.2x
// slower).
inline constexpr std::int64_t few_rows = 16 * 1024, many_positions = 64;
inline std::int64_t fold_grab(std::int64_t rows, std::int64_t tiles, std::int64_t t) {
  return rows < few_rows && t / many_positions >= rows ? tiles : 16;
}

// Arithmetic with one rounding per operation on every backend: nvcc fuses a * b + c
// into one fma unless told not to (C++ compilers here are, by -ffp-contract=off).
// Used where the contract multiplies (scale_grad_by_freq, max_norm).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
KOKKOS_INLINE_FUNCTION float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
KOKKOS_INLINE_FUNCTION float mul_rn(float a, float b) { return __fmul_rn(a, b); }
KOKKOS_INLINE_FUNCTION double dmul_rn(double a, double b) { return __dmul_rn(a, b); }
KOKKOS_INLINE_FUNCTION double dadd_rn(double a, double b) { return __dadd_rn(a, b); }
KOKKOS_INLINE_FUNCTION double dsqrt_rn(double a) { return __dsqrt_rn(a); }
#else
KOKKOS_INLINE_FUNCTION float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
KOKKOS_INLINE_FUNCTION float mul_rn(float a, float b) { return a * b; }
KOKKOS_INLINE_FUNCTION double dmul_rn(double a, double b) { return a * b; }
KOKKOS_INLINE_FUNCTION double dadd_rn(double a, double b) { return a + b; }
KOKKOS_INLINE_FUNCTION double dsqrt_rn(double a) { return std::sqrt(a); }
#endif
// Correctly rounded binary32 division and square root (the update step's). CUDA's
// intrinsics say so whatever -prec-div/-prec-sqrt; HIP's __fsqrt_rn is the native
// approximation unless OCML_BASIC_ROUNDED_OPERATIONS, while its plain '/' and sqrtf
// are correctly rounded (clang's default -fhip-fp32-correctly-rounded-divide-sqrt).
#if defined(__CUDA_ARCH__)
KOKKOS_INLINE_FUNCTION float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
KOKKOS_INLINE_FUNCTION float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}
#elif defined(__HIP_DEVICE_COMPILE__)
KOKKOS_INLINE_FUNCTION float div_rn(float a, float b) {
  return a / b;
}
KOKKOS_INLINE_FUNCTION float sqrt_rn(float a) {
  return sqrtf(a);
}
#else
KOKKOS_INLINE_FUNCTION float div_rn(float a, float b) {
  return a / b;
}
KOKKOS_INLINE_FUNCTION float sqrt_rn(float a) {
  return std::sqrt(a);
}
#endif

// x - x is +0 for every finite x and NaN for NaN and the infinities (no fast-math).
template <class T>
KOKKOS_INLINE_FUNCTION bool is_finite(T x) {
  T const diff = x - x;
  return diff == diff;
}

// Whether a term is NaN or +-inf, in a form compilers vectorise: x - x is 0 for
// every finite x. Kernels OR this over the terms they read anyway, so the input
// check costs no extra pass over dy.
template <class T>
KOKKOS_INLINE_FUNCTION int non_finite(T x) {
  return (x - x) != T(0);
}

// NaN and +-inf absorb under addition (NaN + x is NaN, inf + finite is inf, inf +
// -inf is NaN): a sum that starts finite and takes a non-finite term ends non-finite
// whatever the order or tree. So the folds test each finished sum once instead of
// every term. A sum that overflowed from finite terms is flagged as well; the
// caller's exact pass over dy then finds nothing and refuses nothing.

// Whether a space runs on the host (its memory is the host's): host backends fold
// a tile of columns per thread, devices a column per vector lane (fold.hpp).
template <class ExecutionSpace>
struct Tiles {
  static constexpr bool host =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecutionSpace::memory_space>::accessible;
};

// [begin, end) of part `i` out of `parts` equal parts of n, without forming i * n.
KOKKOS_INLINE_FUNCTION std::int64_t part_begin(std::int64_t n, std::int64_t parts, std::int64_t i) {
  std::int64_t const base = n / parts, extra = n % parts;
  return i * base + (i < extra ? i : extra);
}

// A hint to fetch the line holding `p` into the core's L2 before a later read; a
// no-op where the compiler has no such builtin or the code runs on a device.
// Into L2 (prefetcht2 on x86), not L1: the L1's few fill buffers capped random row
// reads from a 2 GB table at 8 rows in flight; the L2 took 32, and the forward at
// V = T = 1e6 ran 1.2-1.35x faster (docs/PERFORMANCE.md).
inline constexpr std::int64_t prefetch_rows = 32;  // rows fetched ahead of the one read
inline constexpr std::int64_t line_floats = 16;    // floats in a 64-byte cache line
template <int Locality>  // __builtin_prefetch's: 1 into L2 (prefetcht2), 3 into L1 (prefetcht0)
KOKKOS_INLINE_FUNCTION void prefetch_into(void const* p) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
  __builtin_prefetch(p, 0, Locality);
#else
  (void)p;
#endif
}
KOKKOS_INLINE_FUNCTION void prefetch(void const* p) {
  prefetch_into<1>(p);
}
// Into L1 (prefetcht0), for a bag forward whose table fits the cache: its rows then
// come from L2 or L3 and few need to be in flight; at V = 1e5, d = 64 (25.6 MB) the
// forward took 0.87-0.95x, at 256 MB and 2.56 GB 1.03-1.17x (the L1's fill buffers
// capping the rows in flight from memory, as above; the Zen 4 guest's 32 MiB L3).
inline constexpr std::int64_t near_fetch_bytes = std::int64_t{32} << 20;
KOKKOS_INLINE_FUNCTION void prefetch_near(void const* p) {
  prefetch_into<3>(p);
}
// The same hint as an asm statement, which the compiler must keep: GCC 12 emitted
// no instruction at all for the builtin in the scan's fetch of its sums ahead
// (backward_scan.hpp; objdump showed none), and that fetch is worth 1.5-1.9x there.
KOKKOS_INLINE_FUNCTION void prefetch_kept(void const* p) {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && \
    !defined(__SYCL_DEVICE_ONLY__)
  asm volatile("prefetcht2 %0" : : "m"(*static_cast<char const*>(p)));
#else
  prefetch(p);
#endif
}
// Where the term dy(p, c) is stored, for prefetch (a bag's terms overload it).
template <class Dy>
KOKKOS_INLINE_FUNCTION void const* term_address(Dy const& dy, std::int64_t p, std::int64_t c) {
  return &dy(p, c);
}
// A term's factor: the row's s (RowScale), unless the terms carry their own, one per
// position (a bag's terms: detail/bag_terms.hpp overloads both for its type).
template <class Dy>
KOKKOS_INLINE_FUNCTION float term_scale(Dy const&, std::int64_t, float s) {
  return s;
}
template <class Dy>
KOKKOS_INLINE_FUNCTION bool has_term_scales(Dy const&) {
  return false;
}
// Whether a type of terms can carry factors at all: only those kernels compile a
// folding-with-factors copy (bag_terms.hpp specialises it).
template <class Dy>
struct TermsCarryFactors : std::false_type {};
// Terms with at most one that is not -0.0 per (dy row, column), found without a fold
// (a max bag's argmax: bag_terms.hpp specialises it and defines backward_argmax).
template <class Dy>
struct HasArgmax : std::false_type {};
// Terms stored bag by bag, one dy row a bag (bag_terms.hpp specialises it): the scan
// plan walks the bags, holding each bag's row, not each position's bag number.
template <class Dy>
struct WalksBags : std::false_type {};

// A term added to a sum: acc + x, or with its factor s as one fused multiply-add,
// fma(x, s, acc). A row's first term on +0.0 is the same call with acc = +0.0, so
// that fma(-0.0, s, +0.0) is +0.0 as the contract's fold from +0.0 gives.
struct NoFactor {};
KOKKOS_INLINE_FUNCTION float add_term(float acc, float x, NoFactor) {
  return acc + x;
}
KOKKOS_INLINE_FUNCTION float add_term(float acc, float x, float s) {
  return fma_rn(x, s, acc);
}
// Position p's factor where the fold has factors (`float`), none where not.
template <class Dy>
KOKKOS_INLINE_FUNCTION NoFactor factor_of(Dy const&, std::int64_t, NoFactor) {
  return {};
}
template <class Dy>
KOKKOS_INLINE_FUNCTION float factor_of(Dy const& dy, std::int64_t p, float) {
  return term_scale(dy, p, 1.0f);
}

// dst[0, n) = src[0, n) for output written once and not read back by this call:
// on x86 hosts with non-temporal stores, which skip reading the destination's
// lines into cache first (a third of the traffic of a cached copy). Callers end
// the kernel with stream_fence(). Returns whether any value copied is NaN or +-inf
// (a test on values already in registers; dead code where the caller ignores it).
KOKKOS_INLINE_FUNCTION int stream_copy(float* dst, float const* src, std::int64_t n) {
  std::int64_t k = 0;
  int flag = 0;
#ifdef KEMBED_HOST_STREAM_STORES
  for (; k < n && (reinterpret_cast<std::uintptr_t>(dst + k) & 15) != 0; ++k) {
    dst[k] = src[k];
    flag |= non_finite(src[k]);
  }
  __m128 bad = _mm_setzero_ps();
  for (; k + 4 <= n; k += 4) {
    __m128 const x = _mm_loadu_ps(src + k);
    bad = _mm_or_ps(bad, _mm_cmpneq_ps(_mm_sub_ps(x, x), _mm_setzero_ps()));
    _mm_stream_ps(dst + k, x);
  }
  flag |= _mm_movemask_ps(bad);
#endif
  for (; k < n; ++k) {
    dst[k] = src[k];
    flag |= non_finite(src[k]);
  }
  return flag;
}
// dst[0, n) = 0.0f, streamed as stream_copy.
KOKKOS_INLINE_FUNCTION void stream_zero(float* dst, std::int64_t n) {
  std::int64_t k = 0;
#ifdef KEMBED_HOST_STREAM_STORES
  for (; k < n && (reinterpret_cast<std::uintptr_t>(dst + k) & 15) != 0; ++k) dst[k] = 0.0f;
  for (; k + 4 <= n; k += 4) _mm_stream_ps(dst + k, _mm_setzero_ps());
#endif
  for (; k < n; ++k) dst[k] = 0.0f;
}
// dst[0, n) = src[0, n), or +0.0 where src is null, for a row (or a row's tile) in
// one thread's hands: in fixed blocks that stay vector moves. A plain loop becomes
// memcpy, memset or `rep movs`/`rep stos`, and a guarded tail becomes masked moves,
// whose start-up cost more than a short row (the sort plan at V = 1e6, d = 4 ran
// 1.7-2.3x slower; docs/PERFORMANCE.md, "Short rows").
template <int W>
KOKKOS_INLINE_FUNCTION void move_block(float* dst, float const* src) {
  for (int m = 0; m < W; ++m) dst[m] = src[m];
}
template <int W>
KOKKOS_INLINE_FUNCTION void zero_block(float* dst) {
  for (int m = 0; m < W; ++m) dst[m] = 0.0f;
}
KOKKOS_INLINE_FUNCTION void copy_short(float* dst, float const* src, std::int64_t n) {
  std::int64_t k = 0;
  if (src == nullptr) {
    for (; k + 8 <= n; k += 8) zero_block<8>(dst + k);
    if (k + 4 <= n) zero_block<4>(dst + k), k += 4;
    if (k + 2 <= n) zero_block<2>(dst + k), k += 2;
    if (k < n) dst[k] = 0.0f;
    return;
  }
  for (; k + 8 <= n; k += 8) move_block<8>(dst + k, src + k);
  if (k + 4 <= n) move_block<4>(dst + k, src + k), k += 4;
  if (k + 2 <= n) move_block<2>(dst + k, src + k), k += 2;
  if (k < n) dst[k] = src[k];
}
// The same with ordinary stores, which leave an output that fits the cache in it.
KOKKOS_INLINE_FUNCTION int cached_copy(float* dst, float const* src, std::int64_t n) {
  copy_short(dst, src, n);
  int flag = 0;
  for (std::int64_t k = 0; k < n; ++k) flag |= non_finite(src[k]);  // from L1; dead where unused
  return flag;
}
KOKKOS_INLINE_FUNCTION void cached_zero(float* dst, std::int64_t n) {
  copy_short(dst, nullptr, n);
}
KOKKOS_INLINE_FUNCTION void stream_fence() {
#ifdef KEMBED_HOST_STREAM_STORES
  _mm_sfence();
#endif
}

// Host loops compiled twice on x86-64: for the baseline (SSE2) the build targets,
// and for AVX2 with FMA, picked at run time. Each is one IEEE addition per term in the
// same order, and a fused multiply-add only where the contract has one (fma_rn: a
// libm call in the baseline copy, an instruction here; kembed::core's public
// -ffp-contract=off fuses nothing else), so both give the same bits; AVX2 halves the instructions of the
// folds, which are not memory-bound when the gradient slice sits in cache (measured
// 20-25% at d = 512 on one core). Builds that already target AVX2 (-march=...) need
// no second copy, nor do builds with KEMBED_HOST_ISA_COPIES=OFF (CMake) want one.
#if defined(KEMBED_HOST_STREAM_STORES) && defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__) && \
    !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(__SYCL_DEVICE_ONLY__) &&                        \
    !defined(KEMBED_NO_HOST_ISA_COPIES)
#define KEMBED_HOST_AVX2_CLONES 1
// flatten: the body (and the view accessors it calls) is inlined here, so the
// compiler vectorises it for AVX2.
template <class Body>
__attribute__((target("avx2,fma"), flatten, noinline)) void run_avx2(Body const& body) {
  body();
}
// A third copy, for AVX-512 CPUs, of the bag forward only (run_wide): its 64-column
// tile is four registers instead of eight (1.1-1.2x at 32-128 positions a bag). The
// folds keep two copies (their build time), and run their AVX2 copy there.
template <class Body>
__attribute__((target("avx512f,avx512vl,avx2,fma"), flatten, noinline)) void run_avx512(Body const& body) {
  body();
}
#endif

enum class HostIsa { baseline, avx2, avx512 };

inline char const* name(HostIsa isa) {
  return isa == HostIsa::avx512 ? "avx512" : isa == HostIsa::avx2 ? "avx2" : "baseline";
}

// The best the CPU runs, unless KEMBED_HOST_ISA caps it ("baseline" takes the SSE2
// copy, e.g. to show two machines' runs differ for another reason; "avx2" leaves the
// AVX-512 copy out). Read at every call, before any kernel runs; a bad value is an
// InvalidArgument.
inline HostIsa host_isa() {
  char const* env = std::getenv("KEMBED_HOST_ISA");
  char const* const want = env ? env : "auto";  // no std::string: this runs on every call
  bool const baseline = std::strcmp(want, "baseline") == 0, avx2 = std::strcmp(want, "avx2") == 0;
  if (!baseline && !avx2 && std::strcmp(want, "auto") != 0 && std::strcmp(want, "avx512") != 0)
    throw InvalidArgument(
        "KEMBED_HOST_ISA",
        std::string("KEMBED_HOST_ISA must be 'auto', 'baseline', 'avx2' or 'avx512', got '") + want + "'");
#if defined(__AVX2__)
  return HostIsa::avx2;  // the whole build targets it: there is one copy
#elif defined(KEMBED_HOST_AVX2_CLONES)
  if (baseline || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return HostIsa::baseline;
  if (avx2 || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl")) return HostIsa::avx2;
  return HostIsa::avx512;
#else
  return HostIsa::baseline;
#endif
}

// Fills n floats from src (+0.0 where src is null) with 32-byte non-temporal stores:
// for a gradient too big for the cache, which glibc's memset streams on one host and
// not on another (issue 35's Intel host: a 256 MB memset 2.4x the bucket plan's
// streamed rows). On the Zen 4 guest these ran as fast as memset (49-73 GB/s against
// 51-71 at 64 MiB to 1 GiB; 16-byte stores 30-47). The caller fences.
#if defined(KEMBED_HOST_AVX2_CLONES) || (defined(KEMBED_HOST_STREAM_STORES) && defined(__AVX2__) && \
                                         defined(__x86_64__) && !defined(__CUDACC__) && !defined(__HIPCC__))
#define KEMBED_HOST_WIDE_STREAM 1
#ifdef KEMBED_HOST_AVX2_CLONES
#define KEMBED_WIDE_STREAM_TARGET __attribute__((target("avx2")))
#else
#define KEMBED_WIDE_STREAM_TARGET
#endif
KEMBED_WIDE_STREAM_TARGET inline void stream_fill_wide(float* dst, float const* src, std::int64_t n) {
  std::int64_t k = 0;
  for (; k < n && (reinterpret_cast<std::uintptr_t>(dst + k) & 31) != 0; ++k) dst[k] = src ? src[k] : 0.0f;
  if (src)
    for (; k + 8 <= n; k += 8) _mm256_stream_ps(dst + k, _mm256_loadu_ps(src + k));
  else
    for (; k + 8 <= n; k += 8) _mm256_stream_ps(dst + k, _mm256_setzero_ps());
  for (; k < n; ++k) dst[k] = src ? src[k] : 0.0f;
}
#endif
// Past the Zen 4 guest's 32 MiB L3 a start in cache is evicted before the terms come:
// streamed, 2 threads ran 1.1-1.8x faster at 51 MB, one thread 1.01-1.12x (issue 37).
inline constexpr std::int64_t start_stream_bytes = std::int64_t{32} << 20;

// Starts a contiguous host gradient from the carry (or +0.0) as each thread's memset
// or memcpy of its own rows, which stream past the cache where a loop's stores read
// each line first (256 MB on the Zen 4 guest: 6.5 ms against 13.4), from 32 MiB as
// 32-byte streamed stores wherever the CPU has them (stream_fill_wide). Returns false,
// writing nothing, where it does not apply (a device, a strided view): the caller's
// loop then starts the rows.
template <class ExecutionSpace, class Carry, class Grad>
bool start_host_gradient(ExecutionSpace const& space, Carry const& carry, Grad const& grad) {
  if constexpr (Tiles<ExecutionSpace>::host) {
    bool const has_carry = carry.data() != nullptr;
    if (!grad.span_is_contiguous() || (has_carry && !carry.span_is_contiguous())) return false;
    std::int64_t const v = grad.extent(0), d = grad.extent(1);
    std::int64_t const parts = space.concurrency() > 0 ? space.concurrency() : 1;
    float* const to = grad.data();
    float const* const from = carry.data();
#ifdef KEMBED_HOST_WIDE_STREAM
    std::int64_t const floats = start_stream_bytes / std::int64_t(sizeof(float));  // from 32 MiB, with AVX2
    bool const wide = d > 0 && v >= (floats + d - 1) / d && host_isa() != HostIsa::baseline;
#endif
    Kokkos::parallel_for("kembed::start_gradient", Range<ExecutionSpace>(space, 0, parts), [=](std::int64_t i) {
      std::int64_t const r0 = part_begin(v, parts, i), r1 = part_begin(v, parts, i + 1);
      std::size_t const at = std::size_t(r0) * std::size_t(d);
      std::size_t const bytes = std::size_t(r1 - r0) * std::size_t(d) * sizeof(float);
      if (bytes == 0) return;
#ifdef KEMBED_HOST_WIDE_STREAM
      if (wide) {
        stream_fill_wide(to + at, has_carry ? from + at : nullptr, std::int64_t(r1 - r0) * d);
        stream_fence();
        return;
      }
#endif
      if (has_carry)
        std::memcpy(to + at, from + at, bytes);
      else
        std::memset(to + at, 0, bytes);
    });
    return true;
  } else {
    (void)space, (void)carry, (void)grad;
    return false;
  }
}

// The copy the folds run: they have no AVX-512 copy (run_avx512), so its CPUs run AVX2.
inline HostIsa fold_isa(HostIsa isa) {
  return isa == HostIsa::avx512 ? HostIsa::avx2 : isa;
}

// Runs body() from the copy `isa` names (the only copy where there is one), for
// host code (benchmarks) whose body is not a device function.
template <class Body>
inline void run_host(HostIsa isa, Body const& body) {
#ifdef KEMBED_HOST_AVX2_CLONES
  if (fold_isa(isa) == HostIsa::avx2) {
    run_avx2(body);
    return;
  }
#endif
  (void)isa;
  body();
}

// As run_for, with the AVX-512 copy where `isa` names it (the bag forward). `body`
// takes the copy's vector width in floats (16, 8 or 4), as an integral constant.
template <class Body>
inline void run_wide(HostIsa isa, Body const& body) {
#ifdef KEMBED_HOST_AVX2_CLONES
  if (isa == HostIsa::avx512) {
    run_avx512([&] { body(std::integral_constant<int, 16>()); });
    return;
  }
  if (isa == HostIsa::avx2) {
    run_avx2([&] { body(std::integral_constant<int, 8>()); });
    return;
  }
  body(std::integral_constant<int, 4>());
#else
  (void)isa;
  body(std::integral_constant<int, 8>());  // one copy: as wide as the build targets, or lowered to it
#endif
}

// The same inside kernels, which also compile for devices (where there are no copies).
template <class Body>
KOKKOS_INLINE_FUNCTION void run_for(HostIsa isa, Body const& body) {
#ifdef KEMBED_HOST_AVX2_CLONES
  run_host(isa, body);
#else
  (void)isa;
  body();
#endif
}

// The same view without reference counting: a managed view's every copy (each
// lambda capture) is an atomic increment and decrement, which cost more than a
// small call's whole fold (38% of a one-position call's time, measured). For code
// that runs within one call, while the caller holds the managed view.
// Anything else (a bag's terms, detail::BagTerms) is passed as it is.
template <class View>
auto unmanaged(View const& v) {
  if constexpr (Kokkos::is_view<View>::value)
    return Kokkos::View<typename View::data_type, typename View::array_layout, typename View::memory_space,
                        Kokkos::MemoryUnmanaged>(v.data(), v.layout());
  else
    return v;
}

// Labels the region a path runs in, so Kokkos tools show which path ran.
class ScopedRegion {
 public:
  explicit ScopedRegion(std::string const& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(ScopedRegion const&) = delete;
  ScopedRegion& operator=(ScopedRegion const&) = delete;
};

}  // namespace kembed::detail
