#include "replica.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/servable.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/kv_capacity.hpp"

namespace exitsim::sim {

Replica::Replica(int index, const ReplicaSpec& spec, MetricsCollector& metrics)
    : index_(index),
      metrics_(metrics),
      depth_model_(spec.exit_policy, spec.sync, spec.model, spec.seed, index),
      model_depth_(spec.model.depth) {
  policy::SchedulerParams params;
  params.preemption = spec.scheduler.preemption;
  params.watermark_fraction = spec.scheduler.watermark_fraction;
  params.reserve_prompt_blocks = spec.scheduler.reserve_prompt_blocks;
  scheduler_ = policy::make_scheduler(spec.scheduler.kind, params);
  scheduler_name_ = spec.scheduler.kind;
  cost_model_ = make_cost_model(spec.cost_model, spec.model, spec.hardware);
  const KvCapacity kv =
      derive_kv_capacity(spec.model, spec.hardware,
                         {spec.scheduler.block_size, spec.scheduler.kv_blocks,
                          spec.scheduler.memory_reserve_fraction, depth_model_.kv_layers()});
  block_size_ = kv.block_size;
  kv_total_ = kv.blocks;
  kv_free_ = kv.blocks;
  limits_.max_running = spec.scheduler.max_running;
  limits_.max_batched_tokens = spec.scheduler.max_batched_tokens;
  capacity_ = {scheduler_->chunks_prompts(), limits_.max_batched_tokens, kv_total_ * block_size_,
               spec.model.max_context};
  reject_unservable_ = spec.scheduler.unservable == "reject";
  description_ = fmt::format("replica {} ({} on {})", index, spec.model.name, spec.hardware.name);
}

bool Replica::enqueue(const RequestDescriptor& request, TimeNs arrival) {
  if (const auto reason =
          policy::unservable_reason(request.input_tokens, request.output_tokens, capacity_)) {
    if (!reject_unservable_) {
      throw InputError(
          {"", 0, 0, "workload"},
          fmt::format("request {} cannot be served by {}: {}; or set scheduler.unservable: "
                      "reject to count such requests as rejected",
                      request.id.value, description_,
                      policy::describe_unservable(*reason, request.input_tokens,
                                                  request.output_tokens, capacity_)));
    }
    metrics_.record_rejection(*reason);
    return false;
  }
  policy::SequenceView view;
  view.id = request.id;
  view.arrival = arrival;
  view.prompt_tokens = request.input_tokens;
  SequenceExtra extra;
  extra.target_output_tokens = request.output_tokens;
  waiting_.push_back(view, extra);
  load_.outstanding_requests += 1;
  load_.outstanding_tokens += request.input_tokens;
  return true;
}

TimeNs Replica::start_iteration(TimeNs now) {
  decision_.clear();
  const policy::SchedulerSnapshot snapshot{
      running_.views(), waiting_.views(), {block_size_, kv_total_, kv_free_}, limits_, now};
  scheduler_->schedule(snapshot, decision_);
#ifndef NDEBUG
  if (const std::string problem = policy::check_decision(snapshot, decision_); !problem.empty()) {
    throw std::logic_error(fmt::format("scheduler {} made an infeasible decision on {}: {}",
                                       scheduler_name_, description_, problem));
  }
#endif
  if (decision_.work.empty()) {
    if (running_.empty() && !waiting_.empty())
      throw_stalled();
    return -1;
  }
  const std::size_t kept_running = apply_admissions_and_preemptions();
  map_work_to_running(kept_running);

  batch_.clear();
  batch_rows_.clear();
  decode_tokens_.clear();
  IterationRecord& record = last_iteration_;
  record = IterationRecord{};
  const int full_depth = depth_model_.full_depth();
  for (std::size_t i = 0; i < running_.size(); ++i) {
    const std::int64_t tokens = work_tokens_[i];
    if (tokens == 0)
      continue;
    const policy::SequenceView& view = running_.view(i);
    SequenceExtra& extra = running_.extra(i);
    if (extra.first_scheduled < 0)
      extra.first_scheduled = now;
    BatchEntry entry{tokens, view.computed_tokens, full_depth, tokens == view.pending_tokens()};
    if (view.is_decoding()) {
      record.decode_tokens += tokens;
      decode_tokens_.push_back({batch_.size(), view.id, view.generated_tokens,
                                extra.target_output_tokens, &extra.depth});
    } else {
      record.prefill_tokens += tokens;
      depth_model_.plan_prefill(entry, extra.depth);
    }
    batch_.push_back(entry);
    batch_rows_.push_back(i);
  }
  exit_depths_.resize(decode_tokens_.size());
  std::int64_t fill_tokens = 0;
  if (depth_model_.depthwise()) {
    depth_model_.plan_depthwise(decode_tokens_, batch_, exit_depths_);
    for (const int depth : exit_depths_) {
      if (depth >= 0)
        metrics_.record_token_depth(depth, depth);
    }
  } else {
    fill_tokens = depth_model_.plan(decode_tokens_, batch_, exit_depths_);
    for (std::size_t k = 0; k < decode_tokens_.size(); ++k) {
      metrics_.record_token_depth(exit_depths_[k], batch_[decode_tokens_[k].batch_index].depth);
    }
  }
  for (std::size_t k = 0; k < batch_.size(); ++k) {
    const std::size_t row = batch_rows_[k];
    policy::SequenceView& view = running_.view(row);
    const BatchEntry& entry = batch_[k];
    if (!view.is_decoding() && entry.emits_token) {
      metrics_.record_token_depth(full_depth, full_depth);  // a prompt's first token
    }
    const std::int64_t needed =
        blocks_after(view, running_.extra(row), work_tokens_[row], !view.is_decoding());
    kv_free_ -= needed - view.kv_blocks;
    view.kv_blocks = needed;
  }
  if (kv_free_ < 0) {
    throw std::logic_error(fmt::format("{} over-allocated K/V blocks ({} free) after scheduler {}",
                                       description_, kv_free_, scheduler_name_));
  }
  const IterationCost cost = cost_model_->iteration_cost(batch_);
  metrics_.record_iteration_work(cost.flops, cost.masked_flops, fill_tokens);
  // A zero-length iteration would let the clock stand still while work proceeds.
  const TimeNs duration = std::max<TimeNs>(cost.total, 1);
  record.replica = index_;
  record.start = now;
  record.duration = duration;
  record.sequences = static_cast<std::int64_t>(batch_.size());
  record.kv_blocks_used = kv_total_ - kv_free_;
  record.kv_blocks_total = kv_total_;
  metrics_.record_iteration(record);
  busy_ = true;
  return duration;
}

std::size_t Replica::apply_admissions_and_preemptions() {
  // Admissions index the snapshot's waiting queue, so take them out before victims are put at
  // its front.
  admitted_views_.clear();
  admitted_extras_.clear();
  for (std::size_t index : decision_.admit) {
    admitted_views_.push_back(waiting_.view(index));
    admitted_extras_.push_back(waiting_.extra(index));
  }
  scratch_indices_.assign(decision_.admit.begin(), decision_.admit.end());
  std::sort(scratch_indices_.begin(), scratch_indices_.end());
  waiting_.remove(scratch_indices_);

  victims_views_.clear();
  victims_extras_.clear();
  for (std::size_t index : decision_.preempt) {
    policy::SequenceView victim = running_.view(index);
    SequenceExtra extra = running_.extra(index);
    kv_free_ += victim.kv_blocks;
    metrics_.record_recompute(victim.computed_tokens);
    victim.kv_blocks = 0;
    victim.computed_tokens = 0;
    extra.depth = SequenceDepthState{};  // recompute rebuilds every layer's K/V
    extra.preemptions += 1;
    metrics_.record_preemption();
    victims_views_.push_back(victim);
    victims_extras_.push_back(extra);
  }
  preempted_sorted_.assign(decision_.preempt.begin(), decision_.preempt.end());
  std::sort(preempted_sorted_.begin(), preempted_sorted_.end());
  running_.remove(preempted_sorted_);
  for (std::size_t k = victims_views_.size(); k-- > 0;) {
    waiting_.push_front(victims_views_[k], victims_extras_[k]);
  }
  const std::size_t kept_running = running_.size();
  for (std::size_t k = 0; k < admitted_views_.size(); ++k) {
    running_.push_back(admitted_views_[k], admitted_extras_[k]);
  }
  return kept_running;
}

void Replica::map_work_to_running(std::size_t kept_running) {
  // Snapshot running index -> index after the victims left (their work is never scheduled).
  work_tokens_.assign(running_.size(), 0);
  for (const policy::ScheduledWork& work : decision_.work) {
    std::size_t target = 0;
    if (work.sequence.waiting) {
      const auto position =
          std::find(decision_.admit.begin(), decision_.admit.end(), work.sequence.index);
      target = kept_running + static_cast<std::size_t>(position - decision_.admit.begin());
    } else {
      const auto removed_before =
          std::lower_bound(preempted_sorted_.begin(), preempted_sorted_.end(), work.sequence.index);
      target = work.sequence.index -
               static_cast<std::size_t>(removed_before - preempted_sorted_.begin());
    }
    work_tokens_[target] = work.tokens;
  }
}

IterationOutcome Replica::complete_iteration(TimeNs now) {
  IterationOutcome outcome;
  scratch_indices_.clear();
  for (std::size_t i = 0; i < running_.size(); ++i) {
    const std::int64_t tokens = work_tokens_[i];
    if (tokens == 0)
      continue;
    policy::SequenceView& view = running_.view(i);
    SequenceExtra& extra = running_.extra(i);
    const bool emits = tokens == view.pending_tokens() && !extra.depth.token_in_flight();
    if (!view.is_decoding()) {
      depth_model_.on_prefill(extra.depth, tokens);
    } else if (!emits) {
      continue;  // a depth-wise token still in flight: its K/V row is not complete yet
    }
    view.computed_tokens += tokens;
    if (!emits)
      continue;
    view.generated_tokens += 1;
    load_.outstanding_tokens += 1;
    outcome.tokens_emitted += 1;
    if (extra.first_token < 0) {
      extra.first_token = now;
    } else {
      metrics_.record_token_gap(now - extra.last_token);
    }
    extra.last_token = now;
    if (extra.depth.rollback > 0) {
      roll_back(view, outcome, extra.depth.rollback);
      extra.depth.rollback = 0;
    }
    if (view.generated_tokens == extra.target_output_tokens) {
      kv_free_ += view.kv_blocks;
      view.kv_blocks = 0;
      load_.outstanding_requests -= 1;
      load_.outstanding_tokens -= view.known_tokens();
      outcome.requests_finished += 1;
      metrics_.record_request({view.id, index_, view.arrival, extra.first_scheduled,
                               extra.first_token, now, view.prompt_tokens,
                               extra.target_output_tokens, extra.preemptions});
      scratch_indices_.push_back(i);
    }
  }
  running_.remove(scratch_indices_);
  if (outcome.requests_finished > 0) {
    metrics_.record_kv_usage(index_, now, kv_total_ - kv_free_, kv_total_);
  }
  busy_ = false;
  return outcome;
}

std::int64_t Replica::blocks_after(const policy::SequenceView& view, const SequenceExtra& extra,
                                   std::int64_t tokens, bool prefill) const {
  const std::int64_t computed = view.computed_tokens + tokens;
  std::int64_t blocks = (computed + block_size_ - 1) / block_size_;
  if (depth_model_.dynamic() && depth_model_.skips_kv() && model_depth_.recursions > 0) {
    // K/V in layer-token units: prelude and coda layers for every token, each recursion's block
    // only for the tokens that reached it; a block holds block_size tokens of every layer.
    std::int64_t units =
        static_cast<std::int64_t>(model_depth_.prelude_layers + model_depth_.coda_layers) *
        computed;
    for (int r = 0; r < model_depth_.recursions; ++r) {
      const std::int64_t reached =
          extra.depth.reached[static_cast<std::size_t>(r)] + (prefill ? tokens : 0);
      units += model_depth_.block_layers * reached;
    }
    const std::int64_t layers = model_depth_.full_depth();
    blocks = std::max(view.kv_blocks, (units + layers * block_size_ - 1) / (layers * block_size_));
  }
  return blocks;
}

void Replica::roll_back(policy::SequenceView& view, IterationOutcome& outcome,
                        std::int64_t tokens) {
  // The discarded tokens leave the output and their K/V is freed; the sequence goes on from the
  // corrected token, which this iteration emitted.
  view.generated_tokens -= tokens;
  view.computed_tokens -= tokens;
  outcome.tokens_emitted -= tokens;
  load_.outstanding_tokens -= tokens;
  const std::int64_t blocks = (view.computed_tokens + block_size_ - 1) / block_size_;
  kv_free_ += view.kv_blocks - blocks;
  view.kv_blocks = blocks;
  metrics_.record_rollback(tokens);
}

void Replica::throw_stalled() const {
  const policy::SequenceView& head = waiting_.views().front();
  throw InputError(
      {"", 0, 0, "scheduler"},
      fmt::format("{} cannot schedule request {} ({} prompt tokens): scheduler {} admits nothing "
                  "with {} of {} K/V blocks free and max_batched_tokens {}; raise "
                  "scheduler.max_batched_tokens or use chunked_prefill",
                  description_, head.id.value, head.pending_tokens(), scheduler_name_, kv_free_,
                  kv_total_, limits_.max_batched_tokens));
}

}  // namespace exitsim::sim
