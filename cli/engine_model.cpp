#include "engine_model.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/cpu_threads.hpp"
#include "exitsim/engine/tokenizer.hpp"

#if EXITSIM_HAVE_CUDA
#include "exitsim/engine/cuda_model.hpp"
#endif

namespace exitsim::cli {

void ModelOptions::add_to(CLI::App& command, bool model_required) {
  command.add_option("--model", dir, "Model directory (exitsim.json or a Hugging Face Llama)")
      ->required(model_required);
  command
      .add_option("--exit-layers", exit_layers,
                  "Exit points of a plain model (layers, ascending), e.g. 8,16,24")
      ->delimiter(',');
  command.add_option(
      "--text", text,
      "Text the prompts come from (byte-level models, or a tokenizer.json beside the model)");
  command.add_option("--token-ids", token_ids,
                     "Token-id file the prompts come from (one document per line)");
  command.add_option("--backend", backend, "Where the model runs: cpu, or cuda (an NVIDIA GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command
      .add_option("--dtype", dtype,
                  "What the GPU backend stores weights, K/V and matmul operands in: fp32 (token "
                  "parity with the CPU), fp16 or bf16 (half the bytes; fp32 arithmetic)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  command.add_option("--threads", threads,
                     "The CPU backend's OpenMP threads (default: the scenario's engine.threads, "
                     "else OMP_NUM_THREADS, else every core); recorded in the profile's hardware "
                     "name");
  command.add_flag("--pin", pin,
                   "Bind each CPU backend thread to its own core (steadier timing; default: the "
                   "scenario's engine.pin)");
}

std::vector<std::int32_t> ModelOptions::corpus(const engine::ModelConfig& config) const {
  if (!text.empty() && !token_ids.empty()) {
    throw InputError({"", 0, 0, "--text"}, "give --text or --token-ids, not both");
  }
  if (!token_ids.empty()) {
    std::vector<std::int32_t> all;
    for (const auto& document : engine::read_token_id_file(token_ids, config.shape.vocab))
      all.insert(all.end(), document.begin(), document.end());
    return all;
  }
  if (text.empty()) {
    throw InputError({"", 0, 0, "--text"},
                     "expected --text FILE (or --token-ids FILE) for the model's prompts");
  }
  std::vector<std::int32_t> tokens =
      engine::encode_model_text(config, engine::read_text_file(text));
  if (tokens.empty())
    throw InputError({text, 0, 0, "--text"},
                     expected_found("a text to take prompts from", "an empty file"));
  return tokens;
}

std::unique_ptr<LoadedModel> load_model(const ModelOptions& options) {
  if (options.backend != "cuda" && options.dtype != "fp32") {
    throw InputError({"", 0, 0, "--dtype"},
                     expected_found("fp32 (the CPU backend computes in fp32; --dtype is for "
                                    "--backend cuda)",
                                    options.dtype));
  }
  auto loaded = std::make_unique<LoadedModel>();
  loaded->config = engine::load_model_config(options.dir, options.exit_layers);
  loaded->weights = engine::load_model_weights(loaded->config);
  if (options.backend == "cuda") {
#if EXITSIM_HAVE_CUDA
    const kernels::Dtype storage = options.dtype == "bf16"   ? kernels::Dtype::bf16
                                   : options.dtype == "fp16" ? kernels::Dtype::fp16
                                                             : kernels::Dtype::fp32;
    auto cuda = std::make_unique<engine::CudaModel>(loaded->config, loaded->weights, 0, storage);
    loaded->cuda = cuda.get();
    loaded->model = std::move(cuda);
#else
    throw InputError(
        {"", 0, 0, "--backend"},
        expected_found("cpu (this exitsim was built without the CUDA toolkit)", "cuda"));
#endif
  } else {
    if (options.threads != 0 || options.pin)
      engine::apply_cpu_threading({options.threads, options.pin});
    loaded->model = std::make_unique<engine::CpuModel>(loaded->config, loaded->weights);
  }
  return loaded;
}

void apply_scenario_threading(const ModelOptions& options, const scenario::Scenario& s) {
  if (options.backend != "cpu" || options.threads != 0 || options.pin)
    return;
  if (s.engine.threads != 0 || s.engine.pin)
    engine::apply_cpu_threading({static_cast<int>(s.engine.threads), s.engine.pin});
}

int warmup_requests(int command_line, const scenario::Scenario& s) {
  return command_line >= 0 ? command_line : static_cast<int>(s.engine.warmup_requests);
}

// The scenario's model section made to describe the engine's model, so that the scenario's exit
// policy is validated against the exit points the engine really has. The user's --set come
// after and win.
ScenarioOptions with_engine_model(const ScenarioOptions& options, const ModelShape& m) {
  const DepthStructure& d = m.depth;
  ScenarioOptions out = options;
  const std::vector<std::string> model = {
      "model.preset=null",
      "model.name=" + m.name,
      fmt::format("model.d_model={}", m.d_model),
      fmt::format("model.n_heads={}", m.n_heads),
      fmt::format("model.n_kv_heads={}", m.n_kv_heads),
      fmt::format("model.head_dim={}", m.head_dim),
      fmt::format("model.ffn_dim={}", m.ffn_dim),
      fmt::format("model.vocab={}", m.vocab),
      fmt::format("model.tied_embeddings={}", m.tied_embeddings),
      fmt::format("model.depth.prelude={}", d.prelude_layers),
      fmt::format("model.depth.block={}", d.block_layers),
      fmt::format("model.depth.recursions={}", d.recursions),
      fmt::format("model.depth.coda={}", d.coda_layers),
      fmt::format("model.depth.lora_rank=[{}]", fmt::join(d.lora_rank, ", ")),
      fmt::format("model.depth.exit_points=[{}]", fmt::join(d.exit_points, ", "))};
  out.overrides.insert(out.overrides.begin(), model.begin(), model.end());
  return out;
}

}  // namespace exitsim::cli
