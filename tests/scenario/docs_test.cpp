// docs/scenario.md carries the schema reference generated from the schema table, verbatim, so
// the docs cannot drift from what the loader accepts.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "exitsim/scenario/load.hpp"

namespace exitsim::scenario {
namespace {

const std::filesystem::path k_docs = std::filesystem::path(EXITSIM_SOURCE_DIR) / "docs/scenario.md";
constexpr std::string_view k_begin = "<!-- BEGIN GENERATED SCHEMA";
constexpr std::string_view k_end = "<!-- END GENERATED SCHEMA -->\n";

std::string read_docs() {
  std::ifstream in(k_docs, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// EXITSIM_UPDATE_DOCS=1 rewrites the generated section in place (the intro is kept).
void update_docs(std::string docs, const std::string& generated) {
  const auto begin = docs.find(k_begin);
  const auto end = docs.find(k_end);
  if (begin == std::string::npos || end == std::string::npos) {
    docs += "\n" + generated;
  } else {
    docs.replace(begin, end + k_end.size() - begin, generated);
  }
  std::ofstream(k_docs, std::ios::binary) << docs;
}

TEST(SchemaDocs, DocsContainTheGeneratedSchema) {
  const std::string generated = render_schema_markdown();
  const std::string docs = read_docs();
  const char* update = std::getenv("EXITSIM_UPDATE_DOCS");
  if (update != nullptr && std::string(update) == "1") {
    update_docs(docs, generated);
    SUCCEED() << "rewrote " << k_docs;
    return;
  }
  EXPECT_NE(docs.find(generated), std::string::npos)
      << k_docs << " is out of date with the scenario schema. Regenerate it with\n"
      << "  EXITSIM_UPDATE_DOCS=1 <build>/bin/scenario_tests --gtest_filter=SchemaDocs.*\n"
      << "(or `exitsim scenario schema`) and commit the result.";
}

TEST(SchemaDocs, EveryDefaultFileKeyIsDocumented) {
  const std::string generated = render_schema_markdown();
  for (const char* key : {"`scheduler.max_running`", "`workload.trace.rate_scale`",
                          "`exit_policy.position_buckets[].probabilities`", "`sweep[].values`",
                          "`slo.e2e_ms`", "`model.depth.lora_rank`"}) {
    EXPECT_NE(generated.find(key), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace exitsim::scenario
