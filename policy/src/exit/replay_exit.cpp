// replay: the depths a token trace recorded, through a lookup the executor supplies (the policy
// library reads no files; the simulator builds the lookup from a traces::TokenTraceReader).

#include "exit/exit_policies.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::policy::exit {

ReplayExit::ReplayExit(std::vector<int> exit_points, ExitLookup lookup)
    : ExitPolicy(std::move(exit_points)), lookup_(std::move(lookup)) {}

void ReplayExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
    const ExitToken& token = batch.tokens[i];
    const std::optional<int> recorded = lookup_(token.request, token.position);
    // A token the trace lacks (a longer output than was measured, another workload) runs the
    // full depth: the conservative choice, which never understates cost.
    if (!recorded) {
      out[i] = last_exit();
      continue;
    }
    if (*recorded < 0 || *recorded > last_exit()) {
      throw_setting_error("exit_policy.token_trace",
                          "an exit point index in [0, " + std::to_string(last_exit()) +
                              "] for request " + std::to_string(token.request.value) +
                              " position " + std::to_string(token.position),
                          std::to_string(*recorded));
    }
    out[i] = *recorded;
  }
}

}  // namespace exitsim::policy::exit
