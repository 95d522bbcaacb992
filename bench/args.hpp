#pragma once
// Command-line parsing the benchmarks share: "--flag VALUE" pairs and lists of
// numbers ("1e4,1e5", each at least 1).
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kembed::bench {

inline std::vector<long long> parse_list(std::string const& text, char const* flag) {
  std::vector<long long> out;
  std::stringstream in(text);
  for (std::string word; std::getline(in, word, ',');) {
    char* end = nullptr;
    double const x = std::strtod(word.c_str(), &end);
    if (end == word.c_str() || *end != '\0' || x < 1 || x > 1e12)
      throw std::invalid_argument(std::string(flag) + " wants numbers >= 1 separated by commas, got '" + word + "'");
    out.push_back(static_cast<long long>(x));
  }
  return out;
}

// Calls on(flag, value) for each argument; value() takes the next one (or throws).
template <class On>
void for_each_option(int argc, char** argv, On&& on) {
  for (int i = 1; i < argc; ++i) {
    std::string const flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    on(flag, value);
  }
}

}  // namespace kembed::bench
