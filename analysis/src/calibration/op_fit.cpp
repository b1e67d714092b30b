// The fit of one op's latency model: weighted least squares on relative error under a Huber loss,
// a knee on the batch axis where it pays, and (for in-situ traces) a scale to the calls' total.
#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "exitsim/analysis/calibrate.hpp"
#include "parts.hpp"

namespace exitsim::analysis {

namespace {

constexpr double k_min_time_us = 0.05;  // clock resolution: shorter spans count as this long
// Huber's threshold in robust standard deviations (95% efficiency under normal noise).
constexpr double k_huber = 1.345;

// Ops whose time depends on the context as well as the batch: attention and K/V writes read and
// write by it, and the step residual is fitted against emitted tokens in that column.
bool uses_context(std::string_view kind) {
  return kind == "attention" || kind == "memcpy" || kind == "step";
}

struct LeastSquares {
  std::array<double, 4> coefficients{};
  double huber_threshold = 0;  // robust_solve: the last round's threshold on relative error
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
  return out;
}

// The model's terms, by feature column (the constant needs no name).
constexpr std::array<std::string_view, 4> k_term_names = {"", "batch", "context",
                                                          "batch x context"};

struct DeterminedTerms {
  std::vector<int> columns;               // always 0 first, then the terms the calls determine
  std::vector<std::string> undetermined;  // terms the calls vary in but do not determine
};

// The feature columns the samples determine, tried in order: a column is kept when it raises the
// rank of the (distinct, column-normalised) design. A column the data does not vary in is
// collinear with the constant and left out silently, as there is nothing to fit. One the data
// varies in but that is a combination of the others (batch x context where every prefill call
// had one context; batch x context = 8 batch where every step emitted 8 tokens) is left out and
// named: fitting it gave coefficients of 1e15 that cancel on the calls seen and price any other
// shape at years.
DeterminedTerms determined_terms(std::span<const OpSample* const> samples,
                                 const std::vector<int>& candidates) {
  std::set<std::array<double, 4>> distinct;
  for (const OpSample* s : samples)
    distinct.insert(features(*s));
  const auto rows = static_cast<Eigen::Index>(distinct.size());
  Eigen::MatrixXd design(rows, 4);
  Eigen::Index row = 0;
  for (const auto& x : distinct) {
    for (Eigen::Index j = 0; j < 4; ++j)
      design(row, j) = x[static_cast<std::size_t>(j)];
    ++row;
  }
  for (Eigen::Index j = 0; j < 4; ++j) {
    const double largest = design.col(j).cwiseAbs().maxCoeff();
    if (largest > 0)
      design.col(j) /= largest;
  }
  const auto rank_of = [&](const std::vector<int>& columns) {
    Eigen::MatrixXd chosen(rows, static_cast<Eigen::Index>(columns.size()));
    for (std::size_t j = 0; j < columns.size(); ++j)
      chosen.col(static_cast<Eigen::Index>(j)) = design.col(columns[j]);
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(chosen);
    qr.setThreshold(1e-9);
    return static_cast<std::size_t>(qr.rank());
  };
  DeterminedTerms out{{0}, {}};
  for (const int column : candidates) {
    const double first = design(0, column);
    const bool varies = (design.col(column).array() != first).any();
    std::vector<int> trial = out.columns;
    trial.push_back(column);
    if (rank_of(trial) == trial.size())
      out.columns = std::move(trial);
    else if (varies)
      out.undetermined.emplace_back(k_term_names[static_cast<std::size_t>(column)]);
  }
  return out;
}

double median_of(std::vector<double> values) {
  if (values.empty())
    return 0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

// (prediction - time) / time of one sample under a fit's coefficients (no clamping at 0).
double relative_error(const LeastSquares& fit, const OpSample& s) {
  const auto x = features(s);
  double predicted = 0;
  for (std::size_t k = 0; k < x.size(); ++k)
    predicted += fit.coefficients[k] * x[k];
  return (predicted - s.time_us) / std::max(s.time_us, k_min_time_us);
}

// The Huber loss on relative error by iteratively reweighted least squares: a sample whose error
// is beyond 1.345 robust standard deviations (1.4826 x the median absolute error) counts with
// weight threshold / |error|, so a call stretched by a descheduled thread bends the line no more
// than a typical one. huber_loss judges the fit as it was made.
LeastSquares robust_solve(std::span<const OpSample* const> samples,
                          const std::vector<int>& columns) {
  constexpr int k_rounds = 6;
  std::vector<double> weights(samples.size(), 1.0);
  LeastSquares fit = solve(samples, columns);
  std::vector<double> absolute(samples.size());
  for (int round = 0; round < k_rounds; ++round) {
    for (std::size_t i = 0; i < samples.size(); ++i)
      absolute[i] = std::abs(relative_error(fit, *samples[i]));
    const double threshold = k_huber * std::max(1.4826 * median_of(absolute), 1e-4);
    for (std::size_t i = 0; i < samples.size(); ++i)
      weights[i] = absolute[i] <= threshold ? 1.0 : threshold / absolute[i];
    fit = solve(samples, columns, weights);
    fit.huber_threshold = threshold;
  }
  return fit;
}

// The Huber loss of `fit` on the samples with a given threshold: e^2 / 2 within it, linear
// beyond. Regimes are compared by it, at the single fit's threshold, so that a few stretched
// samples (whose squared error would dominate a plain sum) neither make nor hide a knee.
double huber_loss(const LeastSquares& fit, std::span<const OpSample* const> samples,
                  double threshold) {
  double loss = 0;
  for (const OpSample* s : samples) {
    const double e = std::abs(relative_error(fit, *s));
    loss += e <= threshold ? 0.5 * e * e : threshold * (e - 0.5 * threshold);
  }
  return loss;
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

// The relative-error fit follows the typical call; the simulator sums calls, so its total must
// be the measured total: calls stretched by preemption or cache misses are rare but long. Scales
// each regime so that it predicts its fitted calls' total time (the mean, not the median). Per
// regime, because a few huge prefill calls would otherwise set the scale of every small decode
// call. A regime whose fit misses its own calls' total by more than k_max_rescale either way is
// not a shape worth stretching (near-collinear features, predictions clamped at 0): stretching
// it would blow its coefficients up, and prices outside the fitted range with them. It becomes
// its calls' mean instead. For trace fits only: grid points are medians of isolated calls,
// nothing stretched to match.
void scale_regimes_to_totals(sim::OpFit& fit, std::span<const OpSample* const> train) {
  constexpr double k_max_rescale = 4.0;
  for (sim::OpFit::Regime& regime : fit.regimes) {
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
}

}  // namespace

double median_ape(const sim::OpFit& fit, std::span<const OpSample* const> samples) {
  return median_of(absolute_errors(fit, samples));
}

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

  const DeterminedTerms terms =
      determined_terms(train, uses_context(kind) ? std::vector<int>{1, 2, 3} : std::vector<int>{1});
  const std::vector<int>& columns = terms.columns;
  fit.undetermined_terms = terms.undetermined;
  std::sort(train.begin(), train.end(),
            [](const OpSample* a, const OpSample* b) { return a->batch < b->batch; });
  const LeastSquares single = robust_solve(train, columns);
  fit.regimes = {{fit.batch_max_seen, single.coefficients}};

  // A knee: the best split of the batch axis into two regimes, each with enough samples.
  const std::size_t min_side = std::max<std::size_t>(8, 3 * columns.size());
  const double threshold = single.huber_threshold;
  double best = options.knee_gain * huber_loss(single, train, threshold);
  std::set<double> tried;
  // The typical miss (the robust scale the Huber threshold came from), not the RMS: a few
  // stretched samples must not open the search.
  const double typical_miss = threshold / k_huber;
  for (int q = 1; q < 20 && train.size() >= 2 * min_side && typical_miss > options.knee_min_error;
       ++q) {
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
    const double split_loss = huber_loss(low, all.first(left), threshold) +
                              huber_loss(high, all.subspan(left), threshold);
    if (split_loss < best) {
      best = split_loss;
      fit.regimes = {{static_cast<std::int64_t>(knee), low.coefficients},
                     {fit.batch_max_seen, high.coefficients}};
    }
  }
  if (fit.regimes.size() == 2 && fit.regimes[0].batch_max >= fit.regimes[1].batch_max)
    fit.regimes.pop_back();
  if (options.match_total)
    scale_regimes_to_totals(fit, train);
  fit.fit_mape = mape(fit, train);
  fit.held_out_mape = held.empty() ? fit.fit_mape : mape(fit, held);
  fit.fit_median_ape = median_ape(fit, train);
  fit.held_out_median_ape = held.empty() ? fit.fit_median_ape : median_ape(fit, held);
  return fit;
}

}  // namespace exitsim::analysis
