#include "exitsim/analysis/sweep.hpp"

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "exitsim/analysis/run_digest.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/version.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::analysis {

std::vector<SweepPoint> sweep_points(const std::vector<scenario::SweepAxis>& axes) {
  std::size_t total = 1;
  for (const scenario::SweepAxis& axis : axes)
    total *= axis.values.size();
  std::vector<SweepPoint> points;
  points.reserve(total);
  for (std::size_t index = 0; index < total; ++index) {
    SweepPoint p;
    p.index = index;
    // Mixed-radix digits of the index, the last axis least significant.
    std::size_t rest = index;
    p.overrides.resize(axes.size());
    for (std::size_t a = axes.size(); a-- > 0;) {
      const std::size_t n = axes[a].values.size();
      p.overrides[a] = axes[a].key + "=" + axes[a].values[rest % n];
      rest /= n;
    }
    for (const std::string& o : p.overrides)
      p.key += (p.key.empty() ? "" : "; ") + o;
    points.push_back(std::move(p));
  }
  return points;
}

Shard parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  Shard shard;
  const auto number = [&](std::string_view part, std::size_t& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc{} && end == part.data() + part.size() && !part.empty();
  };
  const std::string_view all(text);
  if (slash == std::string::npos || !number(all.substr(0, slash), shard.index) ||
      !number(all.substr(slash + 1), shard.count) || shard.count == 0 ||
      shard.index >= shard.count) {
    throw InputError({"", 0, 0, "--shard"},
                     expected_found("i/N with 0 <= i < N (e.g. 0/4)", "\"" + text + "\""));
  }
  return shard;
}

RunMetrics run_metrics_of(const sim::MetricsSummary& s) {
  RunMetrics m;
  m.throughput_tokens_per_s = s.throughput_tokens_per_s;
  m.goodput_requests_per_s = s.goodput_requests_per_s;
  m.slo_attainment = s.slo_attainment;
  m.ttft_p50_ms = s.ttft.p50;
  m.ttft_p99_ms = s.ttft.p99;
  m.tpot_p50_ms = s.tpot.p50;
  m.tpot_p99_ms = s.tpot.p99;
  m.e2e_p50_ms = s.e2e.p50;
  m.e2e_p99_ms = s.e2e.p99;
  m.mean_exit_depth = s.depth.mean_exit_depth;
  m.summary_json = sim::summary_to_json(s);
  return m;
}

namespace {

scenario::Scenario load_base(const SweepOptions& options) {
  return scenario::ScenarioSource::file_or_default(options.scenario_file).load(options.overrides);
}

scenario::Scenario load_point(const SweepOptions& options, const scenario::ScenarioSource& source,
                              const SweepPoint& point) {
  std::vector<std::string> overrides = options.overrides;
  overrides.insert(overrides.end(), point.overrides.begin(), point.overrides.end());
  overrides.emplace_back("sweep=[]");  // the point is one run
  return source.load(overrides);
}

}  // namespace

RunRecord run_sweep_point(const SweepOptions& options, const SweepPoint& point) {
  std::optional<scenario::Scenario> loaded;
  if (!point.scenario) {
    loaded.emplace(load_point(
        options, scenario::ScenarioSource::file_or_default(options.scenario_file), point));
  }
  const scenario::Scenario& s = point.scenario ? *point.scenario : *loaded;
  const auto workload = sim::make_workload(s.workload, s.seed);
  const sim::SimulationResult result = sim::simulate(sim::simulation_config_from(s, ""), *workload);
  RunRecord record{point, scenario::render_resolved_yaml(s), run_metrics_of(result.summary)};
  record.point.scenario.reset();  // the record keeps the rendered text, not the scenario
  if (record.point.digest.empty()) {
    FileHashes hashes;
    record.point.digest = run_digest(s, hashes);
  }
  return record;
}

PendingPoints pending_points(const SweepOptions& options, const SweepDatabase& database) {
  // The file is parsed once; each point resolves it with its overrides.
  const auto source = scenario::ScenarioSource::file_or_default(options.scenario_file);
  const scenario::Scenario base = source.load(options.overrides);
  const std::map<std::string, std::string> done = database.completed_digests();
  FileHashes hashes;
  PendingPoints out;
  for (SweepPoint& p : sweep_points(base.sweep)) {
    if (!options.shard.contains(p.index))
      continue;
    auto resolved = std::make_shared<const scenario::Scenario>(load_point(options, source, p));
    p.digest = run_digest(*resolved, hashes);
    const auto stored = done.find(p.key);
    if (stored != done.end() && stored->second == p.digest) {
      ++out.skipped;
      continue;
    }
    if (stored != done.end())
      ++out.stale;
    p.scenario = std::move(resolved);
    out.todo.push_back(std::move(p));
  }
  return out;
}

void record_sweep_provenance(const SweepOptions& options, SweepDatabase& database) {
  FileHashes hashes;
  database.record_provenance({"exitsim sweep", run_digest(load_base(options), hashes),
                              fmt::format("{}/{}", options.shard.index, options.shard.count),
                              std::string(version()), std::string(commit())});
}

std::string run_record_to_json(const RunRecord& run) {
  const RunMetrics& m = run.metrics;
  const std::vector<double> metrics = {m.throughput_tokens_per_s,
                                       m.goodput_requests_per_s,
                                       m.slo_attainment,
                                       m.ttft_p50_ms,
                                       m.ttft_p99_ms,
                                       m.tpot_p50_ms,
                                       m.tpot_p99_ms,
                                       m.e2e_p50_ms,
                                       m.e2e_p99_ms,
                                       m.mean_exit_depth};
  return nlohmann::json{{"index", run.point.index},      {"overrides", run.point.overrides},
                        {"key", run.point.key},          {"digest", run.point.digest},
                        {"scenario", run.scenario_yaml}, {"metrics", metrics},
                        {"summary", m.summary_json}}
      .dump();
}

RunRecord run_record_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  RunRecord r;
  r.point.index = j.at("index").get<std::size_t>();
  r.point.overrides = j.at("overrides").get<std::vector<std::string>>();
  r.point.key = j.at("key").get<std::string>();
  r.point.digest = j.at("digest").get<std::string>();
  r.scenario_yaml = j.at("scenario").get<std::string>();
  const auto v = j.at("metrics").get<std::vector<double>>();
  RunMetrics& m = r.metrics;
  double* fields[] = {&m.throughput_tokens_per_s,
                      &m.goodput_requests_per_s,
                      &m.slo_attainment,
                      &m.ttft_p50_ms,
                      &m.ttft_p99_ms,
                      &m.tpot_p50_ms,
                      &m.tpot_p99_ms,
                      &m.e2e_p50_ms,
                      &m.e2e_p99_ms,
                      &m.mean_exit_depth};
  for (std::size_t i = 0; i < std::size(fields) && i < v.size(); ++i)
    *fields[i] = v[i];
  m.summary_json = j.at("summary").get<std::string>();
  return r;
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr)
      return true;
  }
  return false;
}

std::size_t run_sweep(const SweepOptions& options) {
  load_base(options);  // a scenario error leaves no database behind
  SweepDatabase database(options.database);
  record_sweep_provenance(options, database);
  PendingPoints pending = pending_points(options, database);
  std::vector<SweepPoint>& todo = pending.todo;
  SweepProgress progress;
  progress.skipped = pending.skipped;
  progress.stale = pending.stale;
  progress.total = todo.size();
  const auto start = std::chrono::steady_clock::now();
  const auto report = [&] {
    progress.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.progress)
      options.progress(progress);
  };
  report();

  // Workers run points; this thread alone writes the database (one SQLite connection).
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<RunRecord> finished;
  std::exception_ptr failure;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::size_t running =
      std::max(1U, std::min<unsigned>(
                       options.jobs, static_cast<unsigned>(std::max<std::size_t>(todo.size(), 1))));
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < running; ++w) {
    workers.emplace_back([&] {
      for (;;) {
        const std::size_t i = next.fetch_add(1);
        if (i >= todo.size() || stop.load())
          break;
        try {
          RunRecord record = run_sweep_point(options, todo[i]);
          todo[i].scenario.reset();  // run: its scenario is not needed again
          const std::lock_guard lock(mutex);
          finished.push_back(std::move(record));
        } catch (const InputError& e) {
          const std::lock_guard lock(mutex);
          if (!failure) {
            failure = std::make_exception_ptr(
                InputError(e.where(), fmt::format("at sweep point {} ({}): {}", todo[i].index,
                                                  todo[i].key, e.message())));
          }
          stop = true;
        } catch (...) {
          const std::lock_guard lock(mutex);
          if (!failure)
            failure = std::current_exception();
          stop = true;
        }
        ready.notify_one();
      }
      const std::lock_guard lock(mutex);
      --running;
      ready.notify_one();
    });
  }
  std::size_t made = 0;
  // Done when every worker has stopped, or when every point has come back: under a loaded
  // parallel ctest a worker twice ended without being counted out after delivering its last
  // point (not reproduced in isolation; see the notes), and waiting on it hung.
  for (;;) {
    std::unique_lock lock(mutex);
    ready.wait(lock, [&] { return !finished.empty() || running == 0 || made == todo.size(); });
    std::deque<RunRecord> batch;
    batch.swap(finished);
    const bool all_stopped = running == 0 || made + batch.size() == todo.size();
    lock.unlock();
    for (const RunRecord& record : batch) {
      database.record(record);
      ++made;
      ++progress.done;
      report();
    }
    if (all_stopped && batch.empty())
      break;
  }
  for (std::thread& t : workers)
    t.join();
  if (failure)
    std::rethrow_exception(failure);
  return made;
}

}  // namespace exitsim::analysis
