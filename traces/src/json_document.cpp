#include "exitsim/traces/json_document.hpp"

#include <fmt/format.h>

#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::traces {

nlohmann::json parse_json_document(std::string_view text, const std::string& path,
                                   const std::string& what) {
  const std::string_view body = without_utf8_bom(text);
  if (const std::size_t nul = body.find('\0'); nul != std::string_view::npos) {
    throw InputError({path, 0, 0, ""},
                     expected_found(what, fmt::format("a NUL byte at byte {}", nul + 1)));
  }
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError({path, 0, 0, ""},
                     expected_found(what, fmt::format("invalid JSON at byte {}", e.byte)));
  } catch (const nlohmann::json::exception& e) {  // 1e400: nlohmann's out_of_range
    throw InputError({path, 0, 0, ""}, expected_found("JSON numbers within the range of a double",
                                                      library_message(e)));
  }
}

std::string json_shown(const nlohmann::json& value) {
  constexpr std::size_t k_max_shown_bytes = 60;
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() <= k_max_shown_bytes)
    return text;
  std::size_t cut = k_max_shown_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;  // not inside a UTF-8 sequence
  return text.substr(0, cut) + "...";
}

}  // namespace exitsim::traces
