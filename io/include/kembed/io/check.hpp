#pragma once
// Every digest and invariant a kembed file carries, verified by reading its data in
// pieces, so that memory stays bounded whatever the file declares (`kembed info
// --check`). docs/FORMAT.md lists what each format's digests cover.
#include <string>
#include <vector>

namespace kembed::io {

struct CheckReport {
  std::string format;
  std::vector<std::string> verified;    // what was checked and held, a line each
  std::vector<std::string> unverified;  // what the file carries no digest or check for
};

// Throws FileError on the first thing that does not hold.
CheckReport check_file(std::string const& path);

struct RunFile;  // <kembed/io/run_file.hpp>
// That the run file's stored summary (if any) is `run`'s (read with its gradient):
// its summary_sha256 where it has one, and recomputed from the gradient (a summary
// whose digest was recomputed after an edit still fails). Returns false when the
// file has no summary.
bool check_run_summary(std::string const& path, RunFile const& run);

// Refuses (FileError naming `path`) holding `bytes` beyond this machine's memory,
// saying what for: a check before a reader allocates what a file's sizes ask.
void check_memory(std::string const& path, std::string const& what, double bytes);

}  // namespace kembed::io
