#pragma once

// The engine commands' model (engine run, engine eval, validate): the options naming it and the
// text its prompts come from, loading it on its backend, and the scenario made to describe it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exitsim/engine/backend.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "scenario_options.hpp"

namespace CLI {
class App;
}

namespace exitsim::engine {
class CudaModel;  // only defined in a build with CUDA
}

namespace exitsim::cli {

// The model and the text its prompts (or evaluation windows) come from.
struct ModelOptions {
  std::string dir;
  std::vector<int> exit_layers;
  std::string text;
  std::string token_ids;
  std::string backend = "cpu";  // cpu or cuda
  std::string dtype = "fp32";   // the GPU backend's storage: fp32, fp16 or bf16
  int threads = 0;              // the CPU backend's OpenMP threads (0: the scenario's, else
                                // OpenMP's choice)
  bool pin = false;             // each of them bound to its own core (or the scenario's engine.pin)

  // --model is required unless `model_required` is false (the command then checks it itself).
  void add_to(CLI::App& command, bool model_required = true);

  // The prompts' tokens: the text through the byte tokenizer, or the token-id file.
  std::vector<std::int32_t> corpus(const engine::ModelConfig& config) const;
};

struct LoadedModel {
  engine::ModelConfig config;
  engine::ModelWeights weights;
  std::unique_ptr<engine::Backend> model;
  // The same model when it runs on the GPU (to attach a CUPTI tracer); nullptr on the CPU.
  engine::CudaModel* cuda = nullptr;
};

// The scenario's engine.threads and engine.pin, where the command line set neither --threads nor
// --pin (load_model applied those); the CPU backend only.
void apply_scenario_threading(const ModelOptions& options, const scenario::Scenario& s);
// --warmup when given (>= 0), else the scenario's engine.warmup_requests.
int warmup_requests(int command_line, const scenario::Scenario& s);
std::unique_ptr<LoadedModel> load_model(const ModelOptions& options);

// The scenario's model section made to describe the engine's model, so that the scenario's exit
// policy is validated against the exit points the engine really has. The user's --set come
// after and win.
ScenarioOptions with_engine_model(const ScenarioOptions& options, const ModelShape& m);

}  // namespace exitsim::cli
