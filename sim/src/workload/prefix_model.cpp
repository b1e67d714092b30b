#include "exitsim/sim/workload/prefix_model.hpp"

#include <algorithm>
#include <utility>

#include "exitsim/core/random.hpp"

namespace exitsim::sim {

PrefixModelSource::PrefixModelSource(std::unique_ptr<traces::RequestSource> inner,
                                     const scenario::PrefixModelConfig& config, RandomStream random)
    : inner_(std::move(inner)), config_(config), random_(std::move(random)) {
  if (config_.kind == "sessions")
    conversations_.resize(static_cast<std::size_t>(config_.concurrent));
}

std::uint64_t PrefixModelSource::block_name(std::uint64_t kind, std::uint64_t owner,
                                            std::uint64_t block) {
  return splitmix64(splitmix64(kind) ^ splitmix64(owner * 0x100000001b3ULL + block));
}

std::optional<RequestDescriptor> PrefixModelSource::next() {
  std::optional<RequestDescriptor> request = inner_->next();
  if (!request)
    return request;
  ++emitted_;
  if (!request->prefix_hashes.empty())
    return request;  // the trace names its own
  if (config_.kind == "system_prompts")
    name_system_prompt(*request);
  else if (config_.kind == "sessions")
    continue_conversation(*request);
  return request;
}

void PrefixModelSource::name_system_prompt(RequestDescriptor& request) {
  // Both draws always happen, so one request's outcome never shifts the others'.
  const bool has_one = random_.uniform() < config_.share;
  const auto prompt = static_cast<std::uint64_t>(random_.uniform_int(0, config_.prompts - 1));
  if (!has_one)
    return;
  const std::int64_t blocks = std::min(config_.tokens, request.input_tokens) / config_.block_tokens;
  for (std::int64_t b = 0; b < blocks; ++b) {
    request.prefix_hashes.push_back(
        block_name(k_system_prompt, prompt, static_cast<std::uint64_t>(b)));
  }
  request.prefix_block_tokens = config_.block_tokens;
}

void PrefixModelSource::continue_conversation(RequestDescriptor& request) {
  Conversation& c = conversations_[(emitted_ - 1) % conversations_.size()];
  if (c.turns == 0 || c.turns == config_.turns) {
    c = Conversation{};
    c.id = next_conversation_++;
  }
  // The new message is the drawn prompt length; before it, the whole conversation so far.
  const std::int64_t earlier = c.turns == 0 ? 0 : c.prompt_tokens + c.output_tokens;
  request.input_tokens = std::min(earlier + request.input_tokens, k_max_request_tokens);
  // The previous prompt's whole blocks carry over; every later block is new: the one the previous
  // prompt ended in continues with its output.
  const std::int64_t blocks = request.input_tokens / config_.block_tokens;
  const auto kept = std::min<std::size_t>(c.hashes.size(), static_cast<std::size_t>(blocks));
  c.hashes.resize(kept);
  for (std::int64_t b = static_cast<std::int64_t>(kept); b < blocks; ++b) {
    c.hashes.push_back(block_name(k_conversation,
                                  c.id * 1'000'003ULL + static_cast<std::uint64_t>(c.turns),
                                  static_cast<std::uint64_t>(b)));
  }
  request.prefix_hashes = c.hashes;
  request.prefix_block_tokens = config_.block_tokens;
  c.prompt_tokens = request.input_tokens;
  c.output_tokens = request.output_tokens;
  ++c.turns;
}

}  // namespace exitsim::sim
