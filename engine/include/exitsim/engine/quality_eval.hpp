#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exitsim/engine/backend.hpp"
#include "exitsim/policy/calibration_table.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/policy/sync_strategy.hpp"

namespace exitsim::engine {

struct QualityEvalOptions {
  std::int64_t context = 64;     // tokens of each window given as the prompt
  std::int64_t window = 192;     // tokens scored per window (teacher-forced outputs)
  std::int64_t max_windows = 0;  // 0: every window the corpus holds
  // Every setting is measured under each of these (quality depends on the strategy: the K/V
  // later tokens attend over differs).
  std::vector<policy::SyncStrategy> strategies = {policy::SyncStrategy::state_copy};
  std::int64_t max_running = 16;
  // Called after each engine step with the output tokens decoded so far and in all (every
  // window under the baseline and each setting and strategy): a long evaluation's progress.
  std::function<void(std::int64_t done, std::int64_t total)> progress;
  std::uint64_t seed = 0;
};

// One exit setting measured on the evaluation text.
struct QualityMeasurement {
  policy::ExitPolicyParams exit_policy;  // kind "none": the full-depth baseline
  policy::SyncStrategy strategy = policy::SyncStrategy::full_depth;  // measured under
  std::int64_t tokens = 0;
  double nll_per_token = 0;    // nats, of the text's next token under the exit's prediction
  double top1_agreement = 0;   // fraction whose exit argmax equals the full-depth argmax
  double mean_exit_depth = 0;  // stack layers
  std::vector<double> exit_distribution;  // per effective exit point
  // adaptive_threshold: the estimator's threshold at the end of the text (the setting's
  // exit_policy.threshold is its initial one).
  std::optional<double> final_threshold;
};

// Teacher-forces the corpus through the engine, window by window (prompt = `context` tokens,
// then `window` forced tokens; windows advance by `window`, so each scored token is scored
// once), first at full depth and then under each setting with each of the options' strategies
// (setting by setting, strategies in the order given; an adaptive_threshold setting under
// deferred_fill only, the one strategy whose parallel passes give its estimator pairs, one window
// at a time as FREE decodes its samples, so that it refits at each new window). Every
// output token is counted, the first of each window included (it comes from the prompt's
// prefill at full depth). Throws InputError when the corpus holds no window.
std::vector<QualityMeasurement> evaluate_quality(const Backend& model,
                                                 std::span<const std::int32_t> corpus,
                                                 std::span<const policy::ExitPolicyParams> settings,
                                                 const QualityEvalOptions& options);

// The calibration table of the same windows (policy/calibration_table.hpp): every scored token
// runs to the full depth, probed at each exit point below the top (the oracle's run), and each
// probe adds (its confidence by `measure`, "top1" or "margin"; whether its argmax there is the
// full-depth argmax) to `bins` equal-width confidence bins of its point. The first token of each
// window (the prompt's prefill, never probed) is not in it.
policy::CalibrationTable measure_calibration(const Backend& model,
                                             std::span<const std::int32_t> corpus,
                                             const std::string& measure, std::size_t bins,
                                             const QualityEvalOptions& options);

}  // namespace exitsim::engine
