#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string_view>

namespace exitsim::kernels {

// Whether a usable CUDA device is present. Never throws: "no driver" and "no device" are both
// answered false, so callers (and tests) can fall back to the CPU backend.
bool cuda_device_available() noexcept;

// Why no device is available ("" when one is): the CUDA error string, for skip messages.
std::string_view cuda_unavailable_reason() noexcept;

// Throws exitsim::InputError with field "cuda" and the CUDA error string when `status` is not
// cudaSuccess; `call` names what failed.
void check_cuda(cudaError_t status, std::string_view call);

// The same for a cuBLAS status (field "cuda", the status name and description).
void check_cublas(cublasStatus_t status, std::string_view call);

}  // namespace exitsim::kernels
