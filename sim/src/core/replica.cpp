#include "replica.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/scheduler_steps.hpp"
#include "exitsim/policy/servable.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/cost/step_batch.hpp"
#include "exitsim/sim/kv_capacity.hpp"

namespace exitsim::sim {

bool exit_probes(const ReplicaSpec& spec) {
  return prices_exit_probes(spec.exit_policy);
}

bool shares_roofline(const ReplicaSpec& a, const ReplicaSpec& b) {
  return a.cost_model.kind == "roofline" && a.cost_model == b.cost_model && a.model == b.model &&
         a.hardware == b.hardware && a.parallel == b.parallel && exit_probes(a) == exit_probes(b);
}

Replica::Replica(int index, const ReplicaSpec& spec, MetricsCollector& metrics,
                 const StepObserver* step_observer, bool reuse_steady_decode_steps,
                 std::shared_ptr<const CostModel> cost_model)
    : index_(index),
      step_observer_(step_observer != nullptr && *step_observer ? step_observer : nullptr),
      metrics_(metrics),
      depth_model_(spec.exit_policy, spec.sync, spec.model, spec.seed, index),
      kv_layout_(spec.model.depth, depth_model_.strategy()),
      model_depth_(spec.model.depth) {
  policy::SchedulerParams params;
  params.preemption = spec.scheduler.preemption;
  params.watermark_fraction = spec.scheduler.watermark_fraction;
  params.reserve_prompt_blocks = spec.scheduler.reserve_prompt_blocks;
  scheduler_ = policy::make_scheduler(spec.scheduler.kind, params);
  scheduler_name_ = spec.scheduler.kind;
  recompute_waste_.reserving_would_help =
      spec.scheduler.kind == "chunked_prefill" && !spec.scheduler.reserve_prompt_blocks;
  // A confidence policy decides with a probe of the LM head at each exit point (the engine's
  // decode pass runs it on the tokens still running there); the roofline prices it.
  cost_model_ = cost_model != nullptr ? std::move(cost_model)
                                      : make_cost_model(spec.cost_model, spec.model, spec.hardware,
                                                        spec.parallel, exit_probes(spec));
  pricer_.emplace(*cost_model_, spec.model.depth, depth_model_.strategy());
  price_scale_ = spec.cost_model.price_scale;
  // (The scenario allows the key only with a calibrated cost model.)
  if (spec.cost_model.step_variability) {
    const std::span<const double> spread = cost_model_->step_variability();
    step_factors_.assign(spread.begin(), spread.end());
    if (step_factors_.empty())
      unmeasured_variability_ = true;
    else
      step_draws_.emplace(spec.seed, "cost_model.step_variability." + std::to_string(index));
  }
  const KvCapacity kv = derive_kv_capacity(
      spec.model, spec.hardware,
      {spec.scheduler.block_size, spec.scheduler.kv_blocks, spec.scheduler.memory_reserve_fraction,
       kv_layout_.instances(), spec.parallel});
  kv_view_.block_size = kv.block_size;
  role_ = spec.scheduler.role.empty() ? "mixed" : spec.scheduler.role;
  prefill_only_ = role_ == "prefill";
  kv_bytes_per_token_ = kv.kv_bytes_per_token;
  if (spec.scheduler.preemption == "swap") {
    const setup::HostSwapLink link =
        setup::host_swap_link(spec.model, spec.hardware, spec.parallel, kv.block_size);
    swap_.emplace(Swap{link, policy::HostSwapSpace(link.host_blocks), 0, 0, {}});
  }
  kv_view_.groups = kv_layout_.groups();
  kv_instances_ = kv_view_.groups.total_instances();
  kv_total_ = kv.blocks * kv_instances_;
  kv_free_ = kv_total_;
  limits_.max_running = spec.scheduler.max_running;
  limits_.max_batched_tokens = spec.scheduler.max_batched_tokens;
  capacity_ = {scheduler_->chunks_prompts(), limits_.max_batched_tokens, kv.blocks * kv.block_size,
               spec.model.max_context};
  reject_unservable_ = spec.scheduler.unservable == "reject";
  if (spec.scheduler.prefix_caching) {
    // Only prompt blocks are cached, and prompts run every layer: a cached block has its rows at
    // every K/V instance, per-recursion layouts (skip_kv, depthwise) included.
    prefix_reuse_.emplace(kv_view_.block_size, kv_view_.groups.total_instances());
  }
  description_ = fmt::format("replica {} ({} on {})", index, spec.model.name, spec.hardware.name);
  // Steady decode steps need a scheduler that promises their decision. A hand-off replica never
  // decodes twice, and the step observer wants each full step's trace. Prefix caching and swap
  // change nothing in such a step: nobody waits to be offered a hit or swapped in, and no
  // decode-written block is cached. A running sequence's shared blocks, which only the
  // scheduler's victim choice reads, are brought up to date by the next full step.
  steady_allowed_ = reuse_steady_decode_steps && scheduler_->decodes_all_when_steady() &&
                    step_observer_ == nullptr && !prefill_only_;
}

bool Replica::servable(RequestId id, std::int64_t input_tokens, std::int64_t output_tokens,
                       const char* verb) {
  const auto reason = policy::unservable_reason(input_tokens, output_tokens, capacity_);
  if (!reason)
    return true;
  if (!reject_unservable_) {
    throw InputError(
        {"", 0, 0, "workload"},
        fmt::format("request {} cannot be {} by {}: {}; or set scheduler.unservable: "
                    "reject to count such requests as rejected",
                    id.value, verb, description_,
                    policy::describe_unservable(*reason, input_tokens, output_tokens, capacity_)));
  }
  metrics_.record_rejection(*reason);
  return false;
}

bool Replica::enqueue(const RequestDescriptor& request, TimeNs arrival) {
  if (!servable(request.id, request.input_tokens, request.output_tokens, "served"))
    return false;
  policy::SequenceView view;
  view.id = request.id;
  view.arrival = arrival;
  view.prompt_tokens = request.input_tokens;
  SequenceExtra extra;
  extra.target_output_tokens = request.output_tokens;
  if (prefix_reuse_ && !request.prefix_hashes.empty()) {
    auto hashes = policy::scheduler_block_hashes(request.prefix_hashes, request.prefix_block_tokens,
                                                 request.input_tokens, kv_view_.block_size);
    if (!hashes.empty())
      extra.prefix.hashes =
          std::make_shared<const std::vector<policy::BlockHash>>(std::move(hashes));
  }
  const bool names_blocks = extra.prefix.hashes != nullptr;
  waiting_.push_back(view, extra);
  if (names_blocks)
    prefix_offers_due_.push_back(waiting_.key(waiting_.size() - 1));
  load_.outstanding_requests += 1;
  load_.outstanding_tokens += request.input_tokens;
  return true;
}

std::int64_t Replica::cached_prefix_blocks(const RequestDescriptor& request) const {
  if (!prefix_reuse_ || request.prefix_hashes.empty())
    return 0;
  const std::vector<policy::BlockHash> hashes =
      policy::scheduler_block_hashes(request.prefix_hashes, request.prefix_block_tokens,
                                     request.input_tokens, kv_view_.block_size);
  return static_cast<std::int64_t>(prefix_reuse_->cached(hashes));
}

void Replica::offer_prefix_hits() {
  // offer() changes nothing for a waiting sequence whose offer is current: only newcomers and
  // the stale need it, found by their queue keys rather than by walking thousands.
  prefix_reuse_->take_stale(prefix_offers_due_);
  for (const std::uint64_t key : prefix_offers_due_) {
    const std::size_t i = waiting_.find(key);
    // A swapped sequence comes back with its own K/V, not a hit.
    if (i < waiting_.size() && waiting_.extra(i).swapped_blocks == 0)
      prefix_reuse_->offer(waiting_.view(i), waiting_.extra(i).prefix, key);
  }
  prefix_offers_due_.clear();
  for (std::size_t i = 0; i < running_.size(); ++i)
    prefix_reuse_->mark_shared(running_.view(i), running_.extra(i).prefix);
}

void Replica::release_blocks(policy::SequenceView& view, SequenceExtra& extra) {
  if (prefix_reuse_) {
    kv_free_ += view.kv_blocks - prefix_reuse_->referenced_pool_blocks(extra.prefix);
    kv_free_ += prefix_reuse_->release(extra.prefix);
  } else {
    kv_free_ += view.kv_blocks;
  }
  view.kv_blocks = 0;
}

TimeNs Replica::start_iteration(TimeNs now) {
  // Who holds a slot in the shared block is part of what the scheduler sees, steady or not.
  if (depth_model_.parks_in_head_queue()) {
    for (std::size_t i = 0; i < running_.size(); ++i)
      running_.view(i).in_head_queue = running_.extra(i).depth.stage.awaiting_head;
  }
  if (steady_) {
    if (const TimeNs duration = start_steady_decode(now); duration >= 0)
      return duration;
    steady_ = false;
  }
  decision_.clear();
  if (prefix_reuse_)
    offer_prefix_hits();
  policy::KvView kv = kv_view_;
  kv.total_blocks = kv_total_;
  kv.free_blocks = kv_free_;
  const policy::SchedulerSnapshot snapshot{running_.views(), waiting_.views(), kv, limits_, now};
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
  if (step_observer_ != nullptr) {
    step_ = policy::StepTrace{};
    for (const std::size_t index : decision_.admit)
      step_.admitted.push_back(waiting_.view(index).id);
    for (const std::size_t index : decision_.preempt)
      step_.preempted.push_back(running_.view(index).id);
  }
  policy::apply_decision(decision_, running_, waiting_, decision_scratch_, work_tokens_,
                         [this](QueuedSequence& victim) { preempt(victim); });
  // apply_decision appends the admitted to the running set: only its tail can be new.
  const std::size_t admitted_from = running_.size() - decision_.admit.size();
  if (prefix_reuse_) {
    // ... and queues the victims at the front of the waiting queue: they need offers.
    for (std::size_t i = 0; i < decision_.preempt.size(); ++i)
      prefix_offers_due_.push_back(waiting_.key(i));
  }
  if (swap_)
    swap_in_readmitted(admitted_from);
  if (prefix_reuse_) {
    for (std::size_t i = admitted_from; i < running_.size(); ++i) {
      SequencePrefix& prefix = running_.extra(i).prefix;
      if (!prefix.waiting)
        continue;
      prefix_reuse_->admit(running_.view(i), prefix);
      if (prefix.referenced > 0) {
        // The hit tokens stand for a full-depth prefill: every recursion holds their rows.
        SequenceExtra& extra = running_.extra(i);
        depth_model_.on_prefill(extra.depth,
                                static_cast<std::int64_t>(prefix.referenced) * kv_view_.block_size);
        set_kv_rows(running_.view(i), extra, 0);
        // What the hit tokens' prefill would have executed, at full depth.
        const BatchEntry skipped{static_cast<std::int64_t>(prefix.referenced) * kv_view_.block_size,
                                 0, model_depth_.stacked_depth(), false};
        prefix_reuse_->add_saved_flops(
            cost_model_->iteration_cost(std::span<const BatchEntry>(&skipped, 1)).flops);
      }
    }
  }

  std::size_t row_count = 0;
  row_sequences_.clear();
  decode_tokens_.clear();
  IterationRecord& record = last_iteration_;
  record = IterationRecord{};
  std::int64_t first_admissions = 0;  // requests scheduled for the first time (not resumed)
  for (std::size_t i = 0; i < running_.size(); ++i) {
    const std::int64_t tokens = work_tokens_[i];
    if (tokens == 0)
      continue;
    const policy::SequenceView& view = running_.view(i);
    SequenceExtra& extra = running_.extra(i);
    if (extra.first_scheduled < 0) {
      extra.first_scheduled = now;
      ++first_admissions;
    }
    // Rows are reused: resetting one leaves its arrays' unused slots alone.
    if (row_count == rows_.size())
      rows_.emplace_back();
    policy::StepRow& row = rows_[row_count];
    row.reset();
    row.request = view.id;
    row.query_tokens = tokens;
    row.context_tokens = view.computed_tokens;
    row.emits = tokens == view.pending_tokens();
    if (view.is_decoding()) {
      record.decode_tokens += tokens;
      decode_tokens_.push_back(
          {row_count, view.id, view.generated_tokens, extra.target_output_tokens, &extra.depth});
    } else {
      record.prefill_tokens += tokens;
      depth_model_.plan_prefill(row, extra.depth);
    }
    ++row_count;
    row_sequences_.push_back(i);
  }
  const std::span<policy::StepRow> rows(rows_.data(), row_count);
  depth_model_.on_step_start(first_admissions, static_cast<std::int64_t>(steps_started_) + 1, now);
  FillWork fill;
  if (depth_model_.depthwise()) {
    depth_model_.plan_depthwise(decode_tokens_, rows);
  } else {
    fill = depth_model_.plan(decode_tokens_, rows);
  }
  // The next step may reuse these rows when every running sequence decodes in this one (then
  // rows_[k] is running_[k]'s) and nothing joined or left.
  steady_ = steady_allowed_ && decision_.admit.empty() && decision_.preempt.empty() &&
            waiting_.empty() && record.prefill_tokens == 0 && row_count == running_.size();
  return run_rows(now, row_count, fill);
}

TimeNs Replica::start_steady_decode(TimeNs now) {
  policy::KvView kv = kv_view_;
  kv.total_blocks = kv_total_;
  kv.free_blocks = kv_free_;
  const policy::SchedulerSnapshot snapshot{running_.views(), waiting_.views(), kv, limits_, now};
  steady_growth_.resize(running_.size());
  if (!policy::steady_decode(snapshot, steady_growth_))
    return -1;
#ifndef NDEBUG
  // The scheduler promised this decision (Scheduler::decodes_all_when_steady): hold it to it.
  decision_.clear();
  scheduler_->schedule(snapshot, decision_);
  bool decodes_all = decision_.admit.empty() && decision_.preempt.empty() &&
                     decision_.work.size() == running_.size();
  for (std::size_t i = 0; decodes_all && i < decision_.work.size(); ++i)
    decodes_all = decision_.work[i] == policy::ScheduledWork{{false, i}, 1};
  if (!decodes_all) {
    throw std::logic_error(
        fmt::format("scheduler {} on {} did not decode every running sequence "
                    "in a steady decode step",
                    scheduler_name_, description_));
  }
#endif
  IterationRecord& record = last_iteration_;
  record = IterationRecord{};
  const std::size_t n = running_.size();
  record.decode_tokens = static_cast<std::int64_t>(n);
  ++steady_decode_steps_;
  if (depth_model_.dynamic())
    return plan_steady_decode(now);
  // Static depth planned every row alike (DepthModel::plan), so their depths count at once.
  metrics_.record_token_depths(rows_[0].exit_depth, rows_[0].plan.run_depth,
                               static_cast<std::int64_t>(n));
  for (std::size_t k = 0; k < n; ++k) {
    policy::SequenceView& view = running_.view(k);
    policy::StepRow& row = rows_[k];
    row.context_tokens = view.computed_tokens;
    grow_by_steady_blocks(k);
  }
  return price_rows(now, n, FillWork{}, true);
}

void Replica::grow_by_steady_blocks(std::size_t k) {
  // The sequence holds its footprint (kv_footprint(view, 0)), so growing by steady_decode's
  // blocks for one more token gives kv_footprint(view, 1), as a full step allocates.
  policy::SequenceView& view = running_.view(k);
  kv_free_ -= steady_growth_[k];
  view.kv_blocks += steady_growth_[k];
  rows_[k].kv_blocks_after = view.kv_blocks;
}

TimeNs Replica::plan_steady_decode(TimeNs now) {
  // Each token's exit (depth-wise: its next recursion) is decided anew: the rows are the last
  // step's sequences, planned again.
  decode_tokens_.clear();
  for (std::size_t k = 0; k < running_.size(); ++k) {
    const policy::SequenceView& view = running_.view(k);
    SequenceExtra& extra = running_.extra(k);
    policy::StepRow& row = rows_[k];
    row.reset();
    row.request = view.id;
    row.query_tokens = 1;
    row.context_tokens = view.computed_tokens;
    row.emits = true;
    decode_tokens_.push_back(
        {k, view.id, view.generated_tokens, extra.target_output_tokens, &extra.depth});
  }
  const std::span<policy::StepRow> rows(rows_.data(), running_.size());
  if (depth_model_.depthwise()) {
    depth_model_.plan_depthwise(decode_tokens_, rows);
    return run_rows(now, rows.size(), FillWork{});
  }
  const FillWork fill = depth_model_.plan(decode_tokens_, rows);
  if (kv_layout_.per_recursion())
    return run_rows(now, rows.size(), fill);
  // Every token's K/V is stored at every layer (computed, copied or filled later), so each
  // sequence grows as in a static steady step.
  for (std::size_t k = 0; k < rows.size(); ++k) {
    metrics_.record_token_depth(rows[k].exit_depth, rows[k].plan.run_depth);
    grow_by_steady_blocks(k);
  }
  return price_rows(now, rows.size(), fill, false);
}

TimeNs Replica::run_rows(TimeNs now, std::size_t row_count, const FillWork& fill) {
  const std::span<policy::StepRow> rows(rows_.data(), row_count);
  const int full_depth = depth_model_.full_depth();
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::size_t i = row_sequences_[k];
    policy::SequenceView& view = running_.view(i);
    policy::StepRow& row = rows[k];
    if (row.kind == policy::RowKind::prefill && row.emits) {
      metrics_.record_token_depth(full_depth, full_depth);  // a prompt's first token
    } else if (row.kind == policy::RowKind::decode) {
      metrics_.record_token_depth(row.exit_depth, row.plan.run_depth);
    } else if (row.emits) {
      metrics_.record_token_depth(row.exit_depth, row.exit_depth);
    }
    // Allocated now for the rows this iteration writes: what the sequence holds once it ran.
    const bool prefill = row.kind == policy::RowKind::prefill;
    const std::int64_t computed = prefill || row.emits ? work_tokens_[i] : 0;
    std::int64_t needed = 0;
    if (kv_layout_.per_recursion()) {
      policy::SequenceView after = view;
      after.computed_tokens += computed;
      set_kv_rows(after, running_.extra(i), prefill ? work_tokens_[i] : 0);
      needed = policy::kv_footprint(after, 0, kv_view_);
    } else {
      needed = policy::kv_footprint(view, computed, kv_view_);  // every row at every instance
    }
    kv_free_ -= needed - view.kv_blocks;
    view.kv_blocks = needed;
    row.kv_blocks_after = needed;
  }
  return price_rows(now, row_count, fill, false);
}

TimeNs Replica::price_rows(TimeNs now, std::size_t row_count, const FillWork& fill,
                           bool only_contexts_changed) {
  IterationRecord& record = last_iteration_;
  const std::span<const policy::StepRow> rows(rows_.data(), row_count);
  if (kv_free_ < 0) {
    throw std::logic_error(fmt::format("{} over-allocated K/V blocks ({} free) after scheduler {}",
                                       description_, kv_free_, scheduler_name_));
  }
  if (prefix_reuse_)
    prefix_reuse_->evict_for(kv_free_);
  const IterationCost cost =
      only_contexts_changed ? pricer_->price_new_contexts(rows) : pricer_->price(rows);
  metrics_.record_iteration_work(cost.flops, cost.masked_flops, fill);
  TimeNs duration = StepPricer::duration(scaled(cost));
  if (swap_ && swap_->pending_out + swap_->pending_in > 0) {
    const TimeNs transfer = swap_->link.transfer(swap_->pending_out + swap_->pending_in);
    duration += transfer;
    swap_->counts.transfer_time += transfer;
    if (step_observer_ != nullptr) {
      step_.swapped_out_blocks = swap_->pending_out;
      step_.swapped_in_blocks = swap_->pending_in;
    }
    swap_->pending_out = 0;
    swap_->pending_in = 0;
  }
  record.replica = index_;
  record.start = now;
  record.duration = duration;
  record.sequences = static_cast<std::int64_t>(row_count);
  record.kv_blocks_used = kv_blocks_used();
  record.kv_blocks_total = kv_blocks_total();
  metrics_.record_iteration(record);
  recompute_waste_.computed_tokens += record.prefill_tokens + record.decode_tokens;
  ++steps_started_;
  if (step_observer_ != nullptr) {
    step_.step = steps_started_;
    step_.start = now;
    step_.duration = duration;
    step_.rows.assign(rows.begin(), rows.end());
  }
  busy_ = true;
  return duration;
}

std::vector<std::string> Replica::cost_notes() const {
  std::vector<std::string> notes = cost_model_->notes();
  if (unmeasured_variability_) {
    notes.push_back(
        "cost_model.step_variability: the profile holds no measured step spread (calibrate it "
        "from op traces with this exitsim); every iteration priced as it is");
  }
  if (price_scale_ != 1.0) {
    notes.push_back(fmt::format(
        "cost_model.price_scale: every iteration priced x{:.4g} of what the cost model says",
        price_scale_));
  }
  return notes;
}

IterationCost Replica::scaled(IterationCost cost) {
  double factor = price_scale_;
  if (!step_factors_.empty()) {
    // The measured factor at a uniform draw's quantile, linear between the 5% steps.
    const double at = step_draws_->uniform() * static_cast<double>(step_factors_.size() - 1);
    const auto low = static_cast<std::size_t>(at);
    const std::size_t high = std::min(low + 1, step_factors_.size() - 1);
    factor *= step_factors_[low] +
              (step_factors_[high] - step_factors_[low]) * (at - static_cast<double>(low));
  }
  if (factor != 1.0)
    cost.total = static_cast<TimeNs>(std::llround(static_cast<double>(cost.total) * factor));
  return cost;
}

bool Replica::swap_out(QueuedSequence& victim) {
  const std::int64_t blocks = victim.view.kv_blocks;
  if (!swap_->space.take(blocks)) {
    swap_->counts.recomputed_instead += 1;
    return false;
  }
  // Its blocks leave the GPU (those it shares with others stay for them) and go to the host
  // whole: it owns its copy there.
  release_blocks(victim.view, victim.extra);
  swap_->pending_out += blocks;
  swap_->counts.swapped_out += 1;
  swap_->counts.swapped_out_bytes += blocks * swap_->link.bytes_per_block;
  victim.extra.swapped_blocks = blocks;
  victim.view.shared_blocks = 0;
  metrics_.record_preemption();
  victim.extra.preemptions += 1;
  return true;
}

void Replica::swap_in_readmitted(std::size_t admitted_from) {
  for (std::size_t i = admitted_from; i < running_.size(); ++i) {
    SequenceExtra& extra = running_.extra(i);
    if (extra.swapped_blocks == 0)
      continue;
    swap_->space.give_back(extra.swapped_blocks);
    swap_->pending_in += extra.swapped_blocks;
    swap_->counts.swapped_in_bytes += extra.swapped_blocks * swap_->link.bytes_per_block;
    extra.swapped_blocks = 0;
  }
}

void Replica::preempt(QueuedSequence& victim) {
  if (swap_ && swap_out(victim))
    return;  // K/V, computed tokens and depth state kept: it resumes where it stopped
  release_blocks(victim.view, victim.extra);
  victim.extra.prefix.waiting = true;  // admit() closed its offer watch: the next offer recomputes
  metrics_.record_recompute(victim.view.computed_tokens);
  recompute_waste_.preemptions += 1;
  recompute_waste_.recomputed_tokens += victim.view.computed_tokens;
  metrics_.record_preemption();
  victim.view = policy::preempted_view(victim.view);
  victim.extra.depth = SequenceDepthState{};  // recompute rebuilds every layer's K/V
  victim.extra.preemptions += 1;
}

bool Replica::enqueue_handed_off(const HandOff& request, TimeNs now) {
  if (!servable(request.id, request.prompt_tokens, request.target_output_tokens, "decoded"))
    return false;
  // Its prompt's K/V is here now and its first token with it: it waits to decode the next.
  policy::SequenceView view;
  view.id = request.id;
  view.arrival = request.arrival;
  view.prompt_tokens = request.prompt_tokens;
  view.generated_tokens = 1;
  view.computed_tokens = request.prompt_tokens;
  SequenceExtra extra;
  extra.target_output_tokens = request.target_output_tokens;
  extra.first_scheduled = request.first_scheduled;
  extra.first_token = now;
  extra.last_token = now;
  extra.preemptions = request.preemptions;
  extra.prefix.waiting = false;
  // The prompt ran at full depth on the prefill replica: every recursion holds its rows.
  depth_model_.on_prefill(extra.depth, request.prompt_tokens);
  set_kv_rows(view, extra, 0);
  waiting_.push_back(view, extra);
  load_.outstanding_requests += 1;
  load_.outstanding_tokens += request.prompt_tokens + 1;  // as enqueue() and one token since
  return true;
}

IterationOutcome Replica::complete_iteration(TimeNs now) {
  IterationOutcome outcome;
  // Inter-token gaps are recorded in runs of equal ones (the sketch counts them the same).
  TimeNs gap = -1;
  std::int64_t gap_count = 0;
  scratch_indices_.clear();
  handed_off_.clear();
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
      set_kv_rows(view, extra, 0);
      continue;  // a depth-wise token still in flight: its K/V row is not complete yet
    }
    view.computed_tokens += tokens;
    set_kv_rows(view, extra, 0);
    if (prefix_reuse_)
      kv_free_ += prefix_reuse_->cache_filled(view, extra.prefix);
    if (!emits)
      continue;
    view.generated_tokens += 1;
    load_.outstanding_tokens += 1;
    outcome.tokens_emitted += 1;
    if (prefill_only_ && view.generated_tokens == 1 && extra.target_output_tokens > 1) {
      // Its prompt is done here: the K/V and the first token go to a decode replica.
      handed_off_.push_back({view.id, view.arrival, view.prompt_tokens, extra.target_output_tokens,
                             extra.first_scheduled, extra.preemptions,
                             view.prompt_tokens * kv_bytes_per_token_});
      release_blocks(view, extra);
      load_.outstanding_requests -= 1;
      load_.outstanding_tokens -= view.known_tokens();
      scratch_indices_.push_back(i);
      continue;
    }
    if (extra.first_token < 0) {
      extra.first_token = now;
    } else if (now - extra.last_token == gap) {
      ++gap_count;  // sequences that emitted together last time emit together again
    } else {
      if (gap_count > 0)
        metrics_.record_token_gap(gap, gap_count);
      gap = now - extra.last_token;
      gap_count = 1;
    }
    extra.last_token = now;
    if (extra.depth.rollback > 0) {
      roll_back(view, outcome, extra.depth.rollback);
      extra.depth.rollback = 0;
    }
    if (view.generated_tokens == extra.target_output_tokens) {
      release_blocks(view, extra);
      load_.outstanding_requests -= 1;
      load_.outstanding_tokens -= view.known_tokens();
      outcome.requests_finished += 1;
      metrics_.record_request({view.id, index_, view.arrival, extra.first_scheduled,
                               extra.first_token, now, view.prompt_tokens,
                               extra.target_output_tokens, extra.preemptions});
      scratch_indices_.push_back(i);
    }
  }
  if (gap_count > 0)
    metrics_.record_token_gap(gap, gap_count);
  running_.remove(scratch_indices_);
  if (!scratch_indices_.empty())
    steady_ = false;  // the running set changed: the next step's rows differ
  if (outcome.requests_finished > 0) {
    metrics_.record_kv_usage(index_, now, kv_blocks_used(), kv_blocks_total());
  }
  if (step_observer_ != nullptr) {
    step_.kv_blocks_used = kv_total_ - kv_free_;
    (*step_observer_)(index_, step_);
  }
  busy_ = false;
  return outcome;
}

void Replica::set_kv_rows(policy::SequenceView& view, const SequenceExtra& extra,
                          std::int64_t rows_ahead) const {
  // Without exits every token reaches every recursion (the depth model tracks none).
  if (!kv_layout_.per_recursion() || !depth_model_.dynamic())
    return;
  const std::int64_t computed = view.computed_tokens;
  // Every token runs the prelude and the first recursion; a depth-wise token in flight has
  // written its row there (and at each recursion it ran) before it counts as computed.
  const std::int64_t first = std::max(computed, extra.depth.reached[0] + rows_ahead);
  view.kv_row_offset[0] = static_cast<std::int32_t>(first - computed);
  for (int r = 2; r <= model_depth_.recursions; ++r) {
    const std::int64_t rows = extra.depth.reached[static_cast<std::size_t>(r - 1)] + rows_ahead;
    view.kv_row_offset[static_cast<std::size_t>(r - 1)] =
        static_cast<std::int32_t>(rows - computed);
  }
}

void Replica::roll_back(policy::SequenceView& view, IterationOutcome& outcome,
                        std::int64_t tokens) {
  // The discarded tokens leave the output and their K/V is freed; the sequence goes on from the
  // corrected token, which this iteration emitted.
  view.generated_tokens -= tokens;
  view.computed_tokens -= tokens;
  outcome.tokens_emitted -= tokens;
  load_.outstanding_tokens -= tokens;
  const std::int64_t blocks = policy::kv_footprint(view, 0, kv_view_);
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
