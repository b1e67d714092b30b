// A trace's steps, mapped into the calibrated cost model's samples, or counted with the reason
// they could not be (docs/calibration.md, "From your own framework").
#include "kineto_map.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "kineto_shape.hpp"
#include "kineto_steps.hpp"

namespace exitsim::analysis::kineto {
namespace {

namespace ops = traces::engine_ops;

constexpr std::array<std::string_view, 10> k_kinds = {
    "norm", "gemm", "elementwise", "memcpy",      "attention",
    "gemm", "norm", "gemm",        "elementwise", "gemm"};

// Each Skip in words, as "N steps <reason>" reads.
constexpr std::array<std::string_view, k_skip_kinds> k_reasons = {
    "",
    "with no input shapes",
    "with no embedding (aten::embedding of a 2-D weight)",
    "that captured CUDA graphs (their kernels are recorded, not run: no step time)",
    "run as CUDA-graph replays whose batch no step annotation gives as decodes",
    "with no recognisable layer (no q/k/v projection of d_model inputs after the embedding)",
    "with an unknown attention (no attention operator after the q/k/v projections)",
    "with an attention whose batch no shape gives",
    "with a layer cut short (its attention and no MLP)",
    "with layers shaped differently",
    "with an MLP neither dense nor a routed mixture of experts",
    "with fused experts whose width and top-k no shape gives",
    "with experts whose routing no shape gives"};

double total_us(std::span<const Operator* const> group) {
  double us = 0;
  for (const Operator* op : group)
    us += op->duration_us;
  return us;
}

void add_sample(Samples& samples, TraceStep& step, const std::string& name, std::string_view kind,
                const OpSample& call) {
  auto& entry = samples[name];
  entry.first = std::string(kind);
  entry.second.push_back(call);
  step.calls.emplace_back(&samples.find(name)->first, call);
}

// Counts a skipped step under its reason, naming the first one's operator by its position.
void count_skip(ImportReport& report, Skip why, const std::string& problem, const Operator* culprit,
                std::span<const Operator* const> in_step, std::size_t step_index,
                const std::string& step_name) {
  ++report.skipped_steps;
  SkipTally& tally = report.skipped[static_cast<std::size_t>(why)];
  if (tally.steps++ > 0)
    return;
  tally.problem = problem;
  const auto at = std::find(in_step.begin(), in_step.end(), culprit);
  if (culprit != nullptr && at != in_step.end()) {
    tally.first =
        fmt::format("{} at op {} of step {}", culprit->name, at - in_step.begin(), step_index);
  } else {
    tally.first = fmt::format("step {} ({})", step_index, step_name.substr(0, 60));
  }
}

// The step's samples: every layer's ten ops, the all-reduces, embedding, head and sampling.
TraceStep sample_step(const Step& step, Samples& samples, ImportReport& report) {
  TraceStep traced;
  const Dims& ids = step.embedding->input_dims[1];
  traced.embedded = static_cast<double>(product(ids).value_or(0));
  traced.emitted = static_cast<double>(step.lm_rows);
  add_sample(samples, traced, std::string(ops::embed), "other",
             {traced.embedded, 0, step.embedding->duration_us});
  for (const Layer& layer : step.layers) {
    const bool prefill = layer.attention.queries > 1;
    const double pairs = attention_pairs(layer.attention);
    for (std::size_t g = 0; g < layer.groups.size(); ++g) {
      std::string name(ops::layer[g]);
      if (prefill)
        name += ops::prefill_suffix;
      add_sample(samples, traced, name, k_kinds[g],
                 {static_cast<double>(layer.tokens), pairs, total_us(layer.groups[g])});
    }
    for (const Operator* op : layer.all_reduces) {
      const Dims* x = input(*op, 0);
      const double rows_reduced = x != nullptr ? static_cast<double>(rows(*x).value_or(0)) : 0;
      add_sample(samples, traced, std::string(ops::tp_all_reduce), "collective",
                 {rows_reduced, 0, op->duration_us});
      ++report.all_reduces;
    }
  }
  // A base model's steps have no head: the profile leaves it out, and simulations price it by
  // the roofline (and say so).
  if (!step.lm_head.empty()) {
    add_sample(samples, traced, std::string(ops::lm_head), "lm_head",
               {traced.emitted, 0, total_us(step.lm_head)});
    add_sample(samples, traced, std::string(ops::sampling), "sampling",
               {traced.emitted, 0, total_us(step.sampling)});
  }
  return traced;
}

}  // namespace

void map_trace(const Trace& trace, Samples& samples, std::vector<TraceStep>& steps,
               ImportReport& report) {
  const StepBounds bounds = step_bounds(trace);
  if (report.step_source.empty())
    report.step_source = bounds.source;
  report.world_size = std::max(report.world_size, trace.world_size);
  std::size_t next = 0;
  for (std::size_t s = 0; s < bounds.steps.size(); ++s) {
    const StepBound& bound = bounds.steps[s];
    std::vector<const Operator*> in_step;
    while (next < trace.operators.size() && trace.operators[next].start_us < bound.start_us)
      ++next;
    // Half-open: an operator starting where this step ends starts the next one (the fallback's
    // next embedding; a whole-microsecond trace's next step).
    for (; next < trace.operators.size() && trace.operators[next].start_us < bound.cpu_end_us;
         ++next)
      in_step.push_back(&trace.operators[next]);
    const auto skip = [&](Skip why, const std::string& problem, const Operator* culprit) {
      count_skip(report, why, problem, culprit, in_step, s, bound.name);
    };
    if (bound.capture) {
      skip(Skip::graph_capture, "", nullptr);
      continue;
    }
    // A step whose layers ran inside CUDA graphs: a whole decode step, by its sequences.
    const auto graph_step = [&] {
      const std::optional<StepRequests>& r = bound.hints.requests;
      if (!r || r->prefill > 0 || r->decode < 1) {
        skip(Skip::graph_replay, "", nullptr);
        return;
      }
      const OpSample call{static_cast<double>(r->decode), 0, bound.end_us - bound.start_us};
      auto& entry = samples[std::string(ops::graph_step)];
      entry.first = "graph";
      entry.second.push_back(call);
      ++report.graph_steps[r->decode];
    };
    const auto embedding = std::find_if(in_step.begin(), in_step.end(), [](const Operator* op) {
      return op->name == "aten::embedding" && op->input_dims.size() >= 2 &&
             op->input_dims[0].size() == 2 && op->input_dims[0][0] > 0 && op->input_dims[0][1] > 0;
    });
    if (embedding == in_step.end() && !bound.replays.empty()) {
      graph_step();
      continue;
    }
    const bool shapes = std::any_of(in_step.begin(), in_step.end(), [](const Operator* op) {
      return std::any_of(op->input_dims.begin(), op->input_dims.end(),
                         [](const Dims& d) { return !d.empty(); });
    });
    if (!shapes) {
      skip(Skip::no_shapes, "", nullptr);
      continue;
    }
    if (embedding == in_step.end()) {
      skip(Skip::no_embedding, "", nullptr);
      continue;
    }
    Step step = map_step(
        std::span(in_step).subspan(static_cast<std::size_t>(embedding - in_step.begin() + 1)),
        *embedding, bound.hints);
    if (step.skip == Skip::no_layer && !bound.replays.empty()) {
      graph_step();
      continue;
    }
    if (step.skip != Skip::none) {
      skip(step.skip, step.problem, step.culprit);
      continue;
    }
    const ShapeReading read = shape_of(trace, step, s);
    if (read.skip != Skip::none) {
      skip(read.skip, read.problem, read.culprit);
      continue;
    }
    ModelShape shape = read.shape;
    shape.name = report.shape.name;
    if (report.steps > 0 && !(shape == report.shape)) {
      throw InputError(SourceLocation{trace.path, 0, 0, fmt::format("ProfilerStep[{}]", s)},
                       expected_found("the model of the earlier steps (" +
                                          sim::model_fingerprint(report.shape) + ")",
                                      sim::model_fingerprint(shape)));
    }
    report.shape = shape;
    for (const Layer& layer : step.layers) {
      if (!layer.attention.assumed.empty())
        report.assumptions.insert(layer.attention.assumed);
    }

    TraceStep traced = sample_step(step, samples, report);
    traced.wall_us = bound.end_us - bound.start_us;
    step.unmapped.insert(step.unmapped.begin(), in_step.begin(), embedding);
    double mapped = 0;
    for (const auto& call : traced.calls)
      mapped += call.second.time_us;
    double unmapped = 0;
    for (const Operator* op : step.unmapped) {
      auto& [calls, us] = report.unmapped[op->name];
      ++calls;
      us += op->duration_us;
      unmapped += op->duration_us;
    }
    report.gap_us += std::max(0.0, traced.wall_us - mapped - unmapped);
    report.step_us += traced.wall_us;
    report.prefill_steps += step.layers.front().attention.queries > 1 ? 1 : 0;
    report.headless_steps += step.lm_head.empty() ? 1 : 0;
    const std::int64_t sequences = step.layers.front().attention.sequences;
    if (!step.lm_head.empty() && sequences > 0 && step.lm_rows > sequences) {
      ++report.every_position_head_steps;
      report.every_position_head_step_us += traced.wall_us;
      report.every_position_head_extra_us +=
          total_us(step.lm_head) *
          (1 - static_cast<double>(sequences) / static_cast<double>(step.lm_rows));
    }
    report.gpu_ran_past += bound.gpu_ran_past ? 1 : 0;
    ++report.steps;
    steps.push_back(std::move(traced));
  }
  report.unattributed_gpu_us += trace.unattributed_gpu_us;
  report.unattributed_kernels += trace.unattributed_kernels;
  report.graph_kernels += trace.graph_kernels;
}

std::string skipped_summary(const ImportReport& report) {
  std::string out;
  for (std::size_t k = 1; k < k_skip_kinds; ++k) {
    const SkipTally& t = report.skipped[k];
    if (t.steps == 0)
      continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", t.steps,
                       t.problem.empty() ? std::string(k_reasons[k]) : "with " + t.problem);
    if (!t.first.empty())
      out += " (first: " + t.first + ")";
  }
  return out;
}

}  // namespace exitsim::analysis::kineto
