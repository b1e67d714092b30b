// Hostile scenario files and --set values (docs/findings D1-D3, D10, D17, D18, D21): each is
// refused on one line naming the place, before it can exhaust the stack, the memory or the time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "support/scenario_error.hpp"

namespace exitsim::scenario {
namespace {

using test_support::error_of;

// D1: an alias of the mapping it is in made yaml-cpp's node graph a cycle; converting it recursed
// until the stack overflowed (SIGSEGV), in files and in --set values alike.
TEST(HostileYaml, ASelfReferencingAliasIsRefusedAtItsAnchor) {
  EXPECT_EQ(error_of("a: &d\n  b: *d\n"),
            "s.yaml:1:4: expected a value without an anchor, found the anchor &d: scenarios take "
            "no YAML anchors or aliases");
  EXPECT_EQ(error_of("", {"name=&d {a: *d}"}),
            "--set: name: expected a value without an anchor, found the anchor &d: scenarios "
            "take no YAML anchors or aliases");
  // An alias whose anchor yaml-cpp never saw is refused as an alias.
  EXPECT_EQ(error_of("", {"name=*d"}).find("--set: name: "), 0U);
}

// D3: seven levels of ten aliases each expand 405 bytes to 10^7 nodes before validation.
TEST(HostileYaml, NestedAliasesAreRefusedBeforeAnyExpansion) {
  std::string laughs = "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int level = 1; level <= 8; ++level) {
    laughs += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i)
      laughs += (i > 0 ? ", *a" : "*a") + std::to_string(level - 1);
    laughs += "]\n";
  }
  // Refused at the first anchor, line 1, while reading: nothing was expanded (10^9 would-be
  // nodes would not fit in memory).
  EXPECT_EQ(error_of(laughs).find("s.yaml:1:5: expected a value without an anchor"), 0U);
}

// D2: a leading comma made yaml-cpp's LoadAll append empty documents until memory ran out.
TEST(HostileYaml, AStrayLeadingCommaIsOneErrorNotAnEndlessRead) {
  for (const std::string text : {",", ",[", "# comment\n, x: 1\n"}) {
    EXPECT_EQ(error_of(text),
              "s.yaml: expected one YAML document, found more than one (a \"---\" or a stray "
              "leading \",\" starts another)")
        << text;
  }
  EXPECT_EQ(error_of("seed: 1\n---\nseed: 2\n").find("s.yaml: expected one YAML document"), 0U);
}

// D21: a second document in a --set value was silently dropped.
TEST(HostileYaml, ASecondDocumentInASetValueIsRefused) {
  EXPECT_EQ(error_of("", {"scheduler.max_running=4\n---\n5"}),
            "--set: scheduler.max_running: expected one YAML document, found more than one (a "
            "\"---\" or a stray leading \",\" starts another)");
}

// D18: 5,000 nested lists reported only yaml-cpp's "bad file".
TEST(HostileYaml, DeepNestingIsRefusedWithItsLimit) {
  const std::string deep_list = "x: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  EXPECT_EQ(error_of(deep_list),
            "s.yaml:1:35: expected at most 32 levels of nesting, found deeper nesting");
  std::string deep_map;
  for (int i = 0; i < 1000; ++i)
    deep_map += std::string(static_cast<std::size_t>(i), ' ') + "k" + std::to_string(i) + ":\n";
  EXPECT_EQ(error_of(deep_map).find("s.yaml:33:33: expected at most 32 levels of nesting"), 0U);
  EXPECT_EQ(error_of("", {"name=" + std::string(3000, '[') + std::string(3000, ']')}),
            "--set: name: expected at most 32 levels of nesting, found deeper nesting");
  // Real scenarios nest a handful of levels: sweeps of mappings still load.
  EXPECT_EQ(error_of("workload:\n  input_tokens: {dist: lognormal, mean: 96, sigma: 0.6}\n"
                     "sweep:\n  - key: scheduler.max_running\n    values: [4, 8]\n"),
            "no error");
}

// D10, D17: a 10 MB value was echoed whole, and control bytes raw (a terminal escape).
TEST(HostileYaml, FoundValuesAreEscapedAndCut) {
  EXPECT_EQ(error_of("scheduler:\n  max_running: \x1b[31mRED\x1b[0m\n"),
            "s.yaml:2:16: scheduler.max_running: expected an integer, found "
            "\"\\x1b[31mRED\\x1b[0m\"");
  const std::string huge = error_of("scheduler:\n  max_running: " + std::string(10'000'000, 'x'));
  EXPECT_LE(huge.size(), 1100U);
  EXPECT_NE(huge.find("bytes cut"), std::string::npos);
  EXPECT_EQ(huge.find("s.yaml:2:16: scheduler.max_running: expected an integer"), 0U);
}

// D21: /dev/zero or a mistaken huge file was read until std::bad_alloc.
TEST(HostileYaml, AFileOverTheSizeCapIsRefusedUnread) {
  try {
    load_scenario_file("/dev/zero");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/dev/zero: expected a scenario of at most 16 MiB, found a larger file");
  }
}

}  // namespace
}  // namespace exitsim::scenario
