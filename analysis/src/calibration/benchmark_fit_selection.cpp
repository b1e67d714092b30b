#include "benchmark_fit_selection.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "exitsim/core/error.hpp"

namespace exitsim::analysis {
namespace {

// Each parameter's effect is measured moving it this share of its interval either way.
constexpr double k_probe_share = 0.1;
// A parameter is chosen only when the misfit holds more of its own effect than twice the noise
// (in noise units, linearised: fitting it would lower the summed squared misfit by over 2^2).
constexpr double k_explained_noise = 2;

// A parameter's effect on every fitted figure: the change of log(figure) from moving it
// k_probe_share of its interval below its value to as far above, in units of the figure's noise.
struct Effect {
  const FitKnob* knob = nullptr;
  double start = 0;  // in effect in the scenario, inside the interval
  double low_probe = 0, high_probe = 0;
  std::vector<double> in_noise;
};

Effect measure_effect(const scenario::Scenario& start, const FitKnob& knob,
                      const FigureLogs& at_start, const EvaluateFigures& evaluate) {
  Effect e;
  e.knob = &knob;
  e.start = std::clamp(knob.in_effect(start.hardware.spec, start.cost_model), knob.low, knob.high);
  const double step = k_probe_share * (knob.high - knob.low);
  e.low_probe = std::max(knob.low, e.start - step);
  e.high_probe = std::min(knob.high, e.start + step);
  scenario::Scenario probe = start;
  set_knob(probe, knob, e.low_probe);
  const FigureLogs low = evaluate(probe);
  set_knob(probe, knob, e.high_probe);
  const FigureLogs high = evaluate(probe);
  for (std::size_t i = 0; i < low.simulated.size(); ++i)
    e.in_noise.push_back((high.simulated[i] - low.simulated[i]) / at_start.noise[i]);
  return e;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}

double largest(const std::vector<double>& v) {
  double m = 0;
  for (const double x : v)
    m = std::max(m, std::abs(x));
  return m;
}

// `v` less its projections on the orthonormal `basis`: what of it the basis cannot make.
std::vector<double> unexplained(std::vector<double> v,
                                const std::vector<std::vector<double>>& basis) {
  for (const std::vector<double>& b : basis) {
    const double along = dot(v, b);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] -= along * b[i];
  }
  return v;
}

std::string below_noise(const Effect& e, const FigureLogs& at_start) {
  const auto most = std::max_element(e.in_noise.begin(), e.in_noise.end(),
                                     [](double a, double b) { return std::abs(a) < std::abs(b); });
  std::string largest_move;
  if (most != e.in_noise.end()) {
    const auto i = static_cast<std::size_t>(most - e.in_noise.begin());
    largest_move = fmt::format(" (the most: {} by {:.2g}%, its noise {:.2g}%)", at_start.names[i],
                               100 * std::abs(*most) * at_start.noise[i], 100 * at_start.noise[i]);
  }
  return fmt::format(
      "{}: its effect is below the noise: from {:.4g} to {:.4g} it moves no fitted figure beyond "
      "the seeds' spread (or 1%){}",
      e.knob->key, e.low_probe, e.high_probe, largest_move);
}

// The chosen parameter whose effect is most like `e`'s.
const char* most_alike(const Effect& e, const std::vector<Effect>& chosen) {
  const Effect* best = &chosen.front();
  double best_cos = -1;
  for (const Effect& c : chosen) {
    const double cos = std::abs(dot(e.in_noise, c.in_noise)) /
                       std::sqrt(dot(e.in_noise, e.in_noise) * dot(c.in_noise, c.in_noise));
    if (cos > best_cos) {
      best_cos = cos;
      best = &c;
    }
  }
  return best->knob->key;
}

void refuse_more_parameters_than_figures(const std::vector<Effect>& moving, std::size_t figures) {
  if (moving.size() <= figures)
    return;
  std::vector<std::string> keys;
  for (const Effect& e : moving)
    keys.emplace_back(e.knob->key);
  throw InputError(
      {"", 0, 0, "--against"},
      expected_found(fmt::format("at least as many fitted figures as parameters moving them "
                                 "({}: {})",
                                 moving.size(), fmt::join(keys, ", ")),
                     fmt::format("{} (output throughput and the TTFT, TPOT, ITL and E2E p50s of "
                                 "the fitting runs); add runs at other request rates",
                                 figures)));
}

}  // namespace

// In fit_knobs' order, on the effects in noise units (Gram-Schmidt): a parameter whose effect,
// less what the ones chosen before make, moves no figure beyond its noise cannot be told from
// them; one whose own effect the misfit left holds less than k_explained_noise of is not called
// for; the others are chosen, and the misfit they can explain is taken out of what is left.
std::vector<ChosenParameter> choose_parameters(const scenario::Scenario& start,
                                               const FigureLogs& at_start,
                                               const EvaluateFigures& evaluate,
                                               std::vector<std::string>& not_fitted) {
  const ParallelSpec& parallel = start.replica_groups.front().parallel;
  std::vector<Effect> candidates;
  for (const FitKnob& knob : fit_knobs()) {
    if (std::string why = knob.absent(parallel, start.hardware.spec); !why.empty()) {
      not_fitted.push_back(fmt::format("{}: {}", knob.key, why));
      continue;
    }
    Effect e = measure_effect(start, knob, at_start, evaluate);
    if (largest(e.in_noise) > 1)
      candidates.push_back(std::move(e));
    else
      not_fitted.push_back(below_noise(e, at_start));
  }
  refuse_more_parameters_than_figures(candidates, at_start.simulated.size());
  std::vector<double> misfit;
  for (std::size_t i = 0; i < at_start.simulated.size(); ++i)
    misfit.push_back((at_start.measured[i] - at_start.simulated[i]) / at_start.noise[i]);
  std::vector<std::vector<double>> basis;  // the chosen effects, orthonormal
  std::vector<Effect> chosen;
  for (Effect& e : candidates) {
    std::vector<double> own = unexplained(e.in_noise, basis);
    if (largest(own) <= 1) {
      not_fitted.push_back(fmt::format(
          "{}: these runs cannot tell its effect from {}'s (with the others fitted, what is "
          "left of it moves no figure beyond the noise)",
          e.knob->key, most_alike(e, chosen)));
      continue;
    }
    const double norm = std::sqrt(dot(own, own));
    for (double& x : own)
      x /= norm;
    const double share = dot(misfit, own);
    if (std::abs(share) <= k_explained_noise) {
      not_fitted.push_back(fmt::format(
          "{}: kept at {:.4g}: the figures left to explain move its way by {:.2g} times their "
          "noise, within {:.0f}",
          e.knob->key, e.start, std::abs(share), k_explained_noise));
      continue;
    }
    for (std::size_t i = 0; i < misfit.size(); ++i)
      misfit[i] -= share * own[i];
    basis.push_back(std::move(own));
    chosen.push_back(std::move(e));
  }
  std::vector<ChosenParameter> out;
  for (const Effect& e : chosen)
    out.push_back({e.knob, e.start});
  return out;
}

}  // namespace exitsim::analysis
