#pragma once

// The engine's decoding loop, split by pass: engine.cpp drives iterations (scheduler, admission,
// preemption, emission), prefill_pass.cpp runs prompts through the whole stack,
// decode_pass.cpp (with decode_exits.cpp and decode_finish.cpp) runs the sequence-wise
// strategies and depthwise_pass.cpp the depth-wise steps.

#include <Eigen/Core>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "exitsim/core/random.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/hidden_states.hpp"
#include "exitsim/engine/kv_cache.hpp"
#include "exitsim/policy/adaptive_threshold.hpp"
#include "exitsim/policy/apply_decision.hpp"
#include "exitsim/policy/host_swap.hpp"
#include "exitsim/policy/kv_layout.hpp"

namespace exitsim::engine {

// A hidden state left behind by an early exit under deferred_fill: it has run `depth` stack
// layers, and joins its sequence's next token at the layers above until it reaches the top.
struct PendingState {
  HeldStates hidden;  // one slot
  std::int32_t position = 0;
  int depth = 0;
  // adaptive_threshold's calibration pair once the state reaches the top: the exit point it left
  // at, its confidence and prediction there, and the token it emitted (index into
  // EngineRun::tokens), which records the pair's agreement flag.
  int exit_point = -1;
  double confidence = 0;
  std::int32_t exit_argmax = -1;
  std::size_t token_index = 0;
};

// deferred_fill with rollback: the first filled state whose full-depth prediction disagrees with
// the token its early exit emitted, and that prediction. position -1: none.
struct Correction {
  std::int32_t position = -1;
  std::int32_t token = 0;
  std::vector<float> logits;  // empty unless something reads logits (HeadOutput)
};

// What a head's caller reads: the logits (HeadOutput) and the top-2 probabilities, or neither
// (greedy decoding reads only the argmax).
struct HeadWants {
  bool logits = false;
  bool probabilities = false;
};

// What the head computed for its rows: each row's argmax and confidences, and the logits
// themselves only when something reads them (sampling at a temperature, an on_logits observer):
// a GPU backend then moves a few bytes per row to the host instead of a vocabulary's worth.
struct HeadOutput {
  Matrix logits;  // no rows unless asked for
  std::vector<Top2Confidence> top;

  std::span<const float> logits_of(std::size_t row) const {
    if (logits.rows() == 0)
      return {};
    return {logits.row(static_cast<Eigen::Index>(row)).data(),
            static_cast<std::size_t>(logits.cols())};
  }
};

struct Sequence {
  std::size_t index = 0;  // in the request list
  const EngineRequest* request = nullptr;
  std::vector<std::int32_t> tokens;  // prompt, then the outputs so far
  std::vector<int> streams;          // K/V stream per K/V instance; empty while not admitted
  std::vector<PendingState> pending;
  // Depth-wise batching: the in-flight token's stage, hidden state (one slot, held while the
  // sequence runs) and exit decision.
  policy::DepthwiseStage stage;
  HeldStates flight;
  int flight_exit = -1;  // exit point decided when it entered; -1: decided as it goes
  std::vector<double> flight_scores;
  double flight_score = 0;
  // The exits of its decode tokens so far, for policies that realise shares over a sequence.
  policy::ExitQuota exit_quota;
  RandomStream sampler;
  // Swap preemption: the pool blocks it was charged when its K/V went to the host tier (0: none
  // there). Its streams, rows and depth state are kept while it waits.
  std::int64_t swapped_blocks = 0;
  bool admitted_before = false;  // admitted once: a later admission resumes it after preemption
  bool emitted = false;          // emitted a token in the iteration in flight
  int emitted_depth = 0;         // the exit depth (stack layers) of the token it emitted
  // deferred_fill: the shared plan's view of `pending` (groups by depth). The plan of the
  // sequence's last decode token as the engine executed it (what its StepRow reports).
  policy::PendingFill fill;
  policy::DepthPlan plan;

  Sequence(std::uint64_t seed, RequestId id);
  // The output position of the token generated next (0: the first output token).
  std::int64_t output_position() const {
    return static_cast<std::int64_t>(tokens.size() - request->prompt.size());
  }
};

// A sequence as the loop's queues hand it between each other (policy::apply_decision).
struct QueuedSequence {
  policy::SequenceView view;
  Sequence* sequence = nullptr;
};

// The loop's queues (parallel vectors of views and sequences) as policy::apply_decision sees them.
struct QueueRef {
  std::vector<policy::SequenceView>& views;
  std::vector<Sequence*>& sequences;

  std::size_t size() const { return views.size(); }
  QueuedSequence at(std::size_t i) const { return {views[i], sequences[i]}; }
  void push_back(const QueuedSequence& s) {
    views.push_back(s.view);
    sequences.push_back(s.sequence);
  }
  void push_front(const QueuedSequence& s) {
    views.insert(views.begin(), s.view);
    sequences.insert(sequences.begin(), s.sequence);
  }
  void remove(std::span<const std::size_t> sorted_indices);
};

// How the exit policy is fed: some decide from draws before a token runs, the others from what
// the model computes at exit points (confidences, router scores, agreement with full depth).
enum class ExitFeed : std::uint8_t { upfront, token_choice, confidence, expert_choice, oracle };

struct DecodeBatch;

class Engine::Loop {
 public:
  Loop(const Backend& model, const EngineOptions& options, profiler::HostProfiler* profiler,
       const policy::Scheduler& scheduler, const policy::ExitPolicy* exit_policy);
  EngineRun run(std::span<const EngineRequest> requests);

 private:
  // Passes over the iteration's work.
  // Chunk k of sequences[k] covers positions starts[k] .. starts[k] + chunks[k] - 1; a chunk
  // that reaches the last known token emits the next one.
  void prefill_pass(std::span<Sequence* const> sequences, std::span<const std::int64_t> starts,
                    std::span<const std::int64_t> chunks);
  void decode_pass(std::span<Sequence* const> sequences);
  // decode_pass's steps, layer by layer (decode_pass.cpp): the shared plan of the exits known so
  // far (policy::plan_so_far) in b.so_far;
  void plan_layer(DecodeBatch& b);
  // whether it gives the layer anything to do (if not, no layer above has work either);
  bool layer_has_work(const DecodeBatch& b, int layer) const;
  // the exit states of tokens the layer carries on masked, copied before it overwrites them;
  void keep_exit_states(DecodeBatch& b, int layer);
  // the layer as the plan says: each token it runs, with the pending states that run with it,
  // and the K/V-only rows from exit states, recorded in b.ran.
  void run_decode_layer(DecodeBatch& b, int layer);
  void add_pending_rows(DecodeBatch& b, std::size_t i, int layer, std::vector<StateSlot>& slots,
                        std::vector<LayerRow>& rows);
  // Exit decisions (decode_exits.cpp): routers at the start of a recursion, before it runs;
  // exit points (the draws' or routers' decisions taken, confidences or the oracle's probes)
  // after the layer that ends at one.
  void decide_before_layer(DecodeBatch& b, int layer);
  void decide_after_layer(DecodeBatch& b, int layer);
  void probe_exit_point(DecodeBatch& b, int point);
  // After the layers (decode_finish.cpp): each sequence's pending states as the plan of the exits
  // taken leaves them (the filled ones checked for rollback), and each token's emission.
  std::vector<Correction> settle_pending(DecodeBatch& b);
  void emit_decoded(DecodeBatch& b, std::span<const Correction> corrections);
  // adaptive_threshold's calibration pairs (decode_calibration.cpp), FREE's synchronized
  // parallel decoding: the completed fill states' exit predictions against their deep ones
  // (`deep`, the filled states' head), kept in b until the deep token's head has run;
  void collect_state_pairs(DecodeBatch& b, std::size_t i, std::span<const PendingState> filled,
                           const HeadOutput& deep) const;
  // then, row by row, those pairs and the deep token's probes against its own deep prediction,
  // into the estimator and the tokens' agreement flags (the shared executor rule's order);
  // `deep_token`: the row's emitted token (null when a rollback discarded it).
  void add_calibration_pairs(const DecodeBatch& b, std::size_t i, std::int32_t deep_prediction,
                             GeneratedToken* deep_token);
  // The token just emitted for row i: its probed confidences, and, when its exit state waits,
  // the pair that state gives once it reaches the top.
  void record_exit_calibration(const DecodeBatch& b, std::size_t i);
  // Step start: the decision's requests admitted for the first time (marked so), and the refit
  // they may cause, logged with the step just recorded.
  std::int64_t count_first_admissions(const policy::SchedulerDecision& decision);
  void refit_threshold(std::int64_t first_admissions);
  // The strategy the plans follow: full depth without an exit policy.
  policy::SyncStrategy planned_strategy() const;
  // deferred_fill: the sequence's pending states are its plan's groups (logic_error if not).
  void check_pending(const Sequence& s) const;
  void depthwise_pass(std::span<Sequence* const> sequences);
  // Scores the tokens at `deciding` (indices into in_block) at the end of their recursion and
  // sets `leaves` for those the policy lets go.
  void decide_in_flight(std::span<Sequence* const> in_block, std::span<const int> recursion_of,
                        std::span<const std::size_t> deciding, std::span<std::uint8_t> leaves);

  // Helpers shared by the passes.
  LayerRow row_for(const Sequence& s, int layer, std::int32_t position) const;
  void run_layer(int layer, std::span<const StateSlot> slots, std::span<const LayerRow> rows);
  // Coda layers (writing their K/V unless `probe`), final norm and LM head over the states in
  // `slots`: a probe's on copies (its states keep their contents), an emitting head's in place.
  HeadOutput head(std::span<const StateSlot> slots, std::span<Sequence* const> sequences,
                  std::span<const std::int32_t> positions, bool probe, HeadWants wants);
  // Final norm and LM head over the states, as the head span `name`.
  HeadOutput lm_head(std::span<const StateSlot> slots, std::string_view name, HeadWants wants);
  // What an emitted token's head is asked for: logits when something reads them (sampling at a
  // temperature, an on_logits observer).
  HeadWants emission_wants() const;
  std::int32_t sample(Sequence& s, const HeadOutput& head, std::size_t row);
  double confidence_of(const Top2Confidence& top) const;
  // Recursion r's router scores for the rows of x, as a router span.
  std::vector<double> route(int recursion, std::span<const StateSlot> slots);
  // Index of the exit point at stack depth `depth`, or -1.
  int point_at_depth(int depth) const;
  void decide_upfront(std::span<Sequence* const> sequences, std::span<int> exits);
  // The shared exit policy over `sequences`' next tokens: token i brings `scores[i]` (the exit
  // points' confidences or router scores known so far; empty for policies that read none) and,
  // with `draw`, a uniform from its request's exit stream.
  void call_exit_policy(std::span<Sequence* const> sequences,
                        std::span<const std::span<const double>> scores, bool draw,
                        std::span<int> out);
  // Counts a decode token's final exit into its sequence's quota when the policy reads quotas.
  void count_exit(Sequence& s, int exit_point) const;
  void emit(Sequence& s, std::int32_t token, int exit_point, double score,
            std::span<const float> logits);
  // Hands the sequence's K/V to the observer (synchronizing the backend's copy first).
  void report_kv(const Sequence& s);
  // Runs the coda and head on a sequence's pending states that just reached the top (`filled`, as
  // a probe): their deep predictions.
  HeadOutput filled_head(Sequence& s, std::span<const PendingState> filled);
  // The first filled state whose deep prediction (`deep`) disagrees with the token it emitted;
  // counts them.
  Correction check_filled(Sequence& s, std::span<const PendingState> filled,
                          const HeadOutput& deep);
  // Discards every token after the correction's position (and its K/V) and emits the correction.
  void roll_back(Sequence& s, const Correction& correction);
  std::int64_t max_position() const { return max_output_; }
  profiler::HostProfiler::Span span(std::string_view name, traces::OpKind kind, std::int64_t tokens,
                                    int layer);

  // Iteration bookkeeping (engine.cpp).
  void check_requests(std::span<const EngineRequest> requests) const;
  void admit_arrivals(TimeNs now);
  // Sleeps until the next arrival (honour_arrivals), adding the time to idle_.
  void wait_for_next_arrival();
  // Applies the decision's preemptions and admissions; `work` gets each running sequence's
  // tokens for this iteration.
  // Swapped blocks go in the step's trace.
  void apply(const policy::SchedulerDecision& decision, std::vector<std::int64_t>& work,
             policy::StepTrace& trace);
  // Swap preemption: parks a victim's K/V in the host tier when it fits (true), or leaves it to
  // be recomputed; brings a readmitted one's back.
  bool swap_out(QueuedSequence& victim, policy::StepTrace& trace);
  void swap_in(Sequence& s, policy::StepTrace& trace);
  void finish_iteration(std::span<const std::int64_t> work);
  // head_queue: the sequences whose head ran in the last step join the waiting queue, which
  // holds the arrivals up to now (policy::requeue_returning, as the simulator's replica does).
  void requeue_returning();
  // Preempts waiting_[i], back from the head queue with its K/V, by recompute
  // (policy::waiting_kv_holder_to_release).
  void release_waiting(std::size_t i);
  // K/V blocks charged to every sequence: running, waiting (back from the head queue) and
  // returning.
  std::int64_t charged_blocks() const;
  // The step's rows before its passes (policy::StepTrace), and after them: what each row ran,
  // its K/V, the step's duration (virtual clock), the iteration's completion, the observer.
  void begin_rows(std::span<const std::int64_t> work, policy::StepTrace& trace) const;
  void end_step(std::span<const std::int64_t> work, policy::StepTrace& trace);
  // Rows recursion r's K/V holds (skip_kv, depthwise), or `computed` for a uniform layout.
  std::int64_t recursion_rows(const Sequence& s, std::int64_t computed, int recursion) const;
  // The view's K/V rows per group (SequenceView::kv_row_offset) from the sequence's streams.
  void set_kv_rows(const Sequence& s, policy::SequenceView& view) const;
  // Blocks the sequence is charged for, with `view`'s computed tokens and its streams' rows.
  std::int64_t footprint(const Sequence& s, policy::SequenceView view) const;
  void open_streams(Sequence& s);
  void close_streams(Sequence& s);
  std::int64_t physical_blocks(const Sequence& s) const;
  void refresh_kv_views();
  TimeNs now() const;

  const Backend& model_;
  const EngineOptions& options_;
  profiler::HostProfiler* profiler_;
  const policy::Scheduler& scheduler_;
  const policy::ExitPolicy* exit_policy_;
  ExitFeed feed_ = ExitFeed::upfront;
  // adaptive_threshold's estimator (the engine is one replica); absent for other policies.
  std::optional<policy::ThresholdEstimator> estimator_;
  policy::KvLayout layout_;
  policy::KvView kv_view_;  // block size and row groups of the scheduler snapshot
  KvCache kv_;
  std::optional<policy::HostSwapSpace> host_swap_;  // swap preemption only
  // Declared before the sequences, whose pending and in-flight states it holds.
  std::unique_ptr<HiddenStates> states_;
  std::vector<int> exit_depths_;  // the effective exit points (stack depths)
  std::int64_t max_output_ = 1;
  std::uint64_t step_ = 0;
  TimeNs idle_ = 0;                   // slept waiting for arrivals since the last step began
  TimeNs virtual_now_ = 0;            // the clock under EngineOptions::step_duration
  std::size_t step_first_token_ = 0;  // result_.tokens emitted by the step in flight

  std::vector<std::unique_ptr<Sequence>> sequences_;
  std::vector<policy::SequenceView> running_views_, waiting_views_;
  std::vector<Sequence*> running_, waiting_;
  std::vector<QueuedSequence> returning_;  // finish_iteration's, for requeue_returning
  policy::DecisionScratch<QueuedSequence> decision_scratch_;
  std::size_t next_arrival_ = 0;
  std::vector<std::size_t> arrival_order_;  // request indices by arrival
  EngineRun result_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace exitsim::engine
