#pragma once
// Reading a PyTorch-profiler (Kineto) trace: the Chrome-trace JSON that torch.profiler's
// export_chrome_trace writes (gzipped or not), reduced to what calibration needs - the model
// thread's top-level operators with their input shapes and times, the step ranges, the
// record_function ranges, and on GPU traces each operator's kernel time and the CUDA-graph
// replays (docs/calibration.md, "From your own framework").

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace exitsim::analysis::kineto {

// One top-level operator of the model thread: an operator nested in no other, or in nothing but
// wrappers without shapes (torch.compile's "Torch-Compiled Region", which the ops it ran sit in).
struct Operator {
  std::string name;
  double start_us = 0;
  double duration_us = 0;  // CPU time, or on a GPU trace the kernels it launched
  std::vector<std::vector<std::int64_t>> input_dims;  // "Input Dims"; [] for non-tensors
};

// A record_function range (category user_annotation).
struct Range {
  std::string name;
  double start_us = 0;
  double end_us = 0;
};

// One CUDA-graph replay launched from the model thread: when, and the time of its kernels.
struct GraphReplay {
  double launch_us = 0;
  double gpu_us = 0;
  std::int64_t kernels = 0;
};

// A kernel launched from the model thread: when it was launched (CPU) and when it ended (GPU).
struct KernelSpan {
  double launch_us = 0;
  double end_us = 0;
};

struct Trace {
  std::string path;
  std::vector<Operator> operators;  // in start order
  std::vector<Range> steps;         // "ProfilerStep#N" (any thread), in start order
  std::vector<Range> ranges;        // every other record_function range of the model thread
  bool gpu = false;                 // the trace has kernels
  std::string framework;            // "pytorch 2.4.0" where the trace says; empty otherwise
  std::string hardware;  // the exitsim_hardware key, else the first GPU's name; empty otherwise
  int world_size = 1;    // distributedInfo.world_size: the processes of the traced job
  // GPU time that no top-level operator launched (CUDA graph replays, kernels of other
  // threads), in microseconds and kernels; it goes to the step residual.
  double unattributed_gpu_us = 0;
  std::int64_t unattributed_kernels = 0;
  std::int64_t graph_kernels = 0;        // of those, launched by cudaGraphLaunch
  std::vector<GraphReplay> replays;      // in launch order
  std::vector<double> captures_us;       // stream captures begun (cudaStreamBeginCapture)
  std::vector<KernelSpan> kernel_spans;  // by launch time
};

// Reads `path` (gzip or plain JSON). Throws InputError naming the file and the key path for
// malformed JSON, events of the wrong types, a legacy autograd-profiler trace (no shapes), and a
// trace without operators or shapes (record_shapes=True was not set).
Trace read_trace(const std::string& path);

// A runtime call that may launch GPU work (cudaLaunchKernel, cudaGraphLaunch, cudaMemcpyAsync,
// cudaStreamBeginCapture, ...) and a GPU activity (kernel, copy, set), as the GPU attribution
// reads them.
struct RuntimeCall {
  std::string name;
  bool model_thread = false;
  double ts = 0;
};
struct GpuActivity {
  std::int64_t correlation = -1;  // the launching call's; -1: none recorded
  double ts = 0;
  double dur = 0;
};

// Each GPU activity goes to the top-level operator whose CPU time (start to `cpu_end_us`) holds
// the call that launched it, to a graph replay, or to the unattributed remainder; an operator's
// duration becomes its activities' time (kineto_gpu.cpp). `launches` is keyed by correlation id.
void attribute_gpu_time(const std::map<std::int64_t, RuntimeCall>& launches,
                        const std::vector<GpuActivity>& activities,
                        const std::vector<double>& cpu_end_us, Trace& trace);

}  // namespace exitsim::analysis::kineto
