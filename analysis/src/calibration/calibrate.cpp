// `calibrate`: measurements in, one fit per op and the step residual out, and the judgement of
// which fits to trust.
#include "exitsim/analysis/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "exitsim/traces/op_grid.hpp"
#include "parts.hpp"

namespace exitsim::analysis {

namespace ops = traces::engine_ops;

namespace {

// Records how a grid fit predicts its op's calls in the running engine: their total over its
// prediction, and their median error.
void compare_with_engine(sim::OpFit& fit, const std::vector<OpSample>& calls) {
  if (static_cast<std::int64_t>(calls.size()) < k_min_trusted_samples)
    return;
  double measured = 0;
  double predicted = 0;
  std::vector<const OpSample*> views;
  for (const OpSample& call : calls) {
    measured += call.time_us;
    predicted += fit.predict_us(call.batch, call.context);
    views.push_back(&call);
  }
  if (measured <= 0 || predicted <= 0)
    return;
  fit.in_situ_scale = measured / predicted;
  fit.in_situ_median_ape = median_ape(fit, views);
}

// The traced steps' (wall - wait) / price by the profile's own fits, at the quantiles 0, 5%,
// ..., 100% (linear between ranks); empty under 40 steps.
std::vector<double> step_spread(const sim::CostProfile& profile,
                                const std::vector<TraceStep>& steps) {
  const sim::OpFit* residual = profile.find(std::string(ops::step_residual));
  std::vector<double> ratios;
  for (const TraceStep& step : steps) {
    double priced = residual != nullptr ? residual->predict_us(step.embedded, step.emitted) : 0.0;
    for (const auto& [name, call] : step.calls) {
      const sim::OpFit* fit = profile.find(*name);
      priced += fit != nullptr ? fit->predict_us(call.batch, call.context) : call.time_us;
    }
    const double measured = step.wall_us - step.idle_us;
    if (priced > 0 && measured > 0)
      ratios.push_back(measured / priced);
  }
  constexpr std::size_t k_min_steps = 40;
  if (ratios.size() < k_min_steps)
    return {};
  std::sort(ratios.begin(), ratios.end());
  std::vector<double> quantiles;
  const std::size_t last = sim::CostProfile::k_step_quantiles - 1;
  for (std::size_t q = 0; q <= last; ++q) {
    const double at =
        static_cast<double>(q) / static_cast<double>(last) * static_cast<double>(ratios.size() - 1);
    const auto low = static_cast<std::size_t>(at);
    const std::size_t high = std::min(low + 1, ratios.size() - 1);
    quantiles.push_back(ratios[low] +
                        (ratios[high] - ratios[low]) * (at - static_cast<double>(low)));
  }
  return quantiles;
}

}  // namespace

void fit_measurements(const Samples& traced, const Samples& grid,
                      const std::vector<TraceStep>& steps, const CalibrationOptions& options,
                      sim::CostProfile& profile) {
  // An op the grid timed is fitted from the grid (controlled, repeated measurements over a wide
  // range); its calls in the traces, where given, measure how the running engine differs (in
  // isolation an op finds its weights in cache; in the engine the layers between its calls
  // evicted them). The fit is not scaled to them: scaled to the calls' total, a skewed
  // distribution (a few stretched calls) lifts every typical call, and the engine's steps were
  // priced further off (docs/calibration.md has the figures). Ops the grid lacks (sampling) and
  // the step residual come from the traces.
  CalibrationOptions grid_options = options;
  grid_options.match_total = false;
  for (const auto& [name, entry] : grid) {
    if (!priced_op(name))
      continue;
    sim::OpFit fit = fit_op(name, entry.first, entry.second, grid_options);
    fit.measured_by = "grid";
    if (const auto in_situ = traced.find(name); in_situ != traced.end())
      compare_with_engine(fit, in_situ->second.second);
    profile.ops.push_back(std::move(fit));
  }
  for (const auto& [name, entry] : traced) {
    if (priced_op(name) && !grid.contains(name))
      profile.ops.push_back(fit_op(name, entry.first, entry.second, options));
  }
  // The step residual: what a step's wall time holds beyond its priced ops' measured times
  // (scheduling, policy work, gaps), against the tokens it embedded and emitted. Measured, not
  // priced: charging the residual with what grid-fitted ops spend beyond their isolated time
  // makes it a difference of large numbers, often below zero (docs/calibration.md).
  std::vector<OpSample> residuals;
  for (const TraceStep& step : steps) {
    double measured = 0;
    for (const auto& call : step.calls)
      measured += call.second.time_us;
    residuals.push_back(
        {step.embedded, step.emitted, std::max(0.0, step.wall_us - measured - step.idle_us)});
  }
  if (!residuals.empty()) {
    profile.ops.push_back(fit_op(std::string(ops::step_residual), "step", residuals, options));
  }
  std::sort(profile.ops.begin(), profile.ops.end(),
            [](const sim::OpFit& a, const sim::OpFit& b) { return a.name < b.name; });
  profile.step_variability = step_spread(profile, steps);
}

sim::CostProfile calibrate(std::span<const std::string> paths, const CalibrationOptions& options) {
  if (paths.empty())
    throw InputError({"", 0, 0, "OPTRACE"}, expected_found("at least one op trace", "none"));
  sim::CostProfile profile;
  Samples traced;
  Samples grid;
  std::vector<TraceStep> steps;
  double probe_sum = 0;
  int probes = 0;
  // Each file is a grid or a trace, by its first line; with a grid, the traces' layer calls are
  // filed by pass like the grid's shapes.
  std::vector<bool> is_grid;
  for (const std::string& path : paths)
    is_grid.push_back(traces::is_op_grid(path));
  const bool split_passes = std::find(is_grid.begin(), is_grid.end(), true) != is_grid.end();
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    sim::ProfileSource source = read_run_description(path);
    if (profile.source.traces.empty()) {
      profile.source = source;
    } else {
      same_source(profile.source, source);
      profile.source.traces.push_back(path);
    }
    if (source.speed_probe_us > 0) {
      probe_sum += source.speed_probe_us;
      ++probes;
    }
    if (is_grid[i])
      read_grid(path, grid);
    else
      read_trace(path, split_passes, traced, steps);
  }
  profile.source.speed_probe_us = probes > 0 ? probe_sum / probes : 0.0;
  for (const std::string_view required : ops::layer) {
    if (!traced.contains(std::string(required)) && !grid.contains(std::string(required))) {
      // A grid of prefill shapes only has "<op>.prefill": decode calls need their own.
      throw InputError({paths.front(), 0, 0, "name"},
                       expected_found(fmt::format("calls of the layer op \"{}\"", required),
                                      "none in any trace or grid given"));
    }
  }
  fit_measurements(traced, grid, steps, options, profile);
  return profile;
}

std::vector<std::string> absurd_fits(const sim::CostProfile& profile) {
  std::vector<std::string> out;
  for (const sim::OpFit& op : profile.ops) {
    // A handful of calls cannot tell a busy machine from a rare slow call; untrusted_fits names
    // such fits already. A fit to the roofline's prices measured nothing.
    if (op.samples < k_min_trusted_samples || op.measured_by == "roofline")
      continue;
    // Both halves of a grid must say so: 4 of 7 held-out points stretched by a slow spell would
    // otherwise refuse a good fit.
    if (op.measured_by == "grid" && op.held_out_median_ape > k_absurd_held_out_median_ape &&
        op.fit_median_ape > k_absurd_held_out_median_ape) {
      out.push_back(
          fmt::format("{}: median error {:.0f}% on held-out points, {:.0f}% on fitted "
                      "ones (above {:.0f}%)",
                      op.name, 100 * op.held_out_median_ape, 100 * op.fit_median_ape,
                      100 * k_absurd_held_out_median_ape));
    }
    if (op.held_out_mape > k_absurd_held_out_mape) {
      out.push_back(fmt::format("{}: held-out mean error {:.0f}% (above {:.0f}%)", op.name,
                                100 * op.held_out_mape, 100 * k_absurd_held_out_mape));
    }
  }
  return out;
}

std::vector<std::string> untrusted_fits(const sim::CostProfile& profile) {
  std::vector<std::string> out;
  for (const sim::OpFit& op : profile.ops) {
    // Not a measurement: the roofline's prices, which calibrate names as such.
    if (op.measured_by == "roofline")
      continue;
    // A grid fit rests on a few held-out medians, of which a slow spell may stretch two or
    // three: its median error is judged. A trace fit is scaled to its calls' total, so its
    // median is off by design where a few calls are stretched: its mean error is judged.
    const bool grid = op.measured_by == "grid";
    const double held_out = grid ? op.held_out_median_ape : op.held_out_mape;
    if (held_out > k_untrusted_held_out_mape) {
      out.push_back(fmt::format("{}: held-out {} error {:.1f}% (above {:.0f}%)", op.name,
                                grid ? "median" : "mean", 100 * held_out,
                                100 * k_untrusted_held_out_mape));
    }
    if (op.in_situ_median_ape > k_untrusted_held_out_mape) {
      out.push_back(fmt::format(
          "{}: timed in isolation, it misses the engine's own calls by {:.1f}% (median; above "
          "{:.0f}%)",
          op.name, 100 * op.in_situ_median_ape, 100 * k_untrusted_held_out_mape));
    }
    if (op.in_situ_scale > k_max_in_situ_scale || op.in_situ_scale < 1 / k_max_in_situ_scale) {
      out.push_back(fmt::format(
          "{}: the engine's calls took {:.2f}x its isolated timing (beyond {:.0f}x either way)",
          op.name, op.in_situ_scale, k_max_in_situ_scale));
    }
    if (op.samples < k_min_trusted_samples) {
      out.push_back(fmt::format("{}: fitted on {} calls (fewer than {})", op.name, op.samples,
                                k_min_trusted_samples));
    }
    for (const std::string& term : op.undetermined_terms) {
      out.push_back(fmt::format(
          "{}: its calls do not determine the {} term (too few distinct shapes), so it is fitted "
          "without it and prices other shapes by a guess; measure more batch sizes and contexts",
          op.name, term));
    }
    for (const sim::OpFit::Regime& regime : op.regimes) {
      if (regime.mean_of_calls) {
        out.push_back(fmt::format(
            "{}: the regime up to batch {} missed its calls' total by more than 4x and is "
            "priced as their mean",
            op.name, regime.batch_max));
      }
    }
  }
  return out;
}

}  // namespace exitsim::analysis
