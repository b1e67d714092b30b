#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exitsim/core/random.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::sim {

// An arrival process: an endless, non-decreasing sequence of request arrival times. The first
// arrival is at time 0, matching traces, whose arrivals are relative to their first request.
// Gaps are sampled in seconds, rounded to whole nanoseconds and summed as integers, so a run is
// reproducible and the clock never loses resolution.
class ArrivalProcess {
 public:
  virtual ~ArrivalProcess() = default;
  virtual TimeNs next() = 0;
};

// Poisson: exponential gaps with mean 1/rate.
class PoissonArrivals final : public ArrivalProcess {
 public:
  PoissonArrivals(double rate, RandomStream rng);
  TimeNs next() override;

 private:
  double rate_;
  RandomStream rng_;
  TimeNs now_ = 0;
  bool started_ = false;
};

// Gamma-distributed gaps with mean 1/rate and coefficient of variation cv (shape 1/cv^2):
// cv = 1 is Poisson, cv < 1 smoother, cv > 1 burstier.
class GammaArrivals final : public ArrivalProcess {
 public:
  GammaArrivals(double rate, double cv, RandomStream rng);
  TimeNs next() override;

 private:
  double rate_;
  double shape_;
  double scale_;
  RandomStream rng_;
  TimeNs now_ = 0;
  bool started_ = false;
};

// Evenly spaced arrivals. The i-th arrival is round(i / rate) computed directly rather than as a
// sum of rounded gaps, so a rate like 3/s does not drift.
class ConstantArrivals final : public ArrivalProcess {
 public:
  explicit ConstantArrivals(double rate);
  TimeNs next() override;

 private:
  double rate_;
  std::int64_t index_ = 0;
};

// Bursts: Poisson at `rate` for on_seconds, then silence for off_seconds, repeating from time 0.
// The Poisson clock runs only during on periods (a gap that crosses the end of one continues in
// the next), so the long-run rate is rate * on / (on + off).
class OnOffArrivals final : public ArrivalProcess {
 public:
  OnOffArrivals(double rate, double on_seconds, double off_seconds, RandomStream rng);
  TimeNs next() override;

 private:
  double rate_;
  TimeNs on_ns_;
  TimeNs off_ns_;
  RandomStream rng_;
  TimeNs on_time_ = 0;  // time elapsed within on periods
  bool started_ = false;
};

// The names `workload.arrivals.process` accepts.
std::vector<std::string> arrival_process_names();

// Builds the process `config` describes. Throws InputError (field `workload.arrivals.<key>`) on
// an unknown process, rate <= 0, cv <= 0 (gamma), on_seconds <= 0 or off_seconds < 0 (on_off).
std::unique_ptr<ArrivalProcess> make_arrival_process(const scenario::ArrivalConfig& config,
                                                     RandomStream rng);

}  // namespace exitsim::sim
