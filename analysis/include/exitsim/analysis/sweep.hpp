#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exitsim/analysis/sweep_columns.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::analysis {

// One combination of a sweep's axis values: its position in the Cartesian product (the last axis
// varies fastest) and the --set overrides that make it.
struct SweepPoint {
  std::size_t index = 0;
  std::vector<std::string> overrides;  // "key=value", in axis order
  std::string key;                     // the overrides joined by "; ": the run's identity
  // run_digest of the point's resolved scenario and input files (set by pending_points): a
  // stored run with another digest is stale and is run again.
  std::string digest;
  // The resolved scenario that digest was taken of (set by pending_points), so that running the
  // point does not load and resolve it again; null: run_sweep_point loads it.
  std::shared_ptr<const scenario::Scenario> scenario;
};

// Every point of the sweep, in index order (one point with no overrides when there are no axes).
std::vector<SweepPoint> sweep_points(const std::vector<scenario::SweepAxis>& axes);

// A slice of a sweep for job arrays: points whose index % count == index.
struct Shard {
  std::size_t index = 0;
  std::size_t count = 1;
  bool contains(std::size_t point) const { return point % count == index; }
};
// Parses "i/N" (0 <= i < N); throws InputError on `--shard` otherwise.
Shard parse_shard(const std::string& text);

// Where a database's runs came from: one row per sweep invocation's shard (or per database a
// merge read). `identity` is the run_digest of the sweep's base scenario (every --set applied,
// the axes included, input files hashed): shards of one sweep share it, another sweep's differs.
struct SweepProvenance {
  std::string source;  // "exitsim sweep" for runs made into this file; a merged file's path
  std::string identity;
  std::string shard;  // "i/N"
  std::string exitsim_version;
  std::string exitsim_commit;
  friend bool operator==(const SweepProvenance&, const SweepProvenance&) = default;
};

// One completed run, as stored.
struct RunRecord {
  SweepPoint point;
  std::string scenario_yaml;  // the resolved scenario of the run
  RunSetting setting;         // run_setting_of that scenario
  RunMetrics metrics;
};

// The sweep's results in SQLite: one row per completed run, keyed by the point's key, written in
// one transaction each, so a sweep killed at any moment (even kill -9) keeps every completed run
// and none half-written. Throws InputError naming the file when it cannot be opened or written,
// is damaged (SQLite's integrity check, run at every open, or a read that fails), or holds
// another layout (checked before anything is written, so a refused file is left as it was).
class SweepDatabase {
 public:
  // read_write creates the file and its table when new (sweep); read_only changes nothing and
  // refuses a file that holds no runs table (report).
  enum class Access { read_write, read_only };
  explicit SweepDatabase(const std::string& path, Access access = Access::read_write);
  ~SweepDatabase();
  SweepDatabase(const SweepDatabase&) = delete;
  SweepDatabase& operator=(const SweepDatabase&) = delete;

  // Stored runs' keys and their digests ("" for rows written before digests were kept).
  std::map<std::string, std::string> completed_digests() const;
  void record(const RunRecord& run);
  // Every stored run, by point index.
  std::vector<RunRecord> runs() const;
  // Provenance rows in the order they were added (none in databases from before it was kept);
  // the last row's identity is the sweep the file holds now.
  std::vector<SweepProvenance> provenance() const;
  void record_provenance(const SweepProvenance& row);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct SweepProgress {
  std::size_t done = 0;     // completed in this invocation
  std::size_t total = 0;    // to run in this invocation
  std::size_t skipped = 0;  // already in the database, with the same digest
  std::size_t stale = 0;    // in the database with another digest: run again and replaced
  double elapsed_s = 0;
};

struct SweepOptions {
  std::string scenario_file;           // "" = the embedded default
  std::vector<std::string> overrides;  // the command line's --set, before each point's
  std::string database;
  Shard shard;
  unsigned jobs = 1;  // concurrent runs (threads)
  std::function<void(const SweepProgress&)> progress;
};

// Runs every point of the scenario's sweep in the shard that the database does not hold yet,
// `jobs` at a time, storing each as it completes; a run that fails (an impossible configuration at
// that point) stops the sweep with its InputError, naming the point, after the runs in flight are
// stored; a run that cannot be stored stops every worker, which are joined, and the store's error
// is thrown. Returns the number of runs made.
std::size_t run_sweep(const SweepOptions& options);

// The parts of run_sweep that other drivers (MPI) share.
struct PendingPoints {
  std::vector<SweepPoint> todo;  // in the shard, not yet in the database (or stale), by index
  std::size_t skipped = 0;       // in the shard and in the database with the same digest
  std::size_t stale = 0;         // in the todo list because their stored run has another digest
};
PendingPoints pending_points(const SweepOptions& options, const SweepDatabase& database);
// Notes in the database which sweep (SweepProvenance::identity), shard and exitsim made its runs.
void record_sweep_provenance(const SweepOptions& options, SweepDatabase& database);

// The runs of one sweep spread over several databases (shards, job-array tasks), as one list by
// point index. Throws InputError naming the file: a database without provenance (not written by
// this exitsim's sweep), one of another sweep than the first, or two runs of one point with
// different digests.
struct SweepRuns {
  std::vector<RunRecord> runs;
  std::vector<SweepProvenance> provenance;  // every input's, sources named by file
};
SweepRuns read_sweep_databases(const std::vector<std::string>& paths);

// `exitsim sweep merge OUT IN...`: writes a new database OUT holding the inputs' runs and
// provenance (read_sweep_databases's checks), beside OUT first and moved in when whole: a refused
// merge leaves nothing. Throws InputError when OUT exists. Returns the runs written.
std::size_t merge_sweep_databases(const std::string& out, const std::vector<std::string>& inputs);
// One point run: the scenario with the command line's overrides, then the point's.
RunRecord run_sweep_point(const SweepOptions& options, const SweepPoint& point);
// A run as one line of JSON and back (how MPI ranks pass results to rank 0).
std::string run_record_to_json(const RunRecord& run);
RunRecord run_record_from_json(const std::string& text);

// Whether this process was started by mpirun (an MPI launcher's environment is present).
bool launched_by_mpi();
// run_sweep over MPI ranks: rank 0 owns the database and hands out points one at a time to the
// ranks that ask (dynamic load balancing); the other ranks run them and send the results back.
// Returns the runs made on rank 0, nothing on the others. Throws InputError, on every rank, for
// a failing point, and when exitsim was built without MPI.
std::optional<std::size_t> run_sweep_mpi(const SweepOptions& options);

// What a run measured, from its simulation summary.
RunMetrics run_metrics_of(const sim::MetricsSummary& summary);

}  // namespace exitsim::analysis
