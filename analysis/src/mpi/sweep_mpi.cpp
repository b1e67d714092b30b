// run_sweep over MPI ranks (built when CMake finds MPI; see sweep_without_mpi.cpp otherwise).
#include <mpi.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/analysis/sweep.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::analysis {

namespace {

// Worker -> rank 0: "give me a point" (empty), a finished run (its JSON) or a failure (its
// message). Rank 0 -> worker: the index into the pending list, or -1 when there is no more.
enum Tag : int { k_ready = 1, k_result = 2, k_failure = 3, k_assign = 4 };

void send_text(const std::string& text, int to, int tag) {
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

std::string receive_text(MPI_Status& status) {
  MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
  int size = 0;
  MPI_Get_count(&status, MPI_CHAR, &size);
  std::string text(static_cast<std::size_t>(size), '\0');
  MPI_Recv(text.data(), size, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return text;
}

// Whether any rank failed: every rank learns it at once, so that none waits in a barrier for a
// rank that has already given up (a worker that could not read the database used to leave rank 0
// waiting for ever).
bool any_rank_failed(bool failed_here) {
  int here = failed_here ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&here, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any != 0;
}

// The pending points as this rank reads them (`read`), or the error that stopped it; then every
// rank agrees whether all could. Throws this rank's error, or says another rank failed.
PendingPoints read_on_every_rank(const SweepOptions& options,
                                 const std::function<PendingPoints()>& read) {
  PendingPoints pending;
  std::optional<InputError> error;
  try {
    pending = read();
  } catch (const InputError& e) {
    error = e;
  }
  if (any_rank_failed(error.has_value())) {
    if (error)
      throw *error;
    throw InputError({options.database, 0, 0, "sweep"},
                     "expected every MPI rank to read the sweep, found one that could not (its "
                     "error is on its own output)");
  }
  return pending;
}

// Rank 0: hands out points to whoever asks and stores what comes back.
std::size_t coordinate(const SweepOptions& options, int ranks, SweepDatabase& database,
                       const PendingPoints& pending) {
  SweepProgress progress;
  progress.total = pending.todo.size();
  progress.skipped = pending.skipped;
  progress.stale = pending.stale;
  if (options.progress)
    options.progress(progress);
  std::size_t next = 0;
  std::size_t made = 0;
  int working = ranks - 1;
  std::string failure;
  std::exception_ptr stored_failure;  // rank 0's own failure, thrown as it is
  while (working > 0) {
    MPI_Status status;
    const std::string text = receive_text(status);
    if (status.MPI_TAG == k_result && failure.empty()) {
      // A run that cannot be stored (a damaged page, a full disk) stops the sweep like a failing
      // point: thrown from here, it left every other rank waiting for an answer for ever.
      try {
        database.record(run_record_from_json(text));
        ++made;
        ++progress.done;
        if (options.progress)
          options.progress(progress);
      } catch (const std::exception& e) {
        stored_failure = std::current_exception();
        failure = e.what();
      }
    } else if (status.MPI_TAG == k_failure && failure.empty()) {
      failure = text;
    }
    if (status.MPI_TAG == k_failure || status.MPI_TAG == k_ready) {
      long long assign = -1;
      if (failure.empty() && next < pending.todo.size())
        assign = static_cast<long long>(next++);
      MPI_Send(&assign, 1, MPI_LONG_LONG, status.MPI_SOURCE, k_assign, MPI_COMM_WORLD);
      if (assign < 0)
        --working;
    }
  }
  int failed = failure.empty() ? 0 : 1;
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (stored_failure)
    std::rethrow_exception(stored_failure);
  if (failed != 0)
    throw InputError({options.database, 0, 0, "sweep"}, failure);
  return made;
}

// Other ranks: ask, run, send back, until told there is no more.
void work(const SweepOptions& options) {
  // Every rank computes the same pending list (the database is read before rank 0 writes
  // anything new, and the points are in index order), so an index names a point. Rank 0 has the
  // database open and in WAL mode by now: a worker only reads it, and never competes for the
  // journal-mode change (which SQLite refuses as busy without waiting).
  const PendingPoints pending = read_on_every_rank(options, [&] {
    const SweepDatabase database(options.database, SweepDatabase::Access::read_only);
    return pending_points(options, database);
  });
  send_text("", 0, k_ready);
  for (;;) {
    long long assign = -1;
    MPI_Recv(&assign, 1, MPI_LONG_LONG, 0, k_assign, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (assign < 0)
      break;
    const SweepPoint& point = pending.todo[static_cast<std::size_t>(assign)];
    try {
      send_text(run_record_to_json(run_sweep_point(options, point)), 0, k_result);
      send_text("", 0, k_ready);
    } catch (const std::exception& e) {
      // Any failure, not only an InputError, is sent: a rank that left without a word kept
      // rank 0 waiting for its next request for ever.
      send_text(
          "at sweep point " + std::to_string(point.index) + " (" + point.key + "): " + e.what(), 0,
          k_failure);
    }
  }
  int failed = 0;
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (failed != 0)
    throw InputError({options.database, 0, 0, "sweep"}, "a sweep point failed on another rank");
}

}  // namespace

std::optional<std::size_t> run_sweep_mpi(const SweepOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0)
    MPI_Init(nullptr, nullptr);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::optional<std::size_t> made;
  try {
    if (ranks == 1) {
      made = run_sweep(options);
    } else if (rank == 0) {
      // Rank 0 opens (creates) the database and reads it before the others read it.
      std::optional<SweepDatabase> database;
      std::optional<InputError> error;
      try {
        database.emplace(options.database);
        record_sweep_provenance(options, *database);
      } catch (const InputError& e) {
        error = e;
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (error) {
        any_rank_failed(true);
        throw *error;
      }
      const PendingPoints pending =
          read_on_every_rank(options, [&] { return pending_points(options, *database); });
      made = coordinate(options, ranks, *database, pending);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
      work(options);
    }
  } catch (...) {
    MPI_Finalize();
    throw;
  }
  MPI_Finalize();
  return made;
}

}  // namespace exitsim::analysis
