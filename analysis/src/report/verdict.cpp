// The verdict: the report's answer in words and numbers.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {

using nlohmann::json;

namespace {

// What the plan says the configuration `key` needs for its target, beside full depth's
// (`full_depth_key`, when it is another configuration), and what a replica costs at capacity.
std::string plan_sentence(const PlanView& plan, const std::string& key,
                          const std::string* full_depth_key) {
  const json* c = plan.find(key);
  if (c == nullptr)
    return "";
  const json* full = full_depth_key != nullptr ? plan.find(*full_depth_key) : nullptr;
  const int replicas = c->value("replicas", 0);
  // A plan of an exitsim before tensor parallelism has no "gpus": one GPU per replica then.
  const int gpus = c->value("gpus", replicas);
  std::string text = replicas > 0
                         ? fmt::format(
                               " For the plan's target it needs {} replica(s) ({} GPU(s)), {} "
                               "per hour, {} per million output tokens",
                               replicas, gpus, fmt_number(number_or(*c, "cost_per_hour", 0.0)),
                               fmt_number(number_or(*c, "cost_per_million_tokens", 0.0)))
                         : std::string(" The plan found no replica count meeting its target");
  const int full_replicas = full != nullptr ? full->value("replicas", 0) : 0;
  text +=
      full_replicas > 0
          ? fmt::format(" (full depth: {} replica(s), {} per million output tokens).",
                        full_replicas, fmt_number(number_or(*full, "cost_per_million_tokens", 0.0)))
          : ".";
  // A replica run at its capacity: what the configuration costs where it is used fully.
  const auto at_capacity = [](const json* row) {
    return row != nullptr ? number_or(*row, "cost_per_million_tokens_at_capacity", 0.0) : 0.0;
  };
  if (at_capacity(c) > 0) {
    text += fmt::format(" At its capacity a replica costs {} per million output tokens{}.",
                        fmt_number(at_capacity(c)),
                        at_capacity(full) > 0
                            ? fmt::format(" (full depth: {})", fmt_number(at_capacity(full)))
                            : std::string());
  }
  return text;
}

// How far the profile that priced the runs was validated against the engine.
std::string trust_sentence(const ReportInputs& in) {
  if (in.validation_json.empty())
    return " Trust: no validation given, so the pricing's error against the engine is unknown.";
  const json v = validation_document(in);
  double worst = 0;
  std::string which;
  int judged = 0;
  int passed = 0;
  if (v.is_object() && v.contains("strategies")) {
    for (const json& s : v["strategies"]) {
      if (s.is_object() && s.contains("pass") && s["pass"].is_boolean()) {
        ++judged;
        passed += s["pass"].get<bool>() ? 1 : 0;
      }
      // A const json's operator[] on a missing key is undefined: look before reading.
      if (!s.is_object() || !s.contains("same_batches"))
        continue;
      const json& same = s["same_batches"];
      if (same.is_object() && same.contains("median_ape") && same["median_ape"].is_number() &&
          same["median_ape"].get<double>() >= worst) {
        worst = same["median_ape"].get<double>();
        which = s.value("strategy", std::string());
      }
    }
  }
  // No strategy priced the engine's own steps: there is no error to state (not a 0%).
  if (which.empty())
    return " Trust: the validation holds no per-step error of the engine's own batches.";
  const std::string targets =
      judged > 0 ? fmt::format(
                       " {} of {} validated strategies met every target (over {} engine "
                       "runs each; see Validation against the engine).",
                       passed, judged, v.value("repeats", 1))
                 : std::string();
  return fmt::format(
      " Trust: the profile priced the engine's own steps within {:.1f}% (median per step, "
      "worst strategy {}){}{}",
      100 * worst, which,
      worst > in.validation_target
          ? fmt::format(": WARNING, above the {:.0f}% target; treat the gain as an estimate "
                        "of that precision.",
                        100 * in.validation_target)
          : ".",
      targets);
}

}  // namespace

// The verdict: the scenario and its SLOs, the full-depth reference, the most efficient frontier
// configuration within the quality budget and its gain over full depth, what the plan says it
// needs for the target, and how far the pricing was validated.
std::string verdict_of(const ReportInputs& in, const Report& r, const PlanView& plan) {
  if (in.runs.empty() || r.frontier.empty())
    return "No verdict: there is no frontier to choose from (see the notes below).";
  std::string text;
  const YAML::Node root = YAML::Load(in.runs.front().scenario_yaml);
  const auto value = [&](const char* a, const char* b) {
    return root[a] && root[a][b] && !root[a][b].IsNull() ? root[a][b].as<std::string>()
                                                         : std::string("none");
  };
  const auto ms = [&](const char* key) {
    const std::string v = value("slo", key);
    return v == "none" ? v : v + " ms";
  };
  text +=
      fmt::format("Scenario {} (model {}): SLOs TTFT {}, TPOT {}, E2E {}; {} runs.",
                  root["name"] ? root["name"].as<std::string>() : "unnamed", value("model", "name"),
                  ms("ttft_ms"), ms("tpot_ms"), ms("e2e_ms"), in.runs.size());
  // Whether `p` is more efficient than `than` (or `than` is none yet).
  const auto better = [&](const FrontierRow& p, const FrontierRow* than) {
    return than == nullptr || (in.efficiency_objective.maximize ? p.efficiency > than->efficiency
                                                                : p.efficiency < than->efficiency);
  };
  const FrontierRow* reference = nullptr;
  for (const FrontierRow& p : r.points) {
    if (p.reference && p.same_as == p.run && std::isfinite(p.efficiency) && better(p, reference))
      reference = &p;
  }
  if (reference == nullptr) {
    return text +
           " No full-depth run to compare against: the sweep needs sync.strategy "
           "full_depth for a verdict.";
  }
  const bool nll = in.quality_objective.metric == "nll_per_token";
  const double budget = nll ? reference->quality * (1 + in.max_quality_loss)
                            : reference->quality * (1 - in.max_quality_loss);
  const FrontierRow* best = nullptr;
  for (const std::size_t f : r.frontier) {
    const FrontierRow& p = r.points[f];
    const bool within = nll ? p.quality <= budget : p.quality >= budget;
    if (within && better(p, best))
      best = &p;
  }
  const std::string metric = in.efficiency_objective.metric;
  text += fmt::format(" Full depth (the reference, {}): {} {}, {} {}.", reference->key, metric,
                      fmt_number(reference->efficiency), in.quality_objective.metric,
                      fmt_number(reference->quality));
  if (best == nullptr || best == reference) {
    text += fmt::format(
        " Within a quality loss of {:.1f}% no configuration beats full depth: dynamic depth "
        "does not pay off here.",
        100 * in.max_quality_loss);
  } else {
    const double gain = in.efficiency_objective.maximize ? best->efficiency / reference->efficiency
                                                         : reference->efficiency / best->efficiency;
    text += fmt::format(
        " Best within a quality loss of {:.1f}% (--max-quality-loss): {}: {} {} ({:.3f}x full "
        "depth), {} {} ({:+.2f}%).",
        100 * in.max_quality_loss, best->key, metric, fmt_number(best->efficiency), gain,
        in.quality_objective.metric, fmt_number(best->quality),
        100 * (best->quality / reference->quality - 1));
  }
  if (best != nullptr)
    text += plan_sentence(plan, best->key, best == reference ? nullptr : &reference->key);
  return text + trust_sentence(in);
}

}  // namespace exitsim::analysis::report_parts
