#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::scenario::detail {

// The scenario schema: one row per key path, in the order files, docs and rendered output use.
// Validation, defaults, the resolved Scenario, render_resolved_yaml and the docs page all read
// this table; nothing else lists keys.

enum class Type {
  section,  // a mapping of further keys
  integer,
  number,
  boolean,
  string,
  enumeration,  // one of `allowed`
  identifier,   // letters, digits, '_' (open-ended names such as user-registered schedulers)
  integer_list,
  number_list,
  scalar_list,  // sweep values: checked later against the key they sweep
  string_list,
  records,  // a list of mappings whose keys are this key's children
};

// Bounds for numbers and for each item of a number list. Open bounds exclude the limit.
struct Range {
  std::optional<double> min;
  std::optional<double> max;
  bool min_open = false;
  bool max_open = false;
};

using Value =
    std::variant<std::monostate, bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                 std::vector<double>, std::vector<std::string>>;

// A validated value with where it came from.
struct Resolved {
  std::string key;     // key path (records: the child key path)
  Value value;         // std::monostate = null
  SourceLocation loc;  // where it was written; the file alone when it is a default
  bool given = false;  // written by the user (file or --set), not defaulted
  std::vector<SourceLocation> item_locs;       // lists: one per item
  std::vector<std::vector<Resolved>> records;  // records: one row per item, schema order
};

// The cell of `key` in a records row (Resolved::records); a null one when the row has none.
const Resolved& cell(const std::vector<Resolved>& row, const std::string& key);

enum class DefaultKind {
  value,                 // default_value when absent
  required,              // must be given when the key applies
  preset,                // a preset name used when the section gives no shape key
  from_preset,           // from the section's preset; required without one
  from_preset_or_value,  // from the section's preset; default_value without one
};

// The key applies only when the (earlier) key `key` resolved to one of `values`.
struct Condition {
  std::string key;
  std::vector<std::string> values;
  bool empty() const { return key.empty(); }
};

// How a key's value moves in and out of the Scenario struct.
struct Binding {
  std::function<void(Scenario&, const Resolved&)> store;
  std::function<Resolved(const Scenario&)> load;
};

struct KeyDef {
  std::string path;
  Type type = Type::section;
  std::string doc;
  DefaultKind default_kind = DefaultKind::value;
  Value default_value;
  Range range;
  std::vector<std::string> allowed;  // enumeration values; identifier: suggested built-ins
  bool nullable = false;             // null is a valid value (no SLO, no preset)
  Condition when;
  bool defines_shape = false;  // giving it turns off the section's default preset
  // A non-null value supplies the section's shape as its preset does (model.hf_config): keys
  // that default from the preset take it from there instead.
  bool shape_source = false;
  std::string preset_key;  // the preset a from_preset default reads
  // A file the run reads: relative in a scenario file, it names a file beside the scenario; in
  // --set, beside the working directory. $EXITSIM_TRACES at its start is the traces folder.
  bool input_path = false;
  Binding bind;  // empty for sections and for record children

  std::string name() const;         // last path segment
  std::string_view parent() const;  // "" for top-level keys; a view into `path`
  bool is_scalar() const;           // a single value (sweepable)
};

const std::vector<KeyDef>& schema();
const KeyDef* find_key(std::string_view path);
// Direct children of a section (or of a records key), in schema order; "" = top level.
const std::vector<const KeyDef*>& children_of(std::string_view parent);
std::vector<std::string> child_names(std::string_view parent);

// Rows of each section, concatenated by schema() in this order.
std::vector<KeyDef> general_keys();
std::vector<KeyDef> model_keys();
std::vector<KeyDef> hardware_keys();
std::vector<KeyDef> workload_keys();
std::vector<KeyDef> exit_policy_keys();
std::vector<KeyDef> serving_keys();  // sync, scheduler, cluster, slo
std::vector<KeyDef> cluster_keys();  // part of serving_keys

// Whether a scenario's replicas are written as cluster.groups rather than cluster.replicas: when
// they are not all the top-level scenario (a single group with no overrides is just replicas).
bool renders_groups(const Scenario& s);

// cluster.replicas, and the sum of the groups' counts, stay within this.
constexpr std::int64_t k_max_replicas = 100000;
std::vector<KeyDef> output_keys();  // sweep, outputs

}  // namespace exitsim::scenario::detail
