#pragma once
// The lean `exitsim` binary links neither the GPU libraries (CUDA runtime, cuBLAS, CUPTI) nor
// MPI, so that it starts in milliseconds; a command that needs them runs in `exitsim-full`, built
// beside it from the same sources with them (docs/cli.md, "Two binaries").

namespace exitsim::cli {

// Whether this command needs exitsim-full: `--backend cuda` (the GPU backend and its CUPTI
// tracer), or a launch by mpirun (a sweep over MPI ranks).
bool needs_full_binary(int argc, char** argv);

// Replaces this process with exitsim-full (beside this executable) on the same arguments and
// environment. Returns only when it cannot: having printed one line naming what is missing, the
// exit code to return.
int run_in_full_binary(char** argv);

}  // namespace exitsim::cli
