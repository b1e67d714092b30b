#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace exitsim::cli {
namespace {

bool g_quiet = false;

constexpr auto k_line_every = std::chrono::seconds(30);
// A terminal line is redrawn at most this often: drawing costs more than a simulated event.
constexpr auto k_draw_every = std::chrono::milliseconds(100);

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60)
                   : fmt::format("{}m{:02}s", s / 60, s % 60);
}

}  // namespace

void set_quiet(bool is_quiet) {
  g_quiet = is_quiet;
}

bool quiet() {
  return g_quiet;
}

ProgressReporter::ProgressReporter(std::string what, std::string unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      terminal_(::isatty(STDERR_FILENO) != 0),
      enabled_(!g_quiet),
      start_(std::chrono::steady_clock::now()),
      last_line_(start_),
      last_draw_(start_) {}

ProgressReporter::~ProgressReporter() {
  // A command that throws leaves a terminal's line unfinished: end it so the error starts a line.
  if (enabled_ && terminal_ && !finished_ && updated_)
    fmt::print(stderr, "\n");
}

void ProgressReporter::update(double done, double total, const std::string& detail) {
  if (!enabled_)
    return;
  updated_ = true;
  done_ = done;
  total_ = total;
  detail_ = detail;
  const auto now = std::chrono::steady_clock::now();
  if (terminal_) {
    if (now - last_draw_ >= k_draw_every || (total > 0 && done >= total)) {
      last_draw_ = now;
      print(done, total, detail, false);
    }
    return;
  }
  const int tenth = total > 0 ? static_cast<int>(std::floor(10.0 * done / total)) : 0;
  if (tenth > last_tenth_ || now - last_line_ >= k_line_every) {
    last_tenth_ = std::max(last_tenth_, tenth);
    last_line_ = now;
    print(done, total, detail, true);
  }
}

void ProgressReporter::finish() {
  if (!enabled_ || finished_ || !updated_)
    return;
  finished_ = true;
  if (terminal_) {
    print(done_, total_, detail_, false);
    fmt::print(stderr, "\n");
  } else if (printed_done_ != done_) {
    print(done_, total_, detail_, true);
  }
  std::fflush(stderr);
}

void ProgressReporter::print(double done, double total, const std::string& detail, bool line) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string text;
  if (total > 0) {
    const double fraction = std::min(1.0, done / total);
    const double eta = done > 0 ? elapsed / done * (total - done) : 0.0;
    std::string bar;
    if (!line) {
      constexpr int k_width = 24;
      const auto filled = static_cast<int>(fraction * k_width);
      bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
            std::string(static_cast<std::size_t>(k_width - filled), '.') + "] ";
    }
    text =
        fmt::format("{}: {}{:.0f}/{:.0f} {} ({:.0f}%), {} elapsed, ETA {}", what_, bar, done, total,
                    unit_, 100 * fraction, clock_text(elapsed), done > 0 ? clock_text(eta) : "-");
  } else {
    text = fmt::format("{}: {:.0f} {}, {} elapsed", what_, done, unit_, clock_text(elapsed));
  }
  if (!detail.empty())
    text += ", " + detail;
  if (line) {
    printed_done_ = done;
    fmt::print(stderr, "{}\n", text);
  } else
    fmt::print(stderr, "\r\033[K{}", text);
  std::fflush(stderr);
}

}  // namespace exitsim::cli
