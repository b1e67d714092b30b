#include "exitsim/sim/workload/arrivals.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim::sim {
namespace {

// Arrivals stay within k_max_arrival_ns, leaving the rest of the clock to the run itself.
constexpr TimeNs k_max_time = k_max_arrival_ns;

[[noreturn]] void fail(const std::string& key, const std::string& expected,
                       const std::string& found) {
  throw_setting_error("workload.arrivals." + key, expected, found);
}

// `seconds` as whole nanoseconds, rejecting values the int64 clock cannot hold (converting an
// out-of-range double to an integer is undefined behaviour).
TimeNs to_ns_checked(double seconds, const std::string& key) {
  const double ns = std::floor(seconds * 1e9 + 0.5);
  if (!(ns < static_cast<double>(k_max_time))) {
    fail(key, "a duration within the arrival range (2^62 ns, about 146 years)",
         fmt::format("{} s", seconds));
  }
  return static_cast<TimeNs>(ns);
}

// now + gap, failing instead of wrapping when a very low rate pushes arrivals off the clock.
TimeNs advance(TimeNs now, double gap_seconds, double rate) {
  const double gap_ns = std::floor(gap_seconds * 1e9 + 0.5);
  if (!(gap_ns < static_cast<double>(k_max_time - now))) {
    fail("rate", "a rate whose arrivals stay within 2^62 ns (about 146 years)",
         fmt::format("{}", rate));
  }
  return now + static_cast<TimeNs>(gap_ns);
}

void require_rate(double rate) {
  if (!(rate > 0.0) || !std::isfinite(rate)) {
    fail("rate", "a rate > 0 requests/s", fmt::format("{}", rate));
  }
}

}  // namespace

PoissonArrivals::PoissonArrivals(double rate, RandomStream rng) : rate_(rate), rng_(rng) {
  require_rate(rate);
}

TimeNs PoissonArrivals::next() {
  if (started_)
    now_ = advance(now_, rng_.exponential(rate_), rate_);
  started_ = true;
  return now_;
}

GammaArrivals::GammaArrivals(double rate, double cv, RandomStream rng)
    : rate_(rate), shape_(1.0), scale_(1.0), rng_(rng) {
  require_rate(rate);
  if (!(cv > 0.0) || !std::isfinite(cv)) {
    fail("cv", "a coefficient of variation > 0", fmt::format("{}", cv));
  }
  // Gamma(k, theta) has mean k*theta and cv 1/sqrt(k).
  shape_ = 1.0 / (cv * cv);
  scale_ = cv * cv / rate;
}

TimeNs GammaArrivals::next() {
  if (started_)
    now_ = advance(now_, rng_.gamma(shape_, scale_), rate_);
  started_ = true;
  return now_;
}

ConstantArrivals::ConstantArrivals(double rate) : rate_(rate) {
  require_rate(rate);
}

TimeNs ConstantArrivals::next() {
  const double ns = std::floor(static_cast<double>(index_) * 1e9 / rate_ + 0.5);
  if (!(ns < static_cast<double>(k_max_time))) {
    fail("rate", "a rate whose arrivals stay within 2^62 ns (about 146 years)",
         fmt::format("{}", rate_));
  }
  ++index_;
  return static_cast<TimeNs>(ns);
}

OnOffArrivals::OnOffArrivals(double rate, double on_seconds, double off_seconds, RandomStream rng)
    : rate_(rate), on_ns_(0), off_ns_(0), rng_(rng) {
  require_rate(rate);
  if (!(on_seconds > 0.0))
    fail("on_seconds", "an on period > 0 s", fmt::format("{}", on_seconds));
  if (!(off_seconds >= 0.0)) {
    fail("off_seconds", "an off period >= 0 s", fmt::format("{}", off_seconds));
  }
  // A sub-nanosecond on period still has to advance the clock.
  on_ns_ = std::max<TimeNs>(1, to_ns_checked(on_seconds, "on_seconds"));
  off_ns_ = to_ns_checked(off_seconds, "off_seconds");
  if (on_ns_ > k_max_time - off_ns_) {
    fail("off_seconds", "on and off periods that together stay within 2^62 ns (about 146 years)",
         fmt::format("{} s", off_seconds));
  }
}

TimeNs OnOffArrivals::next() {
  if (started_)
    on_time_ = advance(on_time_, rng_.exponential(rate_), rate_);
  started_ = true;
  // Map time-within-on-periods to wall time: whole periods completed, plus the offset into the
  // current on period.
  const TimeNs periods = on_time_ / on_ns_;
  const TimeNs period_ns = on_ns_ + off_ns_;
  if (periods > (k_max_time - on_ns_) / period_ns) {
    fail("rate", "a rate whose arrivals stay within 2^62 ns (about 146 years)",
         fmt::format("{}", rate_));
  }
  return periods * period_ns + on_time_ % on_ns_;
}

std::vector<std::string> arrival_process_names() {
  return {"poisson", "gamma", "constant", "on_off"};
}

std::unique_ptr<ArrivalProcess> make_arrival_process(const scenario::ArrivalConfig& config,
                                                     RandomStream rng) {
  if (config.process == "poisson")
    return std::make_unique<PoissonArrivals>(config.rate, rng);
  if (config.process == "gamma") {
    return std::make_unique<GammaArrivals>(config.rate, config.cv, rng);
  }
  if (config.process == "constant")
    return std::make_unique<ConstantArrivals>(config.rate);
  if (config.process == "on_off") {
    return std::make_unique<OnOffArrivals>(config.rate, config.on_seconds, config.off_seconds, rng);
  }
  const std::vector<std::string> names = arrival_process_names();
  std::string found = fmt::format("'{}'", config.process);
  const std::string hint = nearest_match(config.process, names);
  if (!hint.empty())
    found += fmt::format(" (did you mean '{}'?)", hint);
  fail("process", one_of(names), found);
}

}  // namespace exitsim::sim
