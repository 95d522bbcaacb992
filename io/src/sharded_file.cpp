#include "sharded_file.hpp"

#include <kembed/io/error.hpp>
#if defined(KEMBED_IO_PARALLEL)
#include <kembed/io/collective.hpp>
#endif

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace kembed::io::detail {
namespace {

#if defined(KEMBED_IO_PARALLEL)

// Every rank learns the first failing rank's problem (or that none failed).
std::string first_problem(Collective const& c, std::string const& mine) {
  int rank = 0;
  MPI_Comm_rank(c.comm, &rank);
  int const bad = mine.empty() ? INT32_MAX : rank;
  int first = INT32_MAX;
  MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, c.comm);
  if (first == INT32_MAX) return {};
  long long length = first == rank ? static_cast<long long>(mine.size()) : 0;
  MPI_Bcast(&length, 1, MPI_LONG_LONG, first, c.comm);
  std::string text = first == rank ? mine : std::string(static_cast<std::size_t>(length), ' ');
  MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, first, c.comm);
  return "rank " + std::to_string(first) + ": " + text;
}

std::string broadcast(Collective const& c, std::string text) {
  long long length = static_cast<long long>(text.size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, c.comm);
  text.resize(static_cast<std::size_t>(length));
  MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, c.comm);
  return text;
}
#endif

// Every rank's (or the one process's) rows into the closed, unpublished file at `temp`.
void write_rows_into(std::string const& temp, std::vector<SlabDataset> const& datasets, RowSlab const& slab,
                     Collective const* collective) {
  h5::Handle fapl = access_list(collective);
  h5::Handle f = h5::file(H5Fopen(temp.c_str(), H5F_ACC_RDWR, fapl));
  if (!f.valid()) throw std::runtime_error("opening it again failed: " + h5::error_text());
  h5::Handle dxpl = transfer_list(collective);
  hid_t const transfer = collective ? hid_t(dxpl) : H5P_DEFAULT;
  for (auto const& d : datasets) {
    h5::Handle dset = h5::dataset(H5Dopen2(f, d.name, H5P_DEFAULT));
    if (!dset.valid()) throw std::runtime_error(std::string("opening dataset '") + d.name + "' failed");
    // Many ranks write in pieces of at most 64 MiB a rank: a filtered collective write
    // holds its whole selection's chunks in memory, which would double a rank's rows.
    std::int64_t const row_bytes = std::int64_t(H5Tget_size(d.mem_type)) * std::max<std::int64_t>(d.cols, 1);
    std::int64_t const piece = collective ? std::max<std::int64_t>(1, (std::int64_t{64} << 20) / row_bytes)
                                          : std::max<std::int64_t>(1, slab.count);
    std::int64_t most = (slab.count + piece - 1) / piece;
#if defined(KEMBED_IO_PARALLEL)
    if (collective) {  // every rank calls as often
      std::int64_t const pieces = most;
      MPI_Allreduce(&pieces, &most, 1, MPI_INT64_T, MPI_MAX, collective->comm);
    }
#endif
    auto const* bytes = static_cast<char const*>(d.mine);
    for (std::int64_t k = 0; k < most; ++k) {
      std::int64_t const at = std::min(k * piece, slab.count), n = std::min(piece, slab.count - at);
      write_block(dset, d.name, d.mem_type, slab.first + at, n, bytes ? bytes + at * row_bytes : nullptr, transfer);
    }
  }
  if (H5Fclose(f.release()) < 0) throw std::runtime_error("closing it failed: " + h5::error_text());
}

}  // namespace

int rank_in(Collective const* c) {
  int rank = 0;
#if defined(KEMBED_IO_PARALLEL)
  if (c) MPI_Comm_rank(c->comm, &rank);
#else
  (void)c;
#endif
  return rank;
}

std::string problem_of(std::string const& path, IoFailure const& e) {
  std::string const text = e.message();
  return text.rfind(path + ": ", 0) == 0 ? text.substr(path.size() + 2) : text;
}

void agree_on_problem(std::string const& path, std::string const& problem, Collective const* collective) {
#if defined(KEMBED_IO_PARALLEL)
  if (collective) {
    auto const first = first_problem(*collective, problem);
    if (!first.empty()) throw IoFailure(path, first);
    return;
  }
#else
  (void)collective;
#endif
  if (!problem.empty()) throw IoFailure(path, problem);
}

std::string broadcast_text(Collective const* collective, std::string text) {
#if defined(KEMBED_IO_PARALLEL)
  if (collective) return broadcast(*collective, std::move(text));
#else
  (void)collective;
#endif
  return text;
}

SlabDataset float_rows(char const* name, std::int64_t rows, std::int64_t cols, float const* mine) {
  SlabDataset d;
  d.name = name;
  d.file_type = H5T_IEEE_F32LE;
  d.mem_type = H5T_NATIVE_FLOAT;
  d.rows = rows;
  d.cols = cols;
  d.mine = mine;
  return d;
}

SlabDataset int64_rows(char const* name, std::int64_t rows, std::int64_t const* mine) {
  SlabDataset d;
  d.name = name;
  d.file_type = H5T_STD_I64LE;
  d.mem_type = H5T_NATIVE_INT64;
  d.rows = rows;
  d.cols = 0;
  d.mine = mine;
  return d;
}

void write_slabs(std::string const& path, std::string const& what, std::function<void(hid_t root)> const& header,
                 std::vector<SlabDataset> const& datasets, RowSlab const& slab, SaveOptions const& options,
                 Collective const* collective, std::string const& bad_input) {
  require_parallel(collective);
  int const rank = rank_in(collective);
#if defined(KEMBED_IO_PARALLEL)
  if (collective) {
    auto const first = first_problem(*collective, bad_input);
    if (!first.empty()) throw InvalidArgument("rows", first);
  }
#endif
  if (!bad_input.empty()) throw InvalidArgument("rows", bad_input);
  std::optional<StreamingFile> file;  // the first rank's: its destructor removes an unpublished file
  std::string problem;
  auto step = [&](auto&& f) {
    try {
      writing(path, what, f);
    } catch (IoFailure const& e) {
      problem = problem_of(path, e);
    }
  };
  // Rank 0 creates the datasets and the header and closes the file; then every rank
  // (or the one process) reopens it and writes its rows. One order of allocations, so
  // one process and any number of ranks lay out the same bytes.
  if (rank == 0) step([&] {
      file.emplace(path);
      for (auto const& d : datasets) file->create(d.name, d.file_type, d.rows, d.cols, options);
      header(file->root());
      file->close();
    });
  auto agree = [&] { agree_on_problem(path, problem, collective); };
  agree();
  std::string const temp = broadcast_text(collective, rank == 0 ? file->temp_path() : std::string());
  step([&] { write_rows_into(temp, datasets, slab, collective); });
  agree();
  if (rank == 0) step([&] { file->commit(); });
  agree();
}

}  // namespace kembed::io::detail
