#pragma once
// How kembed talks to people and schedulers: results on stdout; progress, logs and
// errors on stderr (a redrawn line on a terminal, plain lines otherwise); colour
// only on a terminal and never with NO_COLOR; --quiet keeps stderr to errors.
#include <chrono>
#include <cstdint>
#include <string>

namespace kembed::cli {

// Exit statuses a scheduler script can act on (docs/CLI.md).
enum Exit : int { ok = 0, differ = 1, bad_input = 2, io_failure = 3, internal = 4 };

class Console {
 public:
  static Console& get();
  void set_quiet(bool quiet) noexcept { quiet_ = quiet; }
  bool quiet() const noexcept { return quiet_; }
  // Muted: nothing at all on stdout or stderr from this process (an MPI rank other
  // than the first, whose errors are the first rank's too).
  void set_muted(bool muted) noexcept { muted_ = muted; }
  bool muted() const noexcept { return muted_; }
  bool stderr_is_terminal() const noexcept { return tty_err_; }
  bool stdout_is_terminal() const noexcept { return tty_out_; }
  // "kembed <what>: text" on stderr unless quiet.
  void log(std::string const& text) const;
  // "kembed: error: text" on stderr, always; red on a terminal without NO_COLOR.
  void error(std::string const& text) const;
  // Wraps text in a colour for stdout (green "32", red "31", bold "1") when allowed.
  std::string paint(std::string const& text, char const* code) const;

 private:
  Console();
  bool quiet_ = false, muted_ = false, tty_err_ = false, tty_out_ = false, colour_ = false;
};

// Positions done, rate and ETA on stderr: redrawn at most 5 times a second on a
// terminal, else one log line per 10% (or per 30 s).
class Progress {
 public:
  // `unit`: what done and total count, plural ("positions", "bags").
  Progress(std::string what, std::int64_t total, std::int64_t start = 0, std::string unit = "positions");
  void update(std::int64_t done);
  void finish();

 private:
  std::string what_, unit_;
  std::int64_t total_, start_, last_logged_;
  std::chrono::steady_clock::time_point began_, last_draw_;
  bool drawn_ = false;
};

std::string with_commas(std::int64_t n);
std::string seconds_text(double seconds);  // "1.23 s", "2 min 05 s"
// A job setting as the command line spells it: checkpoint_every -> --checkpoint-every
// (a job::Observer's name, so the job's messages name the flags).
std::string flag_of(std::string const& setting);
// Peak resident memory of this process (VmHWM), in bytes; 0 where unknown.
std::int64_t peak_rss_bytes();

}  // namespace kembed::cli
