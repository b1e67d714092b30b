#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim {

// What a measured cost model (calibrated, table) needs to price a tensor- or pipeline-parallel
// replica: the split, and the hardware and efficiencies of the roofline that prices what was not
// measured (collectives, hand-offs, the logits gather).
struct ParallelPricing {
  ParallelSpec parallel;
  HardwareSpec hardware;
  RooflineEfficiency efficiency;
};

// The roofline's stand-ins for what a measured model did not measure, by the index its calls are
// counted under (0 all-reduce, 1 logits gather, 2 hand-off within a node, 3 between nodes, 4 the
// final norm, LM head and sampling of a profile measured on a base model without an LM head):
// those with calls, comma-separated, for the model's notes ("" when none).
inline constexpr std::size_t k_roofline_stand_ins = 5;
std::string roofline_stand_ins_used(const std::array<std::int64_t, k_roofline_stand_ins>& calls);

// A measured model's prices of one micro-batch on each pipeline stage and of its hand-offs.
class StagePricer {
 public:
  virtual ~StagePricer() = default;
  // Writes every element of `stage_us`: the micro-batch `part`'s time on each stage, in
  // microseconds.
  virtual void stage_us(std::span<const BatchEntry> part, std::span<double> stage_us) const = 0;
  // The hand-off of `tokens` tokens' activations after stage `boundary`, microseconds.
  virtual double hand_off_us(std::size_t boundary, std::int64_t tokens) const = 0;
};

// What a measured cost model adds to its one-GPU prices under tensor and pipeline parallelism
// (docs/cost_model.md, "Measured cost models under TP and PP"): the roofline's prices of what it
// did not measure, the pipeline's stages as the roofline splits them (split_pipeline), and the
// roofline's step over its micro-batches (RooflineCostModel's pipeline schedule).
class MeasuredParallel {
 public:
  MeasuredParallel() = default;  // one GPU: nothing to add
  // Throws InputError for a split the roofline refuses (find_parallel_problem,
  // find_link_problem) or hardware it cannot price. `prices_head`: the measured model has no LM
  // head, and head_us prices it (on one GPU too).
  MeasuredParallel(const ModelShape& model, const ParallelPricing& pricing,
                   bool prices_head = false);

  int tensor() const { return parallel_.tensor; }
  std::size_t stages() const { return stages_.empty() ? 1 : stages_.size(); }
  // The stage that runs executed layer `layer` (stack then coda), with PP.
  std::size_t stage_of(int layer) const { return stage_of_[static_cast<std::size_t>(layer)]; }
  // Whether the hand-off after stage `boundary` leaves the node (hand_off_crosses_nodes).
  bool remote(std::size_t boundary) const { return remote_[boundary] != 0; }

  // The roofline's prices in microseconds, launch included (with TP, resp. PP only).
  double all_reduce_us(std::int64_t tokens) const;
  double logits_gather_us(std::int64_t emitting) const;
  double hand_off_us(std::size_t boundary, std::int64_t tokens) const;
  // The final norm, LM head and sampling of `emitting` tokens (with prices_head only; the final
  // norm of those tokens alone, as a measured LM head op holds it).
  double head_us(std::int64_t emitting) const;

  // The step of a pipelined batch in microseconds: its entries split into micro-batches as the
  // roofline splits them (m = min(stages, sequences), each entry to the one with the fewest
  // tokens), then max(the busiest stage's time summed over the micro-batches, the longest
  // micro-batch's trip through every stage and hand-off), from `pricer`'s prices. 0 without
  // query tokens. Allocation-free once warm (per-thread scratch).
  double step_us(std::span<const BatchEntry> batch, const StagePricer& pricer) const;

 private:
  ParallelSpec parallel_;
  std::optional<RooflineCostModel> roofline_;
  std::vector<PipelineStage> stages_;   // empty without PP
  std::vector<std::uint8_t> stage_of_;  // by executed layer
  std::vector<std::uint8_t> remote_;    // by boundary
};

}  // namespace exitsim::sim
