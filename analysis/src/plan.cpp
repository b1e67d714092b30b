#include "exitsim/analysis/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "exitsim/analysis/steady_state.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::analysis {

namespace {

// The scenario of one candidate (the sweep point's overrides, then `extra`), without its sweep.
scenario::Scenario load_point(const PlanOptions& options, const scenario::ScenarioSource& source,
                              const SweepPoint& point, const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = options.overrides;
  overrides.insert(overrides.end(), point.overrides.begin(), point.overrides.end());
  overrides.push_back("sweep=[]");
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return source.load(overrides);
}

class Planner {
 public:
  Planner(const PlanOptions& options, const scenario::ScenarioSource& source,
          const scenario::Scenario& base)
      : options_(options), source_(source), trace_(base.workload.source == "trace") {
    load_key_ = trace_ ? "workload.trace.rate_scale" : "workload.arrivals.rate";
    start_load_ = trace_ ? base.workload.trace.rate_scale : base.workload.arrivals.rate;
    requests_ = static_cast<std::size_t>(std::max<std::int64_t>(base.workload.requests, 0));
  }

  CandidatePlan plan(const SweepPoint& point) const {
    CandidatePlan c;
    c.point = point;
    c.load_key = load_key_;
    const scenario::Scenario s = load_point(options_, source_, point, {});
    find_pools(s, c);
    c.hardware = s.hardware.spec.name;
    c.tensor = s.parallel.tensor;
    c.pipeline = s.parallel.pipeline;
    c.gpus_per_replica = s.parallel.gpus();
    c.gpu_hour_price = price_of(c.hardware);
    if (!c.disaggregated)
      measure_saturation(c);
    find_max_load(c);
    const std::optional<double> target = trace_ ? options_.trace_scale : options_.target_rate;
    // A replica that misses the SLOs even almost idle misses them at any share of the target:
    // more replicas cannot help.
    if (target && c.max_load_per_replica > 0) {
      if (c.disaggregated)
        size_pools(c, *target);
      else
        find_replicas(c, *target);
    }
    c.cost_per_million_tokens_at_capacity = per_million_tokens(
        c.gpus_per_replica * c.gpu_hour_price, c.steady_at_max_rate.output_tokens_per_s);
    return c;
  }

  // The price of one GPU-hour of `hardware` (checked in plan_capacity: every candidate's is
  // there when prices are given by name).
  double price_of(const std::string& hardware) const {
    const auto it = options_.gpu_hour_prices.find(hardware);
    return it != options_.gpu_hour_prices.end() ? it->second : options_.gpu_hour_price;
  }

 private:
  struct Outcome {
    bool meets = false;
    RunMetrics metrics;
    SteadyState steady;
    sim::SloTargets slo;
  };

  struct Finished {
    sim::SimulationResult result;
    sim::SloTargets slo;
    std::vector<sim::RequestRecord> requests;
  };

  Finished simulate(const SweepPoint& point, const std::vector<std::string>& extra,
                    CandidatePlan& c) const {
    const scenario::Scenario s = load_point(options_, source_, point, extra);
    const auto workload = sim::make_workload(s.workload, s.seed);
    sim::SimulationConfig config = sim::simulation_config_from(s, "");
    Finished out;
    config.request_observer = [&](const sim::RequestRecord& r) { out.requests.push_back(r); };
    out.result = sim::simulate(config, *workload);
    out.slo = config.slo;
    ++c.simulations;
    return out;
  }

  // A disaggregated candidate's two groups: their `set` overrides, to be given counts.
  struct Pools {
    std::vector<std::string> prefill;
    std::vector<std::string> decode;
  };

  static std::string group_of(int count, const std::vector<std::string>& set) {
    std::string items;
    for (const std::string& o : set) {
      std::string quoted;
      for (const char ch : o)
        quoted += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
      items += (items.empty() ? "\"" : ", \"") + quoted + "\"";
    }
    return fmt::format("{{count: {}, set: [{}]}}", count, items);
  }

  // The cluster override for `replicas` (prefill + decode replicas when disaggregated).
  std::string cluster_of(const CandidatePlan& c, int prefill, int decode) const {
    if (!c.disaggregated)
      return fmt::format("cluster.replicas={}", prefill);
    const std::lock_guard lock(pools_mutex_);
    const Pools& pools = pools_.at(c.point.index);
    return fmt::format("cluster.groups=[{}, {}]", group_of(prefill, pools.prefill),
                       group_of(decode, pools.decode));
  }

  // Marks a candidate with prefill and decode groups disaggregated, keeping their overrides;
  // refuses other mixes of roles, which the plan cannot size.
  void find_pools(const scenario::Scenario& s, CandidatePlan& c) const {
    Pools pools;
    int prefill = 0;
    int decode = 0;
    int mixed = 0;
    for (const scenario::ReplicaGroup& g : s.replica_groups) {
      if (g.scheduler.role == "prefill") {
        pools.prefill = g.overrides;
        ++prefill;
      } else if (g.scheduler.role == "decode") {
        pools.decode = g.overrides;
        ++decode;
      } else {
        ++mixed;
      }
    }
    if (prefill == 0 && decode == 0)
      return;
    if (prefill != 1 || decode != 1 || mixed != 0) {
      throw InputError({options_.scenario_file, 0, 0, "scheduler.role"},
                       expected_found("one prefill group and one decode group for exitsim plan "
                                      "to size the two pools",
                                      fmt::format("{} prefill, {} decode and {} mixed groups",
                                                  prefill, decode, mixed)));
    }
    c.disaggregated = true;
    const std::lock_guard lock(pools_mutex_);
    pools_[c.point.index] = std::move(pools);
  }

  Outcome run(const SweepPoint& point, double load, int replicas, CandidatePlan& c,
              int decode_replicas = 1) const {
    // At or above saturation no queue is stable: a finite run that looks fine has not run long
    // enough to show it.
    if (c.saturation_load > 0 && load >= c.saturation_load * replicas)
      return {};
    const Finished f = simulate(
        point, {fmt::format("{}={}", load_key_, load), cluster_of(c, replicas, decode_replicas)},
        c);
    // Sustainable: the SLOs held over the steady window and the queue did not keep growing.
    const SteadyState steady = steady_state(f.requests, f.slo);
    return {steady.attainment >= options_.min_attainment && !steady.queue_growing,
            run_metrics_of(f.result.summary), steady, f.slo};
  }

  // One replica with every request waiting from the start: its completion rate in the middle of
  // the run is the most it can serve of this mix.
  void measure_saturation(CandidatePlan& c) const {
    constexpr double k_backlog_rate = 1e6;  // requests/s, or the trace's largest rate scale
    std::vector<std::string> extra = {fmt::format("{}={}", load_key_, k_backlog_rate),
                                      "cluster.replicas=1"};
    if (!trace_) {
      extra.emplace_back("workload.arrivals.process=poisson");
      extra.push_back(fmt::format("workload.requests={}",
                                  std::max(requests_, options_.saturation_min_requests)));
    }
    const Finished f = simulate(c.point, extra, c);
    c.saturation_requests = f.requests.size();
    const double saturation = saturation_requests_per_s(f.requests);
    if (saturation <= 0)
      return;
    // In the load's unit: requests/s for synthetic arrivals; for a trace, the rate scale at
    // which the trace asks for that many requests per second.
    TimeNs first = std::numeric_limits<TimeNs>::max(), last = 0;
    for (const sim::RequestRecord& r : f.requests) {
      first = std::min(first, r.arrival);
      last = std::max(last, r.arrival);
    }
    const double offered = last > first ? static_cast<double>(f.requests.size() - 1) *
                                              static_cast<double>(k_ns_per_s) /
                                              static_cast<double>(last - first)
                                        : 0;
    c.saturation_load = !trace_       ? saturation
                        : offered > 0 ? k_backlog_rate * saturation / offered
                                      : 0;
  }

  // Vidur-Search's bisection: bracket the capacity by doubling (or halving), then halve the
  // bracket.
  void find_max_load(CandidatePlan& c) const {
    constexpr int k_bracket_steps = 12;
    double ok = 0;
    double fail = 0;
    Outcome first = run(c.point, start_load_, 1, c);
    if (first.meets) {
      ok = start_load_;
      c.at_max_rate = first.metrics;
      c.steady_at_max_rate = first.steady;
      for (int i = 0; i < k_bracket_steps; ++i) {
        const double load = ok * 2;
        Outcome o = run(c.point, load, 1, c);
        if (!o.meets) {
          fail = load;
          break;
        }
        ok = load;
        c.at_max_rate = o.metrics;
        c.steady_at_max_rate = o.steady;
      }
      if (fail == 0) {  // never failed: the highest load tried is only a lower bound
        c.max_load_per_replica = ok;
        c.max_load_is_lower_bound = true;
        return;
      }
    } else {
      fail = start_load_;
      for (int i = 0; i < k_bracket_steps && ok == 0; ++i) {
        const double load = fail / 2;
        Outcome o = run(c.point, load, 1, c);
        if (o.meets) {
          ok = load;
          c.at_max_rate = o.metrics;
          c.steady_at_max_rate = o.steady;
        } else {
          fail = load;
        }
      }
      if (ok == 0)
        return;
    }
    for (int i = 0; i < options_.bisection_steps; ++i) {
      const double load = (ok + fail) / 2;
      Outcome o = run(c.point, load, 1, c);
      if (o.meets) {
        ok = load;
        c.at_max_rate = o.metrics;
        c.steady_at_max_rate = o.steady;
      } else {
        fail = load;
      }
    }
    c.max_load_per_replica = ok;
  }

  // The fewest replicas meeting the SLOs at the target load: from the capacity's estimate, up
  // while it misses, down while one fewer still meets.
  void find_replicas(CandidatePlan& c, double target) const {
    int n = c.max_load_per_replica > 0
                ? std::max(1, static_cast<int>(std::ceil(target / c.max_load_per_replica)))
                : 1;
    n = std::min(n, options_.max_replicas);
    Outcome o = run(c.point, target, n, c);
    while (!o.meets && n < options_.max_replicas) {
      n = std::min(options_.max_replicas, n + std::max(1, n / 4));
      o = run(c.point, target, n, c);
    }
    if (!o.meets)
      return;
    while (n > 1) {
      Outcome fewer = run(c.point, target, n - 1, c);
      if (!fewer.meets)
        break;
      --n;
      o = fewer;
    }
    c.replicas = n;
    c.gpus = n * c.gpus_per_replica;
    c.at_target = o.metrics;
    c.cost_per_hour = c.gpus * c.gpu_hour_price;
    c.cost_per_million_tokens = per_million_tokens(c.cost_per_hour, o.steady.output_tokens_per_s);
  }

  static double per_million_tokens(double cost_per_hour, double tokens_per_s) {
    return tokens_per_s > 0 ? cost_per_hour / (tokens_per_s * 3600 / 1e6) : 0;
  }

  // The fewest prefill and decode replicas meeting the SLOs at the target: from one of each,
  // add to the pool whose SLO fails (prefill for TTFT, decode for TPOT, both otherwise), then
  // take one away from either while the SLOs still hold.
  void size_pools(CandidatePlan& c, double target) const {
    int p = 1;
    int d = 1;
    Outcome o = run(c.point, target, p, c, d);
    while (!o.meets && p + d < options_.max_replicas) {
      const bool ttft = o.slo.ttft_ms && o.steady.ttft_p99_ms > *o.slo.ttft_ms;
      const bool tpot = o.slo.tpot_ms && o.steady.tpot_p99_ms > *o.slo.tpot_ms;
      p += ttft || !tpot ? std::max(1, p / 4) : 0;
      d += tpot || !ttft ? std::max(1, d / 4) : 0;
      o = run(c.point, target, p, c, d);
    }
    if (!o.meets)
      return;
    for (bool fewer = true; fewer;) {
      fewer = false;
      if (p > 1) {
        if (Outcome less = run(c.point, target, p - 1, c, d); less.meets) {
          --p;
          o = less;
          fewer = true;
        }
      }
      if (d > 1) {
        if (Outcome less = run(c.point, target, p, c, d - 1); less.meets) {
          --d;
          o = less;
          fewer = true;
        }
      }
    }
    c.prefill_replicas = p;
    c.decode_replicas = d;
    c.replicas = p + d;
    c.gpus = c.replicas * c.gpus_per_replica;
    c.at_target = o.metrics;
    c.cost_per_hour = c.gpus * c.gpu_hour_price;
    c.cost_per_million_tokens = per_million_tokens(c.cost_per_hour, o.steady.output_tokens_per_s);
  }

  const PlanOptions& options_;
  const scenario::ScenarioSource& source_;  // parsed once; every candidate and load resolves it
  bool trace_;
  mutable std::mutex pools_mutex_;
  mutable std::map<std::size_t, Pools> pools_;  // by sweep point index
  std::string load_key_;
  double start_load_ = 1;
  std::size_t requests_ = 0;
};

std::string recommend(const Plan& plan, const PlanOptions& options, bool has_target,
                      std::optional<std::size_t>& chosen) {
  chosen.reset();
  for (std::size_t i = 0; i < plan.candidates.size(); ++i) {
    const CandidatePlan& c = plan.candidates[i];
    if (has_target ? c.replicas == 0 : c.max_load_per_replica <= 0)
      continue;
    if (!chosen) {
      chosen = i;
      continue;
    }
    const CandidatePlan& best = plan.candidates[*chosen];
    // Fewest GPUs, then cheapest, then the most capacity per GPU.
    const auto per_gpu = [](const CandidatePlan& x) {
      return x.max_load_per_replica / x.gpus_per_replica;
    };
    const bool better = has_target ? std::tuple(c.gpus, c.cost_per_hour, -per_gpu(c)) <
                                         std::tuple(best.gpus, best.cost_per_hour, -per_gpu(best))
                                   : per_gpu(c) > per_gpu(best);
    if (better)
      chosen = i;
  }
  if (!chosen) {
    return has_target ? fmt::format(
                            "no candidate meets the SLOs at the target with up to {} "
                            "replicas: relax the SLOs or add candidates",
                            options.max_replicas)
                      : "no candidate meets the SLOs even at the lowest load tried: relax the SLOs";
  }
  const CandidatePlan& c = plan.candidates[*chosen];
  const std::string what = c.point.key.empty() ? "the scenario as given" : c.point.key;
  const char* at_least = c.max_load_is_lower_bound ? ">= " : "";
  std::string gpus =
      c.gpus_per_replica == 1 ? c.hardware : fmt::format("{} x {}", c.gpus_per_replica, c.hardware);
  if (c.pipeline > 1)
    gpus += fmt::format(" (TP {}, PP {})", c.tensor, c.pipeline);
  if (has_target) {
    const std::string replicas =
        c.disaggregated
            ? fmt::format("{} prefill + {} decode replicas", c.prefill_replicas, c.decode_replicas)
            : fmt::format("{} replica{}", c.replicas, c.replicas == 1 ? "" : "s");
    return fmt::format(
        "{}: {} GPU{} ({} of {}){} ({} = {}{:.3g} per {}{})", what, c.gpus, c.gpus == 1 ? "" : "s",
        replicas, gpus,
        c.gpu_hour_price > 0 ? fmt::format(", {:.2f} per hour, {:.3f} per million tokens",
                                           c.cost_per_hour, c.cost_per_million_tokens)
                             : "",
        c.load_key, at_least, c.max_load_per_replica,
        c.disaggregated ? "prefill and decode replica pair" : "replica",
        c.max_load_is_lower_bound ? ": the SLOs held at every load tried" : " at most");
  }
  return fmt::format(
      "{}: {} = {}{:.3g} per replica of {} within the SLOs{}", what, c.load_key, at_least,
      c.max_load_per_replica, gpus,
      c.max_load_is_lower_bound ? " (a lower bound: the SLOs held at every load tried)" : "");
}

}  // namespace

Plan plan_capacity(const PlanOptions& options) {
  const auto source = scenario::ScenarioSource::file_or_default(options.scenario_file);
  const scenario::Scenario base = source.load(options.overrides);
  if (!base.slo.ttft_ms && !base.slo.tpot_ms && !base.slo.e2e_ms) {
    throw InputError({options.scenario_file, 0, 0, "slo"},
                     expected_found("at least one of slo.ttft_ms, slo.tpot_ms, slo.e2e_ms "
                                    "(capacity is the load that still meets them)",
                                    "none"));
  }
  const bool trace = base.workload.source == "trace";
  if (trace && options.target_rate) {
    throw InputError({"", 0, 0, "--target-rate"},
                     "a replayed trace sets its own rate: give --trace-scale K instead");
  }
  if (!trace && options.trace_scale) {
    throw InputError({"", 0, 0, "--trace-scale"},
                     "the workload is synthetic: give --target-rate R instead");
  }
  for (const auto& [name, value] : {std::pair{"--target-rate", options.target_rate},
                                    std::pair{"--trace-scale", options.trace_scale}}) {
    if (value && !(*value > 0 && std::isfinite(*value)))
      throw InputError({"", 0, 0, name}, expected_found("a number > 0", fmt::format("{}", *value)));
  }
  if (!(options.min_attainment > 0 && options.min_attainment <= 1)) {
    throw InputError(
        {"", 0, 0, "--attainment"},
        expected_found("a fraction in (0, 1]", fmt::format("{}", options.min_attainment)));
  }

  for (const auto& [name, price] : options.gpu_hour_prices) {
    if (!(price >= 0 && std::isfinite(price))) {
      throw InputError({"", 0, 0, "--gpu-hour-prices"},
                       expected_found("a price >= 0", fmt::format("{}={}", name, price)));
    }
  }
  const Planner planner(options, source, base);
  const std::vector<SweepPoint> points = sweep_points(base.sweep);
  // Prices by accelerator must cover every candidate's, or its cost would silently be 0.
  if (!options.gpu_hour_prices.empty()) {
    for (const SweepPoint& point : points) {
      const std::string hardware = load_point(options, source, point, {}).hardware.spec.name;
      if (!options.gpu_hour_prices.contains(hardware)) {
        std::string given;
        for (const auto& [name, price] : options.gpu_hour_prices)
          given += (given.empty() ? "" : ", ") + name;
        throw InputError({"", 0, 0, "--gpu-hour-prices"},
                         expected_found(fmt::format("a price for {} (candidate {})", hardware,
                                                    point.key.empty() ? "(scenario)" : point.key),
                                        "prices for " + given + " only"));
      }
    }
  }
  Plan plan;
  plan.candidates.resize(points.size());
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::size_t planned = 0;  // under the mutex
  std::exception_ptr failure;
  // std::jthread joins when destroyed: a thread that cannot be started (the others are then
  // joined on the way out) or an exception here cannot destroy a joinable thread (std::terminate).
  // The loop bound `jobs` is fixed before any worker starts and no worker changes it.
  std::vector<std::jthread> workers;
  const unsigned jobs =
      std::max(1U, std::min<unsigned>(options.jobs, static_cast<unsigned>(points.size())));
  for (unsigned w = 0; w < jobs; ++w) {
    workers.emplace_back([&] {
      for (std::size_t i = next.fetch_add(1); i < points.size(); i = next.fetch_add(1)) {
        try {
          plan.candidates[i] = planner.plan(points[i]);
          const std::lock_guard lock(mutex);
          if (options.progress)
            options.progress(++planned, points.size());
        } catch (...) {
          const std::lock_guard lock(mutex);
          if (!failure)
            failure = std::current_exception();
          next = points.size();
        }
      }
    });
  }
  workers.clear();  // joins them
  if (failure)
    std::rethrow_exception(failure);
  plan.recommendation = recommend(
      plan, options, trace ? options.trace_scale.has_value() : options.target_rate.has_value(),
      plan.recommended);
  return plan;
}

std::string plan_csv(const Plan& plan) {
  std::string out =
      "candidate,load_key,max_load_per_replica,tpot_p99_ms_at_max,ttft_p99_ms_at_max,replicas,"
      "cost_per_hour,cost_per_million_tokens,simulations,recommended,max_load_is_lower_bound,"
      "saturation_load,output_tokens_per_s_at_max,cost_per_million_tokens_at_capacity,"
      "steady_window_too_short,hardware,gpus_per_replica,gpus,gpu_hour_price,tensor,pipeline,"
      "prefill_replicas,decode_replicas\n";
  for (std::size_t i = 0; i < plan.candidates.size(); ++i) {
    const CandidatePlan& c = plan.candidates[i];
    out += fmt::format(
        "\"{}\",{},{:.6g},{:.6g},{:.6g},{},{:.6g},{:.6g},{},{},{},{:.6g},{:.6g},{:.6g},{},{},{},{},"
        "{:.6g},{},{},{},{}\n",
        c.point.key, c.load_key, c.max_load_per_replica, c.steady_at_max_rate.tpot_p99_ms,
        c.steady_at_max_rate.ttft_p99_ms, c.replicas, c.cost_per_hour, c.cost_per_million_tokens,
        c.simulations, plan.recommended == i ? "yes" : "no",
        c.max_load_is_lower_bound ? "yes" : "no", c.saturation_load,
        c.steady_at_max_rate.output_tokens_per_s, c.cost_per_million_tokens_at_capacity,
        c.steady_at_max_rate.window_too_short ? "yes" : "no", c.hardware, c.gpus_per_replica,
        c.gpus, c.gpu_hour_price, c.tensor, c.pipeline, c.prefill_replicas, c.decode_replicas);
  }
  return out;
}

std::string plan_json(const Plan& plan) {
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < plan.candidates.size(); ++i) {
    const CandidatePlan& c = plan.candidates[i];
    list.push_back(
        {{"candidate", c.point.key},
         {"load_key", c.load_key},
         {"max_load_per_replica", c.max_load_per_replica},
         {"max_load_is_lower_bound", c.max_load_is_lower_bound},
         {"tpot_p99_ms_at_max", c.steady_at_max_rate.tpot_p99_ms},
         {"ttft_p99_ms_at_max", c.steady_at_max_rate.ttft_p99_ms},
         {"throughput_at_max", c.at_max_rate.throughput_tokens_per_s},
         {"output_tokens_per_s_at_max", c.steady_at_max_rate.output_tokens_per_s},
         {"steady_window_too_short", c.steady_at_max_rate.window_too_short},
         {"queue_trend_t_at_max", std::isfinite(c.steady_at_max_rate.queue_trend_t)
                                      ? nlohmann::json(c.steady_at_max_rate.queue_trend_t)
                                      : nlohmann::json(nullptr)},
         {"saturation_load", c.saturation_load},
         {"saturation_requests", c.saturation_requests},
         {"replicas", c.replicas},
         {"hardware", c.hardware},
         {"disaggregated", c.disaggregated},
         {"prefill_replicas", c.prefill_replicas},
         {"decode_replicas", c.decode_replicas},
         {"tensor", c.tensor},
         {"pipeline", c.pipeline},
         {"gpus_per_replica", c.gpus_per_replica},
         {"gpus", c.gpus},
         {"gpu_hour_price", c.gpu_hour_price},
         {"cost_per_hour", c.cost_per_hour},
         {"cost_per_million_tokens", c.cost_per_million_tokens},
         {"cost_per_million_tokens_at_capacity", c.cost_per_million_tokens_at_capacity},
         {"simulations", c.simulations},
         {"recommended", plan.recommended == i}});
  }
  return nlohmann::json{{"format", "exitsim-plan v1"},
                        {"candidates", list},
                        {"recommendation", plan.recommendation}}
             .dump(2) +
         "\n";
}

}  // namespace exitsim::analysis
