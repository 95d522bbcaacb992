// libFuzzer target: every kembed loader on a file made of the fuzzer's bytes.
// A kembed::Error (FileError, IoFailure, InvalidArgument) is the right answer to a
// bad file; anything else escaping a loader, a crash, a hang or a leak is a bug.
//   scripts/fuzz.sh [SECONDS]   builds build/fuzz and runs this on tests/fuzz/corpus
#include <kembed/core/error.hpp>
#include <kembed/io/check.hpp>
#include <kembed/io/describe.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/row_reader.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/summary.hpp>
#include <kembed/io/table_file.hpp>

#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

std::string const& input_path() {
  static std::string const path = [] {
    char const* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/kembed-fuzz-" + std::to_string(::getpid()) + ".h5";
  }();
  return path;
}

template <class F>
void refused_or_read(F&& load) {
  try {
    load();
  } catch (kembed::Error const&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  auto const& path = input_path();
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  using namespace kembed::io;
  refused_or_read([&] { describe_file(path); });
  refused_or_read([&] { file_format(path); });
  refused_or_read([&] { read_run_header(path); });
  refused_or_read([&] { read_run(path, false); });
  refused_or_read([&] { read_run(path, true, true); });
  refused_or_read([&] { read_run_gradient_sha256(path); });
  refused_or_read([&] { read_summary(path); });
  refused_or_read([&] {  // what the inspector reads when zoomed in: the first and last rows
    RowReader rows(path);
    std::vector<float> row(static_cast<std::size_t>(std::min<std::int64_t>(rows.cols(), 1 << 20)));
    if (rows.cols() > (1 << 20)) return;
    rows.read(0, 1, row.data());
    rows.read(rows.rows() - 1, 1, row.data());
  });
  refused_or_read([&] { load_table(path); });
  refused_or_read([&] { load_rows(path, 1, 2); });
  refused_or_read([&] { read_table_dataset(path, "weight"); });
  refused_or_read([&] { read_table_dataset(path, "/gradient", true); });
  refused_or_read([&] { read_checkpoint(path, false); });
  refused_or_read([&] { read_checkpoint(path); });
  refused_or_read([&] { check_file(path); });  // kembed info --check: every digest, in pieces
  refused_or_read([&] {
    BatchReader batch(path);
    auto const& info = batch.info();
    auto const n = std::min<std::int64_t>(info.positions, 4096);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
    std::vector<float> dy(static_cast<std::size_t>(n * info.dim));
    batch.read(0, n, ids.data(), dy.data());  // a bag batch refuses dy by position: its dy is per bag
  });
  refused_or_read([&] {  // a bag batch, as the jobs read it: offsets and dy by bags, weights by positions
    BatchReader batch(path);
    auto const& info = batch.info();
    if (info.bags == 0) return;
    auto const b = std::min<std::int64_t>(info.bags, 4096), n = std::min<std::int64_t>(info.positions, 4096);
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(b + 1));
    std::vector<float> dy(static_cast<std::size_t>(b * info.dim)), weights(static_cast<std::size_t>(n));
    batch.read_bags(0, b, offsets.data(), dy.data());
    if (info.weighted) batch.read_weights(0, n, weights.data());
  });
  refused_or_read([&] {
    BatchReader ids_only(path, false);
    std::int64_t id = 0;
    ids_only.read(ids_only.info().positions - 1, 1, &id, nullptr);
  });
  std::remove(path.c_str());
  return 0;
}
