#include "exitsim/analysis/trace_summary.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <map>

namespace exitsim::analysis {
namespace {

// Exact counts per distinct length: token lengths take a few thousand distinct values even in
// million-request traces, so this stays small while giving exact percentiles.
class LengthHistogram {
 public:
  void add(std::int64_t length) {
    ++counts_[length];
    ++total_;
    sum_ += static_cast<double>(length);
  }

  LengthSummary summarize() const {
    LengthSummary summary;
    if (total_ == 0)
      return summary;
    summary.min = counts_.begin()->first;
    summary.max = counts_.rbegin()->first;
    summary.mean = sum_ / static_cast<double>(total_);
    summary.p50 = percentile(50);
    summary.p90 = percentile(90);
    summary.p95 = percentile(95);
    summary.p99 = percentile(99);
    return summary;
  }

 private:
  std::int64_t percentile(std::int64_t p) const {
    // Nearest rank, as core::nearest_rank, but in integers: rank = ceil(p * n / 100), at least 1,
    // exact at any count (the double form's 1e-9 slack is below a ULP past ten million).
    std::int64_t rank = (p * total_ + 99) / 100;
    if (rank < 1)
      rank = 1;
    std::int64_t seen = 0;
    for (const auto& [length, count] : counts_) {
      seen += count;
      if (seen >= rank)
        return length;
    }
    return counts_.rbegin()->first;
  }

  std::map<std::int64_t, std::int64_t> counts_;
  std::int64_t total_ = 0;
  double sum_ = 0.0;
};

// Welford's streaming mean and variance of inter-arrival gaps, stable for long traces.
class GapMoments {
 public:
  void add(double gap) {
    ++n_;
    const double delta = gap - mean_;
    mean_ += delta / static_cast<double>(n_);
    m2_ += delta * (gap - mean_);
  }

  std::optional<double> coefficient_of_variation() const {
    if (n_ == 0 || mean_ <= 0.0)
      return std::nullopt;
    return std::sqrt(m2_ / static_cast<double>(n_)) / mean_;
  }

 private:
  std::int64_t n_ = 0;
  double mean_ = 0.0;
  double m2_ = 0.0;
};

std::string seconds_text(TimeNs t) {
  return fmt::format("{:.3f} s", to_seconds(t));
}

std::string length_row(std::string_view name, const LengthSummary& s) {
  return fmt::format("  {:<8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>12.1f}\n", name, s.min, s.p50,
                     s.p90, s.p95, s.p99, s.max, s.mean);
}

}  // namespace

TraceSummary summarize_requests(traces::RequestSource& source) {
  TraceSummary summary;
  summary.format = source.format_name();
  LengthHistogram inputs;
  LengthHistogram outputs;
  GapMoments gaps;
  while (const std::optional<RequestDescriptor> request = source.next()) {
    ++summary.requests;
    inputs.add(request->input_tokens);
    outputs.add(request->output_tokens);
    if (!request->arrival)
      continue;
    if (!summary.first_arrival)
      summary.first_arrival = request->arrival;
    if (summary.last_arrival)
      gaps.add(static_cast<double>(*request->arrival - *summary.last_arrival));
    summary.last_arrival = request->arrival;
  }
  summary.skipped_rows = source.skipped_rows();
  summary.input = inputs.summarize();
  summary.output = outputs.summarize();
  if (summary.first_arrival) {
    summary.span = *summary.last_arrival - *summary.first_arrival;
    if (*summary.span > 0) {
      summary.mean_rate_per_s =
          static_cast<double>(summary.requests - 1) / to_seconds(*summary.span);
    }
    summary.interarrival_cv = gaps.coefficient_of_variation();
  }
  return summary;
}

std::string format_trace_summary(const TraceSummary& summary, std::string_view path,
                                 std::string_view format) {
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "{:<20}{}\n", label, value);
  };
  line("request trace", std::string(path));
  line("format", std::string(format));
  line("requests", fmt::format("{}", summary.requests));
  line("skipped rows", fmt::format("{}", summary.skipped_rows));
  if (summary.span) {
    line("first arrival", seconds_text(*summary.first_arrival));
    line("last arrival", seconds_text(*summary.last_arrival));
    line("span", fmt::format("{} ({:.1f} min)", seconds_text(*summary.span),
                             to_seconds(*summary.span) / 60.0));
    line("mean rate", summary.mean_rate_per_s
                          ? fmt::format("{:.3f} req/s", *summary.mean_rate_per_s)
                          : std::string("n/a (all requests arrive at once)"));
    line("inter-arrival CV", summary.interarrival_cv
                                 ? fmt::format("{:.3f}", *summary.interarrival_cv)
                                 : std::string("n/a"));
  } else {
    line("arrivals", "none (lengths only; arrivals come from the scenario)");
  }
  fmt::format_to(std::back_inserter(out), "  {:<8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>12}\n",
                 "tokens", "min", "p50", "p90", "p95", "p99", "max", "mean");
  out += length_row("input", summary.input);
  out += length_row("output", summary.output);
  return out;
}

}  // namespace exitsim::analysis
