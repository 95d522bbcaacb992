#pragma once
// How a team's ranks agree on an error (kembed/job/team.hpp, agree()): the failure of
// one rank as text that every rank can rethrow as the same kembed error.
#include <exception>
#include <string>

namespace kembed::job {

// kind 0 bad input (kembed::Error), 1 a failed write (io::IoFailure, with its path),
// 2 out of memory, 3 anything else.
struct Failure {
  int kind = -1;  // -1: none
  std::string path, message;
};
Failure describe(std::exception_ptr error);
[[noreturn]] void rethrow(Failure const& failure);

}  // namespace kembed::job
