#pragma once
// HDF5's Fletcher-32 chunk checksum, computed eight words at a time. The job reads
// every chunk of a batch through it, and HDF5's own loop (one word at a time) was
// the largest part of reading one (docs/PERFORMANCE.md, "The whole job").
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

}  // namespace kembed::io::detail
