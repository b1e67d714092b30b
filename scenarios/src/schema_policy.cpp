// Schema rows: the exit policy and the serving system (sync, scheduler, SLOs; the cluster is in
// schema_cluster.cpp).
#include "schema_build.hpp"

namespace exitsim::scenario::detail {

namespace {

Resolved cell_value(const std::string& key, Value v) {
  Resolved r = loaded(std::move(v));
  r.key = key;
  return r;
}

Binding exit_field(auto member) {
  return field(&Scenario::exit_policy, member);
}

Binding adaptive_field(auto member) {
  return field(&Scenario::exit_policy, &ExitPolicyConfig::adaptive, member);
}

const std::string k_buckets = "exit_policy.position_buckets";
const std::string k_schedule = "exit_policy.schedule";

Binding buckets_binding() {
  return Binding{
      [](Scenario& s, const Resolved& r) {
        s.exit_policy.position_buckets.clear();
        for (const auto& row : r.records) {
          PositionBucket b;
          assign(b.until_position, cell(row, k_buckets + ".until_position").value);
          assign(b.probabilities, cell(row, k_buckets + ".probabilities").value);
          s.exit_policy.position_buckets.push_back(std::move(b));
        }
      },
      [](const Scenario& s) {
        Resolved r = loaded({});
        for (const PositionBucket& b : s.exit_policy.position_buckets) {
          r.records.push_back({cell_value(k_buckets + ".until_position", b.until_position),
                               cell_value(k_buckets + ".probabilities", b.probabilities)});
        }
        return r;
      },
  };
}

Binding schedule_binding() {
  return Binding{
      [](Scenario& s, const Resolved& r) {
        s.exit_policy.schedule.clear();
        for (const auto& row : r.records) {
          DepthScheduleStep step;
          assign(step.from_position, cell(row, k_schedule + ".from_position").value);
          assign(step.depth, cell(row, k_schedule + ".depth").value);
          s.exit_policy.schedule.push_back(step);
        }
      },
      [](const Scenario& s) {
        Resolved r = loaded({});
        for (const DepthScheduleStep& step : s.exit_policy.schedule) {
          r.records.push_back({cell_value(k_schedule + ".from_position", step.from_position),
                               cell_value(k_schedule + ".depth", to_value(step.depth))});
        }
        return r;
      },
  };
}

}  // namespace

std::vector<KeyDef> exit_policy_keys() {
  const std::string kind = "exit_policy.kind";
  return {
      Key("exit_policy", Type::section, "How deep each token goes."),
      Key(kind, Type::enumeration,
          "none: every token runs the full depth; confidence: exit when the top-1 probability "
          "(or margin) reaches threshold; adaptive_threshold: confidence with FREE's threshold "
          "re-estimated from calibration pairs while serving; router_expert_choice / "
          "router_token_choice: MoR "
          "routers; oracle: earliest exit agreeing with full depth; position_schedule: "
          "batch-uniform depth by position (SkipDecode); replay: depths from a token trace; "
          "distribution: depths drawn per exit point.")
          .allowed({"none", "confidence", "adaptive_threshold", "router_expert_choice",
                    "router_token_choice", "oracle", "position_schedule", "replay", "distribution"})
          .def(std::string("none"))
          .bind(exit_field(&ExitPolicyConfig::kind)),
      Key("exit_policy.threshold", Type::number,
          "Exit when the confidence (confidence) or router score (router_expert_choice in "
          "threshold mode) is at least this; in top_k mode, a token goes on within its "
          "sequence's quota when its router score is at least this; adaptive_threshold's "
          "threshold until its first refit.")
          .range(0, 1)
          .def(0.9)
          .when(kind, {"confidence", "adaptive_threshold", "router_expert_choice"})
          .bind(exit_field(&ExitPolicyConfig::threshold)),
      Key("exit_policy.confidence_measure", Type::enumeration,
          "top1: softmax top-1 probability; margin: top-1 minus top-2 (as in FREE).")
          .allowed({"top1", "margin"})
          .def(std::string("top1"))
          .when(kind, {"confidence", "adaptive_threshold"})
          .bind(exit_field(&ExitPolicyConfig::confidence_measure)),
      Key("exit_policy.calm_decay", Type::number,
          "CALM decaying threshold temperature over output position; 0 = constant threshold.")
          .range(0, std::nullopt)
          .def(0.0)
          .when(kind, {"confidence"})
          .bind(exit_field(&ExitPolicyConfig::calm_decay)),
      Key("exit_policy.threshold_table", Type::string,
          "The engine's measured exit distributions (`exitsim engine eval`'s quality table, or "
          "an exit table for confidence), from which the simulator takes this policy's exits; "
          "\"\" = none (the simulator then refuses the policy, or for routers uses "
          "router_scores: uniform when asked).")
          .input_path()
          .def(std::string(""))
          .when(kind, {"confidence", "oracle", "router_expert_choice", "router_token_choice"})
          .bind(exit_field(&ExitPolicyConfig::threshold_table)),
      Key("exit_policy.calibration_table", Type::string,
          "The engine's calibration table (`exitsim engine eval` writes it: confidence bins "
          "with agreement counts per exit point), from which the simulator draws "
          "adaptive_threshold's confidences and calibration pairs; required by the simulator.")
          .input_path()
          .def(std::string(""))
          .when(kind, {"adaptive_threshold"})
          .bind(exit_field(&ExitPolicyConfig::calibration_table)),
      Key("exit_policy.confidence_trace", Type::string,
          "A token trace of an engine adaptive_threshold run (its confidences and agreements "
          "columns): the simulator replays the engine's confidences and calibration pairs "
          "instead of drawing them from calibration_table (the conformance suite).")
          .input_path()
          .def(std::string(""))
          .when(kind, {"adaptive_threshold"})
          .bind(exit_field(&ExitPolicyConfig::confidence_trace)),
      Key("exit_policy.adaptive", Type::section,
          "FREE's adaptive threshold estimator (docs/exit_policies.md, \"adaptive_threshold\")."),
      Key("exit_policy.adaptive.grid_low", Type::number,
          "Lowest threshold of the grid the estimator chooses from.")
          .range(0, 1)
          .open_min()
          .def(0.3)
          .when(kind, {"adaptive_threshold"})
          .bind(adaptive_field(&AdaptiveThresholdConfig::grid_low)),
      Key("exit_policy.adaptive.grid_high", Type::number,
          "Highest threshold of the grid (above grid_low, below 1).")
          .range(0, 1)
          .open_min()
          .def(0.9)
          .when(kind, {"adaptive_threshold"})
          .bind(adaptive_field(&AdaptiveThresholdConfig::grid_high)),
      Key("exit_policy.adaptive.grid_points", Type::integer,
          "Evenly spaced grid points from grid_low to grid_high inclusive.")
          .range(2, 1e6)
          .def(std::int64_t{10})
          .when(kind, {"adaptive_threshold"})
          .bind(adaptive_field(&AdaptiveThresholdConfig::grid_points)),
      Key("exit_policy.adaptive.zeta", Type::number,
          "Posterior of the agreeing component a grid point needs (FREE: 0.4).")
          .range(0, 1)
          .open_min()
          .def(0.4)
          .when(kind, {"adaptive_threshold"})
          .bind(adaptive_field(&AdaptiveThresholdConfig::zeta)),
      Key("exit_policy.adaptive.max_refits", Type::integer,
          "Update budget: refit attempts after which the threshold stays (FREE: 300).")
          .range(0, 1e9)
          .def(std::int64_t{300})
          .when(kind, {"adaptive_threshold"})
          .bind(adaptive_field(&AdaptiveThresholdConfig::max_refits)),
      Key("exit_policy.adaptive.refit_every", Type::integer,
          "Refit cadence: admitted requests between refit attempts (FREE: every request).")
          .range(1, 1e9)
          .def(std::int64_t{1})
          .when(kind, {"adaptive_threshold"})
          .bind(adaptive_field(&AdaptiveThresholdConfig::refit_every)),
      Key("exit_policy.router_scores", Type::enumeration,
          "What the simulator's routers score: measured (the threshold table's exit shares) or "
          "uniform (synthetic U(0,1) scores per token and recursion, not a trained router).")
          .allowed({"measured", "uniform"})
          .def(std::string("measured"))
          .when(kind, {"router_expert_choice", "router_token_choice"})
          .bind(exit_field(&ExitPolicyConfig::router_scores)),
      Key("exit_policy.router_mode", Type::enumeration,
          "Decode-time expert choice: threshold on each token's router score, or top_k keeping "
          "`capacities` of each sequence's tokens at each recursion (MoR's top-k counts, within "
          "one token after every token).")
          .allowed({"threshold", "top_k"})
          .def(std::string("threshold"))
          .when(kind, {"router_expert_choice"})
          .bind(exit_field(&ExitPolicyConfig::router_mode)),
      Key("exit_policy.capacities", Type::number_list,
          "Fraction of each sequence's tokens selected at each recursion (top_k mode), one per "
          "recursion, non-increasing, the first 1.")
          .range(0, 1)
          .open_min()
          .def(std::vector<double>{})
          .when(kind, {"router_expert_choice"})
          .bind(exit_field(&ExitPolicyConfig::capacities)),
      Key("exit_policy.probabilities", Type::number_list,
          "Probability of exiting at each exit point of the model; they sum to 1.")
          .range(0, 1)
          .required()
          .when(kind, {"distribution"})
          .bind(exit_field(&ExitPolicyConfig::probabilities)),
      Key(k_buckets, Type::records,
          "Per-position overrides of probabilities, ascending by until_position; positions "
          "past the last bucket use probabilities.")
          .def(std::vector<std::string>{})
          .when(kind, {"distribution"})
          .bind(buckets_binding()),
      Key(k_buckets + ".until_position", Type::integer,
          "The bucket covers output positions below this.")
          .range(1, std::nullopt)
          .required(),
      Key(k_buckets + ".probabilities", Type::number_list, "Exit probabilities in the bucket.")
          .range(0, 1)
          .required(),
      Key(k_schedule, Type::records,
          "Depth by output position: steps ascending by from_position starting at 0, depths "
          "non-increasing and each an exit point.")
          .required()
          .when(kind, {"position_schedule"})
          .bind(schedule_binding()),
      Key(k_schedule + ".from_position", Type::integer, "First output position of the step.")
          .range(0, std::nullopt)
          .required(),
      Key(k_schedule + ".depth", Type::integer, "Depth (an exit point) from that position on.")
          .range(1, std::nullopt)
          .required(),
      Key("exit_policy.token_trace", Type::string, "Token (exit) trace whose depths are replayed.")
          .input_path()
          .required()
          .when(kind, {"replay"})
          .bind(exit_field(&ExitPolicyConfig::token_trace)),
  };
}

std::vector<KeyDef> serving_keys() {
  std::vector<KeyDef> rows = {
      Key("sync", Type::section,
          "What happens to tokens that exit while others continue, and to their skipped KV."),
      Key("sync.strategy", Type::enumeration,
          "full_depth: nobody exits; batch_sync: exited tokens ride along masked; state_copy: "
          "KV of skipped layers from the exit state (CALM); deferred_fill: skipped KV filled by "
          "the next deep token (FREE); skip_kv / shared_kv: MoR KV strategies; depthwise: "
          "continuous depth-wise batching (recursive models).")
          .allowed({"full_depth", "batch_sync", "state_copy", "deferred_fill", "skip_kv",
                    "shared_kv", "depthwise"})
          .def(std::string("full_depth"))
          .bind(field(&Scenario::sync, &SyncConfig::strategy)),
      Key("sync.rollback_probability", Type::number,
          "Probability that a pending shallow prediction disagrees and is rolled back.")
          .range(0, 1)
          .def(0.0)
          .when("sync.strategy", {"deferred_fill"})
          .bind(field(&Scenario::sync, &SyncConfig::rollback_probability)),
      Key("sync.exited_tokens", Type::enumeration,
          "immediate: a token that leaves the shared block runs the coda and LM head in the "
          "same step; accumulate: tokens that left wait until accumulate_threshold of them (or "
          "all in flight) share one coda + head call, each keeping its sequence's slot in the "
          "block meanwhile; head_queue: the same, but a token that left waits in a head queue "
          "outside the block and its slot goes to another sequence at once (max_running counts "
          "the sequences in the block), so the block stays full; once its head ran, the "
          "sequence joins the back of the waiting queue with its K/V (as MoR's loop re-queues "
          "it) and re-enters the block only when admitted, so the block never holds more than "
          "max_running.")
          .allowed({"immediate", "accumulate", "head_queue"})
          .def(std::string("immediate"))
          .when("sync.strategy", {"depthwise"})
          .bind(field(&Scenario::sync, &SyncConfig::exited_tokens)),
      Key("sync.accumulate_threshold", Type::integer,
          "Tokens waiting for the coda and head that trigger their shared call.")
          .range(1, 1e6)
          .def(std::int64_t{8})
          .when("sync.exited_tokens", {"accumulate", "head_queue"})
          .bind(field(&Scenario::sync, &SyncConfig::accumulate_threshold)),
      Key("sync.head_queue_returns", Type::enumeration,
          "Where a sequence whose head ran rejoins the waiting queue, to be admitted to the "
          "block again by the scheduler's checks. behind_waiting: at the back, behind every "
          "request that arrived by the end of its step (MoR's loop): every queued request is in "
          "flight at once and holds K/V, which a K/V budget sized for max_running sequences "
          "cannot hold (preemptions); ahead_of_waiting: at the front, behind only the sequences "
          "that returned before it, so new requests wait for free slots as under sequence-wise "
          "continuous batching.")
          .allowed({"behind_waiting", "ahead_of_waiting"})
          .def(std::string("behind_waiting"))
          .when("sync.exited_tokens", {"head_queue"})
          .bind(field(&Scenario::sync, &SyncConfig::head_queue_returns)),
      Key("scheduler", Type::section, "How each replica forms batches."),
      Key("scheduler.kind", Type::identifier,
          "Scheduler name: a built-in or one registered by the embedding program.")
          .allowed({"static", "continuous", "chunked_prefill", "shortest_prompt_first"})
          .def(std::string("continuous"))
          .bind(field(&Scenario::scheduler, &SchedulerConfig::kind)),
      Key("scheduler.max_running", Type::integer, "Most sequences in one iteration.")
          .range(1, 1e6)
          .def(std::int64_t{256})
          .bind(field(&Scenario::scheduler, &SchedulerConfig::max_running)),
      Key("scheduler.max_batched_tokens", Type::integer,
          "Most tokens in one iteration (the chunked-prefill budget).")
          .range(1, 1e8)
          .def(std::int64_t{8192})
          .bind(field(&Scenario::scheduler, &SchedulerConfig::max_batched_tokens)),
      Key("scheduler.block_size", Type::integer, "Tokens per paged KV block.")
          .range(1, 4096)
          .def(std::int64_t{16})
          .bind(field(&Scenario::scheduler, &SchedulerConfig::block_size)),
      Key("scheduler.kv_blocks", Type::integer,
          "KV blocks per replica; 0 = what device memory holds after weights and reserve.")
          .range(0, 1e12)
          .def(std::int64_t{0})
          .bind(field(&Scenario::scheduler, &SchedulerConfig::kv_blocks)),
      Key("scheduler.memory_reserve_fraction", Type::number,
          "Fraction of device memory kept free (activations, fragmentation).")
          .range(0, 1)
          .open_max()
          .def(0.1)
          .bind(field(&Scenario::scheduler, &SchedulerConfig::memory_reserve_fraction)),
      Key("scheduler.preemption", Type::enumeration,
          "When KV runs out: recompute the victim's KV when it is readmitted, or swap it to "
          "host memory over hardware.host_link_bandwidth_gbps and back (docs/simulator.md, "
          "\"Swap\"; the engine swaps between its pool and a host tier of blocks).")
          .allowed({"recompute", "swap"})
          .def(std::string("recompute"))
          .bind(field(&Scenario::scheduler, &SchedulerConfig::preemption)),
      Key("scheduler.role", Type::enumeration,
          "mixed: the replica runs prompts and decoding; prefill: prompts only, each request's "
          "K/V then travels to a decode replica over the prefill replica's network link "
          "(hardware.node_link_bandwidth_gbps, shared by its concurrent transfers) and its first "
          "token arrives with it; decode: decoding only. Set per group (cluster.groups) for "
          "disaggregated serving (docs/simulator.md, \"Disaggregation\").")
          .allowed({"mixed", "prefill", "decode"})
          .def(std::string("mixed"))
          .bind(field(&Scenario::scheduler, &SchedulerConfig::role)),
      Key("scheduler.prefix_caching", Type::boolean,
          "Reuse the K/V of prompt blocks another request computed, as vLLM's automatic prefix "
          "caching does: blocks named by hashes chained from the prompt's start (the trace's, "
          "e.g. Mooncake's hash_ids), shared by reference, the unreferenced ones evicted least "
          "recently released first (docs/simulator.md, \"Prefix caching\"). Requests without "
          "hashes never hit.")
          .def(false)
          .bind(field(&Scenario::scheduler, &SchedulerConfig::prefix_caching)),
      Key("scheduler.watermark_fraction", Type::number,
          "Fraction of K/V blocks kept free when admitting new sequences (vLLM's watermark), so "
          "running sequences can grow without preemption.")
          .range(0, 1)
          .open_max()
          .def(0.01)
          .bind(field(&Scenario::scheduler, &SchedulerConfig::watermark_fraction)),
      Key("scheduler.reserve_prompt_blocks", Type::boolean,
          "chunked_prefill: admit a prompt only when the blocks of its whole prompt are free "
          "beyond those the prompts still prefilling will take, so partial prefills never "
          "preempt each other.")
          .def(false)
          .bind(field(&Scenario::scheduler, &SchedulerConfig::reserve_prompt_blocks)),
      Key("scheduler.unservable", Type::enumeration,
          "A request the replica can never serve (prompt over max_batched_tokens without "
          "chunked prefill, longer than model.max_context, or more K/V than the replica holds): "
          "error stops the run naming it; reject drops it at arrival, as vLLM does, and counts "
          "it in the summary's rejected_requests.")
          .allowed({"error", "reject"})
          .def(std::string("error"))
          .bind(field(&Scenario::scheduler, &SchedulerConfig::unservable)),
  };
  for (KeyDef& row : cluster_keys())
    rows.push_back(std::move(row));
  const std::vector<KeyDef> slo = {
      Key("slo", Type::section,
          "Service-level objectives for goodput; null = no objective on that metric."),
      Key("slo.ttft_ms", Type::number, "Time to first token, in milliseconds.")
          .range(0, std::nullopt)
          .open_min()
          .nullable()
          .def(2000.0)
          .bind(field(&Scenario::slo, &SloConfig::ttft_ms)),
      Key("slo.tpot_ms", Type::number, "Time per output token after the first, in milliseconds.")
          .range(0, std::nullopt)
          .open_min()
          .nullable()
          .def(200.0)
          .bind(field(&Scenario::slo, &SloConfig::tpot_ms)),
      Key("slo.e2e_ms", Type::number, "End-to-end latency, in milliseconds.")
          .range(0, std::nullopt)
          .open_min()
          .nullable()
          .def(Value{})
          .bind(field(&Scenario::slo, &SloConfig::e2e_ms)),
  };
  rows.insert(rows.end(), slo.begin(), slo.end());
  return rows;
}

}  // namespace exitsim::scenario::detail
