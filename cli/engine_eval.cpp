// `exitsim engine eval` (engine_eval.hpp).
#include "engine_eval.hpp"

#include <fmt/core.h>

#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/quality_table.hpp"
#include "exitsim/policy/calibration_table.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/setup/policy_params.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "progress.hpp"

namespace exitsim::cli {
namespace {

// Equal-width confidence bins per exit point of the calibration table: 0.05 wide, fine enough
// for the threshold grid's steps (0.067 on FREE's [0.3, 0.9]) with thousands of tokens per point.
constexpr std::size_t k_calibration_bins = 20;

// The quality table's adaptive_threshold rows carry their initial threshold (the setting): the
// threshold the estimator ended at is said here, on stderr, so a table written to stdout stays
// a table.
void report_final_thresholds(std::span<const engine::QualityMeasurement> results) {
  for (const engine::QualityMeasurement& m : results) {
    if (!m.final_threshold)
      continue;
    fmt::print(stderr,
               "adaptive_threshold from {} ended at threshold {} under deferred_fill (the "
               "table's threshold column holds the initial one)\n",
               m.exit_policy.threshold, *m.final_threshold);
  }
}

// Builds each setting's policy for the model before anything is evaluated, so that a bad value
// is refused in a second, naming the option it came from, not after minutes of evaluation.
void check_settings_before_evaluating(std::span<const policy::ExitPolicyParams> settings,
                                      std::span<const std::string> options,
                                      const engine::Backend& model) {
  for (std::size_t i = 0; i < settings.size(); ++i) {
    try {
      policy::make_exit_policy(settings[i], model.depth());
    } catch (const InputError& e) {
      throw InputError({"", 0, 0, options[i]}, e.message());
    }
  }
}

// The calibration table needs an exit point below the full depth and probed tokens: a window's
// first token comes from the prefill and is never probed.
void check_calibration_possible(const engine::Backend& model,
                                const engine::QualityEvalOptions& options) {
  const std::size_t points = model.depth().effective_exit_points().size();
  if (points < 2) {
    throw InputError(
        {"", 0, 0, "--calibration-table"},
        expected_found("a model with an exit point below the full depth",
                       fmt::format("{} with {} exit point", model.config().shape.name, points)));
  }
  if (options.window < 2) {
    throw InputError({"", 0, 0, "--window"},
                     expected_found("at least 2 scored tokens per window with --calibration-table "
                                    "(the first is never probed)",
                                    std::to_string(options.window)));
  }
}

}  // namespace

void run_eval(const EvalArgs& args) {
  const auto loaded = load_model(args.model);
  const std::vector<std::int32_t> corpus = args.model.corpus(loaded->config);
  std::vector<policy::ExitPolicyParams> settings;
  std::vector<std::string> setting_options;  // the option each setting came from
  // One setting per threshold of a confidence-measured kind, remembering the option it came from.
  const auto add_confidence_settings = [&](const std::vector<double>& thresholds, const char* kind,
                                           const char* option) {
    for (const double t : thresholds) {
      policy::ExitPolicyParams p;
      p.kind = kind;
      p.threshold = t;
      p.confidence_measure = args.measure;
      settings.push_back(p);
      setting_options.emplace_back(option);
    }
  };
  add_confidence_settings(args.thresholds, "confidence", "--thresholds");
  add_confidence_settings(args.adaptive_thresholds, "adaptive_threshold", "--adaptive-thresholds");
  for (const double t : args.router_thresholds) {
    policy::ExitPolicyParams p;
    p.kind = "router_expert_choice";
    p.threshold = t;
    settings.push_back(p);
    setting_options.emplace_back("--router-thresholds");
  }
  // Setting-less policies: one row each, what the simulator replays them from.
  struct SettingLess {
    bool wanted;
    const char* kind;
    const char* option;
  };
  for (const SettingLess& policy :
       {SettingLess{args.token_choice, "router_token_choice", "--token-choice"},
        SettingLess{args.oracle, "oracle", "--oracle"}}) {
    if (!policy.wanted)
      continue;
    policy::ExitPolicyParams p;
    p.kind = policy.kind;
    settings.push_back(p);
    setting_options.emplace_back(policy.option);
  }
  check_settings_before_evaluating(settings, setting_options, *loaded->model);
  if (!args.calibration_table.empty())
    check_calibration_possible(*loaded->model, args.options);
  engine::QualityEvalOptions options = args.options;
  const bool recursive = loaded->config.shape.depth.recursions > 0;
  options.strategies.clear();
  for (const std::string& name : args.strategies) {
    const policy::SyncStrategy strategy = setup::strategy_named(name, "--strategies");
    if (strategy == policy::SyncStrategy::full_depth) {
      throw InputError({"", 0, 0, "--strategies"},
                       expected_found("strategies that let tokens exit (full depth is measured "
                                      "always, as the reference)",
                                      "full_depth"));
    }
    options.strategies.push_back(strategy);
  }
  if (options.strategies.empty())
    options.strategies.push_back(recursive ? policy::SyncStrategy::skip_kv
                                           : policy::SyncStrategy::state_copy);
  if (std::cmp_less(corpus.size(), options.context + options.window)) {
    // The evaluation's own check names no file; the user gave one.
    const std::string& source = args.model.text.empty() ? args.model.token_ids : args.model.text;
    throw InputError({source, 0, 0, args.model.text.empty() ? "--token-ids" : "--text"},
                     expected_found(fmt::format("an evaluation text of at least {} tokens "
                                                "(--context {} + --window {})",
                                                options.context + options.window, options.context,
                                                options.window),
                                    fmt::format("{} tokens", corpus.size())));
  }
  // The output is created before the evaluation, so an unwritable path fails at once.
  std::optional<traces::detail::AtomicOutputFile> file;
  if (!args.out.empty())
    file.emplace(args.out);
  std::optional<traces::detail::AtomicOutputFile> calibration_file;
  if (!args.calibration_table.empty())
    calibration_file.emplace(args.calibration_table);
  ProgressReporter reporter("engine eval", "tokens scored");
  options.progress = [&](std::int64_t done, std::int64_t total) {
    reporter.update(static_cast<double>(done), static_cast<double>(total));
  };
  const auto results = engine::evaluate_quality(*loaded->model, corpus, settings, options);
  reporter.finish();
  report_final_thresholds(results);
  std::ostringstream calibration_text;
  if (calibration_file) {
    ProgressReporter calibrating("engine eval: calibration table", "tokens probed");
    options.progress = [&](std::int64_t done, std::int64_t total) {
      calibrating.update(static_cast<double>(done), static_cast<double>(total));
    };
    const policy::CalibrationTable calibration = engine::measure_calibration(
        *loaded->model, corpus, args.measure, k_calibration_bins, options);
    calibrating.finish();
    calibration.write(calibration_text);
  }
  const engine::QualityTable table = engine::quality_table_of(results);
  std::ostringstream text;
  table.write(text);
  // The table goes to the file when one is named, else to stdout: never both.
  if (args.out.empty())
    fmt::print("{}", text.str());
  if (file) {
    file->write(text.str());
    file->finish();
    fmt::print("wrote {}\n", args.out);
  }
  if (calibration_file) {
    calibration_file->write(calibration_text.str());
    calibration_file->finish();
    fmt::print(stderr, "wrote {}\n", args.calibration_table);
  }
}

}  // namespace exitsim::cli
