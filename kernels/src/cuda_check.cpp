#include "exitsim/kernels/cuda_check.hpp"

#include <string>

#include "exitsim/core/error.hpp"

namespace exitsim::kernels {
namespace {

// cudaGetDeviceCount's answer cannot change within a process, so it is asked once.
cudaError_t device_query() noexcept {
  static const cudaError_t status = [] {
    int count = 0;
    const cudaError_t result = cudaGetDeviceCount(&count);
    if (result != cudaSuccess)
      return result;
    return count > 0 ? cudaSuccess : cudaErrorNoDevice;
  }();
  return status;
}

}  // namespace

bool cuda_device_available() noexcept {
  return device_query() == cudaSuccess;
}

std::string_view cuda_unavailable_reason() noexcept {
  const cudaError_t status = device_query();
  return status == cudaSuccess ? std::string_view{} : std::string_view{cudaGetErrorString(status)};
}

void check_cuda(cudaError_t status, std::string_view call) {
  if (status == cudaSuccess)
    return;
  throw InputError(SourceLocation{.file = "", .line = 0, .column = 0, .field = "cuda"},
                   std::string(call) + " failed: " + cudaGetErrorName(status) + ": " +
                       cudaGetErrorString(status));
}

void check_cublas(cublasStatus_t status, std::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  throw InputError(SourceLocation{.file = "", .line = 0, .column = 0, .field = "cuda"},
                   std::string(call) + " failed: " + cublasGetStatusName(status) + ": " +
                       cublasGetStatusString(status));
}

}  // namespace exitsim::kernels
