#include "exitsim/policy/servable.hpp"

#include <fmt/format.h>

namespace exitsim::policy {

std::string_view to_string(UnservableReason reason) {
  switch (reason) {
    case UnservableReason::prompt_over_batch_budget:
      return "prompt_over_batch_budget";
    case UnservableReason::over_context_window:
      return "over_context_window";
    case UnservableReason::over_kv_capacity:
      return "over_kv_capacity";
  }
  return "unknown";
}

std::optional<UnservableReason> unservable_reason(std::int64_t input_tokens,
                                                  std::int64_t output_tokens,
                                                  const ServingCapacity& capacity) {
  if (!capacity.chunks_prompts && input_tokens > capacity.max_batched_tokens)
    return UnservableReason::prompt_over_batch_budget;
  // Compared without adding: lengths reach 2^31 and more from traces and distributions.
  if (capacity.max_context > 0 &&
      (input_tokens > capacity.max_context || output_tokens > capacity.max_context - input_tokens))
    return UnservableReason::over_context_window;
  if (input_tokens > capacity.kv_tokens || output_tokens > capacity.kv_tokens - input_tokens)
    return UnservableReason::over_kv_capacity;
  return std::nullopt;
}

std::string describe_unservable(UnservableReason reason, std::int64_t input_tokens,
                                std::int64_t output_tokens, const ServingCapacity& capacity) {
  switch (reason) {
    case UnservableReason::prompt_over_batch_budget:
      return fmt::format(
          "a {}-token prompt exceeds scheduler.max_batched_tokens ({}), and the scheduler admits "
          "whole prompts only; use scheduler.kind: chunked_prefill or a larger budget",
          input_tokens, capacity.max_batched_tokens);
    case UnservableReason::over_context_window:
      return fmt::format(
          "{} input + {} output tokens exceed the model's context window of {} tokens "
          "(model.max_context)",
          input_tokens, output_tokens, capacity.max_context);
    case UnservableReason::over_kv_capacity:
      return fmt::format(
          "{} input + {} output tokens need more K/V than the replica holds ({} tokens); raise "
          "scheduler.kv_blocks within the device memory or use a larger accelerator",
          input_tokens, output_tokens, capacity.kv_tokens);
  }
  return "unservable";
}

}  // namespace exitsim::policy
