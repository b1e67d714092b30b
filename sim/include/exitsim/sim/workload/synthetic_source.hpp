#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "exitsim/sim/workload/arrivals.hpp"
#include "exitsim/sim/workload/lengths.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::sim {

// A generated workload: `count` requests with ids 0..count-1, arrival times from an arrival
// process and prompt/output lengths from two length distributions. Holds O(1) state.
class SyntheticRequestSource final : public traces::RequestSource {
 public:
  SyntheticRequestSource(std::int64_t count, std::unique_ptr<ArrivalProcess> arrivals,
                         std::unique_ptr<LengthDistribution> input_tokens,
                         std::unique_ptr<LengthDistribution> output_tokens);

  std::optional<RequestDescriptor> next() override;
  std::int64_t skipped_rows() const override { return 0; }
  bool has_arrivals() const override { return true; }
  std::string format_name() const override { return "synthetic"; }
  // Draws clamped to a length distribution's bounds, per distribution.
  std::vector<std::string> notes() override;

 private:
  std::int64_t count_;
  std::int64_t emitted_ = 0;
  std::unique_ptr<ArrivalProcess> arrivals_;
  std::unique_ptr<LengthDistribution> input_tokens_;
  std::unique_ptr<LengthDistribution> output_tokens_;
};

}  // namespace exitsim::sim
