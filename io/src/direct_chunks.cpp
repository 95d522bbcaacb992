#include "direct_chunks.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kembed::io::detail {
namespace {

void fold(std::uint32_t& sum) { sum = (sum & 0xffff) + (sum >> 16); }

// Over one block of 360 words w_i: s1 = sum of w_i and s2 = sum of (360 - i) w_i,
// modulo 2^32. Eight lanes j each run the word-at-a-time recurrence over the words
// i = 8k + j; as 360 - i = 8 (45 - k) - j, s2 = 8 sum_j b_j - sum_j j a_j.
void block360(unsigned char const* p, std::uint32_t& s1, std::uint32_t& s2) {
  std::uint32_t a[8] = {}, b[8] = {};
#if defined(__SSE2__)
  __m128i const zero = _mm_setzero_si128();
  __m128i a_lo = zero, a_hi = zero, b_lo = zero, b_hi = zero;
  for (int k = 0; k < 45; ++k) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<__m128i const*>(p + 16 * k));
    x = _mm_or_si128(_mm_slli_epi16(x, 8), _mm_srli_epi16(x, 8));  // big-endian words
    a_lo = _mm_add_epi32(a_lo, _mm_unpacklo_epi16(x, zero));
    a_hi = _mm_add_epi32(a_hi, _mm_unpackhi_epi16(x, zero));
    b_lo = _mm_add_epi32(b_lo, a_lo);
    b_hi = _mm_add_epi32(b_hi, a_hi);
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(a), a_lo);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(a + 4), a_hi);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(b), b_lo);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(b + 4), b_hi);
#else
  for (int k = 0; k < 45; ++k)
    for (int j = 0; j < 8; ++j) {
      unsigned char const* w = p + 2 * (8 * k + j);
      a[j] += (std::uint32_t(w[0]) << 8) | w[1];
      b[j] += a[j];
    }
#endif
  std::uint32_t sa = 0, sb = 0, ja = 0;
  for (int j = 0; j < 8; ++j) sa += a[j], sb += b[j], ja += std::uint32_t(j) * a[j];
  s1 = sa;
  s2 = 8 * sb - ja;
}

}  // namespace

std::uint32_t fletcher32(void const* data, std::size_t bytes) {
  auto const* p = static_cast<unsigned char const*>(data);
  std::size_t words = bytes / 2;
  std::uint32_t sum1 = 0, sum2 = 0;
  while (words > 0) {
    std::size_t const n = std::min<std::size_t>(words, 360);
    words -= n;
    if (n == 360) {
      std::uint32_t s1 = 0, s2 = 0;
      block360(p, s1, s2);
      sum2 += 360u * sum1 + s2;  // the recurrence's 360 steps at once, modulo 2^32 as its own
      sum1 += s1;
      p += 720;
    } else {
      for (std::size_t i = 0; i < n; ++i, p += 2) {
        sum1 += (std::uint32_t(p[0]) << 8) | p[1];
        sum2 += sum1;
      }
    }
    fold(sum1), fold(sum2);
  }
  if (bytes % 2) {
    sum1 += std::uint32_t(*p) << 8;
    sum2 += sum1;
    fold(sum1), fold(sum2);
  }
  fold(sum1), fold(sum2);
  return (sum2 << 16) | sum1;
}

namespace {
// The checksum HDF5 stored after a chunk (little-endian). Files written before HDF5
// 1.6.3 may hold it with each half's two bytes swapped; HDF5 accepts both, and so do we.
bool checksum_matches(unsigned char const* chunk, std::size_t bytes) {
  unsigned char const* t = chunk + bytes;
  std::uint32_t const stored =
      std::uint32_t(t[0]) | std::uint32_t(t[1]) << 8 | std::uint32_t(t[2]) << 16 | std::uint32_t(t[3]) << 24;
  std::uint32_t const sum = fletcher32(chunk, bytes);
  return stored == sum || stored == (((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu));
}

struct Handle {  // closes an HDF5 id of the kind given
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};
// The dataset's layout where it is kembed's own (see read_rows_direct); nullopt otherwise.
struct Layout {
  std::int64_t chunk_rows = 0, rows = 0;
  std::size_t row_bytes = 0, chunk_bytes = 0;
};
std::optional<Layout> own_layout(hid_t dataset, hid_t memtype) {
  Handle const dcpl{H5Dget_create_plist(dataset), H5Pclose};
  Handle const type{H5Dget_type(dataset), H5Tclose};
  Handle const space{H5Dget_space(dataset), H5Sclose};
  if (dcpl.id < 0 || type.id < 0 || space.id < 0 || H5Pget_layout(dcpl.id) != H5D_CHUNKED) return std::nullopt;
  unsigned flags = 0, config = 0;
  std::size_t nvalues = 0;
  if (H5Pget_nfilters(dcpl.id) != 1 ||
      H5Pget_filter2(dcpl.id, 0, &flags, &nvalues, nullptr, 0, nullptr, &config) != H5Z_FILTER_FLETCHER32 ||
      H5Tequal(type.id, memtype) <= 0)
    return std::nullopt;
  int const rank = H5Sget_simple_extent_ndims(space.id);
  hsize_t dims[2] = {}, chunk[2] = {};
  if (rank < 1 || rank > 2 || H5Sget_simple_extent_dims(space.id, dims, nullptr) != rank ||
      H5Pget_chunk(dcpl.id, rank, chunk) != rank || chunk[0] == 0 || (rank == 2 && chunk[1] != dims[1]))
    return std::nullopt;
  Layout l;
  l.row_bytes = H5Tget_size(memtype) * (rank == 2 ? std::size_t(dims[1]) : 1);
  // kembed writes chunks of about 1 MiB; a file that declares far larger ones (or
  // sizes that overflow) is left to HDF5 rather than given a scratch buffer that big.
  std::size_t const largest = std::size_t(64) << 20;
  if (l.row_bytes == 0 || l.row_bytes > largest || chunk[0] > largest / l.row_bytes || dims[0] > hsize_t(INT64_MAX))
    return std::nullopt;
  l.chunk_rows = std::int64_t(chunk[0]);
  l.chunk_bytes = std::size_t(l.chunk_rows) * l.row_bytes;
  l.rows = std::int64_t(dims[0]);
  return l;
}

thread_local std::vector<unsigned char> scratch;  // one chunk and its checksum

}  // namespace

DirectRead read_rows_direct(hid_t dataset, hid_t memtype, std::int64_t first, std::int64_t count, void* out) {
  auto const layout = count > 0 ? own_layout(dataset, memtype) : std::nullopt;
  if (!layout || first < 0 || first + count > layout->rows) return DirectRead::unsuitable;
  auto const [chunk_rows, rows, row_bytes, chunk_bytes] = *layout;
  auto* const to = static_cast<unsigned char*>(out);
  for (std::int64_t c = first / chunk_rows; c * chunk_rows < first + count; ++c) {
    std::int64_t const row0 = c * chunk_rows;
    std::int64_t const lo = std::max(first, row0), hi = std::min(first + count, row0 + chunk_rows);
    hsize_t const offset[2] = {hsize_t(row0), 0};
    hsize_t stored = 0;
    if (H5Dget_chunk_storage_size(dataset, offset, &stored) < 0 || stored != chunk_bytes + 4)
      return DirectRead::unsuitable;  // a chunk stored otherwise (a filter skipped, say): HDF5 knows
    // A whole chunk is read in place; its 4 checksum bytes land on the next row of
    // `out`, which the next chunk then fills, so the last chunk goes through scratch.
    bool const in_place = lo == row0 && hi == row0 + chunk_rows && hi < first + count && row_bytes >= 4;
    unsigned char* into = to + std::size_t(lo - first) * row_bytes;
    if (!in_place) {
      scratch.resize(chunk_bytes + 4);
      into = scratch.data();
    }
    std::uint32_t skipped = 0;
    if (H5Dread_chunk(dataset, H5P_DEFAULT, offset, &skipped, into) < 0) return DirectRead::damaged;
    if (skipped != 0) return DirectRead::unsuitable;
    if (!checksum_matches(into, chunk_bytes)) return DirectRead::damaged;
    if (!in_place)
      std::memcpy(to + std::size_t(lo - first) * row_bytes, scratch.data() + std::size_t(lo - row0) * row_bytes,
                  std::size_t(hi - lo) * row_bytes);
  }
  return DirectRead::done;
}

DirectWrite write_rows_direct(hid_t dataset, hid_t memtype, std::int64_t first, std::int64_t count,
                              void const* data) {
  auto const layout = count > 0 ? own_layout(dataset, memtype) : std::nullopt;
  if (!layout || first < 0 || first + count > layout->rows) return DirectWrite{true, first, first, 0};
  auto const [chunk_rows, rows, row_bytes, chunk_bytes] = *layout;
  (void)rows;
  // The whole chunks inside [first, first + count); the rows around them are HDF5's.
  std::int64_t const lo = (first + chunk_rows - 1) / chunk_rows * chunk_rows;
  std::int64_t const hi = (first + count) / chunk_rows * chunk_rows;
  if (lo >= hi) return DirectWrite{true, first, first, row_bytes};
  auto const* from = static_cast<unsigned char const*>(data);
  scratch.resize(chunk_bytes + 4);
  for (std::int64_t row0 = lo; row0 < hi; row0 += chunk_rows) {
    std::memcpy(scratch.data(), from + std::size_t(row0 - first) * row_bytes, chunk_bytes);
    std::uint32_t const sum = fletcher32(scratch.data(), chunk_bytes);
    for (int i = 0; i < 4; ++i) scratch[chunk_bytes + std::size_t(i)] = static_cast<unsigned char>(sum >> (8 * i));
    hsize_t const offset[2] = {hsize_t(row0), 0};
    if (H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, offset, chunk_bytes + 4, scratch.data()) < 0)
      return DirectWrite{false, lo, row0, row_bytes};  // the caller reports HDF5's error
  }
  return DirectWrite{true, lo, hi, row_bytes};
}

}  // namespace kembed::io::detail
