#include "exitsim/sim/cost/calibrated_cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::sim {

namespace ops = traces::engine_ops;

namespace {

const OpFit* required(const CostProfile& profile, const std::string& path, std::string_view name) {
  const OpFit* fit = profile.find(std::string(name));
  if (fit == nullptr) {
    std::string seen;
    for (const OpFit& op : profile.ops)
      seen += (seen.empty() ? "" : ", ") + op.name;
    throw InputError({path, 0, 0, "cost_model.profile"},
                     expected_found(fmt::format("a fit of the engine op \"{}\" (every iteration "
                                                "runs it)",
                                                name),
                                    "a profile of only " + seen));
  }
  return fit;
}

// The attention (query, key) pairs of a group, as the engine's op trace counts them.
std::int64_t pairs(const WorkCounts& w) {
  return w.decode_kv + w.prefill_pairs;
}

}  // namespace

CalibratedCostModel::CalibratedCostModel(CostProfile profile, std::string profile_path,
                                         const ModelShape& model, const ParallelPricing& parallel)
    : CalibratedCostModel(std::make_shared<const CostProfile>(std::move(profile)),
                          std::move(profile_path), model, parallel) {}

CalibratedCostModel::CalibratedCostModel(std::shared_ptr<const CostProfile> profile,
                                         std::string profile_path, const ModelShape& model,
                                         const ParallelPricing& parallel)
    : profile_(std::move(profile)),
      profile_path_(profile_path),
      counts_(RooflineCostModel::counting(model, parallel.parallel)),
      layout_(model.depth),
      coda_layers_(model.depth.coda_layers),
      parallel_(model, parallel, profile_->find(std::string(ops::lm_head)) == nullptr) {
  uses_.resize(profile_->ops.size());
  batch_prices_.resize(profile_->ops.size());
  for (const OpFit& op : profile_->ops) {
    const auto reads = [](const OpFit::Regime& r) {
      return r.coefficients[2] != 0 || r.coefficients[3] != 0;
    };
    context_free_.push_back(std::none_of(op.regimes.begin(), op.regimes.end(), reads) ? 1 : 0);
    reads_context_.push_back(reads(op.regimes.front()) ? 1 : 0);
  }
  const std::string fingerprint = model_fingerprint(model);
  if (profile_->source.model_shape != fingerprint) {
    throw InputError(
        {profile_path, 0, 0, "cost_model.profile"},
        expected_found("a profile measured on the scenario's model (" + fingerprint + ")",
                       fmt::format("one of \"{}\" ({})", profile_->source.model,
                                   profile_->source.model_shape)));
  }
  // Each fit prices one GPU's shard of its op at the degree it was measured at.
  const int measured_tp = profile_->source.tensor_parallel;
  if (measured_tp != parallel.parallel.tensor) {
    throw InputError(
        {profile_path, 0, 0, "parallel.tensor"},
        expected_found(fmt::format("{} (the profile's source.tensor_parallel: its fits price one "
                                   "GPU's shard of each op at that degree)",
                                   measured_tp),
                       fmt::format("{}", parallel.parallel.tensor)));
  }
  if (parallel.parallel.tensor > 1)
    all_reduce_ = profile_->find(std::string(ops::tp_all_reduce));
  if (parallel.parallel.pipeline > 1) {
    send_recv_[0] = profile_->find(std::string(ops::pp_send_recv));
    send_recv_[1] = profile_->find(std::string(ops::pp_send_recv_remote));
  }
  const auto prefill_fit = [&](std::string_view name, const OpFit* otherwise) {
    const OpFit* fit = profile_->find(std::string(name) + std::string(ops::prefill_suffix));
    return fit != nullptr ? fit : otherwise;
  };
  for (std::size_t i = 0; i < ops::layer.size(); ++i) {
    layer_fits_[0].ops[i] = required(*profile_, profile_path, ops::layer[i]);
    layer_fits_[1].ops[i] = prefill_fit(ops::layer[i], layer_fits_[0].ops[i]);
  }
  for (LayerFits& fits : layer_fits_) {
    fits.batch_lo = -std::numeric_limits<double>::infinity();
    fits.batch_hi = std::numeric_limits<double>::infinity();
    fits.context_hi = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < fits.ops.size(); ++i) {
      const OpFit& op = *fits.ops[i];
      fits.index[i] = static_cast<std::size_t>(&op - profile_->ops.data());
      fits.batch_lo = std::max(fits.batch_lo, static_cast<double>(op.batch_min_seen));
      fits.batch_hi = std::min(fits.batch_hi, static_cast<double>(op.batch_max_seen));
      if (reads_context_[fits.index[i]] != 0 && op.context_max_seen >= 0)
        fits.context_hi = std::min(fits.context_hi, static_cast<double>(op.context_max_seen));
    }
  }
  embed_ = required(*profile_, profile_path, ops::embed);
  // A profile without an LM head was measured on a base model: the roofline prices the head.
  lm_head_ = profile_->find(std::string(ops::lm_head));
  if (lm_head_ != nullptr)
    sampling_ = required(*profile_, profile_path, ops::sampling);
  kv_only_ = profile_->find(std::string(ops::kv_only));
  if (kv_only_ == nullptr) {
    const double kv = 2.0 * static_cast<double>(model.n_kv_heads * model.head_dim);
    const double qkv = static_cast<double>(model.n_heads * model.head_dim) + kv;
    kv_only_share_ = kv / qkv;
    fallbacks_.push_back(fmt::format(
        "{}: not in the profile (no state_copy run was traced); priced as {} x {:.3f}, the K/V "
        "share of its output",
        ops::kv_only, ops::qkv_proj, kv_only_share_));
  }
  prefill_kv_only_ = prefill_fit(ops::kv_only, kv_only_);
  graph_step_ = profile_->find(std::string(ops::graph_step));
  residual_ = profile_->find(std::string(ops::step_residual));
  if (residual_ == nullptr) {
    fallbacks_.push_back(
        fmt::format("{}: not in the profile; scheduling and policy work between ops priced as 0",
                    ops::step_residual));
  }
}

void CalibratedCostModel::note_off_range(std::size_t index, double batch, double context) const {
  const OpFit& op = profile_->ops[index];
  OpUse& use = uses_[index];
  if (batch < static_cast<double>(op.batch_min_seen) ||
      batch > static_cast<double>(op.batch_max_seen)) {
    ++use.outside_range;
    use.largest = std::max(use.largest, batch);
  }
  // Context is part of the price only where the fit uses it (attention, K/V writes).
  if (reads_context_[index] != 0 && op.context_max_seen >= 0 &&
      context > static_cast<double>(op.context_max_seen)) {
    ++use.beyond_context;
    use.largest_context = std::max(use.largest_context, context);
  }
}

double CalibratedCostModel::checked_us(std::size_t index, double batch, double context) const {
  const OpFit& op = profile_->ops[index];
  double* tabled = nullptr;
  if (context_free_[index] != 0 && batch >= 0 && batch < static_cast<double>(k_batch_table) &&
      static_cast<double>(static_cast<std::size_t>(batch)) == batch) {
    std::vector<double>& prices = batch_prices_[index];
    if (prices.empty())
      prices.assign(k_batch_table, -1.0);
    tabled = &prices[static_cast<std::size_t>(batch)];
    if (*tabled >= 0)
      return *tabled;
  }
  const double us = op.predict_us(batch, context);
  // One op's price past a whole iteration's bound is a fit gone wild off its calls: name it.
  if (!std::isfinite(us) || us > k_max_iteration_us) {
    throw InputError(
        {profile_path_, 0, 0, "cost_model.profile"},
        expected_found(
            fmt::format("op prices under {:g} us", k_max_iteration_us),
            fmt::format("{:.4g} us for {} at batch {:g} and context {:g} (its calls "
                        "had batches {} to {}): its fit extrapolates far beyond what "
                        "was measured; calibrate from runs that cover these batches",
                        us, op.name, batch, context, op.batch_min_seen, op.batch_max_seen)));
  }
  if (tabled != nullptr)
    *tabled = us;
  return us;
}

double CalibratedCostModel::price(const OpFit* op, double batch, double context) const {
  const auto index = static_cast<std::size_t>(op - profile_->ops.data());
  ++uses_[index].calls;
  note_off_range(index, batch, context);
  return checked_us(index, batch, context);
}

double CalibratedCostModel::layer_ops_us(const LayerFits& fits, double batch,
                                         double context) const {
  ++fits.calls;
  if (batch < fits.batch_lo || batch > fits.batch_hi || context > fits.context_hi) {
    for (const std::size_t index : fits.index)
      note_off_range(index, batch, context);
  }
  if (batch == fits.last_batch && context == fits.last_context)
    return fits.last_us;
  // Summed in op order, as the engine runs them.
  double us = 0;
  for (const std::size_t index : fits.index)
    us += checked_us(index, batch, context);
  fits.last_batch = batch;
  fits.last_context = context;
  fits.last_us = us;
  return us;
}

std::vector<std::string> CalibratedCostModel::notes() const {
  std::vector<std::string> out = fallbacks_;
  // Which priced ops were measured and which came from the roofline, said where the roofline
  // priced any.
  std::string measured;
  std::string fitted_to_roofline;
  const auto append = [](std::string& list, const std::string& item) {
    list += (list.empty() ? "" : ", ") + item;
  };
  for (std::size_t i = 0; i < profile_->ops.size(); ++i) {
    const OpFit& op = profile_->ops[i];
    OpUse use = uses_[i];
    for (const LayerFits& fits : layer_fits_)
      use.calls += fits.calls * std::count(fits.index.begin(), fits.index.end(), i);
    if (use.calls > 0)
      append(op.measured_by == "roofline" ? fitted_to_roofline : measured, op.name);
    if (use.outside_range > 0) {
      out.push_back(fmt::format(
          "cost_model.profile: {}: {} of {} distinct batches priced outside the calibrated range "
          "[{}, {}] (largest {:g}): extrapolated, not measured",
          op.name, use.outside_range, use.calls, op.batch_min_seen, op.batch_max_seen,
          use.largest));
    }
    if (use.beyond_context > 0) {
      out.push_back(fmt::format(
          "cost_model.profile: {}: {} of {} distinct calls priced beyond the most attention "
          "context measured ({} pairs; largest {:g}): extrapolated, not measured",
          op.name, use.beyond_context, use.calls, op.context_max_seen, use.largest_context));
    }
    for (const std::string& term : op.undetermined_terms) {
      if (use.calls > 0) {
        out.push_back(fmt::format(
            "cost_model.profile: {}: its calibration's calls did not determine the {} term; "
            "priced without it",
            op.name, term));
      }
    }
    for (std::size_t r = 0; r < op.regimes.size(); ++r) {
      if (op.regimes[r].mean_of_calls && use.calls > 0) {
        out.push_back(fmt::format(
            "cost_model.profile: {}: regime {} (batch <= {}) priced as its calls' mean, not a fit",
            op.name, r, op.regimes[r].batch_max));
      }
    }
  }
  if (graph_step_ != nullptr) {
    const std::size_t index = static_cast<std::size_t>(graph_step_ - profile_->ops.data());
    if (uses_[index].calls > 0) {
      out.push_back(fmt::format(
          "cost_model.profile: {}: {} distinct decode iterations priced as whole CUDA-graph "
          "replays (measured at batches {} to {}), by their sequences alone: a graph's attention "
          "context is in no shape",
          ops::graph_step, uses_[index].calls, graph_step_->batch_min_seen,
          graph_step_->batch_max_seen));
    }
  }
  const std::string roofline_here = roofline_stand_ins_used(roofline_calls_);
  if (!fitted_to_roofline.empty() || !roofline_here.empty()) {
    out.push_back(fmt::format(
        "cost_model.profile: measured by {}: {}; fitted to exitsim's roofline when the profile "
        "was made, not measured: {}; not in the profile, priced by the roofline: {}",
        profile_->source.engine, measured.empty() ? "none" : measured,
        fitted_to_roofline.empty() ? "none" : fitted_to_roofline,
        roofline_here.empty() ? "none" : roofline_here));
  }
  return out;
}

double CalibratedCostModel::all_reduce_us(std::int64_t tokens) const {
  if (all_reduce_ != nullptr)
    return price(all_reduce_, static_cast<double>(tokens), 0);
  ++roofline_calls_[all_reduce_use];
  return parallel_.all_reduce_us(tokens);
}

double CalibratedCostModel::head_us(std::int64_t emitting) const {
  const auto n = static_cast<double>(emitting);
  double us = 0;
  if (lm_head_ != nullptr) {
    us = price(lm_head_, n, 0) + price(sampling_, n, 0);
  } else {
    ++roofline_calls_[head_use];
    us = parallel_.head_us(emitting);  // final norm, head and sampling
  }
  if (parallel_.tensor() > 1) {
    ++roofline_calls_[gather_use];
    us += parallel_.logits_gather_us(emitting);
  }
  return us;
}

double CalibratedCostModel::hand_off_us(std::size_t boundary, std::int64_t tokens) const {
  const bool remote = parallel_.remote(boundary);
  if (const OpFit* fit = send_recv_[remote ? 1 : 0]; fit != nullptr)
    return price(fit, static_cast<double>(tokens), 0);
  ++roofline_calls_[remote ? remote_use : hand_off_use];
  return parallel_.hand_off_us(boundary, tokens);
}

double CalibratedCostModel::layer_us(std::int64_t b, std::int64_t c, std::int64_t kv_only,
                                     bool prefill) const {
  const LayerFits& fits = layer_fits_[prefill ? 1 : 0];
  double us = 0;
  if (b > 0) {
    us = layer_ops_us(fits, static_cast<double>(b), static_cast<double>(c));
    // The row-parallel output and down projections leave partial sums: an all-reduce after each.
    if (parallel_.tensor() > 1)
      us += 2 * all_reduce_us(b);
  }
  if (kv_only > 0) {
    const auto tokens = static_cast<double>(kv_only);
    const OpFit* fit = prefill ? prefill_kv_only_ : kv_only_;
    us += fit != nullptr ? price(fit, tokens, 0) : kv_only_share_ * price(fits.ops[1], tokens, 0);
  }
  return us;
}

bool CalibratedCostModel::collect_passes(std::span<const BatchEntry> batch) const {
  for (LayerBatches& pass : passes_)
    pass.clear(layout_.stacked_depth());
  prefill_layer_us_.resize(static_cast<std::size_t>(layout_.stacked_depth()));
  bool masked = false;
  for (const BatchEntry& e : batch) {
    if (e.query_tokens <= 0)
      continue;
    const EntrySpan s = passes_[e.query_tokens > 1 ? 1 : 0].add(layout_, e);
    masked = masked || s.useful < s.depth;
  }
  return masked;
}

std::int64_t CalibratedCostModel::graph_sequences(std::span<const BatchEntry> batch) const {
  if (graph_step_ == nullptr || parallel_.stages() > 1)
    return 0;
  std::int64_t n = 0;
  for (const BatchEntry& e : batch) {
    if (e.query_tokens <= 0)
      continue;
    if (e.query_tokens != 1 || e.start_depth != 0 || e.depth != layout_.stacked_depth() ||
        !e.emits_token)
      return 0;
    ++n;
  }
  return n;
}

IterationCost CalibratedCostModel::iteration_cost(std::span<const BatchEntry> batch) const {
  if (parallel_.stages() > 1)
    return pipeline_cost(batch);
  if (const std::int64_t n = graph_sequences(batch); n > 0) {
    return measured_cost(price(graph_step_, static_cast<double>(n), 0),
                         counts_.iteration_cost(batch), profile_path_);
  }
  const auto layers = static_cast<std::size_t>(layout_.stacked_depth());
  std::array<LayerBatches, 2>& passes = passes_;  // [0] decode, [1] prefill
  const bool masked = collect_passes(batch);

  // Both passes' layers in one walk: each pass's layers priced as its own calls (the decode
  // pass's summed now, the prefill pass's kept to sum after the decode pass's coda and head, the
  // engine's order), and the FLOPs and bytes of both together counted per run of layers that see
  // the same batch, where regrouping the roofline's counts cannot change them; otherwise (and
  // for masked FLOPs) the counting model goes over the batch itself.
  const bool count_here = !masked && counts_.counts_regroup_exactly();
  IterationCost counted;
  double us = 0;
  // Each pass's batch at the layer.
  WorkCounts run_decode{};
  WorkCounts run_prefill{};
  const std::array<WorkCounts*, 2> run = {&run_decode, &run_prefill};
  std::array<WorkCounts, 2> priced;  // set at layer 0
  std::array<double, 2> priced_us{};
  WorkCounts counted_run{};
  std::size_t counted_from = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t p = 0; p < passes.size(); ++p) {
      if (passes[p].empty())
        continue;
      WorkCounts& sum = *run[p];
      passes[p].next_layer(sum);
      // Consecutive layers usually see the same batch: price each distinct one once.
      if (l == 0 || !(sum == priced[p])) {
        priced[p] = sum;
        priced_us[p] = layer_us(sum.tokens, pairs(sum), sum.kv_only_tokens, p == 1);
      }
      if (p == 0)
        us += priced_us[p];
      else
        prefill_layer_us_[l] = priced_us[p];
    }
    if (count_here) {
      WorkCounts both = run_decode;
      both.add(run_prefill);
      if (l > 0 && !(both == counted_run)) {
        counts_.count_stack_layers(static_cast<int>(counted_from), static_cast<int>(l), counted_run,
                                   counted);
        counted_from = l;
      }
      counted_run = both;
    }
  }
  if (count_here && layers > 0) {
    counts_.count_stack_layers(static_cast<int>(counted_from), static_cast<int>(layers),
                               counted_run, counted);
  }

  std::int64_t embedded = 0;
  std::int64_t emitting = 0;
  for (std::size_t p = 0; p < passes.size(); ++p) {
    const LayerBatches& pass = passes[p];
    const bool prefill = p == 1;
    if (pass.empty())
      continue;
    if (prefill) {
      for (std::size_t l = 0; l < layers; ++l)
        us += prefill_layer_us_[l];
    }
    us += static_cast<double>(coda_layers_) *
          layer_us(pass.coda.tokens, pairs(pass.coda), 0, prefill);
    if (pass.embedded > 0)
      us += price(embed_, static_cast<double>(pass.embedded), 0);
    if (pass.emitting > 0)
      us += head_us(pass.emitting);
    embedded += pass.embedded;
    emitting += pass.emitting;
  }
  if (residual_ != nullptr &&
      (embedded > 0 || emitting > 0 || !passes[0].empty() || !passes[1].empty()))
    us += price(residual_, static_cast<double>(embedded), static_cast<double>(emitting));

  if (count_here) {
    WorkCounts all = passes[0].coda;
    all.add(passes[1].coda);
    counts_.count_coda_and_head(all, emitting, counted);
  }
  // FLOPs past 2^53 are no longer integer sums, so their grouping could change them.
  if (!count_here || !(counted.flops < 0x1p53))
    counted = counts_.iteration_cost(batch);
  return measured_cost(us, counted, profile_path_);
}

void CalibratedCostModel::stage_us(std::span<const BatchEntry> part,
                                   std::span<double> stage_us) const {
  std::fill(stage_us.begin(), stage_us.end(), 0.0);
  const auto layers = static_cast<std::size_t>(layout_.stacked_depth());
  collect_passes(part);
  std::array<WorkCounts, 2> run{};
  std::array<WorkCounts, 2> priced{};
  std::array<double, 2> priced_us{};
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t stage = parallel_.stage_of(static_cast<int>(l));
    for (std::size_t p = 0; p < passes_.size(); ++p) {
      if (passes_[p].empty())
        continue;
      passes_[p].next_layer(run[p]);
      if (l == 0 || !(run[p] == priced[p])) {
        priced[p] = run[p];
        priced_us[p] = layer_us(run[p].tokens, pairs(run[p]), run[p].kv_only_tokens, p == 1);
      }
      stage_us[stage] += priced_us[p];
    }
  }
  for (std::size_t p = 0; p < passes_.size(); ++p) {
    const LayerBatches& pass = passes_[p];
    if (pass.empty())
      continue;
    if (coda_layers_ > 0) {
      const double coda = layer_us(pass.coda.tokens, pairs(pass.coda), 0, p == 1);
      for (int j = 0; j < coda_layers_; ++j)
        stage_us[parallel_.stage_of(static_cast<int>(layers) + j)] += coda;
    }
    // The embedding on the first stage; the LM head, its gather and sampling on the last.
    if (pass.embedded > 0)
      stage_us.front() += price(embed_, static_cast<double>(pass.embedded), 0);
    if (pass.emitting > 0)
      stage_us.back() += head_us(pass.emitting);
  }
}

IterationCost CalibratedCostModel::pipeline_cost(std::span<const BatchEntry> batch) const {
  double us = parallel_.step_us(batch, *this);
  // Scheduling and policy work between steps: once per step, on the host.
  std::int64_t embedded = 0;
  std::int64_t emitting = 0;
  bool any = false;
  for (const BatchEntry& e : batch) {
    if (e.query_tokens <= 0)
      continue;
    any = true;
    if (layout_.span_of(e).start == 0)
      embedded += e.query_tokens;
    if (e.emits_token)
      ++emitting;
  }
  if (residual_ != nullptr && any)
    us += price(residual_, static_cast<double>(embedded), static_cast<double>(emitting));
  return measured_cost(us, counts_.iteration_cost(batch), profile_path_);
}

}  // namespace exitsim::sim
