#include "exitsim/analysis/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
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
  for (const RunMetricColumn& column : k_run_metric_columns)
    m.*column.member = column.of(s);
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
  RunRecord record{point, scenario::render_resolved_yaml(s), run_setting_of(s),
                   run_metrics_of(result.summary)};
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

namespace {

// A metric as JSON: NaN (a percentile of no requests) as null, which JSON has for it.
nlohmann::json number_or_null(double value) {
  return std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value);
}

double number_or_nan(const nlohmann::json& value) {
  return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
}

nlohmann::json setting_to_json(const RunSetting& s) {
  return {{"policy", s.policy},
          {"threshold", s.threshold ? nlohmann::json(*s.threshold) : nlohmann::json(nullptr)},
          {"measure", s.measure},
          {"capacities", s.capacities},
          {"strategy", s.strategy},
          {"max_running", s.max_running}};
}

RunSetting setting_from_json(const nlohmann::json& j) {
  RunSetting s;
  s.policy = j.at("policy").get<std::string>();
  if (!j.at("threshold").is_null())
    s.threshold = j.at("threshold").get<double>();
  s.measure = j.at("measure").get<std::string>();
  s.capacities = j.at("capacities").get<std::vector<double>>();
  s.strategy = j.at("strategy").get<std::string>();
  s.max_running = j.at("max_running").get<double>();
  return s;
}

}  // namespace

std::string run_record_to_json(const RunRecord& run) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const RunMetricColumn& column : k_run_metric_columns)
    metrics[std::string(column.name)] = number_or_null(run.metrics.*column.member);
  return nlohmann::json{{"index", run.point.index},
                        {"overrides", run.point.overrides},
                        {"key", run.point.key},
                        {"digest", run.point.digest},
                        {"scenario", run.scenario_yaml},
                        {"setting", setting_to_json(run.setting)},
                        {"metrics", metrics},
                        {"summary", run.metrics.summary_json}}
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
  r.setting = setting_from_json(j.at("setting"));
  const nlohmann::json& metrics = j.at("metrics");
  for (const RunMetricColumn& column : k_run_metric_columns)
    r.metrics.*column.member = number_or_nan(metrics.at(std::string(column.name)));
  r.metrics.summary_json = j.at("summary").get<std::string>();
  return r;
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr)
      return true;
  }
  return false;
}

namespace {

// What the workers hand to the writer (the calling thread, which alone holds the database's one
// SQLite connection): finished runs, the first failure, and how many workers are still running.
//
// Why it is shaped this way: the first version counted workers out in a `running` variable that
// was also the bound of the loop that started them (`for (w = 0; w < running; ++w)`). Under load,
// the first worker could run its point, fail, see `stop` and count itself out (running 2 -> 1)
// before the loop tested `w < running` again, so the second worker was never started, `running`
// stayed 1 for ever and the writer waited for a worker that did not exist (gdb: running = 1,
// next = 2, stop set, 0 of 4 runs made). Here the number of workers is fixed before any starts,
// each worker's exit is counted by a scope guard (whatever ends it), and the writer is done when
// that count reaches the fixed number and no run is waiting.
class RunQueue {
 public:
  explicit RunQueue(std::size_t workers) : workers_left_(workers) {}

  void push(RunRecord run) {
    {
      const std::lock_guard lock(mutex_);
      runs_.push_back(std::move(run));
    }
    changed_.notify_all();
  }
  // The first failure is the one reported; later ones are consequences or repeats.
  void fail(std::exception_ptr failure) {
    {
      const std::lock_guard lock(mutex_);
      if (!failure_)
        failure_ = std::move(failure);
    }
    changed_.notify_all();
  }
  void worker_exited() {
    {
      const std::lock_guard lock(mutex_);
      --workers_left_;
    }
    changed_.notify_all();
  }
  // The runs that came back since the last call, waiting for one when there is none; empty only
  // when every worker has exited and every run has been taken.
  std::deque<RunRecord> take() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !runs_.empty() || workers_left_ == 0; });
    std::deque<RunRecord> batch;
    batch.swap(runs_);
    return batch;
  }
  std::exception_ptr failure() const {
    const std::lock_guard lock(mutex_);
    return failure_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<RunRecord> runs_;
  std::exception_ptr failure_;
  std::size_t workers_left_;
};

// Counts its worker out of the queue when the worker's function ends, however it ends.
class ExitSignal {
 public:
  explicit ExitSignal(RunQueue& queue) : queue_(queue) {}
  ~ExitSignal() { queue_.worker_exited(); }
  ExitSignal(const ExitSignal&) = delete;
  ExitSignal& operator=(const ExitSignal&) = delete;

 private:
  RunQueue& queue_;
};

// Threads that share one stop request and are joined when the group is destroyed, however the
// scope is left: an exception from the writer (a database that cannot be written) stops and
// joins them instead of destroying joinable threads (std::terminate).
class WorkerGroup {
 public:
  WorkerGroup() = default;
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;
  ~WorkerGroup() { join(); }

  template <typename Work>
  void start(Work work) {
    threads_.emplace_back([this, work = std::move(work)] { work(stop_.get_token()); });
  }
  void request_stop() { stop_.request_stop(); }
  void join() {
    request_stop();
    threads_.clear();  // std::jthread joins when destroyed
  }

 private:
  std::stop_source stop_;
  std::vector<std::jthread> threads_;
};

// An InputError from a point names the point; anything else is passed on as it is.
std::exception_ptr point_failure(const SweepPoint& point) {
  try {
    throw;
  } catch (const InputError& e) {
    return std::make_exception_ptr(InputError(
        e.where(), fmt::format("at sweep point {} ({}): {}", point.index, point.key, e.message())));
  } catch (...) {
    return std::current_exception();
  }
}

// The writer: stores the runs as they come back, one transaction each, until every worker has
// exited and no run is waiting; returns how many it stored.
std::size_t store_runs(RunQueue& queue, SweepDatabase& database, SweepProgress& progress,
                       const std::function<void()>& report) {
  std::size_t made = 0;
  for (std::deque<RunRecord> batch = queue.take(); !batch.empty(); batch = queue.take()) {
    for (const RunRecord& record : batch) {
      database.record(record);
      ++made;
      ++progress.done;
      report();
    }
  }
  return made;
}

}  // namespace

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

  const std::size_t jobs =
      std::clamp<std::size_t>(options.jobs, 1, std::max<std::size_t>(todo.size(), 1));
  RunQueue queue(jobs);
  std::atomic<std::size_t> next{0};
  // Declared after what the workers use, so destroyed (stopped and joined) before it.
  WorkerGroup workers;
  for (std::size_t w = 0; w < jobs; ++w) {
    workers.start([&](const std::stop_token& stop) {
      const ExitSignal counted_out(queue);
      while (!stop.stop_requested()) {
        const std::size_t i = next.fetch_add(1);
        if (i >= todo.size())
          break;
        try {
          queue.push(run_sweep_point(options, todo[i]));
          todo[i].scenario.reset();  // run: its scenario is not needed again
        } catch (...) {
          queue.fail(point_failure(todo[i]));
          workers.request_stop();
        }
      }
    });
  }
  // Every exception from here on (a run the database cannot store, the progress callback, a
  // thread that cannot be started above) leaves through `workers`, which stops and joins them.
  const std::size_t made = store_runs(queue, database, progress, report);
  workers.join();
  if (const std::exception_ptr failure = queue.failure())
    std::rethrow_exception(failure);
  return made;
}

}  // namespace exitsim::analysis
