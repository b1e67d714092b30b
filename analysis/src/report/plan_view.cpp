// The capacity plan as the report reads it: parsed once, its candidates found by key.
#include <nlohmann/json.hpp>

#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {

PlanView::PlanView(const ReportInputs& in) {
  const nlohmann::json plan = plan_document(in);
  if (plan.is_null())
    return;
  for (const nlohmann::json& c : plan["candidates"]) {
    if (!c.is_object() || !c.contains("candidate") || !c["candidate"].is_string())
      continue;
    if (load_key.empty())
      load_key = c.value("load_key", std::string());
    candidates.emplace(c["candidate"].get<std::string>(), c);
  }
}

const nlohmann::json* PlanView::find(const std::string& key) const {
  const auto it = candidates.find(key);
  return it == candidates.end() ? nullptr : &it->second;
}

double json_number(const nlohmann::json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_number()
             ? object[field].get<double>()
             : std::numeric_limits<double>::quiet_NaN();
}

double PlanView::number(const std::string& key, const char* field) const {
  const nlohmann::json* c = find(key);
  return c != nullptr ? json_number(*c, field) : std::numeric_limits<double>::quiet_NaN();
}

bool is_capacity(const std::string& metric) {
  return metric == "sustainable_load" || metric == "sustainable_tokens_per_s";
}

}  // namespace exitsim::analysis::report_parts
