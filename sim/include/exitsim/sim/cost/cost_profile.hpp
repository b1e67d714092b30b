#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/core/model_shape.hpp"

namespace exitsim::sim {

// A latency model of one engine op (an op-trace `name`, e.g. "qkv_proj"), fitted by `exitsim
// calibrate` (docs/calibration.md). Within a regime the time of one call is linear in its
// features: t_us = c0 + c1 * B + c2 * C + c3 * B * C, with B the call's batch tokens and C its
// context tokens (the attention (query, key) pairs it reads). Regimes split the batch axis where
// the data shows a knee (a GEMM that turns from reading weights to computing).
struct OpFit {
  struct Regime {
    std::int64_t batch_max = 0;  // the regime covers B <= batch_max (the last one: all above)
    std::array<double, 4> coefficients{};
    // The fit missed its own calls' total by too much to trust; the regime is their mean
    // (coefficients {mean, 0, 0, 0}). Simulations that use it say so.
    bool mean_of_calls = false;
  };
  std::string name;
  std::string kind;                // the op trace's kind (gemm, attention, ...)
  std::vector<Regime> regimes;     // ascending batch_max; at least one
  std::int64_t samples = 0;        // calls fitted
  std::int64_t held_out = 0;       // calls kept out of the fit to measure its error
  double fit_mape = 0;             // mean absolute percentage error on the fitted calls
  double held_out_mape = 0;        // ... and on the held-out calls (the figure to trust)
  double held_out_median_ape = 0;  // the held-out calls' median absolute percentage error
  double fit_median_ape = 0;       // ... and the fitted calls' one
  std::int64_t batch_min_seen = 0;
  std::int64_t batch_max_seen = 0;
  // The most attention context among the samples; -1: not recorded (a profile of an older
  // exitsim). Prices at more context than this are extrapolated, and said so.
  std::int64_t context_max_seen = -1;
  // "trace": fitted from the engine's own op traces (calls as they ran); "grid": from ops timed
  // in isolation over a grid of shapes (`exitsim engine profile-ops`, or an imported profile such
  // as Vidur's; samples are the points' medians); "roofline": not measured, fitted to exitsim's
  // roofline prices of the op over a grid of shapes, for an imported profile that lacks the op
  // (a simulation that prices it says so).
  std::string measured_by = "trace";
  // A grid fit given op traces too: the traces' calls of the op in total over the fit's
  // prediction of them (the engine's running op against the op in isolation; a figure, not
  // applied), and the fit's median absolute percentage error on those calls; -1: no traces.
  double in_situ_scale = 1;
  double in_situ_median_ape = -1;
  // Terms of c0 + c1 B + c2 C + c3 B C the calls varied in but did not determine ("batch",
  // "context", "batch x context"): fitted without them, so the fit is not to trust off its calls.
  std::vector<std::string> undetermined_terms{};

  // Never negative: a fit may dip below zero outside the data.
  double predict_us(double batch, double context) const;
};

// Where a profile's measurements came from: a profile only prices the engine, backend, hardware
// and model that produced it.
struct ProfileSource {
  std::string engine;       // "exitsim-engine"
  std::string backend;      // "cpu" or "cuda"
  std::string hardware;     // e.g. "AMD EPYC 7B13 x 2 threads"
  std::string model;        // the model's name
  std::string model_shape;  // ModelShape fingerprint, see model_fingerprint()
  std::vector<std::string> traces;
  // The build that measured ("g++ 12.2.0, optimised"); empty: not recorded (older runs).
  std::string build{};
  // The speed probe (engine/op_timing.hpp) of the runs measured, their mean, in microseconds;
  // 0: not recorded. Validation compares the machine's speed now against it.
  double speed_probe_us = 0;
  // The tensor-parallel degree the ops were measured at: each fit prices one GPU's shard of its
  // op, and the profile prices only a scenario of this parallel.tensor (docs/cost_model.md,
  // "Measured cost models under TP and PP").
  int tensor_parallel = 1;
};

struct CostProfile {
  static constexpr const char* k_format = "exitsim-cost-profile v1";
  static constexpr std::size_t k_step_quantiles = 21;  // 0, 5%, ..., 100%
  ProfileSource source;
  std::vector<OpFit> ops;  // sorted by name

  // How the engine's measured steps spread around their price (calibrate, from op traces): the
  // ratio (step wall time - arrival wait) / the profile's price of the step's calls, at the
  // quantiles 0, 5%, ..., 100% (k_step_quantiles values, ascending); empty: not measured. The
  // simulator draws each iteration's factor from it (cost_model.step_variability), so that its
  // steps keep their median price and the engine's mean: the engine's running ops match their
  // isolated price at the median but take more in total (a skewed tail).
  std::vector<double> step_variability;

  // What the calibration said about its measurements (an import's mapping: what it skipped and
  // why, what it assumed, what simulations price by the roofline), one line each; empty: none.
  std::vector<std::string> notes;

  const OpFit* find(const std::string& name) const;

  // Throws InputError naming the file and the JSON key path for a missing, malformed or
  // unreadable profile.
  static CostProfile read(const std::string& path);
  // Atomic: nothing appears at `path` unless the whole profile was written.
  void write(const std::string& path) const;
};

// The parts of a model's shape that its op times depend on, as one comparable line ("d192 h6/2x32
// ffn512 v256 gated depth 1+1x4+1 lora -"; a mixture of experts adds " moe 8x2", its experts and
// top-k); the dtype is left out (the engine's storage and compute types are its own), so is the
// name.
std::string model_fingerprint(const ModelShape& model);

}  // namespace exitsim::sim
