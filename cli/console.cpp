#include "console.hpp"

#include <kembed/io/describe.hpp>
#include <kembed/job/process.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace kembed::cli {

Console& Console::get() {
  static Console console;
  return console;
}

Console::Console() {
  tty_err_ = ::isatty(2) != 0;
  tty_out_ = ::isatty(1) != 0;
  char const* no_colour = std::getenv("NO_COLOR");
  char const* term = std::getenv("TERM");
  colour_ = (no_colour == nullptr || *no_colour == '\0') && !(term && std::string(term) == "dumb");
}

void Console::log(std::string const& text) const {
  if (quiet_ || muted_) return;
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
}

void Console::error(std::string const& text) const {
  if (muted_) return;
  bool const red = colour_ && tty_err_;
  std::fprintf(stderr, "%skembed: error:%s %s\n", red ? "\033[31m" : "", red ? "\033[0m" : "", text.c_str());
  std::fflush(stderr);
}

std::string Console::paint(std::string const& text, char const* code) const {
  if (!colour_ || !tty_out_) return text;
  return std::string("\033[") + code + "m" + text + "\033[0m";
}

std::string with_commas(std::int64_t n) {
  return job::with_commas(n);
}

std::string flag_of(std::string const& setting) {
  std::string flag = "--" + setting;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string seconds_text(double s) {
  return io::seconds_text(s);
}

std::int64_t peak_rss_bytes() {
  return job::peak_rss_bytes();
}

Progress::Progress(std::string what, std::int64_t total, std::int64_t start, std::string unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      start_(start),
      last_logged_(start),
      began_(std::chrono::steady_clock::now()),
      last_draw_(began_) {}

void Progress::update(std::int64_t done) {
  auto const& console = Console::get();
  if (console.quiet()) return;
  auto const now = std::chrono::steady_clock::now();
  double const elapsed = std::chrono::duration<double>(now - began_).count();
  double const rate = elapsed > 0 ? double(done - start_) / elapsed : 0.0;
  double const eta = rate > 0 ? double(total_ - done) / rate : 0.0;
  double const percent = total_ > 0 ? 100.0 * double(done) / double(total_) : 100.0;
  char line[256];
  std::snprintf(line, sizeof line, "kembed %s: %s / %s %s (%.1f%%), %.3g %s/s, ETA %s", what_.c_str(),
                with_commas(done).c_str(), with_commas(total_).c_str(), unit_.c_str(), percent, rate, unit_.c_str(),
                seconds_text(eta).c_str());
  if (console.stderr_is_terminal()) {
    if (std::chrono::duration<double>(now - last_draw_).count() < 0.2 && done < total_) return;
    std::fprintf(stderr, "\r%s\033[K", line);
    std::fflush(stderr);
    drawn_ = true;
  } else {
    bool const step = (done - last_logged_) * 10 >= total_;
    bool const slow = std::chrono::duration<double>(now - last_draw_).count() >= 30.0;
    if (!step && !slow && done < total_) return;
    std::fprintf(stderr, "%s\n", line);
    last_logged_ = done;
  }
  last_draw_ = now;
}

void Progress::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace kembed::cli
