#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "depth_model.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/core/request.hpp"
#include "exitsim/policy/apply_decision.hpp"
#include "exitsim/policy/host_swap.hpp"
#include "exitsim/policy/kv_layout.hpp"
#include "exitsim/policy/replica_router.hpp"
#include "exitsim/policy/scheduler.hpp"
#include "exitsim/policy/servable.hpp"
#include "exitsim/setup/host_swap.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "exitsim/sim/cost/step_batch.hpp"
#include "exitsim/sim/kv_capacity.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/sim/simulator.hpp"
#include "prefix_reuse.hpp"

namespace exitsim::sim {

// What the simulator tracks about a sequence beyond what the scheduler sees.
struct SequenceExtra {
  std::int64_t target_output_tokens = 0;  // known to the simulator, never to the scheduler
  TimeNs first_scheduled = -1;
  TimeNs first_token = -1;
  TimeNs last_token = -1;
  std::int64_t preemptions = 0;
  SequenceDepthState depth;
  SequencePrefix prefix;            // with scheduler.prefix_caching
  std::int64_t swapped_blocks = 0;  // pool blocks of its K/V in host memory (swap preemption)
};

// A sequence as the queues hand it between each other (policy::apply_decision).
struct QueuedSequence {
  policy::SequenceView view;
  SequenceExtra extra;
};

// A queue of sequences stored as two parallel arrays (the scheduler's views, contiguous so a
// snapshot is a span, and the simulator's extras). Removing from the front is O(1) amortised,
// which matters when thousands of requests wait under overload.
class SequenceQueue {
 public:
  std::span<const policy::SequenceView> views() const {
    return {views_.data() + head_, views_.size() - head_};
  }
  std::size_t size() const { return views_.size() - head_; }
  bool empty() const { return size() == 0; }
  policy::SequenceView& view(std::size_t i) { return views_[head_ + i]; }
  SequenceExtra& extra(std::size_t i) { return extras_[head_ + i]; }

  QueuedSequence at(std::size_t i) const { return {views_[head_ + i], extras_[head_ + i]}; }
  // Each entry's key, ascending along the queue, given when it joins (at the back or the front)
  // and kept while it stays: it finds an entry by bisection after the queue has shifted.
  std::uint64_t key(std::size_t i) const { return keys_[head_ + i]; }
  // The index of the entry with `key`; size() when none.
  std::size_t find(std::uint64_t key) const;

  void push_back(const policy::SequenceView& view, const SequenceExtra& extra);
  void push_front(const policy::SequenceView& view, const SequenceExtra& extra);
  void push_back(const QueuedSequence& s) { push_back(s.view, s.extra); }
  void push_front(const QueuedSequence& s) { push_front(s.view, s.extra); }
  // Removes the entries at `sorted_indices` (ascending), keeping the order of the rest.
  void remove(std::span<const std::size_t> sorted_indices);

 private:
  void compact();

  std::vector<policy::SequenceView> views_;
  std::vector<SequenceExtra> extras_;
  std::vector<std::uint64_t> keys_;
  std::size_t head_ = 0;
  std::uint64_t next_back_key_ = std::uint64_t{1} << 63;
  std::uint64_t next_front_key_ = (std::uint64_t{1} << 63) - 1;
};

// Preemption by recompute's waste on one replica: what its victims had computed, thrown away to
// be computed again, against every token its iterations computed (prefill and decode, the
// recomputation included).
struct RecomputeWaste {
  std::int64_t preemptions = 0;
  std::int64_t recomputed_tokens = 0;
  std::int64_t computed_tokens = 0;
  // Whether scheduler.reserve_prompt_blocks would stop it: chunked_prefill admitting prompts on
  // their first chunk's blocks.
  bool reserving_would_help = false;
};

struct IterationOutcome {
  std::int64_t tokens_emitted = 0;
  std::int64_t requests_finished = 0;
};

// A request whose prompt a prefill replica ran, on its way to a decode replica with its K/V and
// its first token (disaggregated serving).
struct HandOff {
  RequestId id;
  TimeNs arrival = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t target_output_tokens = 0;
  TimeNs first_scheduled = 0;
  std::int64_t preemptions = 0;
  std::int64_t bytes = 0;  // its K/V on each GPU of the replica
};

// Whether the replica's exit policy decides by confidence: its decode pass then runs the LM head
// at each exit point, and the cost model prices those probes.
bool exit_probes(const ReplicaSpec& spec);

// Whether replicas of specs `a` and `b` may share one roofline: it is immutable once built and
// reads only the model, hardware, efficiencies, parallelism and probes. Calibrated and table
// models count their uses per replica (their notes), so each replica keeps its own.
bool shares_roofline(const ReplicaSpec& a, const ReplicaSpec& b);

// One replica: its queues, KV block pool, scheduler and cost model. The simulator drives it:
// enqueue arrivals, start_iteration when idle, complete_iteration when the iteration's time is up.
class Replica {
 public:
  // `step_observer` (may be null or empty) is called with every iteration at its completion.
  // `cost_model`: the model that prices this replica's iterations, when the caller shares one
  // between replicas of one spec (roofline_shared_by); null: the replica makes its own.
  Replica(int index, const ReplicaSpec& spec, MetricsCollector& metrics,
          const StepObserver* step_observer = nullptr, bool reuse_steady_decode_steps = true,
          std::shared_ptr<const CostModel> cost_model = nullptr);

  // Queues the request; false when this replica can never serve it (policy::unservable_reason)
  // and the scenario rejects such requests (counted in the metrics). Throws InputError for one
  // under scheduler.unservable: error.
  bool enqueue(const RequestDescriptor& request, TimeNs arrival);
  // Queues a request whose K/V and first token arrived from a prefill replica now; false (or
  // InputError) as enqueue() when this replica can never serve it.
  bool enqueue_handed_off(const HandOff& request, TimeNs now);
  // The requests the last completed iteration handed off (a prefill replica's).
  std::span<const HandOff> handed_off() const { return handed_off_; }
  const std::string& role() const { return role_; }
  // Asks the scheduler for the next iteration; returns its duration, or -1 when idle.
  TimeNs start_iteration(TimeNs now);
  IterationOutcome complete_iteration(TimeNs now);

  bool busy() const { return busy_; }
  // Iterations that reused the previous step's rows (start_steady_decode).
  std::int64_t steady_decode_steps() const { return steady_decode_steps_; }
  const RecomputeWaste& recompute_waste() const { return recompute_waste_; }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  std::size_t waiting() const { return waiting_.size(); }
  std::size_t running() const { return running_.size(); }
  policy::ReplicaLoad load() const { return load_; }
  // In blocks of block_size tokens at every K/V layer (scheduler.kv_blocks' unit), rounded up.
  std::int64_t kv_blocks_used() const { return per_token_blocks(kv_total_ - kv_free_); }
  std::int64_t kv_blocks_total() const { return per_token_blocks(kv_total_); }
  const std::string& scheduler_name() const { return scheduler_name_; }
  // What the cost model substituted or extrapolated while pricing this replica's iterations.
  // The cost model's notes, and a line when step variability is asked for but the profile has
  // no measured spread (its iterations are then priced as they are).
  std::vector<std::string> cost_notes() const;
  // The last iteration's batch, for timelines.
  const IterationRecord& last_iteration() const { return last_iteration_; }
  // The request's leading prompt blocks this replica has cached (0 without prefix caching).
  std::int64_t cached_prefix_blocks(const RequestDescriptor& request) const;
  // What swap preemption moved; nullptr under recompute.
  const SwapSummary* swap_counts() const { return swap_ ? &swap_->counts : nullptr; }
  // What prefix caching did; nullptr without it.
  // adaptive_threshold's estimator and trajectory; null for other exit policies.
  const AdaptiveThresholdRun* adaptive_threshold() const { return depth_model_.adaptive(); }
  const PrefixCacheSummary* prefix_counts() const {
    return prefix_reuse_ ? &prefix_reuse_->counts() : nullptr;
  }

 private:
  // Frees a victim's K/V and counts its preemption (policy::apply_decision's on_preempt).
  void preempt(QueuedSequence& victim);
  // Gives back a finished or preempted sequence's blocks (those it shares stay with the others).
  void release_blocks(policy::SequenceView& view, SequenceExtra& extra);
  // Prefix caching before the scheduler looks: each waiting sequence's hit, each running one's
  // shared blocks.
  void offer_prefix_hits();
  // The cost with its total times cost_model.price_scale and, with step variability, a factor
  // drawn from the measured step spread.
  IterationCost scaled(IterationCost cost);
  [[noreturn]] void throw_stalled() const;
  // A steady decode step (policy::steady_decode) after one: the scheduler would decide what it
  // did last time, so it is not asked. Static depth plans what it planned, so the last step's
  // rows run again with one more token of context each; with exits they are planned anew.
  // Returns -1 when the step is not steady.
  TimeNs start_steady_decode(TimeNs now);
  // start_steady_decode's rest under exits or depth-wise stepping: the same sequences, each
  // token's depth (or recursion) planned anew.
  TimeNs plan_steady_decode(TimeNs now);
  // A steady step's K/V for running_[k] (row rows_[k]): steady_decode's blocks for its one more
  // token, where its K/V is stored at every layer.
  void grow_by_steady_blocks(std::size_t k);
  // Allocates the K/V blocks of the first `row_count` rows and counts their tokens' depths,
  // then price_rows.
  TimeNs run_rows(TimeNs now, std::size_t row_count, const FillWork& fill);
  // Prices the first `row_count` rows and records the iteration; returns its duration.
  // `only_contexts_changed`: the rows are the last step's with new contexts (a steady step).
  TimeNs price_rows(TimeNs now, std::size_t row_count, const FillWork& fill,
                    bool only_contexts_changed);
  // deferred_fill's rollback of `tokens` output tokens at an iteration's completion.
  void roll_back(policy::SequenceView& view, IterationOutcome& outcome, std::int64_t tokens);
  // Sets the view's K/V rows (SequenceView::kv_row_offset) from what the sequence holds: under
  // skip_kv and depthwise, each recursion's rows are the tokens that reached it. `rows_ahead`
  // are rows this iteration adds at every instance before they count as computed (a prefill
  // chunk planned but not yet run).
  void set_kv_rows(policy::SequenceView& view, const SequenceExtra& extra,
                   std::int64_t rows_ahead) const;
  // Pool blocks (one K/V instance each) as blocks of block_size tokens at every instance.
  std::int64_t per_token_blocks(std::int64_t pool_blocks) const {
    return (pool_blocks + kv_instances_ - 1) / kv_instances_;
  }

  int index_;
  const StepObserver* step_observer_;
  MetricsCollector& metrics_;
  std::unique_ptr<policy::Scheduler> scheduler_;
  std::shared_ptr<const CostModel> cost_model_;
  DepthModel depth_model_;
  std::string scheduler_name_;
  std::string description_;  // "replica 0 (llama-3-8b on h100-sxm)" for messages
  policy::SchedulerLimits limits_;
  policy::KvLayout kv_layout_;
  policy::KvView kv_view_;         // block size and row groups; totals in kv_total_ and kv_free_
  std::int64_t kv_total_ = 0;      // pool blocks, each of block_size rows of one K/V instance
  std::int64_t kv_instances_ = 1;  // kv_view_.groups.total_instances(), asked every iteration
  std::int64_t kv_free_ = 0;
  policy::ServingCapacity capacity_;  // what this replica can ever serve (fixed at construction)
  bool reject_unservable_ = false;
  DepthStructure model_depth_;

  SequenceQueue running_;
  SequenceQueue waiting_;
  policy::ReplicaLoad load_;
  bool busy_ = false;
  std::optional<PrefixReuse> prefix_reuse_;
  // The waiting queue keys of the sequences that joined it since offer_prefix_hits() last ran
  // (arrived, or preempted): they have no offer yet. Then also the stale ones' (its scratch).
  std::vector<std::uint64_t> prefix_offers_due_;
  RecomputeWaste recompute_waste_;
  std::string role_;
  bool prefill_only_ = false;            // role_ == "prefill", for the per-token check
  std::int64_t kv_bytes_per_token_ = 0;  // per GPU, every layer
  std::vector<HandOff> handed_off_;
  // Swap preemption: the host's swap space and link, and the transfers the next iteration waits
  // for (vLLM swaps blocks out and in before the forward pass, on the same stream).
  struct Swap {
    setup::HostSwapLink link;
    policy::HostSwapSpace space;
    std::int64_t pending_out = 0;  // pool blocks, this iteration's
    std::int64_t pending_in = 0;
    SwapSummary counts;
  };
  std::optional<Swap> swap_;
  // Moves a victim's K/V to host memory when it fits (true), counting the transfer.
  bool swap_out(QueuedSequence& victim);
  // Brings back the K/V of sequences readmitted after a swap (running_ from `admitted_from` on).
  void swap_in_readmitted(std::size_t admitted_from);
  // Whether this replica can ever serve a request of these lengths; when not, throws InputError
  // ("cannot be <verb> by ...") or, under scheduler.unservable: reject, counts the rejection.
  bool servable(RequestId id, std::int64_t input_tokens, std::int64_t output_tokens,
                const char* verb);

  // Reused every iteration so the steady state allocates nothing.
  policy::SchedulerDecision decision_;
  std::vector<policy::StepRow> rows_;       // the iteration's work, one row per sequence
  std::vector<std::size_t> row_sequences_;  // running index of each row
  std::optional<StepPricer> pricer_;        // rows_ priced by cost_model_
  // The profile's measured step spread (quantiles) and the stream each iteration's factor is
  // drawn from; empty when off or unmeasured.
  std::vector<double> step_factors_;
  std::optional<RandomStream> step_draws_;
  bool unmeasured_variability_ = false;
  double price_scale_ = 1.0;  // cost_model.price_scale
  policy::StepTrace step_;    // for the step observer
  std::uint64_t steps_started_ = 0;
  std::vector<DecodeToken> decode_tokens_;
  std::vector<std::int64_t> work_tokens_;  // by running index, for the iteration in flight
  std::vector<std::size_t> scratch_indices_;
  policy::DecisionScratch<QueuedSequence> decision_scratch_;
  IterationRecord last_iteration_;
  // Steady decode steps: whether this replica's configuration allows them (no hand-offs or step
  // observer; a scheduler that decodes all when steady), and whether the last step qualifies
  // (rows_[k] is running_[k]'s decode row).
  bool steady_allowed_ = false;
  bool steady_ = false;
  std::vector<std::int64_t> steady_growth_;  // each running sequence's new blocks, this step
  std::int64_t steady_decode_steps_ = 0;
};

}  // namespace exitsim::sim
