#pragma once
// Chunks of kembed's own layout read and written past HDF5's filter pipeline, with
// HDF5's Fletcher-32 checksum computed eight words at a time. HDF5's own checksum loop
// (one word at a time) and the pipeline's extra copy of each chunk were most of the
// time a job spent reading its batch (docs/PERFORMANCE.md, "The whole job").
#include <cstddef>
#include <cstdint>

#include <hdf5.h>

namespace kembed::io::detail {

// Bit for bit the checksum HDF5 stores after each chunk (H5_checksum_fletcher32):
// 16-bit big-endian words, sums of 32 bits that wrap, folded every 360 words.
std::uint32_t fletcher32(void const* data, std::size_t bytes);

// Reads rows [first, first + count) of a chunked dataset stored as kembed writes
// them (chunks of whole rows, the one filter fletcher32, the file's type `memtype`)
// chunk by chunk past HDF5's filter pipeline: each chunk's stored bytes go straight
// into `out` (through a scratch buffer where only part of it is wanted) and its
// checksum is checked here. HDF5's pipeline checks one word at a time and copies each
// chunk once more. unsuitable: the dataset is not like that (nothing was read; read it
// with HDF5); damaged: a chunk's checksum does not match or a chunk cannot be read.
enum class DirectRead { done, unsuitable, damaged };
DirectRead read_rows_direct(hid_t dataset, hid_t memtype, std::int64_t first, std::int64_t count, void* out);

// Writes the whole chunks among rows [first, first + count) of such a dataset
// straight to the file with their checksum (H5Dwrite_chunk), the bytes HDF5's
// pipeline would store; the rows before `done_from` and from `done_to` on (parts of
// chunks) are the caller's to write through HDF5 (all of them where the dataset is
// not kembed's layout: done_from == done_to). ok false: HDF5 failed, its error on the stack.
struct DirectWrite {
  bool ok;
  std::int64_t done_from, done_to;
  std::size_t row_bytes;
};
DirectWrite write_rows_direct(hid_t dataset, hid_t memtype, std::int64_t first, std::int64_t count,
                              void const* data);

}  // namespace kembed::io::detail
