#include "exitsim/sim/workload/synthetic_source.hpp"

#include <utility>

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

}  // namespace exitsim::sim
