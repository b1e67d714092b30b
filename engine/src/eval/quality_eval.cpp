#include "exitsim/engine/quality_eval.hpp"

#include <fmt/format.h>

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
  const std::int64_t block_size = 16;
  const std::int64_t per_window = (options.context + options.window + block_size - 1) / block_size;
  std::int64_t tokens_done = 0;
  const auto runs = static_cast<std::int64_t>(1 + settings.size() * options.strategies.size());
  const std::int64_t tokens_total =
      runs * static_cast<std::int64_t>(requests.size()) * options.window;

  const auto measure = [&](const policy::ExitPolicyParams& exit_policy,
                           policy::SyncStrategy strategy, Scored& scored) {
    EngineOptions engine_options;
    engine_options.exit_policy = exit_policy;
    engine_options.strategy = strategy;
    engine_options.limits.max_running = options.max_running;
    engine_options.limits.max_batched_tokens =
        std::max<std::int64_t>(8192, options.context * options.max_running);
    engine_options.block_size = block_size;
    engine_options.kv_blocks = per_window * (options.max_running + 1);
    engine_options.seed = options.seed;
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
    return m;
  };
  out.push_back(summarize(none, policy::SyncStrategy::full_depth, full, full_run));
  for (const policy::ExitPolicyParams& params : settings) {
    for (const policy::SyncStrategy strategy : options.strategies) {
      Scored scored;
      const EngineRun run = measure(params, strategy, scored);
      out.push_back(summarize(params, strategy, scored, run));
    }
  }
  return out;
}

}  // namespace exitsim::engine
