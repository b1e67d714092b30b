// The calibration loop against an engine whose op costs are known. A "true" profile gives every
// op a line, t_us = c0 + c1 B + c2 C. An op grid is written as `exitsim engine profile-ops` would
// (its default batches and contexts): each point's median is the true price times (1 + e),
// e ~ N(0, k_sigma), and k_stretched_share of the points are k_stretch times longer (a thread
// descheduled through most repetitions), which the fit must not follow. An op trace gives
// sampling and the step residual, with the same noise. `calibrate` must recover every op within
// bounds derived from that noise. Then the real engine (the engine tests' small model) runs on a
// virtual clock priced by the true profile, each step's time again times (1 + e), and the
// recovered profile must price the engine's own steps (sim::StepPricer) within the noise.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <numbers>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "engine/support/support_model.hpp"
#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/analysis/validation.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/sim/cost/step_batch.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "exitsim/traces/op_grid.hpp"
#include "exitsim/traces/op_trace.hpp"

namespace exitsim {
namespace {

namespace ops = traces::engine_ops;
using traces::OpKind;

constexpr double k_sigma = 0.03;            // every measurement's relative noise
constexpr double k_stretched_share = 0.08;  // grid points whose median is stretched ...
constexpr double k_stretch = 3.0;           // ... this many times
// Standard errors a bound allows. The first test compares ~600 figures (27 fits: a held-out
// median, a slope, 3 to 18 probes each, correlated within a fit). Over 100 other seeds, 88 had
// every line fitted as one line; at 3 some figure exceeded its bound for 27 of those, at 4 for 3.
// (The other 12 had a true line split at a spurious knee, which broke a bound: a defect of the
// knee search, not of the bounds.)
constexpr double k_z = 4;
// The Huber loss caps a point's relative residual at 1.345 robust standard deviations, 1.4826 x
// the median absolute residual; with 8% of the points stretched beyond any clean one, that median
// is the clean residuals' 0.5 / 0.92 quantile, 0.745 sigma: the cap is 1.49 sigma.
constexpr double k_huber_cap = 1.345 * 1.4826 * 0.745 * k_sigma;

struct Line {
  double c0 = 0, c1 = 0, c2 = 0;
};
struct TrueOp {
  std::string_view name;
  OpKind kind;
  Line decode, prefill;  // prefill: the ".prefill" fit (layer ops only)
};
const std::vector<TrueOp> k_layer_ops = {
    {ops::attn_norm, OpKind::norm, {0.8, 0.05, 0}, {1.5, 0.045, 0}},
    {ops::qkv_proj, OpKind::gemm, {3, 2.5, 0}, {20, 2.2, 0}},
    {ops::rotary, OpKind::elementwise, {0.5, 0.08, 0}, {1, 0.07, 0}},
    {ops::kv_write, OpKind::memcpy, {0.6, 0.1, 0.0005}, {1.2, 0.09, 0.0004}},
    {ops::attention, OpKind::attention, {1, 0.2, 0.004}, {4, 0.15, 0.003}},
    {ops::o_proj, OpKind::gemm, {2, 1.2, 0}, {12, 1.0, 0}},
    {ops::mlp_norm, OpKind::norm, {0.8, 0.05, 0}, {1.5, 0.045, 0}},
    {ops::mlp_gate_up, OpKind::gemm, {5, 4, 0}, {30, 3.5, 0}},
    {ops::mlp_act, OpKind::elementwise, {0.6, 0.15, 0}, {1.2, 0.13, 0}},
    {ops::mlp_down, OpKind::gemm, {3, 2, 0}, {18, 1.8, 0}},
    {ops::kv_only, OpKind::gemm, {1.5, 1.1, 0}, {8, 1.0, 0}}};
const TrueOp k_embed = {ops::embed, OpKind::other, {0.5, 0.02, 0}, {}};
const TrueOp k_lm_head = {ops::lm_head, OpKind::lm_head, {4, 1.5, 0}, {}};
const Line k_sampling = {2, 0.3, 0};
constexpr double k_residual_us = 6;  // the step residual: a constant

struct Model {
  engine::ModelConfig config =
      engine::test_support::small_config(engine::test_support::small_recursive_depth());
  engine::ModelWeights weights = engine::test_support::small_weights(config);
  engine::CpuModel cpu{config, weights};
};
const Model& model() {
  static const Model m;
  return m;
}

sim::CostProfile true_profile() {
  sim::CostProfile profile;
  profile.source.model = model().config.shape.name;
  profile.source.model_shape = sim::model_fingerprint(model().config.shape);
  const auto add = [&](std::string name, std::string_view kind, const Line& l) {
    sim::OpFit fit;
    fit.name = std::move(name);
    fit.kind = std::string(kind);
    fit.regimes = {{std::int64_t{1} << 40, {l.c0, l.c1, l.c2, 0}, false}};
    fit.batch_max_seen = std::int64_t{1} << 40;
    profile.ops.push_back(std::move(fit));
  };
  for (const TrueOp& op : k_layer_ops) {
    add(std::string(op.name), traces::to_string(op.kind), op.decode);
    add(std::string(op.name) + std::string(ops::prefill_suffix), traces::to_string(op.kind),
        op.prefill);
  }
  add(std::string(ops::embed), "other", k_embed.decode);
  add(std::string(ops::lm_head), "lm_head", k_lm_head.decode);
  add(std::string(ops::sampling), "sampling", k_sampling);
  add(std::string(ops::step_residual), "step", {k_residual_us, 0, 0});
  std::sort(profile.ops.begin(), profile.ops.end(),
            [](const sim::OpFit& a, const sim::OpFit& b) { return a.name < b.name; });
  return profile;
}

// The (query, key) pairs of a call as the engine counts them: B decode rows after L cached tokens
// each read L + 1; a prefill chunk of B tokens after L cached reads B L + B (B + 1) / 2.
double pairs(bool prefill, double b, double per_row) {
  return prefill ? b * per_row + b * (b + 1) / 2 : b * (per_row + 1);
}

// What the fit of one op saw, in calibrate's order (it holds out every 5th).
struct Point {
  double b, c, t;
  bool stretched;
};
using Design = std::map<std::string, std::vector<Point>>;
bool held_out(std::size_t i) {
  return i % 5 == 4;
}

void write_run_description(const std::string& path) {
  traces::write_file_atomically(
      path, fmt::format(R"({{"engine": "exitsim-engine", "backend": "cpu", "hardware": )"
                        R"("synthetic", "model": "{}", "model_shape": "{}"}})",
                        model().config.shape.name, sim::model_fingerprint(model().config.shape)));
}

// An op grid as profile-ops writes it, an op's median at a point from `median(line, B, C,
// stretched)`; returns its path.
using Median = std::function<double(const Line&, double, double, bool&)>;
std::string write_grid(const std::filesystem::path& dir, const Median& median, Design& design) {
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "grid.csv").string();
  traces::OpGridWriter writer(path);
  const auto write = [&](const TrueOp& op, bool prefill, std::int64_t b, std::int64_t c) {
    const auto bb = static_cast<double>(b), cc = static_cast<double>(c);
    bool stretched = false;
    const double t = median(prefill ? op.prefill : op.decode, bb, cc, stretched);
    writer.write({std::string(op.name), op.kind, prefill ? "prefill" : "decode", 1, 1, b, c, 15, t,
                  0.97 * t, 1.03 * t, 0.95 * t, 1.1 * t});
    design[std::string(op.name) + (prefill ? std::string(ops::prefill_suffix) : "")].push_back(
        {bb, cc, t, stretched});
  };
  for (const bool prefill : {false, true}) {
    for (std::int64_t b = prefill ? 2 : 1; b <= 256; b *= 2) {
      for (const std::int64_t per_row : prefill ? std::vector<std::int64_t>{0, 16, 64, 256}
                                                : std::vector<std::int64_t>{16, 64, 128, 256}) {
        const auto c = static_cast<std::int64_t>(
            pairs(prefill, static_cast<double>(b), static_cast<double>(per_row)));
        for (const TrueOp& op : k_layer_ops)
          write(op, prefill, b, c);
        if (!prefill) {  // profile-ops times these at decode points, per token
          write(k_embed, false, b, 0);
          write(k_lm_head, false, b, 0);
        }
      }
    }
  }
  writer.finish();
  write_run_description(analysis::grid_description_path(path));
  return path;
}

// An engine run's op trace (run.json and steps.csv beside) with what the grid lacks: steps of an
// embedding and a sampling call, each lasting their time plus the residual. Nothing stretched: a
// trace fit is scaled to its calls' total by design (the simulator sums stretched calls too).
std::string write_trace(const std::filesystem::path& dir, RandomStream& draws, Design& design) {
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "op_trace.csv").string();
  traces::OpTraceWriter writer(path);
  std::string steps = "step_id,start_ns,prefill_request_ids,decode_request_ids\n";
  TimeNs now = 0;
  const auto noisy_ns = [&](double us) {
    return static_cast<TimeNs>(std::llround(us * (1 + k_sigma * draws.normal()) * 1000));
  };
  constexpr std::uint64_t k_steps = 300;
  for (std::uint64_t step = 0; step < k_steps; ++step) {
    const std::int64_t embedded = draws.uniform_int(1, 96);
    const std::int64_t emitted = draws.uniform_int(1, std::min<std::int64_t>(8, embedded));
    const auto e = static_cast<double>(embedded), m = static_cast<double>(emitted);
    steps += fmt::format("{},{},,{}\n", step, now, step);
    const TimeNs embed = noisy_ns(k_embed.decode.c0 + k_embed.decode.c1 * e);
    const TimeNs sample = noisy_ns(k_sampling.c0 + k_sampling.c1 * m);
    const TimeNs residual = noisy_ns(k_residual_us);
    writer.write({std::string(ops::embed), OpKind::other, "cpu", 0, now, embed, embedded, 0, -1, 0,
                  step, 0});
    writer.write({std::string(ops::sampling), OpKind::sampling, "cpu", 0, now + embed, sample,
                  emitted, 0, -1, 0, step, 0});
    now += embed + sample + residual;
    design[std::string(ops::sampling)].push_back({m, 0, static_cast<double>(sample) / 1e3, false});
    if (step + 1 < k_steps)  // the last step has no end
      design[std::string(ops::step_residual)].push_back(
          {e, m, static_cast<double>(residual) / 1e3, false});
  }
  writer.finish();
  traces::write_file_atomically((dir / "steps.csv").string(), steps);
  write_run_description((dir / "run.json").string());
  return path;
}

// A fresh directory under the tests' temporary one, removed with what is in it when done.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(std::string_view name)
      : path(std::filesystem::path(testing::TempDir()) /
             fmt::format("exitsim_{}_{}", name, getpid())) {}
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

struct Calibration {
  sim::CostProfile truth = true_profile();
  sim::CostProfile recovered;
  Design design;
  Calibration() {
    const TempDir dir("calibration_recovery");
    RandomStream draws(41, "calibration_recovery.grid");
    const auto measured = [&](const Line& l, double b, double c, bool& stretched) {
      const double t = (l.c0 + l.c1 * b + l.c2 * c) * (1 + k_sigma * draws.normal());
      stretched = draws.uniform() < k_stretched_share;
      return stretched ? k_stretch * t : t;
    };
    const std::vector<std::string> paths = {write_grid(dir.path, measured, design),
                                            write_trace(dir.path / "run", draws, design)};
    recovered = analysis::calibrate(paths);
  }
};
const Calibration& calibration() {
  static const Calibration c;
  return c;
}

// How far a fit may miss the truth in a linear functional e of its coefficients (a prediction's
// relative error: e = features / time; a slope's: e = unit / slope). The fit minimises relative
// error: rows a_i = features_i / t_i with noise sigma, so its coefficients have covariance
// sigma^2 M^-1 / 0.95 (Huber's efficiency under normal noise), M = sum a_i a_i' over the clean
// fitted points. A stretched point still pulls, with the capped residual: by M^-1 sum_j cap a_j.
class Uncertainty {
 public:
  Uncertainty(const sim::OpFit& truth, const std::vector<Point>& points)
      : context_(truth.kind == "attention" || truth.kind == "memcpy" || truth.kind == "step") {
    const Eigen::Index p = context_ ? 4 : 2;
    Eigen::MatrixXd m = Eigen::MatrixXd::Zero(p, p);
    Eigen::VectorXd stretched = Eigen::VectorXd::Zero(p);
    for (std::size_t i = 0; i < points.size(); ++i) {
      const Eigen::VectorXd a = features(points[i].b, points[i].c) / points[i].t;
      if (held_out(i))
        continue;
      if (points[i].stretched)
        stretched += a;
      else
        m += a * a.transpose();
    }
    // Solved with the columns scaled to unit diagonal (B C reaches 1e7 where 1 is 1).
    scale_ = m.diagonal().cwiseSqrt().cwiseInverse();
    solver_.compute(scale_.asDiagonal() * m * scale_.asDiagonal());
    pull_ = solve(stretched * k_huber_cap);
  }
  Eigen::VectorXd features(double b, double c) const {
    Eigen::VectorXd x(context_ ? 4 : 2);
    x(0) = 1, x(1) = b;
    if (context_)
      x(2) = c, x(3) = b * c;
    return x;
  }
  double bound(const Eigen::VectorXd& e) const {
    return std::abs(e.dot(pull_)) + k_z * k_sigma * std::sqrt(e.dot(solve(e)) / 0.95);
  }
  double parameters() const { return context_ ? 4 : 2; }

 private:
  Eigen::VectorXd solve(const Eigen::VectorXd& v) const {  // M^-1 v
    return scale_.asDiagonal() * solver_.solve(scale_.asDiagonal() * v);
  }
  bool context_;
  Eigen::VectorXd scale_, pull_;
  Eigen::LDLT<Eigen::MatrixXd> solver_;
};

// The q quantile of |N(0, 1)|, and sqrt(n) x the standard error of that quantile of n draws.
double half_normal_quantile(double q) {
  double lo = 0, hi = 10;
  for (int i = 0; i < 60; ++i)
    (std::erf((lo + hi) / 2 / std::sqrt(2.0)) < q ? lo : hi) = (lo + hi) / 2;
  return lo;
}
double quantile_spread(double q) {
  const double x = half_normal_quantile(q);
  return std::sqrt(q * (1 - q)) / (std::sqrt(2 / std::numbers::pi) * std::exp(-x * x / 2));
}

// Every op's recovered price at shapes between the grid's points, with its bound.
struct Probe {
  std::string op;
  double b, per_row, c, error, bound;
};
std::vector<Probe> probes(const Calibration& cal) {
  std::vector<Probe> out;
  for (const sim::OpFit& truth : cal.truth.ops) {
    const sim::OpFit& fit = *cal.recovered.find(truth.name);
    const Uncertainty u(truth, cal.design.at(truth.name));
    const bool prefill = truth.name.ends_with(ops::prefill_suffix);
    for (const double b : {3.0, 5.0, 12.0, 48.0, 100.0, 200.0}) {
      for (const double per_row :
           prefill ? std::vector<double>{8, 40, 150} : std::vector<double>{24, 100, 200}) {
        if (b > static_cast<double>(fit.batch_max_seen))
          continue;
        // The residual's C is the tokens emitted (at most 8 in the trace).
        const double c =
            truth.kind == "step" ? std::min(per_row / 25, b) : pairs(prefill, b, per_row);
        const double want = truth.predict_us(b, c);
        out.push_back({truth.name, b, per_row, c, std::abs(fit.predict_us(b, c) - want) / want,
                       u.bound(u.features(b, c) / want)});
      }
    }
  }
  return out;
}

TEST(CalibrationRecovery, GridFitsRecoverKnownOpCostsWithinTheNoise) {
  const Calibration& cal = calibration();
  // A grid fit is judged by its held-out median (absurd: an op whose held-out points were mostly
  // stretched would be; none is here).
  EXPECT_TRUE(analysis::absurd_fits(cal.recovered).empty());
  int stretched = 0, fitted = 0;
  for (const sim::OpFit& truth : cal.truth.ops) {
    SCOPED_TRACE(truth.name);
    const sim::OpFit* fit = cal.recovered.find(truth.name);
    ASSERT_NE(fit, nullptr);
    const std::vector<Point>& points = cal.design.at(truth.name);
    const Uncertainty u(truth, points);
    // Held-out points miss by |e - d|, d the fit's error there (variance ~ sigma^2 p / n):
    // |N(0, sigma^2 (1 + p / n))|. The s stretched ones of h miss by ~2/3, above every clean one,
    // so the (lower) median is the k = (h - 1) / 2 + 1 smallest of the h - s clean ones, whose
    // expected quantile is q = k / (h - s + 1): within k_z standard errors of that quantile.
    std::size_t h = 0, s = 0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      h += held_out(i) ? 1U : 0U;
      s += held_out(i) && points[i].stretched ? 1U : 0U;
      stretched += !held_out(i) && points[i].stretched ? 1 : 0;
      fitted += !held_out(i) && fit->measured_by == "grid" ? 1 : 0;
    }
    ASSERT_EQ(static_cast<std::int64_t>(h), fit->held_out);
    const double q = static_cast<double>((h - 1) / 2 + 1) / static_cast<double>(h - s + 1);
    const double clean = static_cast<double>(h - s);
    if (q < 1) {  // else the median is a stretched point's miss
      EXPECT_LE(fit->held_out_median_ape,
                (half_normal_quantile(q) + k_z * quantile_spread(q) / std::sqrt(clean)) * k_sigma *
                    std::sqrt(1 + u.parameters() / static_cast<double>(fit->samples)));
    }
    // The slope: stretched points taken at face value would lift it.
    if (const double slope = truth.regimes[0].coefficients[1]; slope > 0) {
      const Eigen::VectorXd e = Eigen::VectorXd::Unit(u.features(0, 0).size(), 1) / slope;
      EXPECT_LE(std::abs(fit->regimes[0].coefficients[1] - slope) / slope, u.bound(e));
    }
  }
  for (const Probe& p : probes(cal))
    EXPECT_LE(p.error, p.bound) << p.op << " at B " << p.b << ", C " << p.c;
  // Not vacuous: the fits did see stretched points.
  EXPECT_GE(stretched, k_stretched_share / 2 * fitted);
}

// The engine's steps on a virtual clock: each lasts the true profile's price times (1 + e). Kept:
// the rows of every step, its measured time, and its true (noiseless) price.
struct EngineSteps {
  std::vector<std::vector<policy::StepRow>> rows;
  std::vector<TimeNs> measured, price;
};
EngineSteps run_engine(const sim::CostProfile& truth) {
  const ModelShape& shape = model().config.shape;
  const sim::CalibratedCostModel cost(truth, "true profile", shape);
  const policy::SyncStrategy strategy = policy::SyncStrategy::state_copy;  // K/V-only calls too
  sim::StepPricer pricer(cost, shape.depth, strategy);
  engine::EngineOptions options;
  options.scheduler = "chunked_prefill";  // prompt chunks beside decode tokens
  options.limits = {4, 24};
  options.block_size = 4;
  options.exit_policy.kind = "distribution";
  options.exit_policy.probabilities = {0.45, 0.3, 0.25};
  options.strategy = strategy;
  options.seed = 3;
  options.honour_arrivals = true;
  EngineSteps out;
  RandomStream noise(23, "calibration_recovery.steps");
  options.step_duration = [&](const policy::StepTrace& step) {
    out.price.push_back(pricer.duration(step.rows));
    out.measured.push_back(static_cast<TimeNs>(
        std::llround(static_cast<double>(out.price.back()) * (1 + k_sigma * noise.normal()))));
    return out.measured.back();
  };
  options.step_observer = [&](const policy::StepTrace& step) { out.rows.push_back(step.rows); };
  // 14 requests of mixed lengths arriving 40 us apart on average, as in conformance_test.cpp.
  RandomStream draws(11, "calibration_recovery.workload");
  std::vector<engine::EngineRequest> requests;
  TimeNs arrival = 0;
  for (std::uint64_t id = 0; id < 14; ++id) {
    engine::EngineRequest r;
    r.id = RequestId(id);
    r.arrival = arrival += static_cast<TimeNs>(draws.exponential(1.0 / 40'000.0));
    r.prompt.resize(static_cast<std::size_t>(draws.uniform_int(6, 36)));
    for (std::int32_t& token : r.prompt)
      token = static_cast<std::int32_t>(draws.uniform_int(0, 49));
    r.output_tokens = draws.uniform_int(8, 28);
    requests.push_back(std::move(r));
  }
  engine::Engine executor(model().cpu, options);
  (void)executor.run(requests);
  return out;
}

TEST(CalibrationRecovery, RecoveredProfilePricesTheEnginesStepsWithinTheNoise) {
  const Calibration& cal = calibration();
  const EngineSteps steps = run_engine(cal.truth);
  ASSERT_EQ(steps.rows.size(), steps.measured.size());
  const sim::CalibratedCostModel recovered(cal.recovered, "recovered profile",
                                           model().config.shape);
  EXPECT_TRUE(recovered.fallbacks().empty());  // sampling and the residual came from the trace
  // The trace's steps are priced by the recovered fits and the residual (each step's time there
  // is its calls' plus the residual's, with the stated noise), so their measured/priced spread
  // centres on 1: the median within the noise (sigma over ~300 steps), the quartiles within a
  // sigma of it.
  const std::vector<double>& spread = cal.recovered.step_variability;
  ASSERT_EQ(spread.size(), 21U);
  EXPECT_NEAR(spread[10], 1.0, 2 * k_sigma);
  EXPECT_LT(spread[15] - spread[5], 3 * k_sigma);
  sim::StepPricer pricer(recovered, model().config.shape.depth, policy::SyncStrategy::state_copy);
  std::vector<TimeNs> priced;
  double fit_error = 0, sum = 0, sum_squares = 0;  // the recovered price's own error, max
  std::int64_t prefill_steps = 0;
  for (std::size_t i = 0; i < steps.rows.size(); ++i) {
    priced.push_back(pricer.duration(steps.rows[i]));
    const auto truth = static_cast<double>(steps.price[i]);
    fit_error = std::max(fit_error, std::abs(static_cast<double>(priced.back()) / truth - 1));
    sum += truth;
    sum_squares += truth * truth;
    prefill_steps += std::any_of(steps.rows[i].begin(), steps.rows[i].end(),
                                 [](const policy::StepRow& r) { return r.query_tokens > 1; });
  }
  // Not vacuous: prompt chunks and decode-only steps, many of them.
  const auto n = static_cast<double>(steps.rows.size());
  EXPECT_GT(n, 60);
  EXPECT_GT(prefill_steps, 5);
  EXPECT_LT(static_cast<double>(prefill_steps), n - 30);
  // A step's price is a sum of op prices, so its error d is at most the worst op's at the shapes
  // it ran: the largest bound at the probes in the engine's range (B up to its 24 batched tokens,
  // contexts up to a request's 64 tokens).
  double worst_bound = 0;
  for (const Probe& p : probes(cal)) {
    if (p.b <= 24 && p.per_row <= 64)
      worst_bound = std::max(worst_bound, p.bound);
  }
  EXPECT_LE(fit_error, worst_bound);
  // Each step misses by |d - e| / (1 + e), d the price's error: the median of |N(0, sigma)|,
  // 0.6745 sigma, within k_z standard errors of the median of n (0.787 sigma / sqrt(n)), plus d.
  const analysis::IterationError error = analysis::compare_iterations(steps.measured, priced);
  EXPECT_EQ(error.matched, static_cast<std::int64_t>(n));
  EXPECT_LE(error.median_ape, (0.6745 + k_z * 0.787 / std::sqrt(n)) * k_sigma + fit_error);
  // The means: the measured one is off the true one by sum(t e) / sum(t), of standard error
  // sigma / sqrt(n_eff), n_eff = sum(t)^2 / sum(t^2) (the steps' times differ); plus d.
  const double n_eff = sum * sum / sum_squares;
  EXPECT_LE(std::abs(error.simulated_mean_us / error.engine_mean_us - 1),
            k_z * k_sigma / std::sqrt(n_eff) + fit_error);
}

// Medians that are noise (uniform over 1 to 1000 us, whatever the shape): no line fits them, and
// calibrate's judgement refuses the profile. Each fit is judged on its 6 or 7 held-out points, so
// a few fits escape by chance; most do not.
TEST(CalibrationRecovery, AGridOfNoiseIsRefusedAsAbsurd) {
  const TempDir dir("calibration_noise");
  RandomStream draws(43, "calibration_recovery.noise");
  Design design;
  const std::vector<std::string> paths = {write_grid(
      dir.path, [&](const Line&, double, double, bool&) { return 1 + 999 * draws.uniform(); },
      design)};
  const sim::CostProfile profile = analysis::calibrate(paths);
  const std::vector<std::string> absurd = analysis::absurd_fits(profile);
  std::size_t named = 0;
  for (const TrueOp& op : k_layer_ops) {
    for (const std::string& name :
         {std::string(op.name), std::string(op.name) + std::string(ops::prefill_suffix)}) {
      named += std::any_of(absurd.begin(), absurd.end(),
                           [&](const std::string& line) { return line.starts_with(name + ":"); });
    }
  }
  // The profile is refused (one absurd fit is enough); a fit is named only when both its held-out
  // and its fitted points miss by over 50% at the median (10 of the 22 here, each fit resting on
  // about 30 medians of pure noise), so that a slow spell stretching a few held-out points
  // cannot refuse a good grid.
  EXPECT_FALSE(absurd.empty());
  EXPECT_GE(named, k_layer_ops.size() * 2 / 5) << "of " << 2 * k_layer_ops.size() << " layer fits";
}

}  // namespace
}  // namespace exitsim
