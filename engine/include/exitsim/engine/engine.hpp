#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exitsim/core/ids.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/engine/backend.hpp"
#include "exitsim/policy/depthwise.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/policy/scheduler.hpp"
#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/step_trace.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "exitsim/profiler/host_profiler.hpp"

namespace exitsim::engine {

struct EngineRequest {
  RequestId id;
  TimeNs arrival = 0;  // on the engine clock (honoured only with EngineOptions::honour_arrivals)
  std::vector<std::int32_t> prompt;
  std::int64_t output_tokens = 1;  // generated exactly: request traces fix output lengths
  // Teacher forcing (quality evaluation): when given, output position p emits forced[p] whatever
  // the model predicts; the logits, exits and K/V are computed as in free decoding. At least
  // output_tokens entries.
  std::vector<std::int32_t> forced;
};

// Hooks into a run, for quality measurement (engine eval) and tests. Each may be empty.
struct EngineObserver {
  // The logits an emitted token was drawn from, with the exit point that produced them.
  std::function<void(RequestId request, std::int64_t position, int exit_point,
                     std::span<const float> logits)>
      on_logits;
  // A finished sequence's K/V at one executed layer, just before it is freed: the positions
  // whose rows exist there and their keys and values (rows of kv_width floats, in order).
  std::function<void(RequestId request, int layer, std::span<const std::int32_t> positions,
                     std::span<const float> keys, std::span<const float> values)>
      on_finished_kv;
  // A token's probe at an exit point below the top (confidence, adaptive_threshold and oracle
  // exits): the top-1 probability and top-1 - top-2 margin there, and the argmax. Setting it
  // makes oracle probes compute the probabilities too. engine eval's calibration table reads it.
  std::function<void(RequestId request, std::int64_t position, int exit_point, double top1_prob,
                     double margin, std::int32_t argmax)>
      on_probe;
};

struct EngineOptions {
  std::string scheduler = "continuous";
  policy::SchedulerParams scheduler_params;  // the scenario's watermark and reservation
  policy::SchedulerLimits limits;
  std::int64_t block_size = 16;
  // K/V capacity in blocks of block_size tokens at every layer (the simulator's unit).
  std::int64_t kv_blocks = 4096;
  policy::ExitPolicyParams exit_policy;  // kind "none": every token runs the full depth
  policy::SyncStrategy strategy = policy::SyncStrategy::full_depth;
  policy::DepthwiseRule depthwise;
  double temperature = 0;  // 0: greedy (the lowest index among tied maxima)
  std::uint64_t seed = 0;  // sampling and the exit draws of `distribution`
  bool honour_arrivals = false;
  // deferred_fill: when a fill reaches the top, compare each filled state's full-depth prediction
  // with the token its early exit emitted; at the first disagreement, emit the deep prediction
  // instead and discard every token after it (with its K/V), as EE-LLM-style rollback does.
  bool rollback = false;
  // scheduler_params.preemption "swap": the K/V cache's host tier, in pool blocks (block_size
  // rows of one K/V stream). A victim whose charged blocks fit moves there and resumes where it
  // stopped; one that does not is recomputed (policy::HostSwapSpace).
  std::int64_t host_kv_blocks = 0;
  EngineObserver observer;
  // Virtual time: when set, the engine's clock never reads the wall clock. Each step lasts what
  // this returns for the step's trace (the simulator's cost model, in the conformance suite),
  // tokens are stamped at the end of their step, and waiting for an arrival jumps to it. With
  // honour_arrivals, the engine then sees the workload's timing exactly as the simulator does.
  std::function<TimeNs(const policy::StepTrace&)> step_duration;
  // Called with every step's trace (policy/step_trace.hpp) once the step is done.
  std::function<void(const policy::StepTrace&)> step_observer;
};

// One generated token, as the token trace records it.
struct GeneratedToken {
  RequestId request;
  std::int64_t position = 0;  // output position
  std::int32_t token = 0;
  int exit_point = 0;      // index into the effective exit points
  int exit_depth = 0;      // stack layers run before the coda
  double score = 0;        // the confidence or router score that decided the exit; NaN when none
  TimeNs time = 0;         // engine clock at emission
  bool discarded = false;  // rolled back later (deferred_fill with rollback): not in the output
  // adaptive_threshold only (the token trace's optional columns): the confidence at each exit
  // point the token was probed at, from the first, and the agreement flags of the calibration
  // pairs it gave, in the order the estimator received them (traces/token_trace.hpp).
  std::vector<double> confidences{};
  std::vector<std::uint8_t> agreements{};
};

// One refit attempt of adaptive_threshold's estimator: the step it came before (its exits use
// the threshold from here on) and that step's start on the engine clock.
struct ThresholdTrajectoryPoint {
  std::uint64_t step = 0;
  TimeNs time = 0;
  policy::ThresholdRefit refit;
};

// One engine iteration: which requests it worked on and what each ran (the step's trace rows,
// which a cost model prices with sim::StepPricer). Op-trace rows carry the step id, so this maps
// every op to its requests.
struct StepRecord {
  std::uint64_t step = 0;
  TimeNs start = 0;
  // Time the engine slept waiting for arrivals since the previous step (honour_arrivals): the
  // previous step lasted until this one's start less this.
  TimeNs idle_before = 0;
  std::vector<RequestId> prefill;     // prompt (or recompute) chunks
  std::vector<RequestId> decode;      // decode tokens or depth-wise steps
  std::vector<policy::StepRow> rows;  // as in the step's policy::StepTrace
};

// Swap preemption's traffic, in pool blocks as the scheduler charges them.
struct EngineSwaps {
  std::int64_t swapped_out = 0;  // victims moved to the host tier
  std::int64_t swapped_out_blocks = 0;
  std::int64_t swapped_in_blocks = 0;
  std::int64_t recomputed_instead = 0;  // victims that did not fit the host tier
};

struct EngineRun {
  std::vector<std::vector<std::int32_t>> outputs;  // per request, in the order given
  std::vector<GeneratedToken> tokens;              // in emission order
  std::int64_t iterations = 0;
  std::int64_t preemptions = 0;
  // deferred_fill: pending states that reached the full depth, those whose deep prediction
  // disagreed with their early exit's token (only looked at with rollback), and output tokens
  // discarded by rollbacks.
  std::int64_t filled_states = 0;
  std::int64_t disagreements = 0;
  std::int64_t rolled_back_tokens = 0;
  EngineSwaps swaps;
  // adaptive_threshold: every refit attempt in order, and the calibration pairs the estimator
  // received (completed fill states and the deep tokens' probes of deferred_fill's passes).
  std::vector<ThresholdTrajectoryPoint> threshold_trajectory;
  std::int64_t calibration_pairs = 0;
  std::vector<StepRecord> steps;
  TimeNs wall = 0;
};

// The decoding loop: continuous batching under a shared scheduler, per-token depth from the
// shared exit policy, and each synchronization strategy executed for real on the K/V cache.
class Engine {
 public:
  // Throws InputError for options the model cannot run (a strategy that needs recursions on a
  // plain model, router policies without routers, exit points inside a recursion under
  // depthwise, an unknown scheduler).
  Engine(const Backend& model, EngineOptions options, profiler::HostProfiler* profiler = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Decodes every request to its output length. Throws InputError for a request that can never
  // fit the K/V capacity or a token outside the vocabulary.
  EngineRun run(std::span<const EngineRequest> requests);

 private:
  class Loop;
  const Backend& model_;
  EngineOptions options_;
  profiler::HostProfiler* profiler_;
  std::unique_ptr<policy::Scheduler> scheduler_;
  std::unique_ptr<policy::ExitPolicy> exit_policy_;
};

}  // namespace exitsim::engine
