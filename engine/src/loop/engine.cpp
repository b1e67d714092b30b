#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "exitsim/core/error.hpp"
#include "exitsim/policy/apply_decision.hpp"
#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/scheduler_steps.hpp"
#include "exitsim/policy/servable.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "loop.hpp"

namespace exitsim::engine {
namespace {

ExitFeed feed_of(const std::string& kind) {
  if (kind == "confidence" || kind == "adaptive_threshold")
    return ExitFeed::confidence;
  if (kind == "router_expert_choice")
    return ExitFeed::expert_choice;
  if (kind == "router_token_choice")
    return ExitFeed::token_choice;
  if (kind == "oracle")
    return ExitFeed::oracle;
  return ExitFeed::upfront;
}

void check_options(const Backend& model, const EngineOptions& options) {
  const DepthStructure& depth = model.depth();
  const bool recursive = depth.recursions > 0 && depth.block_layers > 0;
  const policy::SyncStrategy strategy = options.strategy;
  if (!recursive &&
      (strategy == policy::SyncStrategy::skip_kv || strategy == policy::SyncStrategy::shared_kv ||
       strategy == policy::SyncStrategy::depthwise)) {
    throw InputError({"", 0, 0, "sync.strategy"},
                     fmt::format("strategy {} needs a recursive model; {} has no shared block",
                                 policy::to_string(strategy), model.config().shape.name));
  }
  const std::string& kind = options.exit_policy.kind;
  if ((kind == "router_expert_choice" || kind == "router_token_choice") &&
      static_cast<int>(model.router_count()) < depth.recursions) {
    throw InputError({"", 0, 0, "exit_policy.kind"},
                     fmt::format("exit policy {} needs one router per recursion; {} has {}", kind,
                                 model.config().shape.name, model.router_count()));
  }
  policy::check_exit_policy_for(strategy, kind);
  if (strategy == policy::SyncStrategy::deferred_fill)
    policy::check_deferred_fill_exit_points(depth.effective_exit_points().size());
  if (strategy == policy::SyncStrategy::depthwise)
    policy::check_depthwise_exit_points(depth);
  if (options.rollback && strategy != policy::SyncStrategy::deferred_fill) {
    throw InputError({"", 0, 0, "sync.strategy"},
                     fmt::format("rollback corrects deferred fills; strategy {} has none",
                                 policy::to_string(strategy)));
  }
  if (options.scheduler_params.preemption == "swap" && !model.kv_in_host_cache()) {
    throw InputError({"", 0, 0, "scheduler.preemption"},
                     expected_found(fmt::format("recompute on the {} backend (its K/V pool lives "
                                                "on the device; swap runs on the CPU backend)",
                                                model.name()),
                                    "swap"));
  }
  if (options.block_size <= 0 || options.kv_blocks <= 0) {
    throw InputError(
        {"", 0, 0, "scheduler.kv_blocks"},
        expected_found("a positive block size and block count",
                       fmt::format("{} and {}", options.block_size, options.kv_blocks)));
  }
}

}  // namespace

Sequence::Sequence(std::uint64_t seed, RequestId id)
    : sampler(seed, fmt::format("engine.sample.{}", id.value)) {}

Engine::Engine(const Backend& model, EngineOptions options, profiler::HostProfiler* profiler)
    : model_(model), options_(std::move(options)), profiler_(profiler) {
  check_options(model_, options_);
  scheduler_ = policy::make_scheduler(options_.scheduler, options_.scheduler_params);
  // full_depth is the baseline in which nobody exits (BRIEF.md), whatever the exit policy says:
  // the simulator prices it so, and a comparison against it must be against the whole model.
  if (options_.exit_policy.kind != "none" && options_.strategy != policy::SyncStrategy::full_depth)
    exit_policy_ = policy::make_exit_policy(options_.exit_policy, model_.depth());
}

Engine::~Engine() = default;

EngineRun Engine::run(std::span<const EngineRequest> requests) {
  Loop loop(model_, options_, profiler_, *scheduler_, exit_policy_.get());
  return loop.run(requests);
}

Engine::Loop::Loop(const Backend& model, const EngineOptions& options,
                   profiler::HostProfiler* profiler, const policy::Scheduler& scheduler,
                   const policy::ExitPolicy* exit_policy)
    : model_(model),
      options_(options),
      profiler_(profiler),
      scheduler_(scheduler),
      exit_policy_(exit_policy),
      feed_(exit_policy == nullptr ? ExitFeed::upfront : feed_of(options.exit_policy.kind)),
      layout_(model.depth(), options.strategy),
      kv_(model.kv_width(), options.block_size, options.kv_blocks * layout_.instances(),
          options.scheduler_params.preemption == "swap" ? options.host_kv_blocks : 0),
      states_(model.make_states()),
      exit_depths_(model.depth().effective_exit_points()) {
  kv_view_.block_size = options.block_size;
  kv_view_.groups = layout_.groups();
  kv_view_.total_blocks = options.kv_blocks * layout_.instances();
  if (options.scheduler_params.preemption == "swap")
    host_swap_.emplace(options.host_kv_blocks);
  if (exit_policy != nullptr && exit_policy->adaptive_settings() != nullptr)
    estimator_.emplace(*exit_policy->adaptive_settings());
}

TimeNs Engine::Loop::now() const {
  if (options_.step_duration)
    return virtual_now_;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start_)
      .count();
}

void Engine::Loop::open_streams(Sequence& s) {
  s.streams.resize(static_cast<std::size_t>(layout_.instances()));
  for (int& stream : s.streams)
    stream = kv_.open_stream();
}

void Engine::Loop::close_streams(Sequence& s) {
  for (const int stream : s.streams)
    kv_.close_stream(stream);
  s.streams.clear();
  s.pending.clear();
  s.fill = policy::PendingFill{};
  s.flight.reset();
  s.stage = policy::DepthwiseStage{};
  s.flight_exit = -1;
}

std::int64_t Engine::Loop::physical_blocks(const Sequence& s) const {
  std::int64_t blocks = 0;
  for (const int stream : s.streams)
    blocks += kv_.blocks_of(stream);
  return blocks;
}

void Engine::Loop::refresh_kv_views() {
  // Each sequence is charged its footprint (footprint()); the physical blocks never exceed it.
  for (std::size_t i = 0; i < running_.size(); ++i) {
    policy::SequenceView& view = running_views_[i];
    const Sequence& s = *running_[i];
    view.in_head_queue = options_.depthwise.parks_in_head_queue() && s.stage.awaiting_head;
    set_kv_rows(s, view);
    view.kv_blocks = policy::kv_footprint(view, 0, kv_view_);
    if (physical_blocks(s) > view.kv_blocks) {
      throw std::logic_error(
          fmt::format("engine: request {} holds {} K/V blocks, more than the "
                      "{} its rows account for",
                      view.id.value, physical_blocks(s), view.kv_blocks));
    }
  }
}

void Engine::Loop::admit_arrivals(TimeNs now) {
  while (next_arrival_ < arrival_order_.size()) {
    Sequence* s = sequences_[arrival_order_[next_arrival_]].get();
    if (options_.honour_arrivals && s->request->arrival > now)
      return;
    ++next_arrival_;
    policy::SequenceView view;
    view.id = s->request->id;
    view.arrival = s->request->arrival;
    view.prompt_tokens = static_cast<std::int64_t>(s->request->prompt.size());
    waiting_views_.push_back(view);
    waiting_.push_back(s);
  }
}

void Engine::Loop::check_requests(std::span<const EngineRequest> requests) const {
  const std::int64_t vocab = model_.config().shape.vocab;
  // The same rule the simulator applies at arrival; the engine always refuses (its runs are
  // small and a rejected request would leave a hole in the measured workload).
  const policy::ServingCapacity capacity{
      scheduler_.chunks_prompts(), options_.limits.max_batched_tokens,
      options_.kv_blocks * options_.block_size, model_.config().max_positions};
  for (const EngineRequest& r : requests) {
    const auto where = SourceLocation{"", 0, 0, "workload"};
    if (r.prompt.empty() || r.output_tokens < 1) {
      throw InputError(where, fmt::format("request {}: expected a non-empty prompt and at least "
                                          "one output token, found {} and {}",
                                          r.id.value, r.prompt.size(), r.output_tokens));
    }
    if (!r.forced.empty() && options_.rollback) {
      throw InputError(where, fmt::format("request {}: teacher-forced tokens cannot be rolled "
                                          "back; run without rollback",
                                          r.id.value));
    }
    if (!r.forced.empty() && static_cast<std::int64_t>(r.forced.size()) < r.output_tokens) {
      throw InputError(
          where, fmt::format("request {}: expected at least {} forced tokens, found {}", r.id.value,
                             r.output_tokens, r.forced.size()));
    }
    for (const std::int32_t token : r.forced) {
      if (token < 0 || token >= vocab) {
        throw InputError(where, fmt::format("request {}: expected forced token ids in [0, {}), "
                                            "found {}",
                                            r.id.value, vocab, token));
      }
    }
    for (const std::int32_t token : r.prompt) {
      if (token < 0 || token >= vocab) {
        throw InputError(where, fmt::format("request {}: expected token ids in [0, {}), found {}",
                                            r.id.value, vocab, token));
      }
    }
    const auto prompt = static_cast<std::int64_t>(r.prompt.size());
    if (const auto reason = policy::unservable_reason(prompt, r.output_tokens, capacity)) {
      throw InputError(
          {"", 0, 0,
           *reason == policy::UnservableReason::over_kv_capacity ? "scheduler.kv_blocks"
                                                                 : "workload"},
          fmt::format("request {}: {}", r.id.value,
                      policy::describe_unservable(*reason, prompt, r.output_tokens, capacity)));
    }
  }
}

void Engine::Loop::apply(const policy::SchedulerDecision& decision, std::vector<std::int64_t>& work,
                         policy::StepTrace& trace) {
  for (const std::size_t a : decision.admit) {
    // A swapped sequence's streams are in the host tier, one back from the head queue holds its.
    if (waiting_[a]->streams.empty())
      open_streams(*waiting_[a]);
  }
  QueueRef running{running_views_, running_};
  QueueRef waiting{waiting_views_, waiting_};
  policy::apply_decision(decision, running, waiting, decision_scratch_, work,
                         [this, &trace](QueuedSequence& victim) {
                           ++result_.preemptions;
                           if (host_swap_ && swap_out(victim, trace))
                             return;  // resumes where it stopped
                           close_streams(*victim.sequence);
                           victim.view = policy::preempted_view(victim.view);
                         });
  // apply_decision appends the admitted to the running set: only its tail can be back from swap,
  // and it comes back once the victims' blocks are free.
  for (std::size_t i = running_.size() - decision.admit.size(); i < running_.size(); ++i) {
    if (running_[i]->swapped_blocks > 0)
      swap_in(*running_[i], trace);
  }
}

bool Engine::Loop::swap_out(QueuedSequence& victim, policy::StepTrace& trace) {
  const std::int64_t blocks = victim.view.kv_blocks;
  if (!host_swap_->take(blocks)) {
    ++result_.swaps.recomputed_instead;
    return false;
  }
  {
    auto copy = span(traces::engine_ops::kv_swap, traces::OpKind::memcpy, 0, -1);
    for (const int stream : victim.sequence->streams)
      kv_.swap_out(stream);
  }
  victim.sequence->swapped_blocks = blocks;
  victim.view.kv_blocks = 0;
  victim.view.shared_blocks = 0;
  trace.swapped_out_blocks += blocks;
  ++result_.swaps.swapped_out;
  result_.swaps.swapped_out_blocks += blocks;
  return true;
}

void Engine::Loop::swap_in(Sequence& s, policy::StepTrace& trace) {
  {
    auto copy = span(traces::engine_ops::kv_swap, traces::OpKind::memcpy, 0, -1);
    for (const int stream : s.streams)
      kv_.swap_in(stream);
  }
  host_swap_->give_back(s.swapped_blocks);
  trace.swapped_in_blocks += s.swapped_blocks;
  result_.swaps.swapped_in_blocks += s.swapped_blocks;
  s.swapped_blocks = 0;
}

EngineRun Engine::Loop::run(std::span<const EngineRequest> requests) {
  check_requests(requests);
  start_ = std::chrono::steady_clock::now();
  result_ = EngineRun{};
  result_.outputs.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto s = std::make_unique<Sequence>(options_.seed, requests[i].id);
    s->index = i;
    s->request = &requests[i];
    s->tokens = requests[i].prompt;
    sequences_.push_back(std::move(s));
    arrival_order_.push_back(i);
    max_output_ = std::max(max_output_, requests[i].output_tokens);
  }
  std::stable_sort(arrival_order_.begin(), arrival_order_.end(), [&](std::size_t a, std::size_t b) {
    return requests[a].arrival < requests[b].arrival;
  });

  policy::SchedulerDecision decision;
  std::vector<std::int64_t> work;
  std::vector<Sequence*> prefills, decodes;
  std::vector<std::int64_t> starts, chunks;
  for (;;) {
    admit_arrivals(now());
    requeue_returning();
    if (running_.empty() && waiting_.empty()) {
      if (next_arrival_ == arrival_order_.size())
        break;
      wait_for_next_arrival();
      continue;
    }
    policy::KvView kv = kv_view_;
    kv.free_blocks = kv.total_blocks - charged_blocks();
    const policy::SchedulerSnapshot snapshot{running_views_, waiting_views_, kv, options_.limits,
                                             now()};
    decision.clear();
    scheduler_.schedule(snapshot, decision);
#ifndef NDEBUG
    if (const std::string problem = policy::check_decision(snapshot, decision); !problem.empty())
      throw std::logic_error("engine: infeasible scheduler decision: " + problem);
#endif
    if (decision.work.empty()) {
      if (const auto holder = policy::waiting_kv_holder_to_release(snapshot)) {
        release_waiting(*holder);  // it held the blocks the queue's head needs
        continue;
      }
      if (running_.empty() && next_arrival_ == arrival_order_.size()) {
        throw InputError({"", 0, 0, "scheduler"},
                         fmt::format("the engine cannot schedule request {} ({} prompt tokens) "
                                     "with scheduler {}; raise max_batched_tokens or use "
                                     "chunked_prefill",
                                     waiting_views_.front().id.value,
                                     waiting_views_.front().prompt_tokens, options_.scheduler));
      }
      wait_for_next_arrival();
      continue;
    }
    policy::StepTrace trace;
    for (const std::size_t a : decision.admit)
      trace.admitted.push_back(waiting_views_[a].id);
    for (const std::size_t v : decision.preempt)
      trace.preempted.push_back(running_views_[v].id);
    const std::int64_t first_admissions = count_first_admissions(decision);
    apply(decision, work, trace);
    begin_rows(work, trace);
    step_first_token_ = result_.tokens.size();
    prefills.clear();
    decodes.clear();
    starts.clear();
    chunks.clear();
    for (std::size_t i = 0; i < running_.size(); ++i) {
      if (work[i] == 0)
        continue;
      running_[i]->emitted = false;
      if (running_views_[i].is_decoding()) {
        decodes.push_back(running_[i]);
      } else {
        prefills.push_back(running_[i]);
        starts.push_back(running_views_[i].computed_tokens);
        chunks.push_back(work[i]);
      }
    }
    ++step_;
    StepRecord record{step_, now(), idle_, {}, {}, {}};
    idle_ = 0;
    for (const Sequence* p : prefills)
      record.prefill.push_back(p->request->id);
    for (const Sequence* d : decodes)
      record.decode.push_back(d->request->id);
    result_.steps.push_back(std::move(record));
    refit_threshold(first_admissions);  // before the step's exits (the shared executor rule)
    if (!prefills.empty())
      prefill_pass(prefills, starts, chunks);
    if (!decodes.empty()) {
      if (options_.strategy == policy::SyncStrategy::depthwise)
        depthwise_pass(decodes);
      else
        decode_pass(decodes);
    }
    end_step(work, trace);
    ++result_.iterations;
  }
  result_.wall = now();
  return std::move(result_);
}

std::int64_t Engine::Loop::count_first_admissions(const policy::SchedulerDecision& decision) {
  std::int64_t first = 0;
  for (const std::size_t a : decision.admit) {
    if (!waiting_[a]->admitted_before)
      ++first;
    waiting_[a]->admitted_before = true;
  }
  return first;
}

void Engine::Loop::refit_threshold(std::int64_t first_admissions) {
  if (!estimator_)
    return;
  if (const std::optional<policy::ThresholdRefit> refit =
          estimator_->on_admissions(first_admissions)) {
    result_.threshold_trajectory.push_back({step_, result_.steps.back().start, *refit});
  }
}

void Engine::Loop::finish_iteration(std::span<const std::int64_t> work) {
  std::vector<policy::SequenceView> views;
  std::vector<Sequence*> still;
  for (std::size_t i = 0; i < running_.size(); ++i) {
    Sequence& s = *running_[i];
    policy::SequenceView& view = running_views_[i];
    const bool decoded = work[i] > 0 && view.is_decoding();
    if (work[i] > 0 && !view.is_decoding()) {
      view.computed_tokens += work[i];
    } else if (work[i] > 0 && s.emitted) {
      // Every token but the one just emitted has its K/V (fewer after a rollback).
      view.computed_tokens = static_cast<std::int64_t>(s.tokens.size()) - 1;
    }
    view.generated_tokens = static_cast<std::int64_t>(s.tokens.size()) - view.prompt_tokens;
    if (view.generated_tokens >= s.request->output_tokens) {
      report_kv(s);
      close_streams(s);
      result_.outputs[s.index].assign(s.tokens.begin() + view.prompt_tokens, s.tokens.end());
      continue;
    }
    if (decoded && s.emitted && options_.depthwise.requeues_after_head()) {
      // head_queue: its slot went to another sequence when its token left the block; its next
      // token waits in the queue to be admitted again (requeue_returning).
      policy::SequenceView back = policy::requeued_view(view);
      set_kv_rows(s, back);
      back.kv_blocks = policy::kv_footprint(back, 0, kv_view_);
      returning_.push_back({back, &s});
      continue;
    }
    views.push_back(view);
    still.push_back(&s);
  }
  running_views_ = std::move(views);
  running_ = std::move(still);
  refresh_kv_views();
}

void Engine::Loop::requeue_returning() {
  QueueRef waiting{waiting_views_, waiting_};
  policy::requeue_returning(options_.depthwise, returning_, waiting);
}

void Engine::Loop::release_waiting(std::size_t i) {
  ++result_.preemptions;
  close_streams(*waiting_[i]);
  waiting_views_[i] = policy::preempted_view(waiting_views_[i]);
}

std::int64_t Engine::Loop::charged_blocks() const {
  std::int64_t blocks = 0;
  for (const auto* views : {&running_views_, &waiting_views_}) {
    for (const policy::SequenceView& v : *views)
      blocks += v.kv_blocks;
  }
  for (const QueuedSequence& q : returning_)
    blocks += q.view.kv_blocks;
  return blocks;
}

void Engine::Loop::wait_for_next_arrival() {
  if (!options_.honour_arrivals || next_arrival_ == arrival_order_.size())
    return;
  const TimeNs arrival = sequences_[arrival_order_[next_arrival_]]->request->arrival;
  const TimeNs before = now();
  const TimeNs wait = arrival - before;
  if (wait <= 0)
    return;
  if (options_.step_duration) {
    virtual_now_ = arrival;
    idle_ += wait;
    return;
  }
  {
    auto timed = span(traces::engine_ops::wait_for_arrival, traces::OpKind::other, 0, -1);
    // Sleep to just short of the arrival, then spin: a sleep alone overshoots by the kernel's
    // timer slack (tens of microseconds, more on a busy VM), which delays every request behind
    // it, and leaves the core idle long enough to come back slower.
    constexpr TimeNs k_spin_ns = 200'000;
    if (wait > k_spin_ns)
      std::this_thread::sleep_for(std::chrono::nanoseconds(wait - k_spin_ns));
    while (now() < arrival) {
    }
  }
  idle_ += now() - before;
}

void Engine::Loop::begin_rows(std::span<const std::int64_t> work, policy::StepTrace& trace) const {
  const DepthStructure& depth = model_.depth();
  const bool depthwise = options_.strategy == policy::SyncStrategy::depthwise;
  // skip_kv's attention reads each recursion's own rows (the simulator's recursion contexts).
  const bool contexts = exit_policy_ != nullptr && depth.recursions >= 1 &&
                        options_.strategy == policy::SyncStrategy::skip_kv;
  for (std::size_t i = 0; i < running_.size(); ++i) {
    if (work[i] == 0)
      continue;
    const Sequence& s = *running_[i];
    const policy::SequenceView& view = running_views_[i];
    policy::StepRow row;
    row.request = view.id;
    row.query_tokens = work[i];
    row.context_tokens = view.computed_tokens;
    row.kind = !view.is_decoding() ? policy::RowKind::prefill
               : depthwise         ? policy::RowKind::depthwise
                                   : policy::RowKind::decode;
    if (row.kind == policy::RowKind::depthwise) {
      row.recursion = s.stage.next_recursion();
      if (row.recursion >= 1) {
        row.recursion_contexts = 1;
        row.recursion_context[0] =
            static_cast<std::int32_t>(recursion_rows(s, view.computed_tokens, row.recursion));
      }
    } else if (contexts || (depthwise && row.kind == policy::RowKind::prefill)) {
      row.recursion_contexts = static_cast<std::uint8_t>(depth.recursions);
      for (int r = 1; r <= depth.recursions; ++r) {
        row.recursion_context[static_cast<std::size_t>(r - 1)] =
            static_cast<std::int32_t>(recursion_rows(s, view.computed_tokens, r));
      }
    }
    trace.rows.push_back(row);
  }
}

std::int64_t Engine::Loop::recursion_rows(const Sequence& s, std::int64_t computed,
                                          int recursion) const {
  if (!layout_.per_recursion())
    return computed;
  const int instance = layout_.first_instance_of_group(static_cast<std::size_t>(recursion - 1));
  return kv_.rows(s.streams[static_cast<std::size_t>(instance)]);
}

void Engine::Loop::set_kv_rows(const Sequence& s, policy::SequenceView& view) const {
  if (!layout_.per_recursion())
    return;
  for (std::size_t g = 0; g < kv_view_.groups.count; ++g) {
    const int stream = s.streams[static_cast<std::size_t>(layout_.first_instance_of_group(g))];
    view.kv_row_offset[g] = static_cast<std::int32_t>(kv_.rows(stream) - view.computed_tokens);
  }
}

std::int64_t Engine::Loop::footprint(const Sequence& s, policy::SequenceView view) const {
  // The K/V manager reports the rows each group holds (the rows of its first instance), and the
  // sequence is charged the shared footprint of them. deferred_fill's owed rows count as held:
  // the fill that writes them cannot wait for blocks.
  set_kv_rows(s, view);
  return policy::kv_footprint(view, 0, kv_view_);
}

void Engine::Loop::end_step(std::span<const std::int64_t> work, policy::StepTrace& trace) {
  const int stacked = model_.depth().stacked_depth();
  for (std::size_t i = 0, k = 0; i < running_.size(); ++i) {
    if (work[i] == 0)
      continue;
    Sequence& s = *running_[i];
    policy::StepRow& row = trace.rows[k++];
    row.emits = s.emitted;
    switch (row.kind) {
      case policy::RowKind::prefill:
        row.plan.run_depth = stacked;
        row.plan.useful_depth = stacked;
        row.exit_depth = stacked;
        break;
      case policy::RowKind::decode:
        row.plan = s.plan;
        row.exit_depth = s.plan.useful_depth;
        break;
      case policy::RowKind::depthwise:
        row.runs_head = s.emitted;
        row.exit_depth = s.emitted ? s.emitted_depth : 0;
        break;
    }
    policy::SequenceView after = running_views_[i];
    if (row.kind == policy::RowKind::prefill)
      after.computed_tokens += work[i];
    else if (s.emitted)
      after.computed_tokens = static_cast<std::int64_t>(s.tokens.size()) - 1;
    row.kv_blocks_after = footprint(s, after);
  }
  trace.step = step_;
  trace.start = result_.steps.back().start;
  if (options_.step_duration) {
    // The step lasts what the virtual clock prices it at; its tokens appear at its end.
    trace.duration = options_.step_duration(trace);
    virtual_now_ = trace.start + trace.duration;
    for (std::size_t t = step_first_token_; t < result_.tokens.size(); ++t)
      result_.tokens[t].time = virtual_now_;
  }
  result_.steps.back().rows = trace.rows;
  finish_iteration(work);
  if (!options_.step_duration)
    trace.duration = now() - trace.start;
  trace.kv_blocks_used = charged_blocks();
  if (options_.step_observer)
    options_.step_observer(trace);
}

}  // namespace exitsim::engine
