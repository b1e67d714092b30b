#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exitsim/sim/cost/cost_profile.hpp"

namespace exitsim::analysis {

// What `exitsim engine run --profile-dir DIR` writes beside op_trace.csv (run.json): which engine,
// backend, hardware and model produced the trace. A profile keeps it, and the calibrated cost
// model refuses a scenario of other hardware or another model.
sim::ProfileSource read_run_description(const std::string& op_trace_path);
// Where that description is: run.json beside an op trace; <name>.run.json beside an op grid.
std::string run_description_path(const std::string& measurement_path);
// <name>.run.json for the op grid <name>.csv (whether or not it exists yet).
std::string grid_description_path(const std::string& grid_path);

struct CalibrationOptions {
  // Every n-th call of an op (in trace order) is held out of the fit and measures its error.
  int hold_out_every = 5;
  // A second regime is kept only when it cuts the fit's squared relative error to this fraction.
  double knee_gain = 0.7;
  // ... and is only looked for when one line misses by more than this RMS relative error (timer
  // noise alone must not split an op).
  double knee_min_error = 0.01;
  // Scale each regime to predict its fitted calls' measured total (in-situ traces, whose few
  // stretched calls the simulator must sum too); off for grid medians.
  bool match_total = true;
};

// One fitted op's samples, for tests and reports: what the fit saw.
struct OpSample {
  double batch = 0;
  double context = 0;
  double time_us = 0;
};

// Fits an OpFit to samples (weighted least squares on relative error, features by op kind:
// attention and kv_write use batch, context and their product, the rest batch only; a knee on the
// batch axis splits two regimes when it pays; see docs/calibration.md).
sim::OpFit fit_op(const std::string& name, const std::string& kind,
                  std::span<const OpSample> samples, const CalibrationOptions& options);

// calibrate() throws InputError for unreadable or malformed traces, a missing run.json, traces
// of different engines, hardware or models, and traces without the ops every iteration runs.
// A fit exitsim would not trust: its held-out error exceeds this fraction...
inline constexpr double k_untrusted_held_out_mape = 0.25;
// ... or it rests on fewer calls than this.
inline constexpr std::int64_t k_min_trusted_samples = 10;
// ... or the running engine's calls of a grid-timed op took more than this many times (or less
// than its inverse) what the op took in isolation.
inline constexpr double k_max_in_situ_scale = 2.0;

// One line per fitted op that should not be trusted as it is (held-out error above
// k_untrusted_held_out_mape, fewer than k_min_trusted_samples calls, a regime priced as its
// calls' mean), naming the op and the figure; empty when every fit is within those bounds. Fits
// to the roofline's prices (measured_by "roofline") measured nothing and are not judged.
std::vector<std::string> untrusted_fits(const sim::CostProfile& profile);

// Fits that say the measurements were not of one steady machine; `calibrate` refuses such a
// profile unless forced. A grid fit (medians of repeated isolated calls) whose held-out points
// mostly miss by more than k_absurd_held_out_median_ape; any fit whose held-out calls miss by
// more than k_absurd_held_out_mape on average; only fits of at least k_min_trusted_samples calls
// are judged. (A trace fit is scaled to its calls' total, so its
// median error is large by design where a few calls are stretched: its mean error is judged.)
// Fits to the roofline's prices are not judged.
inline constexpr double k_absurd_held_out_median_ape = 0.5;
inline constexpr double k_absurd_held_out_mape = 10.0;
std::vector<std::string> absurd_fits(const sim::CostProfile& profile);

// Reads op traces (each with its run.json) and op grids (`exitsim engine profile-ops`, each with
// its <name>.run.json), fits every op (from the grid where it timed the op, else from the
// traces) and the step residual (from the traces). Throws InputError as described above.
sim::CostProfile calibrate(std::span<const std::string> paths,
                           const CalibrationOptions& options = {});

// What `calibrate --kineto` names that the trace may not say.
struct KinetoNames {
  std::string hardware;  // empty: the trace's exitsim_hardware key, else its first GPU's name
  std::string model;     // empty: the first trace's file name
};

struct KinetoCalibration {
  sim::CostProfile profile;
  // What was mapped and what was not (unmapped operators and their time, gaps, GPU time no
  // operator launched): all of it is in the step residual. One line each, for the console.
  std::vector<std::string> report;
};

// Reads PyTorch-profiler (Kineto) traces of a decoder (torch.profiler with record_shapes=True,
// one prof.step() per model step or the framework's own step ranges; gzipped or not): Hugging
// Face's models, vLLM's and SGLang's custom operators, mixtures of experts, tensor-parallel
// shards, CUDA-graph decode steps (step.graph). Maps their operators to the engine ops the
// calibrated cost model prices (docs/calibration.md, "From your own framework"), recovers the
// model's shape, and fits a profile as calibrate() does; the report (also the profile's notes)
// counts the steps skipped by reason and says what was assumed or left to the roofline. Throws
// InputError naming the trace and key path for malformed traces, traces without shapes, traces
// of different models, a model whose structure contradicts itself, and traces with no usable
// step (one line counting the steps by reason, naming the first one's operator).
KinetoCalibration calibrate_kineto(std::span<const std::string> paths, const KinetoNames& names,
                                   const CalibrationOptions& options = {});

// What `calibrate --vidur-mlp` reads: Vidur's public profiles (github.com/microsoft/vidur,
// data/profiling) of one model on one GPU at one tensor-parallel degree.
struct VidurInputs {
  std::string mlp;         // compute/<gpu>/<model>/mlp.csv (required)
  std::string attention;   // compute/<gpu>/<model>/attention.csv; empty: from the roofline
  std::string all_reduce;  // network/<node>/all_reduce.csv; empty: the simulation's roofline
  std::string send_recv;   // network/<node>/send_recv.csv; empty: the simulation's roofline
  std::string model;       // an exitsim model preset of the profile's shape
  std::string hardware;    // an exitsim hardware preset, or Vidur's a100 / h100
  int tensor_parallel = 1;
};

struct VidurCalibration {
  sim::CostProfile profile;
  // What was mapped to what, what came from the roofline and why, one line each, for the
  // console.
  std::vector<std::string> report;
};

// Reads Vidur's profiles (vidur.hpp), keeps the rows at the tensor-parallel degree, maps Vidur's
// ops onto the engine ops the calibrated cost model prices (docs/calibration.md, "From Vidur's
// public profiles": e.g. attn_norm = input_layernorm + add), fits each from the grid's medians
// (duplicated points averaged; measured_by "grid") and fits the ops Vidur does not time (LM head,
// sampling, state_copy's K/V projection, and attention without an attention file) to the
// roofline's prices of the named hardware over the same grid (measured_by "roofline"). The
// network files give `tp_all_reduce` (all-reduces of that many GPUs within one node) and
// `pp_send_recv` / `pp_send_recv.remote` (sends between two GPUs of one node / of two nodes),
// their batch the tokens whose activations the bytes hold. The profile records the degree
// (source.tensor_parallel), the preset's name and shape, and the hardware preset's name. Throws
// InputError naming the file or option for malformed files, a model preset of another shape
// (naming what differs and the presets of the profile's shape), an unknown hardware preset, and
// a degree the files or the model do not have.
VidurCalibration calibrate_vidur(const VidurInputs& inputs, const CalibrationOptions& options = {});

}  // namespace exitsim::analysis
