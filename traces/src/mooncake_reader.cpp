// Mooncake traces (FAST 2025): JSON Lines with timestamp (ms, relative), input_length,
// output_length and hash_ids (prefix-block hashes, checked but not kept). No header line.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "exitsim/core/error.hpp"
#include "exitsim/core/json_input.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/traces/json_document.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

using nlohmann::json;

constexpr std::int64_t k_ns_per_ms = 1'000'000;
constexpr std::int64_t k_ns_per_s = 1'000'000'000;
// The largest millisecond count within the arrival range (k_max_arrival_ns, about 146 years).
constexpr std::int64_t k_max_ms = k_max_arrival_ns / k_ns_per_ms;

// How a JSON value appears after "found" in a message.
std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "the string " + json_shown(value);
    case json::value_t::boolean:
      return "the boolean " + json_shown(value);
    case json::value_t::null:
      return "null";
    case json::value_t::number_float:
      return "the number " + json_shown(value);
    default:
      return json_shown(value);
  }
}

class MooncakeSource final : public RowSource {
 public:
  MooncakeSource(TraceInput input, bool skip_bad_rows)
      : RowSource(std::move(input), RequestTraceFormat::mooncake, skip_bad_rows,
                  ArrivalPresence::always, Naming{"timestamp", ""}) {}

  bool may_carry_prefix_hashes() const override { return true; }

 private:
  std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) override {
    json object;
    try {
      // exitsim's JSON limits, a row at a time: 32 levels, each key once, no NUL.
      object = parse_json(line, JsonInput{std::string(where.file), "a JSON object"});
    } catch (const InputError& error) {  // the row's line, not the whole file
      fail_at(where, 0, "", error.message());
    }
    if (!object.is_object()) {
      fail_at(where, 1, "", expected_found("a JSON object", describe(object)));
    }

    ParsedRow row;
    row.time = timestamp(where, require(where, object, "timestamp"));
    row.time_text = time_text_;
    row.input_tokens = token_count(where, require(where, object, "input_length"), "input_length");
    row.output_tokens =
        token_count(where, require(where, object, "output_length"), "output_length");
    row.prefix_hashes = hash_ids(where, object);
    row.prefix_block_tokens = row.prefix_hashes.empty() ? 0 : k_mooncake_block_tokens;
    return row;
  }

  static const json& require(const RowContext& where, const json& object, const char* key) {
    const auto it = object.find(key);
    if (it == object.end()) {
      fail_at(where, 0, key, expected_found("a key \"" + std::string(key) + "\"", "none"));
    }
    return *it;
  }

  Timestamp timestamp(const RowContext& where, const json& value) {
    time_text_ = json_shown(value);
    const std::string expected = "a number of milliseconds from 0 to " + std::to_string(k_max_ms);
    std::int64_t ns = 0;
    if (value.is_number_unsigned()) {
      const auto ms = value.get<std::uint64_t>();
      if (ms > static_cast<std::uint64_t>(k_max_ms)) {
        fail_at(where, 0, "timestamp", expected_found(expected, time_text_));
      }
      ns = static_cast<std::int64_t>(ms) * k_ns_per_ms;
    } else if (value.is_number_integer()) {
      // Unsigned integers were handled above, so this one is negative or "-0", which is 0.
      if (value.get<std::int64_t>() != 0) {
        fail_at(where, 0, "timestamp", expected_found(expected, time_text_));
      }
    } else if (value.is_number_float()) {
      const auto ms = value.get<double>();
      if (!(ms >= 0.0 && ms <= static_cast<double>(k_max_ms))) {
        fail_at(where, 0, "timestamp", expected_found(expected, time_text_));
      }
      ns = std::llround(ms * static_cast<double>(k_ns_per_ms));
    } else {
      fail_at(where, 0, "timestamp", expected_found(expected, describe(value)));
    }
    return Timestamp{ns / k_ns_per_s, ns % k_ns_per_s};
  }

  static std::int64_t token_count(const RowContext& where, const json& value, const char* key) {
    if (value.is_number_unsigned()) {
      const auto count = value.get<std::uint64_t>();
      if (count > static_cast<std::uint64_t>(k_max_tokens)) {
        fail_at(where, 0, key,
                expected_found("a token count of at most " + std::to_string(k_max_tokens),
                               json_shown(value)));
      }
      return check_token_count(where, static_cast<std::int64_t>(count), 0, key);
    }
    if (value.is_number_integer()) {
      return check_token_count(where, value.get<std::int64_t>(), 0, key);
    }
    fail_at(where, 0, key, expected_found("an integer token count", describe(value)));
  }

  // The prompt's 512-token prefix blocks, named (the trace's documentation: "hash_ids
  // (512-token prefix-block hashes)"); requests sharing an id share that block's tokens.
  static constexpr std::int64_t k_mooncake_block_tokens = 512;

  static std::vector<std::uint64_t> hash_ids(const RowContext& where, const json& object) {
    std::vector<std::uint64_t> hashes;
    const auto it = object.find("hash_ids");
    // Optional: other Mooncake exports leave the hashes out, and then nothing is shared.
    if (it == object.end())
      return hashes;
    const std::string expected = "an array of non-negative integers";
    if (!it->is_array())
      fail_at(where, 0, "hash_ids", expected_found(expected, describe(*it)));
    hashes.reserve(it->size());
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& element = (*it)[i];
      if (!element.is_number_unsigned()) {
        fail_at(where, 0, "hash_ids",
                expected_found(expected, describe(element) + " at index " + std::to_string(i)));
      }
      hashes.push_back(element.get<std::uint64_t>());
    }
    return hashes;
  }

  std::string time_text_;
};

}  // namespace

std::unique_ptr<RequestSource> open_mooncake_trace(TraceInput input, bool skip_bad_rows) {
  return std::make_unique<MooncakeSource>(std::move(input), skip_bad_rows);
}

}  // namespace exitsim::traces
