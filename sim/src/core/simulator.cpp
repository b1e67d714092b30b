#include "exitsim/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/event_queue.hpp"
#include "replica.hpp"
#include "timeline.hpp"
#include "transfer_link.hpp"

namespace exitsim::sim {
namespace {

struct Event {
  // transfer_start: a hand-off (tag: its slot) joins its prefill replica's link after the
  // link's latency; transfer_done: the link's next transfer may have finished (tag: the link's
  // version when scheduled; a later one makes it stale).
  enum class Kind : std::uint8_t { arrival, iteration_done, transfer_start, transfer_done };
  Kind kind;
  int replica;
  std::uint64_t tag = 0;
};

constexpr std::int64_t k_progress_every_events = 1 << 16;

class ClusterRun {
 public:
  ClusterRun(const SimulationConfig& config, traces::RequestSource& workload,
             const ProgressCallback& progress)
      : config_(config),
        workload_(workload),
        progress_(progress),
        metrics_(MetricsOptions{config.slo, static_cast<int>(config.replicas.size()),
                                config.requests_csv_path, config.request_observer}) {
    if (config.replicas.empty()) {
      throw InputError({"", 0, 0, "cluster.replicas"}, expected_found("at least 1", "0"));
    }
    // A roofline takes about 24 KB of tables and a quarter of a millisecond to build: the
    // replicas of one group (consecutive, of one spec) share one, so that the documented
    // maximum of 100,000 replicas does not build 100,000 (4.4 GB, 25 s).
    std::shared_ptr<const CostModel> roofline;
    for (std::size_t r = 0; r < config.replicas.size(); ++r) {
      const ReplicaSpec& spec = config.replicas[r];
      if (r == 0 || !shares_roofline(config.replicas[r - 1], spec))
        roofline = nullptr;
      if (roofline == nullptr && spec.cost_model.kind == "roofline") {
        roofline = make_cost_model(spec.cost_model, spec.model, spec.hardware, spec.parallel,
                                   exit_probes(spec));
      }
      replicas_.push_back(std::make_unique<Replica>(static_cast<int>(r), spec, metrics_,
                                                    &config_.step_observer,
                                                    config.reuse_steady_decode_steps, roofline));
    }
    loads_.resize(replicas_.size());
    marked_.assign(replicas_.size(), 0);
    set_up_disaggregation();
    if (!config.timeline_path.empty()) {
      timeline_.emplace(config.timeline_path, config.timeline_max_mb,
                        static_cast<int>(replicas_.size()));
    }
  }

  SimulationResult run() {
    schedule_next_arrival();
    while (!events_.empty()) {
      const auto event = events_.pop();
      if (event.time < now_)
        throw std::logic_error("simulated time went backwards");
      requests_in_system_area_ +=
          static_cast<double>(requests_in_system_) * static_cast<double>(event.time - now_);
      now_ = event.time;
      ++totals_.events;
      switch (event.payload.kind) {
        case Event::Kind::arrival:
          on_arrival();
          break;
        case Event::Kind::iteration_done:
          on_iteration_done(event.payload.replica);
          break;
        case Event::Kind::transfer_start:
          on_transfer_start(event.payload.replica, event.payload.tag);
          break;
        case Event::Kind::transfer_done:
          on_transfer_done(event.payload.replica, event.payload.tag);
          break;
      }
      // Replicas start their next iteration only once every event of this instant is in, so
      // requests arriving together (whole-second trace timestamps) are batched together.
      if (events_.empty() || events_.top().time > now_)
        start_marked_replicas();
      if (progress_ && totals_.events % k_progress_every_events == 0) {
        progress_({totals_.requests_finished, now_});
      }
    }
    return finish();
  }

 private:
  void schedule_next_arrival() {
    pending_ = workload_.next();
    if (!pending_)
      return;
    if (!pending_->arrival) {
      throw std::logic_error("workload produced a request without an arrival time");
    }
    events_.push(*pending_->arrival, Event{Event::Kind::arrival, -1});
  }

  void on_arrival() {
    const RequestDescriptor request = std::move(*pending_);
    const std::size_t target =
        route(prefill_capable_, static_cast<std::uint64_t>(totals_.requests_arrived), &request);
    if (replicas_[target]->enqueue(request, now_)) {
      if (totals_.requests_arrived == 0)
        first_arrival_ = now_;
      totals_.requests_arrived += 1;
      requests_in_system_ += 1;
      totals_.tokens_expected += request.output_tokens;
      mark_for_start(target);
    } else {
      totals_.requests_rejected += 1;
    }
    schedule_next_arrival();
  }

  // The replica among `candidates` the router picks (`request` for prefix affinity).
  std::size_t route(const std::vector<std::size_t>& candidates, std::uint64_t routed_so_far,
                    const RequestDescriptor* request) {
    const bool affinity =
        request != nullptr && config_.router == policy::ReplicaRouterKind::prefix_affinity;
    loads_.resize(candidates.size());
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      loads_[k] = replicas_[candidates[k]]->load();
      if (affinity)
        loads_[k].cached_prefix_blocks = replicas_[candidates[k]]->cached_prefix_blocks(*request);
    }
    return candidates[policy::route_request(config_.router, {loads_, routed_so_far})];
  }

  // Replicas that take arrivals (mixed, prefill) and hand-offs (mixed, decode), and each prefill
  // replica's link. Throws InputError when one kind has nowhere to go.
  void set_up_disaggregation() {
    bool disaggregated = false;
    for (std::size_t r = 0; r < replicas_.size(); ++r) {
      const std::string& role = replicas_[r]->role();
      if (role != "decode")
        prefill_capable_.push_back(r);
      if (role != "prefill")
        decode_capable_.push_back(r);
      disaggregated = disaggregated || role != "mixed";
      const HardwareSpec& hardware = config_.replicas[r].hardware;
      // A K/V transfer is a send between nodes: at the share of the network a send reaches
      // (hardware.node_link_efficiency; 0: all of it) after the send's latency.
      const Interconnect& net = hardware.interconnect;
      links_.emplace_back(
          net.node_link_bandwidth * (net.node_link_efficiency > 0 ? net.node_link_efficiency : 1.0),
          net.node_link_latency);
      if (role == "prefill" && !(hardware.interconnect.node_link_bandwidth > 0)) {
        throw InputError({"", 0, 0, "hardware.node_link_bandwidth_gbps"},
                         expected_found("a positive bandwidth for a prefill replica's K/V "
                                        "transfers",
                                        "0"));
      }
    }
    if (prefill_capable_.empty() || decode_capable_.empty()) {
      throw InputError({"", 0, 0, "scheduler.role"},
                       expected_found("replicas that run prompts (mixed or prefill) and replicas "
                                      "that decode (mixed or decode)",
                                      prefill_capable_.empty() ? "decode replicas only"
                                                               : "prefill replicas only"));
    }
    if (disaggregated)
      transfers_.emplace();
  }

  void schedule_link(std::size_t link) {
    if (const auto finish = links_[link].next_finish()) {
      events_.push(*finish, Event{Event::Kind::transfer_done, static_cast<int>(link),
                                  links_[link].version()});
    }
  }

  void on_transfer_start(int replica, std::uint64_t slot) {
    const auto link = static_cast<std::size_t>(replica);
    links_[link].join(now_, static_cast<std::size_t>(slot), in_transfer_[slot].handoff.bytes);
    transfers_->most_concurrent =
        std::max(transfers_->most_concurrent, static_cast<std::int64_t>(links_[link].active()));
    schedule_link(link);
  }

  void on_transfer_done(int replica, std::uint64_t version) {
    const auto link = static_cast<std::size_t>(replica);
    if (version != links_[link].version())
      return;  // the sharing changed since: a later event stands for this link
    finished_transfers_.clear();
    links_[link].finish_until(now_, finished_transfers_);
    for (const std::size_t slot : finished_transfers_) {
      const InTransfer& t = in_transfer_[slot];
      const TimeNs took = now_ - t.started;
      transfers_->transfers += 1;
      transfers_->bytes += t.handoff.bytes;
      transfers_->total_time += took;
      transfers_->longest = std::max(transfers_->longest, took);
      const std::size_t target = route(decode_capable_, handed_off_so_far_++, nullptr);
      if (replicas_[target]->enqueue_handed_off(t.handoff, now_)) {
        mark_for_start(target);
      } else {
        totals_.requests_rejected += 1;
        requests_in_system_ -= 1;
      }
      free_slots_.push_back(slot);
    }
    schedule_link(link);
  }

  void start_transfers(std::size_t replica_index) {
    for (const HandOff& h : replicas_[replica_index]->handed_off()) {
      std::size_t slot = in_transfer_.size();
      if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
      } else {
        in_transfer_.emplace_back();
      }
      in_transfer_[slot] = {h, now_};
      events_.push(now_ + links_[replica_index].latency(),
                   Event{Event::Kind::transfer_start, static_cast<int>(replica_index), slot});
    }
  }

  void on_iteration_done(int replica_index) {
    Replica& replica = *replicas_[static_cast<std::size_t>(replica_index)];
    const IterationOutcome outcome = replica.complete_iteration(now_);
    if (!replica.handed_off().empty())
      start_transfers(static_cast<std::size_t>(replica_index));
    totals_.tokens_emitted += outcome.tokens_emitted;
    totals_.requests_finished += outcome.requests_finished;
    requests_in_system_ -= outcome.requests_finished;
    mark_for_start(static_cast<std::size_t>(replica_index));
  }

  void mark_for_start(std::size_t replica_index) {
    if (marked_[replica_index] != 0)
      return;
    marked_[replica_index] = 1;
    marked_order_.push_back(replica_index);
  }

  void start_marked_replicas() {
    for (std::size_t replica_index : marked_order_) {
      marked_[replica_index] = 0;
      try_start(replica_index);
    }
    marked_order_.clear();
  }

  void try_start(std::size_t replica_index) {
    Replica& replica = *replicas_[replica_index];
    if (replica.busy())
      return;
    const TimeNs duration = replica.start_iteration(now_);
    if (duration < 0)
      return;
    if (duration > k_max_iteration_end_ns - now_) {
      throw InputError(
          {"", 0, 0, "hardware"},
          expected_found(fmt::format("a run whose iterations end within {:.0f} years of simulated "
                                     "time",
                                     to_seconds(k_max_iteration_end_ns) / (365.25 * 86400)),
                         fmt::format("an iteration of {:.4g} s on replica {} starting at {:.4g} "
                                     "s: the hardware is far too slow for this workload",
                                     to_seconds(duration), replica_index, to_seconds(now_))));
    }
    totals_.max_kv_blocks_used = std::max(totals_.max_kv_blocks_used, replica.kv_blocks_used());
    if (timeline_)
      timeline_->record(replica.last_iteration());
    if (config_.iteration_observer)
      config_.iteration_observer(replica.last_iteration());
    events_.push(now_ + duration,
                 Event{Event::Kind::iteration_done, static_cast<int>(replica_index)});
  }

  SimulationResult finish() {
    for (const auto& replica : replicas_) {
      if (replica->has_work()) {
        throw std::logic_error(
            fmt::format("simulation ended with {} running and {} waiting requests on a replica",
                        replica->running(), replica->waiting()));
      }
      totals_.kv_blocks_leaked += replica->kv_blocks_used();
      totals_.steady_decode_steps += replica->steady_decode_steps();
    }
    totals_.end_time = now_;
    if (now_ > first_arrival_) {
      totals_.mean_requests_in_system =
          requests_in_system_area_ / static_cast<double>(now_ - first_arrival_);
    }
    metrics_.finish();
    if (timeline_)
      timeline_->finish();
    SimulationResult result{metrics_.summarize(), totals_};
    result.summary.transfers = transfers_;
    for (const auto& replica : replicas_) {
      if (const SwapSummary* swap = replica->swap_counts()) {
        if (!result.summary.swap)
          result.summary.swap.emplace();
        result.summary.swap->add(*swap);
      }
      if (const PrefixCacheSummary* counts = replica->prefix_counts()) {
        if (!result.summary.prefix_cache)
          result.summary.prefix_cache.emplace();
        result.summary.prefix_cache->add(*counts);
      }
    }
    result.summary.adaptive_threshold = adaptive_threshold_summary();
    if (result.summary.adaptive_threshold && !config_.threshold_trajectory_path.empty()) {
      std::ofstream out(config_.threshold_trajectory_path);
      write_threshold_trajectory(out, *result.summary.adaptive_threshold);
      if (!out) {
        throw InputError({config_.threshold_trajectory_path, 0, 0, ""},
                         "cannot write the threshold trajectory");
      }
    }
    result.summary.warnings = collect_warnings(result.summary);
    return result;
  }

  // Every replica's adaptive_threshold estimator, or nullopt when the policy is another.
  std::optional<AdaptiveThresholdSummary> adaptive_threshold_summary() const {
    std::optional<AdaptiveThresholdSummary> summary;
    for (const auto& replica : replicas_) {
      const AdaptiveThresholdRun* run = replica->adaptive_threshold();
      if (run == nullptr)
        continue;
      if (!summary) {
        summary.emplace();
        summary->initial_threshold = run->initial_threshold();
      }
      summary->pairs += run->estimator().sums().pairs();
      for (const ThresholdTrajectoryPoint& point : run->trajectory())
        summary->trajectory.push_back(
            trajectory_row(point.step, point.time, point.replica, point.refit));
    }
    return summary;
  }

  // chunked_prefill admitting prompts on their first chunk's blocks can start more prefills than
  // K/V memory finishes; they then preempt each other and recompute (docs/schedulers.md,
  // "Chunked prefill under memory pressure"). Over those replicas, a line when at least
  // k_thrash_fraction of the tokens they computed were recomputations.
  std::optional<std::string> thrash_warning() const {
    RecomputeWaste waste;
    for (const auto& replica : replicas_) {
      const RecomputeWaste& r = replica->recompute_waste();
      if (!r.reserving_would_help)
        continue;
      waste.preemptions += r.preemptions;
      waste.recomputed_tokens += r.recomputed_tokens;
      waste.computed_tokens += r.computed_tokens;
    }
    if (waste.computed_tokens == 0)
      return std::nullopt;
    const double fraction =
        static_cast<double>(waste.recomputed_tokens) / static_cast<double>(waste.computed_tokens);
    if (fraction < k_thrash_fraction)
      return std::nullopt;
    return fmt::format(
        "scheduler.reserve_prompt_blocks: chunked_prefill thrashed: {} preemptions threw away {} "
        "computed tokens to recompute them, {:.1f}% of the {} tokens its iterations computed "
        "(prompts admitted on their first chunk's blocks outgrew the K/V memory); "
        "scheduler.reserve_prompt_blocks: true admits a prompt only when its whole prompt's "
        "blocks fit",
        waste.preemptions, waste.recomputed_tokens, 100.0 * fraction, waste.computed_tokens);
  }
  static constexpr double k_thrash_fraction = 0.1;

  // In a fixed order: the workload's, the rejections, swap space, the thrash, each replica's cost
  // model, the timeline.
  std::vector<std::string> collect_warnings(const MetricsSummary& summary) {
    std::vector<std::string> out = workload_.notes();
    if (const RejectedRequests& r = summary.rejected; r.total() > 0) {
      out.push_back(fmt::format(
          "scheduler.unservable: reject: {} of {} requests rejected at arrival ({} prompts over "
          "the batch budget, {} over the context window, {} over the K/V memory); they are in "
          "no latency, throughput or goodput figure",
          r.total(), r.total() + totals_.requests_arrived, r.prompt_over_batch_budget,
          r.over_context_window, r.over_kv_capacity));
    }
    if (summary.swap && summary.swap->recomputed_instead > 0) {
      out.push_back(fmt::format(
          "hardware.host_swap_gb: {} preempted sequences did not fit the host's swap space and "
          "were recomputed instead of swapped",
          summary.swap->recomputed_instead));
    }
    if (auto thrash = thrash_warning())
      out.push_back(std::move(*thrash));
    if (const auto& adaptive = summary.adaptive_threshold; adaptive && adaptive->pairs == 0) {
      out.push_back(fmt::format(
          "exit_policy.kind: adaptive_threshold collected no calibration pair, so the threshold "
          "never moved from exit_policy.threshold = {:g}: pairs come only from deferred_fill "
          "passes that complete at the full depth (FREE's synchronized parallel decoding), and "
          "this run had none (sync.strategy is not deferred_fill, or no exited token was ever "
          "filled)",
          adaptive->initial_threshold));
    }
    for (const auto& replica : replicas_) {
      for (std::string& note : replica->cost_notes()) {
        if (std::find(out.begin(), out.end(), note) == out.end())
          out.push_back(std::move(note));
      }
    }
    if (timeline_ && timeline_->truncated()) {
      out.push_back(fmt::format(
          "outputs.timeline: timeline.json cut at outputs.timeline_max_mb ({:g} MB): {} events "
          "dropped",
          config_.timeline_max_mb, timeline_->events_dropped()));
    }
    return out;
  }

  const SimulationConfig& config_;
  traces::RequestSource& workload_;
  const ProgressCallback& progress_;
  MetricsCollector metrics_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<policy::ReplicaLoad> loads_;
  // Disaggregated serving: who takes arrivals and hand-offs, the prefill replicas' links (one per
  // replica), and the hand-offs on their way.
  struct InTransfer {
    HandOff handoff;
    TimeNs started = 0;  // when the prefill replica let it go
  };
  std::vector<std::size_t> prefill_capable_;
  std::vector<std::size_t> decode_capable_;
  std::vector<TransferLink> links_;
  std::vector<InTransfer> in_transfer_;
  std::vector<std::size_t> free_slots_;
  std::vector<std::size_t> finished_transfers_;
  std::uint64_t handed_off_so_far_ = 0;
  std::optional<TransferSummary> transfers_;
  std::vector<std::uint8_t> marked_;  // replicas to start once the current instant is processed
  std::vector<std::size_t> marked_order_;
  std::optional<IterationTimeline> timeline_;
  EventQueue<Event> events_;
  std::optional<RequestDescriptor> pending_;
  SimulationTotals totals_;
  TimeNs now_ = 0;
  TimeNs first_arrival_ = 0;
  std::int64_t requests_in_system_ = 0;
  double requests_in_system_area_ = 0;
};

}  // namespace

SimulationResult simulate(const SimulationConfig& config, traces::RequestSource& workload,
                          const ProgressCallback& progress) {
  return ClusterRun(config, workload, progress).run();
}

SimulationConfig simulation_config_from(const scenario::Scenario& s,
                                        const std::string& output_dir) {
  SimulationConfig config;
  // Replica indices follow the groups in order, so group i's replicas are contiguous.
  for (const scenario::ReplicaGroup& group : s.replica_groups) {
    const ReplicaSpec spec{group.model.shape,
                           group.hardware.spec,
                           group.cost_model,
                           group.scheduler,
                           s.exit_policy,
                           s.sync,
                           s.seed,
                           group.parallel};
    config.replicas.insert(config.replicas.end(), static_cast<std::size_t>(group.count), spec);
  }
  const auto router = policy::parse_replica_router(s.cluster.router);
  if (!router) {
    throw InputError({"", 0, 0, "cluster.router"},
                     expected_found("a replica router", "\"" + s.cluster.router + "\""));
  }
  config.router = *router;
  config.slo = {s.slo.ttft_ms, s.slo.tpot_ms, s.slo.e2e_ms};
  if (!output_dir.empty()) {
    const std::filesystem::path dir(output_dir);
    if (s.outputs.requests_csv)
      config.requests_csv_path = (dir / "requests.csv").string();
    if (s.outputs.timeline)
      config.timeline_path = (dir / "timeline.json").string();
    // The estimator's trajectory is the run's record of what the threshold did: always written.
    if (s.exit_policy.kind == "adaptive_threshold")
      config.threshold_trajectory_path = (dir / "threshold_trajectory.csv").string();
  }
  config.timeline_max_mb = s.outputs.timeline_max_mb;
  return config;
}

}  // namespace exitsim::sim
