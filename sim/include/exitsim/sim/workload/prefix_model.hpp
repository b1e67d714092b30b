#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/core/random.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::sim {

// Names the prompt prefixes of a stream whose requests name none (RequestDescriptor's
// prefix_hashes), so that prefix caching has something to reuse:
// - system_prompts: with probability `share` a request starts with one of `prompts` system
//   prompts (uniform, seeded) of `tokens` tokens; those whole blocks are named by the prompt,
//   the rest of the request is its own;
// - sessions: requests go in turn to `concurrent` conversations of `turns` turns; a turn's prompt
//   is the previous turn's prompt and output followed by the request's drawn prompt length as
//   its new message, so its blocks up to the previous prompt's last whole block are the previous
//   turn's. Changes input lengths, so only for synthetic workloads.
// Requests that name their own prefixes (a Mooncake trace) pass unchanged. O(concurrent) state.
class PrefixModelSource final : public traces::RequestSource {
 public:
  PrefixModelSource(std::unique_ptr<traces::RequestSource> inner,
                    const scenario::PrefixModelConfig& config, RandomStream random);

  std::optional<RequestDescriptor> next() override;
  std::int64_t skipped_rows() const override { return inner_->skipped_rows(); }
  bool has_arrivals() const override { return inner_->has_arrivals(); }
  std::string format_name() const override { return inner_->format_name(); }
  std::vector<std::string> notes() override { return inner_->notes(); }

  // A block name no other block gets: `owner` (a prompt or a conversation) of a `kind` and the
  // block's index. The kinds: a system prompt, a conversation (this class), a serving
  // benchmark's prompt (analysis/benchmark_validation.hpp, --prefix-cache warm).
  static constexpr std::uint64_t k_system_prompt = 1;
  static constexpr std::uint64_t k_conversation = 2;
  static constexpr std::uint64_t k_benchmark_prompt = 3;
  static std::uint64_t block_name(std::uint64_t kind, std::uint64_t owner, std::uint64_t block);

 private:
  struct Conversation {
    std::uint64_t id = 0;
    std::int64_t turns = 0;  // taken so far
    std::int64_t prompt_tokens = 0;
    std::int64_t output_tokens = 0;
    std::vector<std::uint64_t> hashes;  // the last prompt's whole blocks
  };

  void name_system_prompt(RequestDescriptor& request);
  void continue_conversation(RequestDescriptor& request);

  std::unique_ptr<traces::RequestSource> inner_;
  scenario::PrefixModelConfig config_;
  RandomStream random_;
  std::vector<Conversation> conversations_;
  std::uint64_t next_conversation_ = 0;
  std::uint64_t emitted_ = 0;
};

}  // namespace exitsim::sim
