#include "exitsim/sim/workload/synthetic_source.hpp"

#include <fmt/format.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace exitsim::sim {

SyntheticRequestSource::SyntheticRequestSource(std::int64_t count,
                                               std::unique_ptr<ArrivalProcess> arrivals,
                                               std::unique_ptr<LengthDistribution> input_tokens,
                                               std::unique_ptr<LengthDistribution> output_tokens)
    : count_(count),
      arrivals_(std::move(arrivals)),
      input_tokens_(std::move(input_tokens)),
      output_tokens_(std::move(output_tokens)) {}

std::optional<RequestDescriptor> SyntheticRequestSource::next() {
  if (emitted_ >= count_)
    return std::nullopt;
  RequestDescriptor request;
  request.id = RequestId(static_cast<std::uint64_t>(emitted_++));
  request.arrival = arrivals_->next();
  request.input_tokens = input_tokens_->sample();
  request.output_tokens = output_tokens_->sample();
  return request;
}

std::vector<std::string> SyntheticRequestSource::notes() {
  std::vector<std::string> out;
  const auto note = [&](const LengthDistribution& lengths, const char* key) {
    if (lengths.clamped() == 0)
      return;
    const LengthBounds b = lengths.bounds();
    out.push_back(fmt::format(
        "{}: {} of {} drawn lengths clamped to [{}, {}] (the distribution's mean and spread are "
        "not what was asked for)",
        key, lengths.clamped(), emitted_, b.lo,
        b.hi == std::numeric_limits<std::int64_t>::max() ? std::string("none")
                                                         : std::to_string(b.hi)));
  };
  note(*input_tokens_, "workload.input_tokens");
  note(*output_tokens_, "workload.output_tokens");
  return out;
}

}  // namespace exitsim::sim
