// kembed info: what a file holds, its format and provenance (io::file_info, which
// the inspector's Info view shows too).
#include "commands.hpp"
#include "console.hpp"

#include <kembed/io/describe.hpp>

#include <cstdio>

namespace kembed::cli {

int info(std::string const& path, bool check) {
  std::fputs(io::info_text(io::file_info(path)).c_str(), stdout);
  // The account first: a check that fails (it throws) then follows what was read.
  if (check) std::fputs(io::info_text(io::check_section(path)).c_str(), stdout);
  return Exit::ok;
}

}  // namespace kembed::cli
