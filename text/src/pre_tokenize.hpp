#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bpe_model.hpp"

namespace exitsim::text {

// The pieces BPE merges within: the text (no added tokens in it) normalized and split by every
// pre-tokenizer step in order. Pieces are never empty and, without a normalizer or a prefix
// space, concatenate back to the text.
std::vector<std::string> pre_tokenize(const BpeModel& model, std::string_view text);

}  // namespace exitsim::text
