// GPU engine speed (issue 8's targets), as ratios within one run, on random weights in the shape
// of Mixture-of-Recursions on SmolLM-360M with three recursions, stored in fp32 or bf16:
//   - hbm_copy: a device-to-device copy, the memory bandwidth ceiling measured here;
//   - decode/<strategy>[_bf16]/<batch>: decode tokens/s per synchronization strategy, and the bytes
//   a
//     step must move (the weights of the layers it runs, the K/V it reads) over its time, as a
//     fraction of hbm_copy's bandwidth (target: at least 70% for the memory-bound decode);
//   - prefill: one 512-token prompt chunk through a shared-block layer — the layer's GEMM FLOPs
//     over the whole call's time, uploads, attention and the host sync included — against cuBLAS
//     alone on the same four products (target: at least 70%).
// Needs a GPU; without one every benchmark reports the reason and skips.
//
//   build/release/bin/engine_cuda_bench
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "decode_workload.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/engine/cuda_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/gemm.hpp"

namespace {

using namespace exitsim;

struct Model {
  engine::ModelConfig config;
  engine::ModelWeights weights;
  std::unique_ptr<engine::CudaModel> gpu, gpu_bf16;

  Model() {
    config.shape = *find_model_preset("mor-smollm-360m-r3");
    config.shape.dtype = DType::fp32;
    config.routers = true;
    weights = engine::random_model_weights(config, 1);
    gpu = std::make_unique<engine::CudaModel>(config, weights);
    gpu_bf16 = std::make_unique<engine::CudaModel>(config, weights, 0, kernels::Dtype::bf16);
  }
  const engine::CudaModel& in(kernels::Dtype storage) const {
    return storage == kernels::Dtype::bf16 ? *gpu_bf16 : *gpu;
  }
  // Elements of a unique layer's matrices.
  double layer_elements(int unique_layer) const {
    const engine::LayerWeights& w = weights.layers[static_cast<std::size_t>(unique_layer)];
    double n = 0;
    for (const engine::Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down})
      n += static_cast<double>(m->size());
    return n;
  }
};

bool skip_without_device(benchmark::State& state) {
  if (kernels::cuda_device_available())
    return false;
  state.SkipWithError(
      ("no CUDA device: " + std::string(kernels::cuda_unavailable_reason())).c_str());
  return true;
}

const Model& mor360() {
  static const Model m;
  return m;
}

struct GemmLike {
  std::int64_t out = 0;  // rows of W
  std::int64_t in = 0;   // its columns
};

float elapsed_ms(cudaEvent_t start, cudaEvent_t stop) {
  float ms = 0;
  kernels::check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  return ms;
}

void hbm_copy(benchmark::State& state) {
  if (skip_without_device(state))
    return;
  const std::size_t bytes = std::size_t{2} << 30;
  void* a = nullptr;
  void* b = nullptr;
  kernels::check_cuda(cudaMalloc(&a, bytes), "cudaMalloc");
  kernels::check_cuda(cudaMalloc(&b, bytes), "cudaMalloc");
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double seconds = 0;
  for (auto _ : state) {
    cudaEventRecord(start);
    kernels::check_cuda(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    const double s = elapsed_ms(start, stop) / 1e3;
    state.SetIterationTime(s);
    seconds += s;
  }
  // A copy reads and writes every byte.
  state.counters["GB/s"] =
      2.0 * static_cast<double>(bytes) * static_cast<double>(state.iterations()) / seconds / 1e9;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
}

void decode(benchmark::State& state, const std::string& strategy, bool exits,
            kernels::Dtype storage) {
  if (skip_without_device(state))
    return;
  const Model& m = mor360();
  const engine::CudaModel& gpu = m.in(storage);
  const auto element = static_cast<double>(kernels::dtype_size(storage));
  const int batch = static_cast<int>(state.range(0));
  const engine::EngineOptions options = bench::decode_options(strategy, exits, batch);
  const std::vector<engine::EngineRequest> work = bench::decode_requests(batch, 8, 24);
  double decode_tokens = 0, decode_seconds = 0, moved_bytes = 0;
  for (auto _ : state) {
    engine::Engine engine(gpu, options);
    const engine::EngineRun run = engine.run(work);
    const bench::DecodeShare share = bench::decode_share(run, batch);
    decode_tokens += share.tokens;
    decode_seconds += share.seconds;
    // What the decode steps had to read: each executed layer's weights once per step that ran
    // it (every step at full depth: the lower bound without exits) plus the LM head.
    double step_bytes = element * static_cast<double>(m.weights.lm_head.size());
    for (int layer = 0; layer < gpu.executed_layers(); ++layer)
      step_bytes += element * m.layer_elements(gpu.source_of(layer).unique_layer);
    moved_bytes += step_bytes * static_cast<double>(run.iterations - 1);
  }
  state.counters["decode_tokens/s"] = decode_tokens / decode_seconds;
  state.counters["weight_GB/s"] = moved_bytes / decode_seconds / 1e9;
}

// One shared-block layer over a 512-token chunk, and the same four products through cuBLAS
// alone: q|k|v, o, gate|up, down.
void prefill(benchmark::State& state, bool engine_path) {
  if (skip_without_device(state))
    return;
  const Model& m = mor360();
  const ModelShape& s = m.config.shape;
  const std::int64_t tokens = 512;
  const std::int64_t q_dim = s.n_heads * s.head_dim;
  const std::int64_t qkv = q_dim + 2 * s.n_kv_heads * s.head_dim;
  const double flops = 2.0 * static_cast<double>(tokens) *
                       static_cast<double>(s.d_model * qkv + q_dim * s.d_model +
                                           s.d_model * 2 * s.ffn_dim + s.ffn_dim * s.d_model);
  std::vector<engine::LayerRow> rows(static_cast<std::size_t>(tokens));
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows[i] = {.position = static_cast<std::int32_t>(i), .chunk = 0};
  const std::unique_ptr<engine::HiddenStates> states = m.gpu->make_states();
  const engine::HeldStates x(*states, static_cast<std::size_t>(tokens));
  const engine::HeldStates y(*states, static_cast<std::size_t>(tokens));
  states->write(x.slots(), engine::Matrix::Random(tokens, s.d_model));
  kernels::CublasHandle cublas;
  std::vector<float*> buffers;
  const std::int64_t widest = std::max({qkv, 2 * s.ffn_dim, s.d_model, q_dim});
  for (int i = 0; i < 3; ++i) {
    void* p = nullptr;
    kernels::check_cuda(
        cudaMalloc(&p, sizeof(float) * static_cast<std::size_t>(tokens * widest * 2)),
        "cudaMalloc");
    buffers.push_back(static_cast<float*>(p));
  }
  const GemmLike shapes[] = {
      {qkv, s.d_model}, {s.d_model, q_dim}, {2 * s.ffn_dim, s.d_model}, {s.d_model, s.ffn_dim}};
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (engine_path) {
      engine::KvCache fresh(m.gpu->kv_width(), 16, 64);
      const int st = fresh.open_stream();
      for (engine::LayerRow& r : rows)
        r.read_stream = r.write_stream = st;
      states->copy(x.slots(), y.slots());
      m.gpu->layer(1, *states, y.slots(), rows, fresh);
      kernels::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    } else {
      for (const GemmLike& g : shapes) {
        kernels::linear<float, float>(cublas, buffers[0], buffers[1], buffers[2],
                                      {.m = tokens, .n = g.out, .k = g.in});
      }
      kernels::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  state.counters["GEMM_GFLOP/s"] = flops * static_cast<double>(state.iterations()) / seconds / 1e9;
  for (float* p : buffers)
    cudaFree(p);
}

}  // namespace

BENCHMARK(hbm_copy)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
#define EXITSIM_DECODE(name, strategy, exits, storage)                   \
  BENCHMARK_CAPTURE(decode, name, std::string(strategy), exits, storage) \
      ->Arg(1)                                                           \
      ->Arg(8)                                                           \
      ->Arg(32)                                                          \
      ->Arg(64)                                                          \
      ->Unit(benchmark::kMillisecond)                                    \
      ->Iterations(2)
EXITSIM_DECODE(full_depth, "full_depth", false, kernels::Dtype::fp32);
EXITSIM_DECODE(batch_sync, "batch_sync", true, kernels::Dtype::fp32);
EXITSIM_DECODE(state_copy, "state_copy", true, kernels::Dtype::fp32);
EXITSIM_DECODE(skip_kv, "skip_kv", true, kernels::Dtype::fp32);
EXITSIM_DECODE(depthwise, "depthwise", true, kernels::Dtype::fp32);
EXITSIM_DECODE(full_depth_bf16, "full_depth", false, kernels::Dtype::bf16);
EXITSIM_DECODE(depthwise_bf16, "depthwise", true, kernels::Dtype::bf16);
BENCHMARK_CAPTURE(prefill, cublas_alone, false)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK_CAPTURE(prefill, engine_layer, true)->Unit(benchmark::kMillisecond)->Iterations(20);

BENCHMARK_MAIN();
