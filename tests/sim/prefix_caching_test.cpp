// Prefix caching in the simulator (scheduler.prefix_caching): hits skip the prefill of cached
// prompt blocks, the hit rates match what the requests' hashes allow, blocks are shared by
// reference and evicted when the pool needs room, and nothing leaks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/request_traces.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

RequestDescriptor request(std::uint64_t id, TimeNs arrival, std::int64_t input, std::int64_t output,
                          std::vector<std::uint64_t> hashes) {
  RequestDescriptor r{RequestId(id), arrival, input, output};
  r.prefix_hashes = std::move(hashes);
  r.prefix_block_tokens = 512;
  return r;
}

SimulationResult run(std::vector<RequestDescriptor> requests, std::vector<std::string> overrides) {
  test_support::VectorSource source(std::move(requests));
  overrides.push_back("scheduler.prefix_caching=true");
  const auto s = scenario::load_default_scenario(overrides);
  return simulate(simulation_config_from(s, ""), source);
}

// 100 requests a second apart, each 1024 prompt tokens: a shared 512-token system prompt (hash
// 0) and a block of its own. Every request after the first finds the system prompt cached:
// 99 x 512 of 102,400 prompt tokens, and 99 x 32 of the 100 x 64 16-token blocks named.
TEST(PrefixCaching, ASharedSystemPromptHitsAsOftenAsItRecurs) {
  std::vector<RequestDescriptor> requests;
  for (std::uint64_t i = 0; i < 100; ++i)
    requests.push_back(request(i, static_cast<TimeNs>(i) * k_ns_per_s, 1024, 20, {0, 1000 + i}));
  const SimulationResult cached = run(requests, {});
  ASSERT_TRUE(cached.summary.prefix_cache.has_value());
  const PrefixCacheSummary& p = *cached.summary.prefix_cache;
  EXPECT_EQ(p.admitted_prompt_tokens, 102400);
  EXPECT_EQ(p.hit_tokens, 99 * 512);
  EXPECT_DOUBLE_EQ(p.token_hit_rate(), 99.0 * 512 / 102400);
  EXPECT_EQ(p.hashed_blocks, 100 * 64);
  EXPECT_EQ(p.hit_blocks, 99 * 32);
  EXPECT_EQ(p.evicted_blocks, 0);
  EXPECT_GT(p.prefill_flops_saved, 0);
  EXPECT_EQ(cached.totals.kv_blocks_leaked, 0);

  // The hit skips half of each later prompt's prefill: TTFT drops, the tokens are the same.
  test_support::VectorSource plain_source(requests);
  const auto s = scenario::load_default_scenario({});
  const SimulationResult plain = simulate(simulation_config_from(s, ""), plain_source);
  EXPECT_FALSE(plain.summary.prefix_cache.has_value());
  EXPECT_EQ(plain.summary.output_tokens, cached.summary.output_tokens);
  EXPECT_LT(cached.summary.ttft.mean, 0.75 * plain.summary.ttft.mean);
}

// The same on a recursive model whose exited tokens keep K/V only at the recursions they reached
// (skip_kv, depthwise): prompt blocks hold every recursion's rows, so they are shared the same
// way, and a hit counts its tokens as having reached every recursion.
TEST(PrefixCaching, PerRecursionKvLayoutsShareFullDepthPromptBlocks) {
  for (const char* strategy : {"skip_kv", "depthwise"}) {
    SCOPED_TRACE(strategy);
    // The first request is the system prompt alone, so that the peak pool use comes from the
    // hitting requests.
    std::vector<RequestDescriptor> requests = {request(0, 0, 512, 20, {0})};
    for (std::uint64_t i = 1; i < 100; ++i)
      requests.push_back(
          request(i, static_cast<TimeNs>(i) * k_ns_per_s / 4, 1024, 20, {0, 1000 + i}));
    const SimulationResult r =
        run(requests,
            {"model.preset=rrt-gemma-1b", "exit_policy.kind=distribution",
             "exit_policy.probabilities=[0.5, 0.5]", std::string("sync.strategy=") + strategy});
    const PrefixCacheSummary& p = *r.summary.prefix_cache;
    EXPECT_EQ(p.hit_tokens, 99 * 512);
    EXPECT_EQ(r.totals.kv_blocks_leaked, 0);
    EXPECT_EQ(r.totals.tokens_emitted, r.totals.tokens_expected);
    EXPECT_EQ(r.summary.depth.exit_depth_tokens.size(), 2U);  // exits at both points
    // A hit sequence holds its prompt's rows at every recursion, as if it had prefilled them:
    // at most a request or two at a time, the peak pool use is the same without the cache.
    test_support::VectorSource plain_source(requests);
    const auto s = scenario::load_default_scenario(std::vector<std::string>{
        "model.preset=rrt-gemma-1b", "exit_policy.kind=distribution",
        "exit_policy.probabilities=[0.5, 0.5]", std::string("sync.strategy=") + strategy});
    const SimulationResult plain = simulate(simulation_config_from(s, ""), plain_source);
    EXPECT_EQ(r.totals.max_kv_blocks_used, plain.totals.max_kv_blocks_used);
  }
}

// A conversation: turn t's prompt is turn t-1's prompt plus 512 more tokens, so it finds every
// earlier turn's whole blocks cached. An identical prompt finds all of itself cached but runs
// its last token, for the logits of its first output token.
TEST(PrefixCaching, TurnsOfAConversationReuseTheWholeEarlierPrompt) {
  std::vector<RequestDescriptor> requests;
  std::vector<std::uint64_t> hashes;
  for (std::uint64_t turn = 0; turn < 5; ++turn) {
    hashes.push_back(7000 + turn);
    requests.push_back(request(turn, static_cast<TimeNs>(turn) * k_ns_per_s,
                               512 * static_cast<std::int64_t>(turn + 1), 10, hashes));
  }
  requests.push_back(request(5, 5 * k_ns_per_s, 512 * 5, 10, hashes));  // turn 4 again
  const PrefixCacheSummary p = *run(requests, {}).summary.prefix_cache;
  // Turn t hits t x 512 tokens; the repeat hits all but its last block's 16 tokens.
  EXPECT_EQ(p.hit_tokens, 512 * (0 + 1 + 2 + 3 + 4) + (512 * 5 - 16));
  EXPECT_EQ(p.admitted_prompt_tokens, 512 * (1 + 2 + 3 + 4 + 5 + 5));
}

// Two requests at once with the same prompt: neither finds the other's blocks (nothing is cached
// before a prefill fills them), as in vLLM; the second copy of each block is freed when the
// first is cached, so the pool ends empty.
TEST(PrefixCaching, ConcurrentIdenticalPromptsMissAndLeakNothing) {
  const SimulationResult r =
      run({request(0, 0, 2048, 50, {1, 2, 3, 4}), request(1, 0, 2048, 50, {1, 2, 3, 4}),
           request(2, 5 * k_ns_per_s, 2048, 50, {1, 2, 3, 4})},
          {});
  const PrefixCacheSummary& p = *r.summary.prefix_cache;
  EXPECT_EQ(p.hit_tokens, 2048 - 16);  // only the third, after both finished
  EXPECT_EQ(r.totals.kv_blocks_leaked, 0);
}

// A pool of 300 blocks (4,800 tokens) against 40 requests of 2,048 tokens whose prompts are all
// different: the cache fills, unreferenced blocks are evicted to make room, and accounting holds.
// Then the same requests on a pool that keeps them all: a repeat of the first request hits only
// when its blocks were not evicted.
TEST(PrefixCaching, AFullPoolEvictsUnreferencedBlocksAndStillAccountsForEveryBlock) {
  std::vector<RequestDescriptor> requests;
  for (std::uint64_t i = 0; i < 40; ++i) {
    requests.push_back(request(i, static_cast<TimeNs>(i) * 100 * k_ns_per_ms, 2048, 30,
                               {4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3}));
  }
  requests.push_back(request(40, 8 * k_ns_per_s, 2048, 30, {0, 1, 2, 3}));
  const SimulationResult small = run(requests, {"scheduler.kv_blocks=300"});
  const PrefixCacheSummary& s = *small.summary.prefix_cache;
  EXPECT_GT(s.evicted_blocks, 0);
  EXPECT_EQ(s.hit_tokens, 0);  // request 0's blocks went long before its repeat
  EXPECT_EQ(small.totals.kv_blocks_leaked, 0);
  const SimulationResult large = run(requests, {});
  EXPECT_EQ(large.summary.prefix_cache->evicted_blocks, 0);
  EXPECT_EQ(large.summary.prefix_cache->hit_tokens, 2048 - 16);
}

// A scenario's run with prefix caching and a prefix model over fixed lengths, one request a
// second (each finishes long before the next arrives).
PrefixCacheSummary modelled(std::vector<std::string> set) {
  set.insert(set.end(), {"scheduler.prefix_caching=true", "scheduler.kind=chunked_prefill",
                         "workload.arrivals.process=constant", "workload.arrivals.rate=1",
                         "workload.input_tokens.dist=fixed", "workload.output_tokens.dist=fixed",
                         "workload.output_tokens.value=64"});
  const auto s = scenario::load_default_scenario(set);
  const auto source = make_workload(s.workload, s.seed);
  return *simulate(simulation_config_from(s, ""), *source).summary.prefix_cache;
}

// 100 requests of 1,024 tokens, each starting with one of two 512-token system prompts: all but
// each prompt's first request hit it.
TEST(PrefixModel, SystemPromptsHitOnceEachPromptWasSeen) {
  const PrefixCacheSummary p =
      modelled({"workload.requests=100", "workload.input_tokens.value=1024",
                "workload.prefix.kind=system_prompts", "workload.prefix.prompts=2",
                "workload.prefix.tokens=512"});
  EXPECT_EQ(p.admitted_prompt_tokens, 102400);
  EXPECT_EQ(p.hit_tokens, 98 * 512);
  EXPECT_EQ(p.hashed_blocks, 100 * 32);
}

// Four conversations of three turns, new messages of 512 tokens and answers of 64: turn 2's
// prompt (1,088 tokens) starts with turn 1's 32 whole blocks, turn 3's (1,664) with turn 2's 68.
// Each conversation hits 512 + 1,088 of its 512 + 1,088 + 1,664 prompt tokens.
TEST(PrefixModel, EachTurnReusesThePreviousTurnsWholePromptBlocks) {
  const PrefixCacheSummary p = modelled({"workload.requests=12", "workload.input_tokens.value=512",
                                         "workload.prefix.kind=sessions", "workload.prefix.turns=3",
                                         "workload.prefix.concurrent=4"});
  EXPECT_EQ(p.admitted_prompt_tokens, 4 * (512 + 1088 + 1664));
  EXPECT_EQ(p.hit_tokens, 4 * (512 + 1088));
}

// Four replicas with room for about two system prompts' blocks each, and four 2,048-token system
// prompts: round robin sends every prompt everywhere and each replica keeps evicting the ones it
// cannot hold; prefix_affinity sends each prompt back to the replica that has it.
TEST(PrefixRouting, AffinityKeepsEachSystemPromptWhereItIsCached) {
  const auto run_with = [](const std::string& router) {
    const std::vector<std::string> set = {"cluster.replicas=4",
                                          "cluster.router=" + router,
                                          "scheduler.prefix_caching=true",
                                          "scheduler.kv_blocks=400",
                                          "workload.requests=400",
                                          "workload.arrivals.rate=8",
                                          "workload.input_tokens.dist=fixed",
                                          "workload.input_tokens.value=2560",
                                          "workload.output_tokens.dist=fixed",
                                          "workload.output_tokens.value=32",
                                          "workload.prefix.kind=system_prompts",
                                          "workload.prefix.prompts=4",
                                          "workload.prefix.tokens=2048"};
    const auto s = scenario::load_default_scenario(set);
    const auto source = make_workload(s.workload, s.seed);
    return simulate(simulation_config_from(s, ""), *source);
  };
  const SimulationResult spread = run_with("round_robin");
  const SimulationResult sticky = run_with("prefix_affinity");
  // Round robin: 53% of prompt tokens hit, 15,753 blocks evicted. Affinity: 78.8%, none evicted;
  // the most possible is 80% (the system prompt's share of each prompt) less each prompt's first
  // request and the few the balance bound sends elsewhere while the replicas are idle.
  const PrefixCacheSummary& a = *spread.summary.prefix_cache;
  const PrefixCacheSummary& b = *sticky.summary.prefix_cache;
  EXPECT_GT(a.evicted_blocks, 0);
  EXPECT_LT(a.token_hit_rate(), 0.6);
  EXPECT_EQ(b.evicted_blocks, 0);
  EXPECT_GT(b.token_hit_rate(), 0.78);
  EXPECT_LE(b.token_hit_rate(), 0.8);
  EXPECT_EQ(sticky.totals.kv_blocks_leaked, 0);
}

TEST(PrefixModel, SessionsAreRefusedForATraceWhoseLengthsAreItsOwn) {
  const auto s = scenario::load_default_scenario(std::vector<std::string>{
      "workload.source=trace", "workload.trace.path=trace.csv", "workload.prefix.kind=sessions"});
  try {
    make_workload(s.workload, s.seed);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "workload.prefix.kind: expected none or system_prompts for a replayed trace "
              "(sessions set prompt lengths, and a trace's are its own), found sessions");
  }
}

// The Mooncake trace's first 150 requests one at a time (max_running 1) on a pool that keeps
// every block: each request hits the longest prefix of its hash_ids that an earlier request's
// whole 512-token blocks held, counted here from the file itself, capped so that the prompt's
// last token runs.
TEST(PrefixCaching, MooncakeHitRateIsWhatTheTracesOwnHashesAllow) {
  const std::string path = test_support::shared_trace("mooncake_synthetic.jsonl");
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "trace absent (../shared/traces)";
  constexpr int k_requests = 150;
  std::ifstream in(path);
  std::set<std::vector<std::uint64_t>> seen;  // prefixes of whole blocks cached so far
  std::int64_t prompt_tokens = 0;
  std::int64_t expected_hit = 0;
  std::string line;
  for (int i = 0; i < k_requests && std::getline(in, line); ++i) {
    const auto row = nlohmann::json::parse(line);
    const auto input = row["input_length"].get<std::int64_t>();
    const auto ids = row["hash_ids"].get<std::vector<std::uint64_t>>();
    const auto whole = std::min<std::size_t>(ids.size(), static_cast<std::size_t>(input / 512));
    std::size_t matched = 0;
    while (matched < whole && seen.count(std::vector<std::uint64_t>(
                                  ids.begin(), ids.begin() + static_cast<long>(matched) + 1)) > 0)
      ++matched;
    expected_hit +=
        std::min<std::int64_t>(static_cast<std::int64_t>(matched) * 512, (input - 1) / 16 * 16);
    prompt_tokens += input;
    for (std::size_t k = 1; k <= whole; ++k)
      seen.insert(std::vector<std::uint64_t>(ids.begin(), ids.begin() + static_cast<long>(k)));
  }
  const std::vector<std::string> set = {"workload.source=trace",
                                        "workload.trace.path=" + path,
                                        "workload.trace.max_requests=" + std::to_string(k_requests),
                                        "model.preset=smollm-135m",
                                        "model.max_context=0",
                                        "hardware.preset=h200",
                                        "scheduler.kind=chunked_prefill",
                                        "scheduler.max_running=1",
                                        "scheduler.prefix_caching=true"};
  const auto s = scenario::load_default_scenario(set);
  const auto source = make_workload(s.workload, s.seed);
  const SimulationResult r = simulate(simulation_config_from(s, ""), *source);
  const PrefixCacheSummary& p = *r.summary.prefix_cache;
  EXPECT_EQ(p.evicted_blocks, 0);
  EXPECT_EQ(p.admitted_prompt_tokens, prompt_tokens);
  EXPECT_EQ(p.hit_tokens, expected_hit);
  // 158,720 of 2,037,770 prompt tokens (7.8%): the first requests have little history. Over the
  // whole trace an unbounded cache would serve 65.0% (docs/simulator.md, "Prefix caching").
  EXPECT_EQ(p.hit_tokens, 158720);
}

}  // namespace
}  // namespace exitsim::sim
