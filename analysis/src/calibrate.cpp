#include "exitsim/analysis/calibrate.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "exitsim/traces/op_grid.hpp"
#include "exitsim/traces/op_trace.hpp"

namespace exitsim::analysis {

namespace ops = traces::engine_ops;

std::string grid_description_path(const std::string& grid_path) {
  std::filesystem::path p(grid_path);
  p.replace_extension(".run.json");
  return p.string();
}

std::string run_description_path(const std::string& measurement_path) {
  if (traces::is_op_grid(measurement_path))
    return grid_description_path(measurement_path);
  return (std::filesystem::path(measurement_path).parent_path() / "run.json").string();
}

sim::ProfileSource read_run_description(const std::string& op_trace_path) {
  const std::string path = run_description_path(op_trace_path);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError({path, 0, 0, ""},
                     expected_found("the run description that `exitsim engine run --profile` "
                                    "writes beside " +
                                        op_trace_path,
                                    "no readable file"));
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError({path, 0, 0, ""},
                     expected_found("JSON", fmt::format("invalid JSON at byte {}", e.byte)));
  }
  sim::ProfileSource source;
  const auto field = [&](const char* key) {
    if (!root.is_object() || !root.contains(key) || !root[key].is_string())
      throw InputError({path, 0, 0, key}, expected_found("a string", "none"));
    return root[key].get<std::string>();
  };
  source.engine = field("engine");
  source.backend = field("backend");
  source.hardware = field("hardware");
  source.model = field("model");
  source.model_shape = field("model_shape");
  source.traces = {op_trace_path};
  // The speed probe at the start and end of the run (engine/op_timing.hpp); older runs have none.
  if (root.contains("speed_probe")) {
    const nlohmann::json& probe = root["speed_probe"];
    const auto reading = [&](const char* key) {
      if (!probe.is_object() || !probe.contains(key) || !probe[key].is_number() ||
          probe[key].get<double>() <= 0) {
        throw InputError({path, 0, 0, std::string("speed_probe.") + key},
                         expected_found("a time in microseconds > 0", "none"));
      }
      return probe[key].get<double>();
    };
    source.speed_probe_us = 0.5 * (reading("start_us") + reading("end_us"));
  }
  return source;
}

namespace {

constexpr double k_min_time_us = 0.05;  // clock resolution: shorter spans count as this long

// Ops whose time depends on the context as well as the batch: attention and K/V writes read and
// write by it, and the step residual is fitted against emitted tokens in that column.
bool uses_context(std::string_view kind) {
  return kind == "attention" || kind == "memcpy" || kind == "step";
}

struct LeastSquares {
  std::array<double, 4> coefficients{};
  double relative_sse = 0;
};

std::array<double, 4> features(const OpSample& s) {
  return {1.0, s.batch, s.context, s.batch * s.context};
}

// Minimises the weighted squared relative error over the samples with the given feature columns
// (weights: one per sample, from the robust loss; empty = all 1).
LeastSquares solve(std::span<const OpSample* const> samples, const std::vector<int>& columns,
                   std::span<const double> weights = {}) {
  const auto rows = static_cast<Eigen::Index>(samples.size());
  const auto cols = static_cast<Eigen::Index>(columns.size());
  Eigen::MatrixXd a(rows, cols);
  Eigen::VectorXd b(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const OpSample& s = *samples[static_cast<std::size_t>(i)];
    const double robust = weights.empty() ? 1.0 : std::sqrt(weights[static_cast<std::size_t>(i)]);
    const double weight = robust / std::max(s.time_us, k_min_time_us);
    const auto x = features(s);
    for (Eigen::Index j = 0; j < cols; ++j)
      a(i, j) = x[static_cast<std::size_t>(columns[static_cast<std::size_t>(j)])] * weight;
    b(i) = s.time_us * weight;
  }
  // Column scaling keeps the products (up to ~1e9) from swamping the constant term.
  Eigen::VectorXd scale = a.colwise().norm().transpose();
  for (Eigen::Index j = 0; j < cols; ++j)
    scale(j) = scale(j) > 0 ? scale(j) : 1.0;
  const Eigen::MatrixXd scaled = a * scale.cwiseInverse().asDiagonal();
  const Eigen::VectorXd solution = scaled.colPivHouseholderQr().solve(b).cwiseQuotient(scale);
  LeastSquares out;
  for (Eigen::Index j = 0; j < cols; ++j)
    out.coefficients[static_cast<std::size_t>(columns[static_cast<std::size_t>(j)])] = solution(j);
  out.relative_sse = (a * solution - b).squaredNorm();
  return out;
}

double median_of(std::vector<double> values) {
  if (values.empty())
    return 0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

// The Huber loss on relative error by iteratively reweighted least squares: a sample whose error
// is beyond 1.345 robust standard deviations (1.4826 x the median absolute error) counts with
// weight threshold / |error|, so a call stretched by a descheduled thread bends the line no more
// than a typical one. The returned relative_sse is the plain (unweighted) one, so regimes compare
// as before.
LeastSquares robust_solve(std::span<const OpSample* const> samples,
                          const std::vector<int>& columns) {
  constexpr int k_rounds = 6;
  constexpr double k_huber = 1.345;
  std::vector<double> weights(samples.size(), 1.0);
  LeastSquares fit = solve(samples, columns);
  std::vector<double> errors(samples.size());
  for (int round = 0; round < k_rounds; ++round) {
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const OpSample& s = *samples[i];
      const auto x = features(s);
      double predicted = 0;
      for (std::size_t k = 0; k < x.size(); ++k)
        predicted += fit.coefficients[k] * x[k];
      errors[i] = (predicted - s.time_us) / std::max(s.time_us, k_min_time_us);
    }
    std::vector<double> absolute(errors.size());
    std::transform(errors.begin(), errors.end(), absolute.begin(),
                   [](double e) { return std::abs(e); });
    const double threshold = k_huber * std::max(1.4826 * median_of(absolute), 1e-4);
    for (std::size_t i = 0; i < samples.size(); ++i)
      weights[i] = absolute[i] <= threshold ? 1.0 : threshold / absolute[i];
    fit = solve(samples, columns, weights);
  }
  fit.relative_sse = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const OpSample& s = *samples[i];
    const auto x = features(s);
    double predicted = 0;
    for (std::size_t k = 0; k < x.size(); ++k)
      predicted += fit.coefficients[k] * x[k];
    const double e = (predicted - s.time_us) / std::max(s.time_us, k_min_time_us);
    fit.relative_sse += e * e;
  }
  return fit;
}

double predict(const sim::OpFit& fit, const OpSample& s) {
  return fit.predict_us(s.batch, s.context);
}

std::vector<double> absolute_errors(const sim::OpFit& fit,
                                    std::span<const OpSample* const> samples) {
  std::vector<double> out;
  out.reserve(samples.size());
  for (const OpSample* s : samples) {
    const double t = std::max(s->time_us, k_min_time_us);
    out.push_back(std::abs(predict(fit, *s) - t) / t);
  }
  return out;
}

double mape(const sim::OpFit& fit, std::span<const OpSample* const> samples) {
  const std::vector<double> errors = absolute_errors(fit, samples);
  if (errors.empty())
    return 0;
  double sum = 0;
  for (const double e : errors)
    sum += e;
  return sum / static_cast<double>(errors.size());
}

double median_ape(const sim::OpFit& fit, std::span<const OpSample* const> samples) {
  return median_of(absolute_errors(fit, samples));
}

}  // namespace

sim::OpFit fit_op(const std::string& name, const std::string& kind,
                  std::span<const OpSample> samples, const CalibrationOptions& options) {
  if (samples.empty())
    throw std::logic_error("fit_op: no samples of " + name);
  sim::OpFit fit;
  fit.name = name;
  fit.kind = kind;
  std::vector<const OpSample*> train, held;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const bool hold = options.hold_out_every > 1 && samples.size() >= 10 &&
                      static_cast<int>(i % static_cast<std::size_t>(options.hold_out_every)) ==
                          options.hold_out_every - 1;
    (hold ? held : train).push_back(&samples[i]);
  }
  fit.samples = static_cast<std::int64_t>(train.size());
  fit.held_out = static_cast<std::int64_t>(held.size());
  fit.batch_min_seen = std::numeric_limits<std::int64_t>::max();
  for (const OpSample& s : samples) {
    fit.batch_min_seen = std::min(fit.batch_min_seen, static_cast<std::int64_t>(s.batch));
    fit.batch_max_seen = std::max(fit.batch_max_seen, static_cast<std::int64_t>(s.batch));
    fit.context_max_seen = std::max(fit.context_max_seen, static_cast<std::int64_t>(s.context));
  }

  // Only the features the data varies in: a constant column would be collinear with c0.
  const auto varies = [&](int column) {
    const double first = features(*train.front())[static_cast<std::size_t>(column)];
    return std::any_of(train.begin(), train.end(), [&](const OpSample* s) {
      return features(*s)[static_cast<std::size_t>(column)] != first;
    });
  };
  std::vector<int> columns = {0};
  for (int column : uses_context(kind) ? std::vector<int>{1, 2, 3} : std::vector<int>{1}) {
    if (varies(column))
      columns.push_back(column);
  }
  std::sort(train.begin(), train.end(),
            [](const OpSample* a, const OpSample* b) { return a->batch < b->batch; });
  const LeastSquares single = robust_solve(train, columns);
  fit.regimes = {{fit.batch_max_seen, single.coefficients}};

  // A knee: the best split of the batch axis into two regimes, each with enough samples.
  const std::size_t min_side = std::max<std::size_t>(8, 3 * columns.size());
  double best = options.knee_gain * single.relative_sse;
  std::set<double> tried;
  const double rms = std::sqrt(single.relative_sse / static_cast<double>(train.size()));
  for (int q = 1; q < 20 && train.size() >= 2 * min_side && rms > options.knee_min_error; ++q) {
    const std::size_t at = train.size() * static_cast<std::size_t>(q) / 20;
    const double knee = train[at]->batch;
    if (!tried.insert(knee).second)
      continue;
    const auto split = std::upper_bound(train.begin(), train.end(), knee,
                                        [](double k, const OpSample* s) { return k < s->batch; });
    const auto left = static_cast<std::size_t>(split - train.begin());
    if (left < min_side || train.size() - left < min_side)
      continue;
    const std::span<const OpSample* const> all(train);
    const LeastSquares low = robust_solve(all.first(left), columns);
    const LeastSquares high = robust_solve(all.subspan(left), columns);
    if (low.relative_sse + high.relative_sse < best) {
      best = low.relative_sse + high.relative_sse;
      fit.regimes = {{static_cast<std::int64_t>(knee), low.coefficients},
                     {fit.batch_max_seen, high.coefficients}};
    }
  }
  if (fit.regimes.size() == 2 && fit.regimes[0].batch_max >= fit.regimes[1].batch_max)
    fit.regimes.pop_back();
  // The relative-error fit follows the typical call; the simulator sums calls, so its total must
  // be the measured total: calls stretched by preemption or cache misses are rare but long.
  // Scale each regime so that it predicts its fitted calls' total time (the mean, not the
  // median). Per regime, because a few huge prefill calls would otherwise set the scale of
  // every small decode call.
  // A regime whose fit misses its own calls' total by more than k_max_rescale either way is not
  // a shape worth stretching (near-collinear features, predictions clamped at 0): stretching it
  // would blow its coefficients up, and prices outside the fitted range with them. It becomes its
  // calls' mean instead.
  constexpr double k_max_rescale = 4.0;
  // Grid points are medians of isolated calls: nothing stretched to match, so no rescaling.
  std::span<sim::OpFit::Regime> to_match;
  if (options.match_total)
    to_match = fit.regimes;
  for (sim::OpFit::Regime& regime : to_match) {
    const double low =
        &regime == &fit.regimes.front() ? -1.0 : static_cast<double>(fit.regimes.front().batch_max);
    double measured = 0;
    double predicted = 0;
    std::int64_t calls = 0;
    for (const OpSample* s : train) {
      if (s->batch > low && s->batch <= static_cast<double>(regime.batch_max)) {
        measured += s->time_us;
        predicted += predict(fit, *s);
        ++calls;
      }
    }
    if (measured <= 0 || calls == 0)
      continue;
    const double ratio = predicted > 0 ? measured / predicted : 0.0;
    if (ratio >= 1.0 / k_max_rescale && ratio <= k_max_rescale) {
      for (double& c : regime.coefficients)
        c *= ratio;
    } else {
      regime.coefficients = {measured / static_cast<double>(calls), 0.0, 0.0, 0.0};
      regime.mean_of_calls = true;
    }
  }
  fit.fit_mape = mape(fit, train);
  fit.held_out_mape = held.empty() ? fit.fit_mape : mape(fit, held);
  fit.held_out_median_ape = held.empty() ? median_ape(fit, train) : median_ape(fit, held);
  return fit;
}

namespace {

// Ops the calibrated model prices one call at a time; the rest of a step is its residual.
bool priced_op(std::string_view name) {
  if (name.ends_with(ops::prefill_suffix))
    name.remove_suffix(ops::prefill_suffix.size());
  return std::find(ops::layer.begin(), ops::layer.end(), name) != ops::layer.end() ||
         name == ops::kv_only || name == ops::embed || name == ops::lm_head ||
         name == ops::sampling;
}

struct StepTotals {
  TimeNs first_start = std::numeric_limits<TimeNs>::max();
  double priced_us = 0;
  double idle_us = 0;
  std::int64_t embedded = 0;
  std::int64_t emitted = 0;
};

void same_source(const sim::ProfileSource& a, const sim::ProfileSource& b) {
  const auto check = [&](const char* key, const std::string& x, const std::string& y) {
    if (x != y) {
      throw InputError(
          {b.traces.front(), 0, 0, key},
          expected_found(fmt::format("\"{}\" as in {}", x, a.traces.front()), "\"" + y + "\""));
    }
  };
  check("engine", a.engine, b.engine);
  check("backend", a.backend, b.backend);
  check("hardware", a.hardware, b.hardware);
  check("model_shape", a.model_shape, b.model_shape);
}

using Samples = std::map<std::string, std::pair<std::string, std::vector<OpSample>>>;

// One op trace's calls per op, and its steps' residuals.
void read_trace(const std::string& path, Samples& samples, std::vector<OpSample>& residuals) {
  std::map<std::uint64_t, StepTotals> steps;
  traces::OpTraceReader reader(path);
  while (const auto row = reader.next()) {
    const double us = static_cast<double>(row->duration_ns) / 1000.0;
    auto& entry = samples[row->name];
    entry.first = std::string(traces::to_string(row->kind));
    entry.second.push_back(
        {static_cast<double>(row->batch_tokens), static_cast<double>(row->context_tokens), us});
    StepTotals& step = steps[row->step_id];
    step.first_start = std::min(step.first_start, row->start_ns);
    if (priced_op(row->name))
      step.priced_us += us;
    if (row->name == ops::wait_for_arrival)
      step.idle_us += us;
    if (row->name == ops::embed)
      step.embedded += row->batch_tokens;
    if (row->name == ops::sampling)
      step.emitted += row->batch_tokens;
  }
  // A step lasts from its first op to the next step's first op, so scheduling between steps
  // is part of the residual, as the simulator sees it, but waiting for arrivals is not. The
  // last step has no such end, and a wait before the first step is no step: both left out.
  for (auto it = steps.begin(); it != steps.end() && std::next(it) != steps.end(); ++it) {
    if (it->second.priced_us == 0)
      continue;
    const TimeNs end = std::next(it)->second.first_start;
    const double wall_us = static_cast<double>(end - it->second.first_start) / 1000.0;
    residuals.push_back({static_cast<double>(it->second.embedded),
                         static_cast<double>(it->second.emitted),
                         std::max(0.0, wall_us - it->second.priced_us - it->second.idle_us)});
  }
}

// One op grid's points per op: each point's median is one sample. Prefill-shaped points fit
// "<op>.prefill": a prompt chunk's matrix-matrix projections cost otherwise than decode rows.
void read_grid(const std::string& path, Samples& samples) {
  traces::OpGridReader reader(path);
  while (const auto row = reader.next()) {
    auto& entry =
        samples[row->shape == "prefill" ? row->op + std::string(ops::prefill_suffix) : row->op];
    entry.first = std::string(traces::to_string(row->kind));
    entry.second.push_back({static_cast<double>(row->batch_tokens),
                            static_cast<double>(row->context_tokens), row->median_us});
  }
}

}  // namespace

sim::CostProfile calibrate(std::span<const std::string> paths, const CalibrationOptions& options) {
  if (paths.empty())
    throw InputError({"", 0, 0, "OPTRACE"}, expected_found("at least one op trace", "none"));
  sim::CostProfile profile;
  Samples traced;
  Samples grid;
  std::vector<OpSample> residuals;
  double probe_sum = 0;
  int probes = 0;
  for (const std::string& path : paths) {
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
    if (traces::is_op_grid(path))
      read_grid(path, grid);
    else
      read_trace(path, traced, residuals);
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
  // An op the grid timed is fitted from the grid (controlled, repeated measurements); its calls
  // in the traces then measure how well isolated timings predict the running engine. Ops the
  // grid lacks (sampling) and the step residual come from the traces.
  CalibrationOptions grid_options = options;
  grid_options.match_total = false;
  for (const auto& [name, entry] : grid) {
    if (!priced_op(name))
      continue;
    sim::OpFit fit = fit_op(name, entry.first, entry.second, grid_options);
    fit.measured_by = "grid";
    // The traces' calls of an op timed in both shapes mix both passes under one name: no
    // single fit to compare them with.
    const bool both_shapes = grid.contains(name + std::string(ops::prefill_suffix));
    if (const auto in_situ = traced.find(name); in_situ != traced.end() && !both_shapes) {
      std::vector<const OpSample*> calls;
      for (const OpSample& call : in_situ->second.second)
        calls.push_back(&call);
      fit.in_situ_median_ape = median_ape(fit, calls);
    }
    profile.ops.push_back(std::move(fit));
  }
  for (const auto& [name, entry] : traced) {
    if (priced_op(name) && !grid.contains(name))
      profile.ops.push_back(fit_op(name, entry.first, entry.second, options));
  }
  if (!residuals.empty()) {
    profile.ops.push_back(fit_op(std::string(ops::step_residual), "step", residuals, options));
  }
  std::sort(profile.ops.begin(), profile.ops.end(),
            [](const sim::OpFit& a, const sim::OpFit& b) { return a.name < b.name; });
  return profile;
}

std::vector<std::string> absurd_fits(const sim::CostProfile& profile) {
  std::vector<std::string> out;
  for (const sim::OpFit& op : profile.ops) {
    // A handful of calls cannot tell a busy machine from a rare slow call; untrusted_fits names
    // such fits already.
    if (op.samples < k_min_trusted_samples)
      continue;
    if (op.measured_by == "grid" && op.held_out_median_ape > k_absurd_held_out_median_ape) {
      out.push_back(fmt::format("{}: held-out median error {:.0f}% (above {:.0f}%)", op.name,
                                100 * op.held_out_median_ape, 100 * k_absurd_held_out_median_ape));
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
    if (op.held_out_mape > k_untrusted_held_out_mape) {
      out.push_back(fmt::format("{}: held-out error {:.1f}% (above {:.0f}%)", op.name,
                                100 * op.held_out_mape, 100 * k_untrusted_held_out_mape));
    }
    if (op.in_situ_median_ape > k_untrusted_held_out_mape) {
      out.push_back(fmt::format(
          "{}: timed in isolation, it misses the engine's own calls by {:.1f}% (median; above "
          "{:.0f}%)",
          op.name, 100 * op.in_situ_median_ape, 100 * k_untrusted_held_out_mape));
    }
    if (op.samples < k_min_trusted_samples) {
      out.push_back(fmt::format("{}: fitted on {} calls (fewer than {})", op.name, op.samples,
                                k_min_trusted_samples));
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
