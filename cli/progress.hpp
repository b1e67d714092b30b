#pragma once

// Progress of a long command, on stderr so stdout stays the result: on a terminal, one line
// redrawn in place with a bar and the ETA; off a terminal (a Slurm log, a pipe), a line each time
// another tenth of the work is done or 30 s have passed, whichever comes first; nothing at all
// with --quiet (set_quiet).

#include <chrono>
#include <string>

namespace exitsim::cli {

// `exitsim --quiet` / `-q`, on any command: no progress output.
void set_quiet(bool quiet);
bool quiet();

class ProgressReporter {
 public:
  // `what`: the command ("sweep"); `unit`: what is counted ("runs").
  ProgressReporter(std::string what, std::string unit);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // `done` of `total` units (total 0: unknown, then only elapsed time and `detail` are shown).
  void update(double done, double total, const std::string& detail = "");
  // Ends the line on a terminal; off one, reports the last state if it was not reported yet.
  void finish();

 private:
  void print(double done, double total, const std::string& detail, bool line);

  std::string what_;
  std::string unit_;
  bool terminal_ = false;
  bool enabled_ = true;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_line_;
  std::chrono::steady_clock::time_point last_draw_;
  int last_tenth_ = 0;
  double done_ = 0, total_ = 0;
  std::string detail_;
  double printed_done_ = -1;  // the last state a line reported (off a terminal)
  bool updated_ = false;
};

}  // namespace exitsim::cli
