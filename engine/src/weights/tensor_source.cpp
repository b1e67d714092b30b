#include "weights/tensor_source.hpp"

#include <fmt/format.h>

#include <set>

#include "exitsim/core/error.hpp"
#include "weights/strict_json.hpp"

namespace exitsim::engine::detail {
namespace {

constexpr std::uint64_t k_max_index_bytes = 64u << 20;

// The shard files an index names, each a plain file name next to the index: a path elsewhere
// would let a downloaded index read files outside the model directory.
std::vector<std::string> shard_names(const std::filesystem::path& index_path) {
  const std::string file = index_path.string();
  const nlohmann::json root =
      parse_strict_json(read_small_file(index_path, k_max_index_bytes), file, "", 8);
  if (!root.is_object())
    throw InputError({file, 0, 0, ""}, expected_found("a JSON object", describe_json(root)));
  const ObjectReader reader(root, file, "");
  const nlohmann::json* map = reader.object("weight_map");
  if (map == nullptr)
    throw reader.error("weight_map", "an object of tensor name -> shard file", "none");
  std::set<std::string> shards;
  for (const auto& [name, shard] : map->items()) {
    const std::string field = "weight_map." + name;
    if (!shard.is_string())
      throw InputError({file, 0, 0, field}, expected_found("a file name", describe_json(shard)));
    const std::string shard_name = shard.get<std::string>();
    const std::filesystem::path shard_path(shard_name);
    if (shard_name.empty() || shard_path.has_parent_path() || shard_name == "." ||
        shard_name == "..") {
      throw InputError({file, 0, 0, field}, expected_found("a file name in the index's directory",
                                                           json_quoted(shard_name)));
    }
    shards.insert(shard_name);
  }
  return {shards.begin(), shards.end()};
}

}  // namespace

TensorSource TensorSource::open(const std::filesystem::path& path) {
  TensorSource source;
  const std::string path_text = path.string();
  const bool sharded = path_text.ends_with(".index.json");
  if (!sharded) {
    source.files_.push_back(SafetensorsFile::open(path));
  } else {
    for (const std::string& shard : shard_names(path))
      source.files_.push_back(SafetensorsFile::open(path.parent_path() / shard));
  }
  for (std::size_t i = 0; i < source.files_.size(); ++i) {
    for (const std::string& name : source.files_[i].names()) {
      const auto [it, inserted] = source.owner_.emplace(name, i);
      if (!inserted) {
        throw InputError({source.files_[i].path(), 0, 0, name},
                         expected_found("each tensor in one shard",
                                        "it also in " + source.files_[it->second].path()));
      }
    }
  }
  return source;
}

SafetensorsFile& TensorSource::file_of(std::string_view name) {
  return files_[owner_.find(name)->second];
}

const TensorInfo& TensorSource::info(std::string_view name) const {
  return files_[owner_.find(name)->second].info(name);
}

std::vector<std::string> TensorSource::names() const {
  std::vector<std::string> out;
  out.reserve(owner_.size());
  for (const auto& [name, index] : owner_)
    out.push_back(name);
  return out;
}

}  // namespace exitsim::engine::detail
