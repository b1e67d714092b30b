#include "exitsim/engine/quality_eval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/engine.hpp"

namespace exitsim::engine {
namespace {

std::vector<EngineRequest> windows_of(std::span<const std::int32_t> corpus,
                                      const QualityEvalOptions& options) {
  std::vector<EngineRequest> requests;
  const auto length = static_cast<std::int64_t>(corpus.size());
  for (std::int64_t start = 0; start + options.context + options.window <= length;
       start += options.window) {
    if (options.max_windows > 0 &&
        static_cast<std::int64_t>(requests.size()) >= options.max_windows)
      break;
    EngineRequest r;
    r.id = RequestId(static_cast<std::uint64_t>(requests.size()));
    const auto begin = corpus.begin() + start;
    r.prompt.assign(begin, begin + options.context);
    r.forced.assign(begin + options.context, begin + options.context + options.window);
    r.output_tokens = options.window;
    requests.push_back(std::move(r));
  }
  if (requests.empty()) {
    throw InputError({"", 0, 0, "eval"},
                     expected_found(fmt::format("an evaluation text of at least {} tokens "
                                                "(context {} + window {})",
                                                options.context + options.window, options.context,
                                                options.window),
                                    fmt::format("{} tokens", corpus.size())));
  }
  return requests;
}

// Every run's engine: the windows' K/V room for max_running of them at once, one more spare.
EngineOptions engine_options_for(const QualityEvalOptions& options,
                                 const policy::ExitPolicyParams& exit_policy,
                                 policy::SyncStrategy strategy) {
  constexpr std::int64_t block_size = 16;
  const std::int64_t per_window = (options.context + options.window + block_size - 1) / block_size;
  EngineOptions engine_options;
  engine_options.exit_policy = exit_policy;
  engine_options.strategy = strategy;
  engine_options.limits.max_running = options.max_running;
  engine_options.limits.max_batched_tokens =
      std::max<std::int64_t>(8192, options.context * options.max_running);
  engine_options.block_size = block_size;
  engine_options.kv_blocks = per_window * (options.max_running + 1);
  engine_options.seed = options.seed;
  // FREE refits its threshold at each new sample and decodes one at a time: windows admitted
  // all at once would give the estimator one refit before it has a pair. One window at a time
  // (teacher-forced, deferred_fill's exact K/V: the same tokens, exits only by the threshold).
  if (exit_policy.kind == "adaptive_threshold")
    engine_options.limits.max_running = 1;
  return engine_options;
}

// The strategies a setting is measured under: all the options name, except that an adaptive
// threshold learns only under deferred_fill (elsewhere it would be the fixed rule at its initial
// threshold, which the confidence rows already measure).
std::vector<policy::SyncStrategy> strategies_for(const policy::ExitPolicyParams& params,
                                                 const QualityEvalOptions& options) {
  if (params.kind == "adaptive_threshold")
    return {policy::SyncStrategy::deferred_fill};
  return options.strategies;
}

struct Scored {
  std::map<std::pair<std::uint64_t, std::int64_t>, std::int32_t> argmax;
  double nll = 0;
  std::int64_t tokens = 0;
};

}  // namespace

std::vector<QualityMeasurement> evaluate_quality(const Backend& model,
                                                 std::span<const std::int32_t> corpus,
                                                 std::span<const policy::ExitPolicyParams> settings,
                                                 const QualityEvalOptions& options) {
  const std::vector<EngineRequest> requests = windows_of(corpus, options);
  const std::vector<int> exit_depths = model.depth().effective_exit_points();
  std::int64_t tokens_done = 0;
  std::int64_t runs = 1;
  for (const policy::ExitPolicyParams& params : settings)
    runs += static_cast<std::int64_t>(strategies_for(params, options).size());
  const std::int64_t tokens_total =
      runs * static_cast<std::int64_t>(requests.size()) * options.window;

  const auto measure = [&](const policy::ExitPolicyParams& exit_policy,
                           policy::SyncStrategy strategy, Scored& scored) {
    EngineOptions engine_options = engine_options_for(options, exit_policy, strategy);
    if (options.progress) {
      engine_options.step_observer = [&](const policy::StepTrace& step) {
        for (const policy::StepRow& row : step.rows)
          tokens_done += row.emits ? 1 : 0;
        options.progress(tokens_done, tokens_total);
      };
    }
    engine_options.observer.on_logits = [&](RequestId id, std::int64_t position, int,
                                            std::span<const float> logits) {
      const EngineRequest& r = requests[static_cast<std::size_t>(id.value)];
      const std::int32_t next = r.forced[static_cast<std::size_t>(position)];
      std::size_t best = 0;
      double max = logits[0];
      for (std::size_t v = 1; v < logits.size(); ++v) {
        if (logits[v] > logits[best])
          best = v;
        max = std::max(max, double{logits[v]});
      }
      double total = 0;
      for (const float l : logits)
        total += std::exp(double{l} - max);
      scored.nll += std::log(total) + max - double{logits[static_cast<std::size_t>(next)]};
      scored.tokens += 1;
      scored.argmax[{id.value, position}] = static_cast<std::int32_t>(best);
    };
    Engine engine(model, engine_options);
    return engine.run(requests);
  };

  std::vector<QualityMeasurement> out;
  Scored full;
  policy::ExitPolicyParams none;
  const EngineRun full_run = measure(none, policy::SyncStrategy::full_depth, full);
  const auto summarize = [&](const policy::ExitPolicyParams& params, policy::SyncStrategy strategy,
                             const Scored& scored, const EngineRun& run) {
    QualityMeasurement m;
    m.exit_policy = params;
    m.strategy = strategy;
    m.tokens = scored.tokens;
    m.nll_per_token = scored.nll / static_cast<double>(scored.tokens);
    m.exit_distribution.assign(exit_depths.size(), 0.0);
    std::int64_t agree = 0;
    double depth = 0;
    for (const GeneratedToken& t : run.tokens) {
      m.exit_distribution[static_cast<std::size_t>(t.exit_point)] += 1;
      depth += t.exit_depth;
      if (scored.argmax.at({t.request.value, t.position}) ==
          full.argmax.at({t.request.value, t.position}))
        ++agree;
    }
    const auto n = static_cast<double>(run.tokens.size());
    for (double& p : m.exit_distribution)
      p /= n;
    m.top1_agreement = static_cast<double>(agree) / n;
    m.mean_exit_depth = depth / n;
    if (params.kind == "adaptive_threshold") {
      m.final_threshold = run.threshold_trajectory.empty()
                              ? params.threshold
                              : run.threshold_trajectory.back().refit.threshold;
    }
    return m;
  };
  out.push_back(summarize(none, policy::SyncStrategy::full_depth, full, full_run));
  for (const policy::ExitPolicyParams& params : settings) {
    for (const policy::SyncStrategy strategy : strategies_for(params, options)) {
      Scored scored;
      const EngineRun run = measure(params, strategy, scored);
      out.push_back(summarize(params, strategy, scored, run));
    }
  }
  return out;
}

policy::CalibrationTable measure_calibration(const Backend& model,
                                             std::span<const std::int32_t> corpus,
                                             const std::string& measure, std::size_t bins,
                                             const QualityEvalOptions& options) {
  const std::vector<EngineRequest> requests = windows_of(corpus, options);
  const std::size_t below_top = model.depth().effective_exit_points().size() - 1;
  struct Probe {
    double confidence = 0;
    std::int32_t argmax = 0;
  };
  // Per token, its probes by exit point; the full-depth argmax arrives at its emission.
  std::map<std::pair<std::uint64_t, std::int64_t>, std::vector<Probe>> probes;
  std::map<std::pair<std::uint64_t, std::int64_t>, std::int32_t> deep;
  policy::ExitPolicyParams oracle;
  oracle.kind = "oracle";
  // state_copy: the oracle runs every token to the top, so its K/V is exact whatever the strategy.
  EngineOptions engine_options =
      engine_options_for(options, oracle, policy::SyncStrategy::state_copy);
  engine_options.observer.on_probe = [&](RequestId id, std::int64_t position, int point,
                                         double top1_prob, double margin, std::int32_t argmax) {
    std::vector<Probe>& token = probes[{id.value, position}];
    token.resize(below_top);
    token[static_cast<std::size_t>(point)] = {measure == "margin" ? margin : top1_prob, argmax};
  };
  engine_options.observer.on_logits = [&](RequestId id, std::int64_t position, int,
                                          std::span<const float> logits) {
    deep[{id.value, position}] =
        static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  };
  std::int64_t tokens_done = 0;
  const auto tokens_total = static_cast<std::int64_t>(requests.size()) * options.window;
  if (options.progress) {
    engine_options.step_observer = [&](const policy::StepTrace& step) {
      for (const policy::StepRow& row : step.rows)
        tokens_done += row.emits ? 1 : 0;
      options.progress(tokens_done, tokens_total);
    };
  }
  Engine engine(model, engine_options);
  engine.run(requests);
  policy::CalibrationCounter counter(measure, below_top, bins);
  for (const auto& [token, points] : probes) {
    for (std::size_t p = 0; p < points.size(); ++p)
      counter.add(p, points[p].confidence, points[p].argmax == deep.at(token));
  }
  return counter.table("engine eval");
}

}  // namespace exitsim::engine
