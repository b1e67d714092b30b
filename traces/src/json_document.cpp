#include "exitsim/traces/json_document.hpp"

namespace exitsim::traces {

nlohmann::json parse_json_document(std::string_view text, const std::string& path,
                                   const std::string& what) {
  return parse_json(text, JsonInput{path, what, k_max_json_document_bytes});
}

}  // namespace exitsim::traces
