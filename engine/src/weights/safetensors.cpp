#include "exitsim/engine/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <optional>
#include <system_error>

#include "exitsim/core/error.hpp"
#include "weights/half_float.hpp"
#include "weights/strict_json.hpp"

namespace exitsim::engine {
namespace {

using detail::describe_json;
using detail::json_quoted;

struct DtypeSize {
  std::string_view name;
  std::uint64_t bytes;
};

// Every fixed-size dtype of the format. Tensors of any of them may sit in a file we read (a
// checkpoint may carry integer buffers we never touch); only the three float ones can be read.
constexpr std::array<DtypeSize, 15> k_dtypes = {{{"BOOL", 1},
                                                 {"U8", 1},
                                                 {"I8", 1},
                                                 {"F8_E5M2", 1},
                                                 {"F8_E4M3", 1},
                                                 {"I16", 2},
                                                 {"U16", 2},
                                                 {"F16", 2},
                                                 {"BF16", 2},
                                                 {"I32", 4},
                                                 {"U32", 4},
                                                 {"F32", 4},
                                                 {"I64", 8},
                                                 {"U64", 8},
                                                 {"F64", 8}}};

std::optional<std::uint64_t> dtype_size(std::string_view name) {
  for (const DtypeSize& d : k_dtypes) {
    if (d.name == name)
      return d.bytes;
  }
  return std::nullopt;
}

std::string dtype_names() {
  std::string out;
  for (const DtypeSize& d : k_dtypes)
    out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

std::uint64_t read_u64_le(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

// The JSON array as unsigned integers, or nullopt when it is not an array of them.
std::optional<std::vector<std::uint64_t>> unsigned_array(const nlohmann::json& value) {
  if (!value.is_array())
    return std::nullopt;
  std::vector<std::uint64_t> out;
  out.reserve(value.size());
  for (const nlohmann::json& item : value) {
    if (!item.is_number_unsigned())
      return std::nullopt;
    out.push_back(item.get<std::uint64_t>());
  }
  return out;
}

class HeaderChecker {
 public:
  HeaderChecker(std::string path, std::uint64_t data_size)
      : path_(std::move(path)), data_size_(data_size) {}

  InputError error(const std::string& field, const std::string& message) const {
    return InputError({path_, 0, 0, field}, message);
  }
  InputError entry_error(const std::string& name, std::string_view key, const std::string& expected,
                         const std::string& found) const {
    return error(name, fmt::format("\"{}\": {}", key, expected_found(expected, found)));
  }

  std::map<std::string, std::string> metadata(const nlohmann::json& value) const {
    if (!value.is_object())
      throw error("__metadata__", expected_found("an object of strings", describe_json(value)));
    std::map<std::string, std::string> out;
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string())
        throw error("__metadata__." + key, expected_found("a string", describe_json(item)));
      out.emplace(key, item.get<std::string>());
    }
    return out;
  }

  TensorInfo tensor(const std::string& name, const nlohmann::json& entry) const {
    if (!entry.is_object()) {
      throw error(name, expected_found("an object with \"dtype\", \"shape\" and \"data_offsets\"",
                                       describe_json(entry)));
    }
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) {
        throw error(name, expected_found("\"dtype\", \"shape\" and \"data_offsets\"",
                                         fmt::format("no \"{}\"", key)));
      }
    }
    TensorInfo info;
    info.name = name;
    const nlohmann::json& dtype = entry["dtype"];
    if (!dtype.is_string())
      throw entry_error(name, "dtype", "a string", describe_json(dtype));
    info.dtype = dtype.get<std::string>();
    const std::optional<std::uint64_t> element_bytes = dtype_size(info.dtype);
    if (!element_bytes)
      throw entry_error(name, "dtype", "one of " + dtype_names(), json_quoted(info.dtype));

    const std::optional<std::vector<std::uint64_t>> shape = unsigned_array(entry["shape"]);
    if (!shape) {
      throw entry_error(name, "shape", "an array of non-negative integers",
                        describe_json(entry["shape"]));
    }
    // A dimension past int64 or a byte count past 64 bits cannot describe a real file's bytes;
    // either is reported below as a size the range cannot match.
    std::uint64_t bytes = *element_bytes;
    bool overflow = false;
    for (std::uint64_t dim : *shape) {
      overflow = overflow || dim > static_cast<std::uint64_t>(k_int64_max) ||
                 __builtin_mul_overflow(bytes, dim, &bytes);
      info.shape.push_back(overflow ? 0 : static_cast<std::int64_t>(dim));
    }
    const std::optional<std::vector<std::uint64_t>> offsets = unsigned_array(entry["data_offsets"]);
    if (!offsets || offsets->size() != 2) {
      throw entry_error(name, "data_offsets", "an array of two non-negative integers",
                        describe_json(entry["data_offsets"]));
    }
    info.begin = (*offsets)[0];
    info.end = (*offsets)[1];
    const std::string range = fmt::format("[{}, {}]", info.begin, info.end);
    if (info.begin > info.end)
      throw entry_error(name, "data_offsets", "begin <= end", range);
    if (info.end > data_size_) {
      throw entry_error(name, "data_offsets",
                        fmt::format("a range within the {}-byte data section", data_size_), range);
    }
    if (overflow || bytes != info.end - info.begin) {
      const std::string expected =
          overflow ? fmt::format("more bytes than 64 bits count for {} of shape [{}]", info.dtype,
                                 fmt::join(*shape, ", "))
                   : fmt::format("{} bytes for {} of shape {}", bytes, info.dtype,
                                 format_shape(info.shape));
      throw entry_error(name, "data_offsets", expected,
                        fmt::format("{} bytes in {}", info.end - info.begin, range));
    }
    return info;
  }

  // Tensors that hold bytes must not share any; empty ones hold none and may sit anywhere.
  void check_disjoint(const std::map<std::string, TensorInfo, std::less<>>& tensors) const {
    std::vector<const TensorInfo*> ordered;
    for (const auto& [name, info] : tensors) {
      if (info.end > info.begin)
        ordered.push_back(&info);
    }
    std::sort(ordered.begin(), ordered.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
    });
    for (std::size_t i = 1; i < ordered.size(); ++i) {
      const TensorInfo& before = *ordered[i - 1];
      const TensorInfo& after = *ordered[i];
      if (after.begin < before.end) {
        throw entry_error(after.name, "data_offsets",
                          fmt::format("a range that does not overlap {} at [{}, {}]",
                                      json_quoted(before.name), before.begin, before.end),
                          fmt::format("[{}, {}]", after.begin, after.end));
      }
    }
  }

 private:
  static constexpr std::int64_t k_int64_max = std::numeric_limits<std::int64_t>::max();
  std::string path_;
  std::uint64_t data_size_;
};

}  // namespace

std::int64_t TensorInfo::elements() const {
  std::int64_t count = 1;
  for (std::int64_t dim : shape)
    count *= dim;
  return count;
}

std::string format_shape(std::span<const std::int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.path_ = path.string();
  const auto fail = [&](const std::string& field, const std::string& message) {
    return InputError({file.path_, 0, 0, field}, message);
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    const bool exists = std::filesystem::exists(path, ec);
    throw fail("", expected_found("a safetensors file", exists ? "something else" : "none"));
  }
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec)
    throw fail("", "cannot read the file size: " + ec.message());
  file.in_.open(path, std::ios::binary);
  if (!file.in_)
    throw fail("", "cannot open the file");
  if (size < 8) {
    throw fail("header length",
               expected_found("a file of at least 8 bytes", fmt::format("{} bytes", size)));
  }
  std::array<unsigned char, 8> length_bytes{};
  file.in_.read(reinterpret_cast<char*>(length_bytes.data()), 8);
  const std::uint64_t header_bytes = read_u64_le(length_bytes.data());
  if (!file.in_)
    throw fail("header length", "cannot read the first 8 bytes");
  if (header_bytes > size - 8) {
    throw fail("header length",
               expected_found(fmt::format("at most {} (the bytes after it)", size - 8),
                              fmt::format("{}", header_bytes)));
  }
  if (header_bytes > k_max_safetensors_header_bytes) {
    throw fail("header length",
               expected_found(fmt::format("at most {} bytes", k_max_safetensors_header_bytes),
                              fmt::format("{}", header_bytes)));
  }
  std::string text(header_bytes, '\0');
  file.in_.read(text.data(), static_cast<std::streamsize>(header_bytes));
  if (!file.in_)
    throw fail("header", "cannot read the header");
  const nlohmann::json header = detail::parse_strict_json(text, file.path_, "header", 3);
  if (!header.is_object())
    throw fail("header", expected_found("a JSON object", describe_json(header)));

  file.data_start_ = 8 + header_bytes;
  const HeaderChecker checker(file.path_, size - file.data_start_);
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__")
      file.metadata_ = checker.metadata(entry);
    else
      file.tensors_.emplace(name, checker.tensor(name, entry));
  }
  checker.check_disjoint(file.tensors_);
  return file;
}

const TensorInfo& SafetensorsFile::info(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw InputError({path_, 0, 0, std::string(name)}, expected_found("a tensor", "none"));
  return it->second;
}

std::vector<float> SafetensorsFile::read_floats(std::string_view name) {
  const TensorInfo& tensor = info(name);
  std::vector<float> values(static_cast<std::size_t>(tensor.elements()));
  read_into(tensor, values.data());
  return values;
}

std::vector<float> SafetensorsFile::read_floats(std::string_view name,
                                                std::span<const std::int64_t> shape) {
  check_shape(info(name), shape);
  return read_floats(name);
}

Matrix SafetensorsFile::read_matrix(std::string_view name, std::int64_t rows, std::int64_t cols) {
  const TensorInfo& tensor = info(name);
  const std::array<std::int64_t, 2> shape = {rows, cols};
  check_shape(tensor, shape);
  Matrix out(rows, cols);
  read_into(tensor, out.data());
  return out;
}

Eigen::VectorXf SafetensorsFile::read_vector(std::string_view name, std::int64_t size) {
  const TensorInfo& tensor = info(name);
  const std::array<std::int64_t, 1> shape = {size};
  check_shape(tensor, shape);
  Eigen::VectorXf out(size);
  read_into(tensor, out.data());
  return out;
}

void SafetensorsFile::check_shape(const TensorInfo& tensor,
                                  std::span<const std::int64_t> shape) const {
  if (!std::equal(tensor.shape.begin(), tensor.shape.end(), shape.begin(), shape.end())) {
    throw InputError({path_, 0, 0, tensor.name},
                     expected_found("shape " + format_shape(shape), format_shape(tensor.shape)));
  }
}

void SafetensorsFile::read_into(const TensorInfo& tensor, float* out) {
  std::uint64_t element_bytes = 0;
  if (tensor.dtype == "F32")
    element_bytes = 4;
  else if (tensor.dtype == "F16" || tensor.dtype == "BF16")
    element_bytes = 2;
  else
    throw InputError({path_, 0, 0, tensor.name},
                     expected_found("dtype F32, F16 or BF16", tensor.dtype));
  const bool is_f16 = tensor.dtype == "F16";
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(data_start_ + tensor.begin));
  // Chunks keep the extra memory small when a tensor is gigabytes (a large vocabulary's head).
  constexpr std::uint64_t k_chunk_bytes = std::uint64_t{1} << 20;
  std::vector<unsigned char> chunk;
  for (std::uint64_t at = tensor.begin; at < tensor.end;) {
    const std::uint64_t bytes = std::min(k_chunk_bytes, tensor.end - at);
    chunk.resize(bytes);
    in_.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(bytes));
    if (!in_) {
      throw InputError({path_, 0, 0, tensor.name},
                       fmt::format("cannot read bytes [{}, {}] of the data section (did the file "
                                   "change after it was opened?)",
                                   tensor.begin, tensor.end));
    }
    const unsigned char* p = chunk.data();
    const std::uint64_t count = bytes / element_bytes;
    for (std::uint64_t i = 0; i < count; ++i, p += element_bytes) {
      if (element_bytes == 4) {
        const std::uint32_t bits = std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 |
                                   std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
        *out++ = std::bit_cast<float>(bits);
      } else {
        const auto bits = static_cast<std::uint16_t>(p[0] | p[1] << 8);
        *out++ = is_f16 ? detail::half_to_float(bits) : detail::bfloat16_to_float(bits);
      }
    }
    at += bytes;
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_)
    out.push_back(name);
  return out;
}

}  // namespace exitsim::engine

namespace exitsim::engine {

float f16_to_float(std::uint16_t bits) {
  return detail::half_to_float(bits);
}
float bf16_to_float(std::uint16_t bits) {
  return detail::bfloat16_to_float(bits);
}
std::uint16_t float_to_f16(float value) {
  return detail::float_to_half(value);
}
std::uint16_t float_to_bf16(float value) {
  return detail::float_to_bfloat16(value);
}

}  // namespace exitsim::engine
