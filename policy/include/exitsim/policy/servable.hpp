#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace exitsim::policy {

// Why a serving configuration can never serve a request, whatever else is running. vLLM rejects
// such requests at arrival (a prompt longer than the model's context, or, without chunked
// prefill, longer than max_num_batched_tokens); exitsim either does the same and counts them, or
// refuses the configuration (scheduler.unservable).
enum class UnservableReason : std::uint8_t {
  prompt_over_batch_budget,  // a whole-prompt scheduler cannot fit the prompt in one iteration
  over_context_window,       // prompt + output longer than the model's context window
  over_kv_capacity,          // prompt + output K/V larger than the replica's whole K/V memory
};
inline constexpr UnservableReason k_unservable_reasons[] = {
    UnservableReason::prompt_over_batch_budget, UnservableReason::over_context_window,
    UnservableReason::over_kv_capacity};
std::string_view to_string(UnservableReason reason);

// What a replica can ever hold and batch.
struct ServingCapacity {
  bool chunks_prompts = false;          // the scheduler splits prompts across iterations
  std::int64_t max_batched_tokens = 0;  // tokens in one iteration
  std::int64_t kv_tokens = 0;           // K/V memory, in tokens (blocks x block size)
  std::int64_t max_context = 0;         // the model's context window; 0 = unlimited
};

// The first reason, in the order above, why a request of `input_tokens` prompt and
// `output_tokens` output tokens can never be served; nullopt when it can. A preempted sequence
// recomputes its prompt and outputs so far, which may outgrow a whole-prompt scheduler's budget:
// that is servable (it runs alone, see admits_alone), since its prompt alone once fitted.
std::optional<UnservableReason> unservable_reason(std::int64_t input_tokens,
                                                  std::int64_t output_tokens,
                                                  const ServingCapacity& capacity);

// One line for the user: what the request needs, what the configuration has, and what to change.
std::string describe_unservable(UnservableReason reason, std::int64_t input_tokens,
                                std::int64_t output_tokens, const ServingCapacity& capacity);

}  // namespace exitsim::policy
