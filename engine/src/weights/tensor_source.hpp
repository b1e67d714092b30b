#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/engine/safetensors.hpp"

namespace exitsim::engine::detail {

// The tensors of a model, in one safetensors file or in the shards a Hugging Face
// model.safetensors.index.json names. Every shard's header is validated on open; a tensor stored
// in two shards is an error, since which one the model would use would be arbitrary.
class TensorSource {
 public:
  // `path` ends in ".index.json" for a sharded checkpoint.
  static TensorSource open(const std::filesystem::path& path);

  bool has(std::string_view name) const { return owner_.find(name) != owner_.end(); }
  // Precondition: has(name).
  SafetensorsFile& file_of(std::string_view name);
  const TensorInfo& info(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted, over every shard

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::size_t, std::less<>> owner_;  // tensor name -> index into files_
};

}  // namespace exitsim::engine::detail
