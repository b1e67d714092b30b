#pragma once

// A prompt through every executed layer of a backend, one layer call at a time as the decoding
// loop makes them: its states sit in slots interleaved with others held elsewhere (so every call
// gathers and scatters) and are embedded in reverse slot order; each layer keeps its own K/V
// stream. Shared by the CPU slot tests and the GPU parity tests.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "exitsim/engine/backend.hpp"
#include "exitsim/engine/hidden_states.hpp"
#include "exitsim/engine/kv_cache.hpp"

namespace exitsim::engine::test_support {

struct LayerCallRun {
  std::unique_ptr<HiddenStates> states;
  HeldStates spacer;
  HeldStates x;  // the prompt's states after the last executed layer, in token order
};

inline LayerCallRun run_layer_calls(const Backend& model, std::span<const std::int32_t> tokens) {
  const std::size_t n = tokens.size();
  LayerCallRun run;
  run.states = model.make_states();
  run.spacer = HeldStates(*run.states, 3);
  run.x = HeldStates(*run.states, n);
  const std::vector<StateSlot> reversed(run.x.slots().rbegin(), run.x.slots().rend());
  const std::vector<std::int32_t> reversed_tokens(tokens.rbegin(), tokens.rend());
  model.embed(reversed_tokens, *run.states, reversed);
  const auto blocks_per_stream = static_cast<std::int64_t>((n + 3) / 4);
  KvCache kv(model.kv_width(), 4, model.executed_layers() * blocks_per_stream);
  for (int layer = 0; layer < model.executed_layers(); ++layer) {
    const int stream = kv.open_stream();
    std::vector<LayerRow> rows(n);
    for (std::size_t t = 0; t < n; ++t) {
      rows[t] = {.position = static_cast<std::int32_t>(t),
                 .read_stream = stream,
                 .write_stream = stream,
                 .chunk = 0};
    }
    model.layer(layer, *run.states, run.x.slots(), rows, kv);
  }
  return run;
}

}  // namespace exitsim::engine::test_support
