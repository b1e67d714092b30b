#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "exitsim/engine/safetensors.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "weights/half_float.hpp"

namespace exitsim::engine {
namespace {

std::string_view file_dtype(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return "F32";
    case DType::fp16:
      return "F16";
    case DType::bf16:
      return "BF16";
    default:
      break;
  }
  throw std::invalid_argument(fmt::format(
      "write_safetensors: dtype {} cannot be written; use fp32, fp16 or bf16", to_string(dtype)));
}

std::uint64_t checked_bytes(const TensorToWrite& tensor) {
  std::uint64_t elements = 1;
  for (std::int64_t dim : tensor.shape) {
    if (dim < 0) {
      throw std::invalid_argument("write_safetensors: " + tensor.name + " has a negative dim " +
                                  format_shape(tensor.shape));
    }
    elements *= static_cast<std::uint64_t>(dim);
  }
  if (elements != tensor.values.size()) {
    throw std::invalid_argument(fmt::format("write_safetensors: {} has shape {} but {} values",
                                            tensor.name, format_shape(tensor.shape),
                                            tensor.values.size()));
  }
  return elements * (tensor.dtype == DType::fp32 ? 4 : 2);
}

// Converts and writes in chunks so that a large tensor never needs a second full-size buffer.
void write_values(traces::detail::AtomicOutputFile& out, const TensorToWrite& tensor) {
  constexpr std::size_t k_chunk_elements = std::size_t{1} << 18;
  std::string bytes;
  for (std::size_t at = 0; at < tensor.values.size(); at += k_chunk_elements) {
    const std::span<const float> part =
        tensor.values.subspan(at, std::min(k_chunk_elements, tensor.values.size() - at));
    bytes.clear();
    for (float value : part) {
      if (tensor.dtype == DType::fp32) {
        const auto bits = std::bit_cast<std::uint32_t>(value);
        for (int shift = 0; shift < 32; shift += 8)
          bytes.push_back(static_cast<char>((bits >> shift) & 0xffu));
      } else {
        const std::uint16_t bits = tensor.dtype == DType::fp16 ? detail::float_to_half(value)
                                                               : detail::float_to_bfloat16(value);
        bytes.push_back(static_cast<char>(bits & 0xffu));
        bytes.push_back(static_cast<char>(bits >> 8));
      }
    }
    out.write(bytes);
  }
}

}  // namespace

void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const TensorToWrite& tensor : tensors) {
    if (tensor.name == "__metadata__")
      throw std::invalid_argument("write_safetensors: the name __metadata__ is reserved");
    if (!seen.insert(tensor.name).second)
      throw std::invalid_argument("write_safetensors: two tensors named " + tensor.name);
    const std::string_view dtype = file_dtype(tensor.dtype);
    const std::uint64_t bytes = checked_bytes(tensor);
    header[tensor.name] = {
        {"dtype", dtype}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  traces::detail::AtomicOutputFile out(path.string());
  std::string length;
  for (int shift = 0; shift < 64; shift += 8)
    length.push_back(static_cast<char>((text.size() >> shift) & 0xffu));
  out.write(length);
  out.write(text);
  for (const TensorToWrite& tensor : tensors)
    write_values(out, tensor);
  out.finish();
}

}  // namespace exitsim::engine
