#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"

namespace exitsim::scenario {

// The fully resolved, validated scenario: every field has its value (defaults applied, presets
// expanded). The YAML schema, the defaults and the docs are defined in one place
// (scenarios/src/schema*.cpp, documented in docs/scenario.md); this struct is what the rest of
// exitsim reads. Fields of keys that do not apply to the chosen kind (say, lognormal `mean` for a
// fixed length) keep the member defaults below. Load scenarios with exitsim/scenario/load.hpp.

struct ModelConfig {
  std::string preset;  // "" when the shape was given explicitly
  // The Hugging Face config.json the shape was read from ("" = none); explicit keys override it.
  std::string hf_config;
  ModelShape shape;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};
struct HardwareConfig {
  std::string preset;
  HardwareSpec spec;

  friend bool operator==(const HardwareConfig&, const HardwareConfig&) = default;
};
struct CostModelConfig {
  std::string kind = "roofline";  // roofline | calibrated | table
  std::string profile;            // calibrated/table: path of the cost profile
  double flops_efficiency = 0.0;  // fraction of peak FLOP/s reached by matrix ops
  double bandwidth_efficiency = 0.0;
  // calibrated: draw each iteration's time factor from the profile's measured step spread.
  bool step_variability = false;
  // Every iteration's price times this factor: a what-if for a slower or faster machine, and how
  // validate measures a metric's sensitivity to the profile's precision.
  double price_scale = 1.0;
  // What an iteration's price covers: whole_step (every op the step runs) or block_only (the
  // recursion block's layers alone, as Mixture-of-Recursions' throughput was timed;
  // docs/cost_model.md, "Timing scope").
  std::string timing_scope = "whole_step";

  friend bool operator==(const CostModelConfig&, const CostModelConfig&) = default;
};

struct ArrivalConfig {
  std::string process;  // poisson | gamma | constant | on_off
  double rate = 0.0;    // requests/s (during "on" periods for on_off)
  double cv = 1.0;      // gamma: coefficient of variation of inter-arrival times
  double on_seconds = 0.0;
  double off_seconds = 0.0;

  friend bool operator==(const ArrivalConfig&, const ArrivalConfig&) = default;
};

struct LengthConfig {
  std::string dist;        // fixed | uniform | lognormal | empirical
  std::int64_t value = 0;  // fixed
  std::int64_t min = 1;    // uniform bounds; clamp for the others
  std::int64_t max = 0;    // 0 = no upper clamp (uniform requires it)
  double mean = 0.0;       // lognormal: mean in tokens
  double sigma = 0.0;      // lognormal: standard deviation of log(length)
  std::string path;        // empirical: a length CSV (any supported length-bearing trace)
  std::string column;      // empirical: "input" or "output" lengths of that file

  friend bool operator==(const LengthConfig&, const LengthConfig&) = default;
};

// Which columns of a generic CSV trace (format csv) hold what, by header name.
struct TraceColumnsConfig {
  std::string arrival;       // "" = no arrival times: workload.arrivals draws them
  std::string arrival_unit;  // s | ms | us | ns | datetime
  std::string input_tokens;
  std::string output_tokens;

  friend bool operator==(const TraceColumnsConfig&, const TraceColumnsConfig&) = default;
};

struct TraceConfig {
  std::string path;  // "" = no trace
  // auto | azure | vidur | mooncake | burstgpt | native | tracev2 | csv | sharegpt
  std::string format;
  TraceColumnsConfig columns{};   // format csv
  std::int64_t max_requests = 0;  // replay the first N requests only (0 = the whole trace)
  double rate_scale = 1.0;        // replay at x k: inter-arrival gaps divided by k
  bool skip_bad_rows = false;
  std::string tokenizer{};  // a tokenizer.json: ShareGPT turns are counted in its tokens

  friend bool operator==(const TraceConfig&, const TraceConfig&) = default;
};

// Prompts that share prefixes, for workloads whose requests name none (docs/simulator.md,
// "Prefix caching").
struct PrefixModelConfig {
  std::string kind;  // none | system_prompts | sessions
  std::int64_t block_tokens = 16;
  // system_prompts: a share of requests start with one of `prompts` system prompts of `tokens`.
  std::int64_t prompts = 1;
  std::int64_t tokens = 0;
  double share = 1.0;
  // sessions (synthetic only): conversations of `turns` turns, `concurrent` at a time; a turn's
  // prompt is the previous turn's prompt, its output, and a new message drawn from
  // workload.input_tokens.
  std::int64_t turns = 1;
  std::int64_t concurrent = 1;

  friend bool operator==(const PrefixModelConfig&, const PrefixModelConfig&) = default;
};

struct WorkloadConfig {
  std::string source;         // synthetic | trace
  std::int64_t requests = 0;  // synthetic: number of requests (traces: trace.max_requests)
  TraceConfig trace;
  ArrivalConfig arrivals;  // synthetic, and traces without timestamps
  LengthConfig input_tokens;
  LengthConfig output_tokens;
  PrefixModelConfig prefix;

  friend bool operator==(const WorkloadConfig&, const WorkloadConfig&) = default;
};

struct PositionBucket {
  std::int64_t until_position = 0;  // applies to output positions < until_position
  std::vector<double> probabilities;

  friend bool operator==(const PositionBucket&, const PositionBucket&) = default;
};

struct DepthScheduleStep {
  std::int64_t from_position = 0;
  int depth = 0;

  friend bool operator==(const DepthScheduleStep&, const DepthScheduleStep&) = default;
};

// exit_policy.adaptive: FREE's adaptive threshold estimator (policy/adaptive_threshold.hpp).
struct AdaptiveThresholdConfig {
  double grid_low = 0.3;
  double grid_high = 0.9;
  std::int64_t grid_points = 10;
  double zeta = 0.4;
  std::int64_t max_refits = 300;
  std::int64_t refit_every = 1;

  friend bool operator==(const AdaptiveThresholdConfig&, const AdaptiveThresholdConfig&) = default;
};

struct ExitPolicyConfig {
  // none | confidence | adaptive_threshold | router_expert_choice | router_token_choice | oracle
  // | position_schedule | replay | distribution
  std::string kind;
  double threshold = 0.0;             // confidence / router score threshold
  std::string confidence_measure;     // top1 | margin (top-1 minus top-2, as in FREE)
  double calm_decay = 0.0;            // CALM decaying threshold temperature; 0 = constant
  std::string router_mode;            // expert choice at decode time: threshold | top_k
  std::vector<double> capacities;     // expert choice: per-recursion capacity fractions
  std::vector<double> probabilities;  // distribution: one per exit point
  std::vector<PositionBucket> position_buckets;  // distribution, per position
  std::vector<DepthScheduleStep> schedule;       // position_schedule
  std::string token_trace;                       // replay
  // confidence, oracle, router_*: the engine's measured quality (or exit) table the simulator
  // takes these policies' exit distributions from
  std::string threshold_table;
  std::string router_scores;  // router_*: measured (from threshold_table) | uniform (synthetic)
  AdaptiveThresholdConfig adaptive;  // adaptive_threshold
  // adaptive_threshold: the engine's calibration table the simulator draws confidences and
  // agreements from
  std::string calibration_table;
  // adaptive_threshold: an engine run's token trace whose confidences and agreement flags the
  // simulator replays instead (the conformance suite); "" = draw from calibration_table
  std::string confidence_trace;

  friend bool operator==(const ExitPolicyConfig&, const ExitPolicyConfig&) = default;
};

struct SyncConfig {
  // full_depth | batch_sync | state_copy | deferred_fill | skip_kv | shared_kv | depthwise
  std::string strategy;
  double rollback_probability = 0.0;  // deferred_fill
  std::string exited_tokens;          // depthwise: immediate | accumulate | head_queue
  std::int64_t accumulate_threshold = 0;
  std::string head_queue_returns;  // head_queue: behind_waiting | ahead_of_waiting

  friend bool operator==(const SyncConfig&, const SyncConfig&) = default;
};

struct SchedulerConfig {
  std::string kind;              // static | continuous | chunked_prefill | depthwise | <registered>
  std::int64_t max_running = 0;  // sequences per iteration
  std::int64_t max_batched_tokens = 0;  // tokens per iteration (chunked prefill budget)
  std::int64_t block_size = 0;          // KV block size in tokens
  std::int64_t kv_blocks = 0;           // 0 = derive from device memory
  double memory_reserve_fraction = 0.0;
  std::string preemption;              // recompute | swap
  double watermark_fraction = 0.01;    // of K/V blocks kept free at admission
  bool reserve_prompt_blocks = false;  // chunked_prefill: admit only whole prompts' blocks
  std::string unservable;              // error | reject
  bool prefix_caching = false;         // reuse cached prompt blocks (policy/prefix_cache.hpp)
  std::string role = "mixed";          // mixed | prefill | decode (disaggregated serving)

  friend bool operator==(const SchedulerConfig&, const SchedulerConfig&) = default;
};

struct ClusterConfig {
  std::int64_t replicas = 0;  // all replicas: cluster.replicas, or the sum of the groups' counts
  std::string router;         // round_robin | least_outstanding | shortest_queue_tokens

  friend bool operator==(const ClusterConfig&, const ClusterConfig&) = default;
};

// `count` identical replicas: the top-level scenario with `overrides` applied (cluster.groups),
// or, without groups, all cluster.replicas with the top-level sections.
struct ReplicaGroup {
  std::int64_t count = 0;
  ModelConfig model;
  HardwareConfig hardware;
  CostModelConfig cost_model;
  SchedulerConfig scheduler;
  ParallelSpec parallel;
  // What differs from the top-level sections, as "key.path=value" assignments in canonical form
  // (presets expanded, as render_resolved_yaml writes them); empty when nothing does.
  std::vector<std::string> overrides;

  friend bool operator==(const ReplicaGroup&, const ReplicaGroup&) = default;
};

struct SloConfig {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2e_ms;

  friend bool operator==(const SloConfig&, const SloConfig&) = default;
};

struct SweepAxis {
  std::string key;                  // a scenario key path, validated like --set
  std::vector<std::string> values;  // YAML scalars, each validated against that key

  friend bool operator==(const SweepAxis&, const SweepAxis&) = default;
};

struct OutputConfig {
  std::string dir;
  bool summary_json = true;
  bool requests_csv = true;
  bool timeline = false;
  double timeline_max_mb = 0.0;

  friend bool operator==(const OutputConfig&, const OutputConfig&) = default;
};

// How the real engine (`exitsim engine run`, `validate`) is measured on the CPU backend; the
// simulator ignores it. Command-line --threads, --pin and --warmup win over these.
struct EngineConfig {
  std::int64_t threads = 0;  // OpenMP threads; 0: OpenMP's choice (OMP_NUM_THREADS, else all)
  bool pin = false;          // bind thread i to the i-th CPU the process may run on
  std::int64_t warmup_requests = 4;  // decoded untimed before a measured run

  friend bool operator==(const EngineConfig&, const EngineConfig&) = default;
};

struct Scenario {
  std::string name;
  std::uint64_t seed = 0;
  ModelConfig model;
  HardwareConfig hardware;
  CostModelConfig cost_model;
  WorkloadConfig workload;
  ExitPolicyConfig exit_policy;
  SyncConfig sync;
  SchedulerConfig scheduler;
  ParallelSpec parallel;  // the GPUs each replica spans (groups may differ)
  ClusterConfig cluster;
  // Never empty in a loaded scenario; what the simulator builds replicas from, in order.
  std::vector<ReplicaGroup> replica_groups;
  SloConfig slo;
  std::vector<SweepAxis> sweep;
  OutputConfig outputs;
  EngineConfig engine;

  friend bool operator==(const Scenario&, const Scenario&) = default;
};

}  // namespace exitsim::scenario
