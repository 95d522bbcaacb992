// kembed make-batch / make-table: inputs for tests and demos. A batch's ids come
// from a token stream (a text file of ids, repeated if asked) or a Zipf(1.1)
// stream; dy is drawn from the seed. Both are written in blocks, crash-safely.
// A bag batch cuts the positions into bags (at random points or every L positions)
// and draws one dy row per bag, and weights in [-1, 1) if asked.
#include "commands.hpp"

#include <cstdlib>
#include "console.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/table_file.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace kembed::cli {
namespace {

std::vector<std::int64_t> read_tokens(std::string const& path) {
  std::ifstream in(path);
  if (!in) throw io::FileError(path, "", "cannot be opened");
  std::vector<std::int64_t> ids;
  std::string word;
  while (in >> word) {
    std::size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (std::exception const&) {
      used = 0;
    }
    if (used != word.size() || id < 0)
      throw io::FileError(path, "",
                          "holds '" + word + "' at token " + std::to_string(ids.size()) +
                              "; a token stream is whitespace-separated non-negative integer ids");
    ids.push_back(id);
  }
  if (ids.empty()) throw io::FileError(path, "", "holds no tokens");
  return ids;
}

// Bag b's first position: B - 1 cuts drawn uniformly in [0, T] and sorted (so bags
// vary in size and some are empty), or every L positions.
std::vector<std::int64_t> bag_offsets(MakeBatchArgs const& a, std::int64_t t, synthetic::Rng& rng) {
  std::vector<std::int64_t> offsets;
  if (a.bag_size > 0) {
    for (std::int64_t p = 0; p < t; p += a.bag_size) offsets.push_back(p);
  } else {
    offsets.push_back(0);
    for (std::int64_t b = 1; b < a.bags; ++b) offsets.push_back(rng.below(t + 1));
    std::sort(offsets.begin(), offsets.end());
  }
  return offsets;
}

// A bag batch: ids as a batch of positions has them, offsets, one dy row per bag and,
// with --weighted, a weight per position; written in blocks of 64 Ki.
int make_bags(MakeBatchArgs const& a, std::vector<std::int64_t> const& stream, std::int64_t t,
              io::BatchMeta const& meta) {
  if ((a.bags > 0) == (a.bag_size > 0) || a.bags < 0 || a.bag_size < 0)
    throw InvalidArgument("bags", "give one of --bags B (random cuts) or --bag-size L (every L positions), >= 1");
  synthetic::Rng rng(a.seed);
  auto const offsets = bag_offsets(a, t, rng);
  std::int64_t const b = std::int64_t(offsets.size()), cycle = std::int64_t(stream.size()), block = 1 << 16;
  io::BatchWriter out(a.out, t, a.dim, meta, {}, io::BagShape{b, a.weighted});
  std::vector<std::int64_t> ids(std::size_t(std::min(block, t)));
  std::vector<float> values(std::size_t(std::min(block, std::max(t, b)) * a.dim));
  Progress progress("make-batch", t + b, 0, "ids and bags");
  for (std::int64_t p = 0; p < t; p += block) {
    std::int64_t const n = std::min(block, t - p);
    for (std::int64_t i = 0; i < n; ++i) ids[std::size_t(i)] = stream[std::size_t((p + i) % cycle)];
    out.write(p, n, ids.data(), nullptr);
    progress.update(p + n);
  }
  for (std::int64_t first = 0; first < b; first += block) {
    std::int64_t const n = std::min(block, b - first);
    for (std::int64_t i = 0; i < n * a.dim; ++i) values[std::size_t(i)] = rng.uniform_float();
    out.write_bags(first, n, offsets.data() + first, values.data());
    progress.update(t + first + n);
  }
  for (std::int64_t p = 0; a.weighted && p < t; p += block) {
    std::int64_t const n = std::min(block, t - p);
    for (std::int64_t i = 0; i < n; ++i) values[std::size_t(i)] = rng.uniform_float();
    out.write_weights(p, n, values.data());
  }
  progress.finish();
  out.commit();
  std::printf("batch:      %s (%s bags over %s positions%s, d = %lld, ids in [0, %lld), %s)\n", a.out.c_str(),
              with_commas(b).c_str(), with_commas(t).c_str(), a.weighted ? ", weighted" : "", (long long)a.dim,
              (long long)meta.num_embeddings, meta.source.c_str());
  return Exit::ok;
}

}  // namespace

int make_batch(MakeBatchArgs const& a) {
  if (a.dim < 1) throw InvalidArgument("dim", "--dim must be at least 1, got " + std::to_string(a.dim));
  if (a.repeat < 1) throw InvalidArgument("repeat", "--repeat must be at least 1, got " + std::to_string(a.repeat));
  if (a.tokens.empty() == (a.zipf_rows == 0))
    throw InvalidArgument("tokens", "give exactly one source of ids: --tokens FILE or --zipf ROWS");
  std::vector<std::int64_t> stream;
  std::string source;
  if (!a.tokens.empty()) {
    stream = read_tokens(a.tokens);
    source = "tokens " + a.tokens + (a.repeat > 1 ? " x" + std::to_string(a.repeat) : "");
  } else {
    if (a.positions < 1) throw InvalidArgument("positions", "--zipf needs --positions T >= 1");
    stream = synthetic::zipf_ids(a.zipf_rows, a.positions, 1.1, a.seed);
    source = "zipf s=1.1 over " + std::to_string(a.zipf_rows) + " rows, seed " + std::to_string(a.seed);
  }
  std::int64_t const cycle = static_cast<std::int64_t>(stream.size());
  std::int64_t const t = a.positions > 0 ? a.positions : cycle * a.repeat;
  std::int64_t const max_id = *std::max_element(stream.begin(), stream.end());
  if (a.vocab > 0 && max_id >= a.vocab)
    throw InvalidArgument("vocab",
                          "the ids reach " + std::to_string(max_id) + ", beyond --vocab " + std::to_string(a.vocab));
  io::BatchMeta meta{a.vocab > 0 ? a.vocab : max_id + 1, source, a.seed};
  if (a.bags > 0 || a.bag_size > 0) return make_bags(a, stream, t, meta);
  if (a.weighted) throw InvalidArgument("weighted", "--weighted weights bags: give --bags B or --bag-size L");
  io::BatchWriter out(a.out, t, a.dim, meta);
  synthetic::Rng rng(a.seed);
  std::int64_t const block = 1 << 16;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(std::min(block, t)));
  std::vector<float> dy(static_cast<std::size_t>(std::min(block, t) * a.dim));
  Progress progress("make-batch", t);
  for (std::int64_t p = 0; p < t; p += block) {
    std::int64_t const n = std::min(block, t - p);
    for (std::int64_t i = 0; i < n; ++i) ids[i] = stream[(p + i) % cycle];
    // One generator for the whole batch: the same seed gives the same dy at any block size.
    for (std::int64_t i = 0; i < n * a.dim; ++i) dy[i] = rng.uniform_float();
    out.write(p, n, ids.data(), dy.data());
    progress.update(p + n);
  }
  progress.finish();
  out.commit();
  std::printf("batch:      %s (%s positions, d = %lld, ids in [0, %lld), %s)\n", a.out.c_str(), with_commas(t).c_str(),
              (long long)a.dim, (long long)meta.num_embeddings, source.c_str());
  return Exit::ok;
}

int make_table(MakeTableArgs const& a) {
  auto const config = make_config(a.rows, a.dim, a.options);
  auto const weight = synthetic::uniform_floats(a.rows * a.dim, a.seed);
  io::save_table(a.out, weight.data(), config);
  std::printf("table:      %s (%s x %lld, seed %llu)\n", a.out.c_str(), with_commas(a.rows).c_str(), (long long)a.dim,
              (unsigned long long)a.seed);
  return Exit::ok;
}

}  // namespace kembed::cli
