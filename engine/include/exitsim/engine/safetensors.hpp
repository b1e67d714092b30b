#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/dtype.hpp"
#include "exitsim/engine/cpu_ops.hpp"

// Reading and writing the safetensors format (docs/engine_model_format.md): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and byte range,
// then the data section. Files are treated as hostile: every inconsistency is an InputError that
// names the file and the tensor, and nothing is read outside the ranges the header was checked
// to describe.
namespace exitsim::engine {

// Headers beyond this are refused before they are read: real ones are a few hundred kilobytes.
inline constexpr std::uint64_t k_max_safetensors_header_bytes = 100'000'000;

struct TensorInfo {
  std::string name;
  std::string dtype;  // as the file spells it: "F32", "BF16", "I8", ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte range [begin, end) within the data section
  std::uint64_t end = 0;

  std::int64_t elements() const;
};

// "[3, 4]": shapes as messages show them.
std::string format_shape(std::span<const std::int64_t> shape);

// An open safetensors file whose header has been validated. Tensor bytes are read on demand, so
// opening a multi-gigabyte checkpoint costs only its header.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::string& path() const { return path_; }
  bool has(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }
  // Throws InputError when the file has no such tensor.
  const TensorInfo& info(std::string_view name) const;
  // Sorted.
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor's values converted to float (F32, F16 and BF16; any other dtype is an
  // InputError). The overloads with a shape first check that the tensor has exactly that shape.
  std::vector<float> read_floats(std::string_view name);
  std::vector<float> read_floats(std::string_view name, std::span<const std::int64_t> shape);
  Matrix read_matrix(std::string_view name, std::int64_t rows, std::int64_t cols);
  Eigen::VectorXf read_vector(std::string_view name, std::int64_t size);

 private:
  SafetensorsFile() = default;
  void check_shape(const TensorInfo& tensor, std::span<const std::int64_t> shape) const;
  void read_into(const TensorInfo& tensor, float* out);

  std::string path_;
  std::ifstream in_;
  std::uint64_t data_start_ = 0;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
  std::string name;
  DType dtype = DType::fp32;  // fp32, fp16 or bf16
  std::vector<std::int64_t> shape;
  std::span<const float> values;  // row-major, as many as the shape holds
};

// Writes the tensors in the given order, header keys sorted, header padded with spaces to a
// multiple of 8 bytes so that readers that map the file see aligned data. The file appears
// whole or not at all. Throws std::invalid_argument for a duplicate or reserved name, a values
// count that does not match the shape, or a dtype other than fp32/fp16/bf16; InputError when the
// file cannot be written.
void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Element conversions the reader and writer use; narrowing rounds to nearest, ties to even.
float f16_to_float(std::uint16_t bits);
float bf16_to_float(std::uint16_t bits);
std::uint16_t float_to_f16(float value);
std::uint16_t float_to_bf16(float value);

}  // namespace exitsim::engine
