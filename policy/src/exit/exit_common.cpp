#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "exit/exit_policies.hpp"
#include "exitsim/core/random.hpp"

namespace exitsim::policy {
namespace exit {

std::string number_text(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

void check_output_size(const ExitBatch& batch, std::span<const int> out) {
  if (out.size() != batch.tokens.size()) {
    throw std::invalid_argument("exit policy: " + std::to_string(out.size()) +
                                " output slots for " + std::to_string(batch.tokens.size()) +
                                " tokens");
  }
}

void check_scores(const ExitToken& token, std::size_t needed, std::string_view policy) {
  if (token.scores.size() < needed) {
    throw std::invalid_argument(std::string(policy) + " exit policy needs " +
                                std::to_string(needed) + " scores per token, got " +
                                std::to_string(token.scores.size()));
  }
}

ExitSampler::ExitSampler(const std::vector<double>& probabilities) {
  double sum = 0.0;
  for (std::size_t i = 0; i < probabilities.size(); ++i) {
    sum += probabilities[i];
    cumulative_.push_back(sum);
    if (probabilities[i] > 0.0)
      last_positive_ = static_cast<int>(i);
  }
}

void NoExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  std::fill(out.begin(), out.end(), last_exit());
}

}  // namespace exit

std::vector<std::string> exit_policy_names() {
  return {"none",
          "confidence",
          "adaptive_threshold",
          "router_expert_choice",
          "router_token_choice",
          "oracle",
          "position_schedule",
          "replay",
          "distribution"};
}

double calm_threshold(double lambda, double tau, std::int64_t t, std::int64_t n) {
  if (tau == 0.0)
    return lambda;
  const double horizon = static_cast<double>(std::max<std::int64_t>(n, 1));
  return lambda * std::exp(-tau * static_cast<double>(t) / horizon) / 10.0 + 0.9 * lambda;
}

std::optional<ConfidenceMeasure> parse_confidence_measure(std::string_view name) {
  if (name == "top1")
    return ConfidenceMeasure::top1;
  if (name == "margin")
    return ConfidenceMeasure::margin;
  return std::nullopt;
}

double exit_confidence(std::span<const float> probabilities, ConfidenceMeasure measure) {
  float first = 0.0F;
  float second = 0.0F;
  for (const float p : probabilities) {
    if (p > first) {
      second = first;
      first = p;
    } else if (p > second) {
      second = p;
    }
  }
  return measure == ConfidenceMeasure::top1 ? static_cast<double>(first)
                                            : static_cast<double>(first) - second;
}

KeyedUniform exit_draws(std::uint64_t seed) {
  return KeyedUniform(seed, "exit.token");
}

double exit_uniform(std::uint64_t seed, RequestId request, std::int64_t position, int draw) {
  // One draw per token in the engine: the stream's hash is kept per seed.
  thread_local std::uint64_t hashed_seed = 0;
  thread_local KeyedUniform stream = exit_draws(0);
  if (seed != hashed_seed) {
    stream = exit_draws(seed);
    hashed_seed = seed;
  }
  return stream(request.value, static_cast<std::uint64_t>(position),
                static_cast<std::uint64_t>(draw));
}

}  // namespace exitsim::policy
