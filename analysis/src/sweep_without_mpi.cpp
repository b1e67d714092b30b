// run_sweep_mpi for builds without MPI: launched by mpirun, the sweep says how to get it.
#ifndef EXITSIM_HAVE_MPI
#include "exitsim/analysis/sweep.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::analysis {

std::optional<std::size_t> run_sweep_mpi(const SweepOptions& options) {
  throw InputError({options.database, 0, 0, "sweep"},
                   "this exitsim was built without MPI: install libopenmpi-dev (Debian) and "
                   "rebuild, or run without mpirun (with --shard i/N for job arrays)");
}

}  // namespace exitsim::analysis
#endif
