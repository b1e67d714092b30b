#include "benchmark_results.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <optional>

#include "exitsim/analysis/benchmark_validation.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::test_support {
namespace {

class ListSource final : public traces::RequestSource {
 public:
  explicit ListSource(std::vector<RequestDescriptor> requests) : requests_(std::move(requests)) {}
  std::optional<RequestDescriptor> next() override {
    if (next_ == requests_.size())
      return std::nullopt;
    return requests_[next_++];
  }
  std::int64_t skipped_rows() const override { return 0; }
  bool has_arrivals() const override { return true; }
  std::string format_name() const override { return "test list"; }

 private:
  std::vector<RequestDescriptor> requests_;
  std::size_t next_ = 0;
};

}  // namespace

std::vector<RequestLengths> request_lengths(int n, std::uint64_t seed) {
  std::uint64_t state = seed;
  const auto next = [&] {
    // Knuth's MMIX linear congruential generator; the high bits are the well-mixed ones.
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  std::vector<RequestLengths> out;
  for (int i = 0; i < n; ++i) {
    const auto input = static_cast<std::int64_t>(64 + next() % 1984);
    const auto output = static_cast<std::int64_t>(16 + next() % 240);
    out.push_back({input, output});
  }
  return out;
}

std::string simulated_vllm_result(const scenario::Scenario& truth,
                                  const std::vector<RequestLengths>& lengths, double rate,
                                  double burstiness, std::uint64_t arrival_seed) {
  traces::ServingBenchmark benchmark;
  benchmark.request_rate = rate;
  benchmark.burstiness = burstiness;
  for (const RequestLengths& l : lengths) {
    traces::BenchmarkRequest r;
    r.input_tokens = l.input;
    r.output_tokens = l.output;
    benchmark.requests.push_back(r);
  }
  const std::vector<TimeNs> arrivals = analysis::benchmark_arrivals(benchmark, arrival_seed);
  std::vector<RequestDescriptor> requests;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    RequestDescriptor d;
    d.id = RequestId(i);
    d.arrival = arrivals[i];
    d.input_tokens = lengths[i].input;
    d.output_tokens = lengths[i].output;
    requests.push_back(d);
  }
  std::map<std::uint64_t, std::vector<TimeNs>> emitted;  // per request, each token's time
  sim::SimulationConfig config = sim::simulation_config_from(truth, "");
  config.step_observer = [&](int, const policy::StepTrace& step) {
    for (const policy::StepRow& row : step.rows) {
      if (row.emits)
        emitted[row.request.value].push_back(step.start + step.duration);
    }
  };
  ListSource source(std::move(requests));
  sim::simulate(config, source);

  std::vector<std::string> ttfts, itls, inputs, outputs, errors;
  TimeNs last = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const std::vector<TimeNs>& times = emitted.at(i);
    ttfts.push_back(fmt::format("{:.9f}", static_cast<double>(times.front() - arrivals[i]) / 1e9));
    std::vector<std::string> gaps;
    for (std::size_t k = 1; k < times.size(); ++k)
      gaps.push_back(fmt::format("{:.9f}", static_cast<double>(times[k] - times[k - 1]) / 1e9));
    itls.push_back(fmt::format("[{}]", fmt::join(gaps, ", ")));
    inputs.push_back(std::to_string(lengths[i].input));
    outputs.push_back(std::to_string(lengths[i].output));
    errors.emplace_back("\"\"");
    last = std::max(last, times.back());
  }
  return fmt::format(
      "{{\"date\": \"20260101-000000\", \"backend\": \"vllm\", \"model_id\": \"{}\", "
      "\"tokenizer_id\": \"{}\", \"num_prompts\": {}, \"request_rate\": {}, \"burstiness\": {}, "
      "\"max_concurrency\": null, \"duration\": {:.9f}, \"input_lens\": [{}], \"output_lens\": "
      "[{}], \"ttfts\": [{}], \"itls\": [{}], \"errors\": [{}]}}\n",
      truth.model.shape.name, truth.model.shape.name, lengths.size(), rate,
      std::isinf(burstiness) ? std::string("Infinity") : fmt::format("{}", burstiness),
      static_cast<double>(last) / 1e9, fmt::join(inputs, ", "), fmt::join(outputs, ", "),
      fmt::join(ttfts, ", "), fmt::join(itls, ", "), fmt::join(errors, ", "));
}

}  // namespace exitsim::test_support
