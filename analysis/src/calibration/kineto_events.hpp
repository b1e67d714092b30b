#pragma once
// Reading a PyTorch-profiler (Kineto) trace: the Chrome-trace JSON that torch.profiler's
// export_chrome_trace writes (gzipped or not), reduced to what calibration needs - the model
// thread's top-level operators with their input shapes and times, the profiler steps, the
// record_function ranges, and on GPU traces each operator's kernel time (docs/calibration.md,
// "From your own framework").

#include <cstdint>
#include <string>
#include <vector>

namespace exitsim::analysis::kineto {

// One top-level operator of the model thread (an `aten::` call not nested in another operator).
struct Operator {
  std::string name;
  double start_us = 0;
  double duration_us = 0;  // CPU time, or on a GPU trace the kernels it launched
  std::vector<std::vector<std::int64_t>> input_dims;  // "Input Dims"; [] for non-tensors
};

// A record_function range (category user_annotation) on the model thread.
struct Range {
  std::string name;
  double start_us = 0;
  double end_us = 0;
};

struct Trace {
  std::string path;
  std::vector<Operator> operators;  // in start order
  std::vector<Range> steps;         // "ProfilerStep#N", in start order
  std::vector<Range> ranges;        // every other record_function range
  bool gpu = false;                 // the trace has kernels
  std::string framework;            // "pytorch 2.4.0" where the trace says; empty otherwise
  std::string hardware;  // the exitsim_hardware key, else the first GPU's name; empty otherwise
  // GPU time that no top-level operator launched (CUDA graph replays, kernels of other
  // threads), in microseconds and kernels; it goes to the step residual.
  double unattributed_gpu_us = 0;
  std::int64_t unattributed_kernels = 0;
  std::int64_t graph_kernels = 0;  // of those, launched by cudaGraphLaunch
};

// Reads `path` (gzip or plain JSON). Throws InputError naming the file and the key path for
// malformed JSON, events of the wrong types, a legacy autograd-profiler trace (no shapes), and a
// trace without operators or shapes (record_shapes=True was not set).
Trace read_trace(const std::string& path);

}  // namespace exitsim::analysis::kineto
