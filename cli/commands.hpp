#pragma once
// The subcommands of `kembed`. Each returns an exit status (console.hpp) and
// throws kembed errors for main() to report.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <kembed/job/settings.hpp>

namespace kembed::cli {

// backward and forward take the job's own settings, typed as main.cpp parses them.
using BackwardArgs = job::BackwardSettings;
using ForwardArgs = job::ForwardSettings;
using StepArgs = job::StepSettings;

struct DiffArgs {
  std::string a, b;
  bool json = false;
  std::int64_t rows = 10;  // differing rows listed
};

struct MakeBatchArgs {
  std::string out;
  std::string tokens;          // a text file of whitespace-separated ids
  std::int64_t zipf_rows = 0;  // or a Zipf(1.1) stream over this many rows
  std::int64_t positions = 0;  // 0: the whole token stream
  std::int64_t repeat = 1;     // the token stream this many times
  std::int64_t dim = 0;
  std::int64_t vocab = 0;  // 0: the largest id + 1
  std::uint64_t seed = 1;
  std::int64_t bags = 0;      // a bag batch of B bags cut at random points (dy per bag)
  std::int64_t bag_size = 0;  // or of bags of L positions (the last may be shorter)
  bool weighted = false;      // a bag batch with per_sample_weights
};

struct MakeTableArgs {
  std::string out;
  std::int64_t rows = 0, dim = 0;
  std::uint64_t seed = 1;
  Options options;  // what the file stores
};

struct ImportArgs {
  std::string from, dataset, out;  // dataset "": the file's only 2-D float dataset
  bool convert = false;            // round float64/float16 to float32
  bool deflate = false;
  Options options;  // what the file stores
};

// Backend-dependent commands, run on the execution space `Space`.
template <class Space>
int backward(BackwardArgs const& args);
template <class Space>
int forward(ForwardArgs const& args);
template <class Space>
int step(StepArgs const& args);

int diff(DiffArgs const& args);
// With `check`, every digest and invariant is verified too (io::check_file).
int info(std::string const& path, bool check = false);
int make_batch(MakeBatchArgs const& args);
int make_table(MakeTableArgs const& args);
int import_table(ImportArgs const& args);

}  // namespace kembed::cli
