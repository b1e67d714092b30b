// A GPU trace's kernels, copies and sets: which top-level operator launched each one (through the
// launching runtime call's correlation id), which CUDA-graph replay ran it, and what is nobody's.
#include <algorithm>

#include "kineto_events.hpp"

namespace exitsim::analysis::kineto {

void attribute_gpu_time(const std::map<std::int64_t, RuntimeCall>& launches,
                        const std::vector<GpuActivity>& activities,
                        const std::vector<double>& cpu_end_us, Trace& trace) {
  trace.gpu = true;
  for (Operator& op : trace.operators)
    op.duration_us = 0;
  // One replay per graph launch of the model thread, in launch order.
  std::map<std::int64_t, std::size_t> replay_of;
  for (const auto& [correlation, call] : launches) {
    if (call.model_thread && call.name.find("GraphLaunch") != std::string::npos) {
      replay_of.emplace(correlation, trace.replays.size());
      trace.replays.push_back({call.ts, 0, 0});
    }
  }
  for (const GpuActivity& k : activities) {
    const auto launch = k.correlation >= 0 ? launches.find(k.correlation) : launches.end();
    Operator* owner = nullptr;
    if (launch != launches.end() && launch->second.model_thread) {
      const double at = launch->second.ts;
      trace.kernel_spans.push_back({at, k.ts + k.dur});
      if (const auto replay = replay_of.find(k.correlation); replay != replay_of.end()) {
        // A graph's kernels cannot be told apart by operator: they are the replay's.
        GraphReplay& r = trace.replays[replay->second];
        r.gpu_us += k.dur;
        ++r.kernels;
        ++trace.graph_kernels;
        trace.unattributed_gpu_us += k.dur;
        ++trace.unattributed_kernels;
        continue;
      }
      auto it = std::upper_bound(trace.operators.begin(), trace.operators.end(), at,
                                 [](double t, const Operator& op) { return t < op.start_us; });
      if (it != trace.operators.begin()) {
        --it;
        if (at <= cpu_end_us[static_cast<std::size_t>(it - trace.operators.begin())])
          owner = &*it;
      }
    }
    if (owner != nullptr) {
      owner->duration_us += k.dur;
    } else {
      trace.unattributed_gpu_us += k.dur;
      ++trace.unattributed_kernels;
    }
  }
  std::sort(trace.replays.begin(), trace.replays.end(),
            [](const GraphReplay& a, const GraphReplay& b) { return a.launch_us < b.launch_us; });
  std::sort(trace.kernel_spans.begin(), trace.kernel_spans.end(),
            [](const KernelSpan& a, const KernelSpan& b) { return a.launch_us < b.launch_us; });
}

}  // namespace exitsim::analysis::kineto
