#include "exitsim/engine/cuda_model.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "cuda/device.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/kernels/attention.hpp"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/gemm.hpp"
#include "exitsim/kernels/kv_project.hpp"
#include "exitsim/kernels/kv_write.hpp"
#include "exitsim/kernels/lm_head.hpp"
#include "exitsim/kernels/rms_norm.hpp"
#include "exitsim/kernels/rotary.hpp"
#include "exitsim/kernels/swiglu.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::engine {

namespace ops = traces::engine_ops;

namespace {

std::span<const float> span_of(const Eigen::VectorXf& v) {
  return {v.data(), static_cast<std::size_t>(v.size())};
}

// Rows of the given matrices stacked into one row-major block: q|k|v and gate|up become one
// weight each, so each is one GEMM.
std::vector<float> stacked(std::initializer_list<const Matrix*> parts) {
  std::vector<float> out;
  for (const Matrix* m : parts)
    out.insert(out.end(), m->data(), m->data() + m->size());
  return out;
}

}  // namespace

CudaModel::CudaModel(const ModelConfig& config, const ModelWeights& weights, int device)
    : config_(config), weights_(weights) {
  if (!kernels::cuda_device_available()) {
    throw InputError({"", 0, 0, "cuda"},
                     expected_found("a CUDA device (--backend cuda)",
                                    "none: " + std::string(kernels::cuda_unavailable_reason())));
  }
  if (!weights.lora.empty()) {
    throw InputError({"", 0, 0, "model"},
                     expected_found("a model without per-recursion LoRA (the CUDA backend does "
                                    "not run LoRA yet; use --backend cpu)",
                                    "LoRA adapters"));
  }
  // Before the Device: its cuBLAS handle belongs to the current device.
  kernels::check_cuda(cudaSetDevice(device), "cudaSetDevice");
  auto d = std::make_unique<Device>();
  d->id = device;
  cudaDeviceProp properties{};
  kernels::check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  d->name = properties.name;
  kernels::check_cuda(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
                      "cudaStreamCreate");
  for (const LayerWeights& w : weights.layers) {
    LayerOnDevice& l = d->layers.emplace_back();
    l.attn_norm.upload(span_of(w.attn_norm));
    l.mlp_norm.upload(span_of(w.mlp_norm));
    l.qkv.upload(stacked({&w.wq, &w.wk, &w.wv}));
    l.o.upload(stacked({&w.wo}));
    l.gate_up.upload(stacked({&w.w_gate, &w.w_up}));
    l.down.upload(stacked({&w.w_down}));
  }
  d->final_norm.upload(span_of(weights.final_norm));
  d->lm_head.upload(stacked({&weights.lm_head}));
  for (const Router& r : weights.routers)
    d->routers.emplace_back(span_of(r.weight));
  device_ = std::move(d);
}

CudaModel::~CudaModel() = default;

std::string CudaModel::hardware() const {
  return device_->name;
}

LayerSource CudaModel::source_of(int executed_layer) const {
  return layer_source(depth(), executed_layer);
}

Matrix CudaModel::embed(std::span<const std::int32_t> tokens) const {
  return embed_rows(weights_.embedding, tokens);
}

Matrix CudaModel::logits(const Matrix& x) const {
  Device& d = *device_;
  const std::int64_t n = x.rows();
  const std::int64_t dim = config_.shape.d_model;
  const std::int64_t vocab = weights_.lm_head.rows();
  Matrix out(n, vocab);
  if (n == 0)
    return out;
  d.x.upload_async({x.data(), static_cast<std::size_t>(x.size())}, d.stream);
  float* h = d.h.reserve(static_cast<std::size_t>(n * dim));
  float* logits = d.logits.reserve(static_cast<std::size_t>(n * vocab));
  // The loop times the head as a host span ("lm_head"); the label only attributes its kernels.
  const profiler::SpanShape shape{.batch_tokens = n};
  DeviceOp label(d, tracer_, {}, shape, "lm_head.kernels", traces::OpKind::lm_head);
  kernels::rms_norm(d.x.get(), d.final_norm.get(), h, n, dim, config_.rms_eps, d.stream);
  kernels::linear<float, float>(d.cublas, h, d.lm_head.get(), logits,
                                {.m = n, .n = vocab, .k = dim}, false, d.stream);
  kernels::check_cuda(
      cudaMemcpyAsync(out.data(), logits, sizeof(float) * static_cast<std::size_t>(out.size()),
                      cudaMemcpyDeviceToHost, d.stream),
      "cudaMemcpyAsync (logits)");
  d.sync("cudaStreamSynchronize (logits)");
  return out;
}

std::vector<double> CudaModel::router_scores(int recursion, const Matrix& x) const {
  Device& d = *device_;
  const Router& router = weights_.routers.at(static_cast<std::size_t>(recursion - 1));
  const std::int64_t n = x.rows();
  std::vector<double> scores(static_cast<std::size_t>(n));
  if (n == 0)
    return scores;
  d.x.upload_async({x.data(), static_cast<std::size_t>(x.size())}, d.stream);
  float* device_scores = d.scores.reserve(static_cast<std::size_t>(n));
  const profiler::SpanShape shape{.batch_tokens = n};
  DeviceOp label(d, tracer_, {}, shape, "router.kernels", traces::OpKind::router);
  kernels::router_scores<float>(d.x.get(), d.routers[static_cast<std::size_t>(recursion - 1)].get(),
                                router.bias, device_scores,
                                {.rows = n, .dim = config_.shape.d_model}, d.stream);
  std::vector<float> host(static_cast<std::size_t>(n));
  kernels::check_cuda(cudaMemcpyAsync(host.data(), device_scores, sizeof(float) * host.size(),
                                      cudaMemcpyDeviceToHost, d.stream),
                      "cudaMemcpyAsync (router scores)");
  d.sync("cudaStreamSynchronize (router scores)");
  std::copy(host.begin(), host.end(), scores.begin());
  return scores;
}

}  // namespace exitsim::engine
