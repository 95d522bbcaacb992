#pragma once
// What a batch program says about itself and its numbers (the job's log, the CLI).
#include <cstdint>
#include <string>

namespace kembed::job {

// "1,234,567".
std::string with_commas(std::int64_t n);
// Peak resident memory of this process (VmHWM), in bytes; 0 where unknown.
std::int64_t peak_rss_bytes();

}  // namespace kembed::job
