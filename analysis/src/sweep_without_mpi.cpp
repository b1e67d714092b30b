// run_sweep_mpi where MPI is not linked (the lean `exitsim` binary, which hands runs under mpirun
// to exitsim-full, and builds without MPI): launched by mpirun, the sweep says how to get it.
#include "exitsim/analysis/sweep.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::analysis {

std::optional<std::size_t> run_sweep_mpi(const SweepOptions& options) {
  throw InputError({options.database, 0, 0, "sweep"},
                   "this exitsim was built without MPI: install libopenmpi-dev (Debian) and "
                   "rebuild, or run without mpirun (with --shard i/N for job arrays)");
}

}  // namespace exitsim::analysis
