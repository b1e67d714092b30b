#include "engine_support.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exitsim/core/dtype.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/cpu_threads.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/engine/options_from_setup.hpp"
#include "exitsim/engine/quality_eval.hpp"
#include "exitsim/engine/quality_table.hpp"
#include "exitsim/engine/tokenizer.hpp"
#include "exitsim/setup/executor_setup.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/chrome_trace.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "exitsim/traces/token_trace.hpp"
#include "scenario_options.hpp"

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

std::int64_t longest_request(std::span<const engine::EngineRequest> requests) {
  std::int64_t longest = 1;
  for (const engine::EngineRequest& r : requests)
    longest = std::max(longest, static_cast<std::int64_t>(r.prompt.size()) + r.output_tokens);
  return longest;
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

#if EXITSIM_HAVE_CUDA
struct DeviceTrace::State {
  engine::CudaModel* model = nullptr;
  std::unique_ptr<profiler::CuptiTracer> tracer;
};

DeviceTrace::DeviceTrace(engine::CudaModel* cuda_model, const profiler::HostProfiler* profiler)
    : state_(std::make_unique<State>()) {
  if (cuda_model == nullptr || profiler == nullptr || !profiler->enabled())
    return;
  state_->model = cuda_model;
  state_->tracer = std::make_unique<profiler::CuptiTracer>(
      profiler::CuptiTracerOptions{.origin = profiler->origin()});
  state_->model->set_tracer(state_->tracer.get());
}

DeviceTrace::~DeviceTrace() {
  if (state_->model != nullptr)
    state_->model->set_tracer(nullptr);
}

std::vector<traces::OpTraceRow> DeviceTrace::take() {
  if (state_->tracer == nullptr)
    return {};
  std::vector<traces::OpTraceRow> rows = state_->tracer->take_rows();
  summary_ = profiler::describe(state_->tracer->last_join());
  return rows;
}
#else
struct DeviceTrace::State {};

DeviceTrace::DeviceTrace(engine::CudaModel*, const profiler::HostProfiler*) {}
DeviceTrace::~DeviceTrace() = default;
std::vector<traces::OpTraceRow> DeviceTrace::take() {
  return {};
}
#endif

std::vector<engine::EngineRequest> engine_requests(const scenario::Scenario& s,
                                                   const std::vector<std::int32_t>& corpus) {
  const auto workload = sim::make_workload(s.workload, s.seed);
  const engine::PromptSource prompts(corpus, s.seed);
  std::vector<engine::EngineRequest> requests;
  while (auto descriptor = workload->next()) {
    engine::EngineRequest r;
    r.id = descriptor->id;
    r.arrival = descriptor->arrival.value_or(0);
    r.prompt = prompts.prompt(descriptor->id, descriptor->input_tokens);
    r.output_tokens = descriptor->output_tokens;
    requests.push_back(std::move(r));
  }
  return requests;
}

engine::EngineOptions engine_options(const scenario::Scenario& s, const RunArgs& args,
                                     std::int64_t longest) {
  // What only the simulator models so far: refused rather than run as something else.
  if (s.scheduler.prefix_caching) {
    throw InputError({"", 0, 0, "scheduler.prefix_caching"},
                     expected_found("false for the engine (prefix caching is modelled by the "
                                    "simulator only so far)",
                                    "true"));
  }
  // Scheduling, exits (replay's token trace included), synchronisation and the host swap tier
  // exactly as the simulator takes them from the scenario.
  engine::EngineOptions o = engine::options_from_setup(setup::executor_setup(s));
  if (o.kv_blocks == 0) {
    // No device memory to size from on the CPU: room for max_running of the longest request.
    const std::int64_t per_sequence = (longest + o.block_size - 1) / o.block_size;
    o.kv_blocks = per_sequence * std::min<std::int64_t>(s.scheduler.max_running, 64);
  }
  o.temperature = args.temperature;
  o.honour_arrivals = args.honour_arrivals;
  if (s.sync.rollback_probability > 0) {
    throw InputError({"", 0, 0, "sync.rollback_probability"},
                     "the engine measures disagreement instead of drawing it: set 0 and pass "
                     "--rollback");
  }
  o.rollback = args.rollback;
  return o;
}

namespace {

// steps.csv: the requests of every engine step, so each op of the op trace (by its step id)
// maps to the requests it served.
void write_steps(const engine::EngineRun& run, const std::string& path) {
  traces::detail::AtomicOutputFile file(path);
  file.write("step_id,start_ns,prefill_request_ids,decode_request_ids\n");
  const auto ids = [](const std::vector<RequestId>& requests) {
    std::string out;
    for (const RequestId id : requests)
      out += (out.empty() ? "" : ";") + std::to_string(id.value);
    return out;
  };
  for (const engine::StepRecord& step : run.steps) {
    file.write(
        fmt::format("{},{},{},{}\n", step.step, step.start, ids(step.prefill), ids(step.decode)));
  }
  file.finish();
}

}  // namespace

void write_run_description(const engine::Backend& backend, const RunConditions& conditions,
                           const std::string& path) {
  const ModelShape& shape = backend.config().shape;
  const auto probe = [](const engine::SpeedProbe& p) {
    return nlohmann::json{{"median_us", p.median_us}, {"p10_us", p.p10_us}, {"p90_us", p.p90_us}};
  };
  const nlohmann::json run = {
      {"engine", "exitsim-engine"},
      {"backend", backend.name()},
      {"hardware", backend.hardware()},
      {"model", shape.name},
      {"model_shape", sim::model_fingerprint(shape)},
      {"speed_probe",
       {{"start", probe(conditions.probe_start)}, {"end", probe(conditions.probe_end)}}},
      {"warmup_requests", conditions.warmup_requests},
      {"omp_wait_policy", conditions.omp_wait_policy},
      {"build", build_description()}};
  traces::write_file_atomically(path, run.dump(2) + "\n");
}

std::string build_description() {
#if defined(__clang__)
  std::string out = std::string("clang++ ") + __clang_version__;
#elif defined(__GNUC__)
  std::string out = std::string("g++ ") + __VERSION__;
#else
  std::string out = "unknown compiler";
#endif
#ifdef NDEBUG
  out += ", optimised";
#else
  out += ", debug";
#endif
#if defined(__SANITIZE_ADDRESS__)
  out += ", AddressSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  out += ", AddressSanitizer";
#endif
#endif
  return out;
}

std::string omp_wait_policy() {
  const char* value = std::getenv("OMP_WAIT_POLICY");
  return value != nullptr && *value != '\0' ? value : "default";
}

void warm_up_engine(const engine::Backend& backend, std::span<const engine::EngineRequest> requests,
                    engine::EngineOptions options, int count) {
  if (count <= 0 || requests.empty())
    return;
  std::vector<engine::EngineRequest> first(
      requests.begin(), requests.begin() + std::min<std::ptrdiff_t>(count, std::ssize(requests)));
  for (engine::EngineRequest& r : first)
    r.arrival = 0;
  options.honour_arrivals = false;
  options.observer = {};
  options.step_observer = {};
  engine::Engine engine(backend, std::move(options), nullptr);
  (void)engine.run(first);
}

void write_token_trace(const engine::EngineRun& run, const std::string& policy,
                       const std::string& path) {
  traces::TokenTraceWriter writer(path);
  for (const engine::GeneratedToken& t : run.tokens) {
    if (t.discarded)
      continue;
    traces::TokenTraceRow row;
    row.request_id = t.request.value;
    row.position = t.position;
    row.exit_depth = t.exit_depth;
    row.exit_point = t.exit_point;
    row.score = t.score;
    row.policy = policy;
    row.time_ns = t.time;
    writer.write(row);
  }
  writer.finish();
}

void check_output_directory(const std::string& path, const std::string& option) {
  std::error_code ec;
  for (std::filesystem::path at = std::filesystem::absolute(path, ec); !at.empty();
       at = at.parent_path()) {
    if (std::filesystem::exists(at, ec)) {
      if (!std::filesystem::is_directory(at, ec)) {
        throw InputError({path, 0, 0, option},
                         expected_found("a directory that can be created",
                                        at.string() + " is a file, not a directory"));
      }
      return;
    }
    if (at == at.parent_path())
      return;
  }
}

void check_output_file_folder(const std::string& path, const std::string& option) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty())
    check_output_directory(folder.string(), option);
}

void make_output_file_folder(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty())
    std::filesystem::create_directories(folder);
}

void write_profile(const profiler::HostProfiler& profiler, const engine::EngineRun& run,
                   const engine::Backend& backend, const std::string& dir,
                   const RunConditions& conditions, std::vector<traces::OpTraceRow> device_rows) {
  write_run_description(backend, conditions, (std::filesystem::path(dir) / "run.json").string());
  write_steps(run, (std::filesystem::path(dir) / "steps.csv").string());
  const std::string csv = (std::filesystem::path(dir) / "op_trace.csv").string();
  {
    traces::OpTraceWriter writer(csv);
    if (device_rows.empty()) {
      profiler.write(writer);
    } else {
      std::vector<traces::OpTraceRow> rows = profiler.rows();
      rows.insert(rows.end(), std::make_move_iterator(device_rows.begin()),
                  std::make_move_iterator(device_rows.end()));
      std::stable_sort(rows.begin(), rows.end(),
                       [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
      for (const traces::OpTraceRow& row : rows)
        writer.write(row);
    }
    writer.finish();
  }
  traces::OpTraceReader reader(csv);
  traces::ChromeTraceWriter chrome((std::filesystem::path(dir) / "op_trace.json").string(),
                                   {256LL << 20});
  traces::write_op_trace_as_chrome(reader, chrome);
  chrome.finish();
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
