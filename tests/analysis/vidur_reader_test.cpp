// Vidur's profiling CSVs read by header name: the public files in ../shared/gpu/vidur (skipped
// when absent), checked against rows read from them by hand, and malformed inputs, each one
// error line naming the file, line, column and header name.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/analysis/vidur.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis::vidur {
namespace {

using test_support::error_of;
using test_support::shared_gpu_file;
using test_support::TempDir;

const ComputeTime* find_time(const MlpProfile& profile, const std::string& op, int tp,
                             std::int64_t tokens) {
  for (const ComputeTime& t : profile.times) {
    if (t.op == op && t.tensor_parallel == tp && t.tokens == tokens)
      return &t;
  }
  return nullptr;
}

TEST(VidurReader, ReadsLlama2SevenBMlpProfile) {
  const std::string path = shared_gpu_file("vidur/a100_Llama-2-7b-hf_mlp.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  const MlpProfile profile = read_mlp(path);
  EXPECT_EQ(profile.model.n_head, 32);
  EXPECT_EQ(profile.model.n_kv_head, 32);
  EXPECT_EQ(profile.model.n_embd, 4096);
  EXPECT_EQ(profile.model.n_expanded_embd, 11008);
  EXPECT_EQ(profile.model.vocab_size, 32768);  // Vidur's Llama-2 config, not the 32000 of HF
  EXPECT_TRUE(profile.model.gated);
  // 1044 rows (261 per TP degree 1, 2, 4, 8), ten ops each.
  ASSERT_EQ(profile.times.size(), 10440U);
  const std::vector<std::string> ops = {
      "emb",         "input_layernorm", "attn_pre_proj",
      "attn_rope",   "attn_post_proj",  "post_attention_layernorm",
      "mlp_up_proj", "mlp_act",         "mlp_down_proj",
      "add"};
  for (std::size_t i = 0; i < ops.size(); ++i)
    EXPECT_EQ(profile.times[i].op, ops[i]);
  // Line 2: 4096 tokens at TP 1, mlp_up_proj 3.3655 ms (min 3.016, max 3.369).
  const ComputeTime& up = profile.times[6];
  EXPECT_EQ(up.tokens, 4096);
  EXPECT_EQ(up.tensor_parallel, 1);
  EXPECT_DOUBLE_EQ(up.median_us, 3365.5);
  EXPECT_DOUBLE_EQ(up.min_us, 3016.0);
  EXPECT_DOUBLE_EQ(up.max_us, 3369.0);
  // Line 262: one token at TP 1, attn_pre_proj 0.065 ms; line 778: 32 tokens at TP 4, 0.022 ms.
  const ComputeTime* qkv = find_time(profile, "attn_pre_proj", 1, 1);
  ASSERT_NE(qkv, nullptr);
  EXPECT_DOUBLE_EQ(qkv->median_us, 65.0);
  const ComputeTime* shard = find_time(profile, "attn_pre_proj", 4, 32);
  ASSERT_NE(shard, nullptr);
  EXPECT_DOUBLE_EQ(shard->median_us, 22.0);
  // Duplicated grid points are kept: 4096 tokens at TP 1 twice.
  const auto twice = std::count_if(profile.times.begin(), profile.times.end(), [](const auto& t) {
    return t.op == "add" && t.tensor_parallel == 1 && t.tokens == 4096;
  });
  EXPECT_EQ(twice, 2);
  for (const int tp : {1, 2, 4, 8}) {
    const auto rows = std::count_if(profile.times.begin(), profile.times.end(), [&](const auto& t) {
      return t.op == "emb" && t.tensor_parallel == tp;
    });
    EXPECT_EQ(rows, 261) << "TP " << tp;
  }
}

TEST(VidurReader, ReadsTheOldAttentionGridOfLlama2SeventyBAtTp2) {
  const std::string path = shared_gpu_file("vidur/a100_old_attention_70b_tp2.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  const std::vector<AttentionTime> rows = read_attention(path);
  ASSERT_EQ(rows.size(), 14658U);
  EXPECT_EQ(std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.prefill; }), 4418);
  // Line 2: decode, batch 1 after 32 cached tokens, attn_decode 0.015 ms, reshapes 0 + 0.001.
  const AttentionTime& first = rows.front();
  EXPECT_FALSE(first.prefill);
  EXPECT_EQ(first.tensor_parallel, 2);
  EXPECT_EQ(first.n_q_head, 64);
  EXPECT_EQ(first.n_kv_head, 8);
  EXPECT_EQ(first.n_embd, 8192);
  EXPECT_EQ(first.batch_size, 1);
  EXPECT_EQ(first.prefill_chunk, 0);
  EXPECT_EQ(first.kv_cache, 32);
  EXPECT_DOUBLE_EQ(first.median_us, 15.0);
  EXPECT_DOUBLE_EQ(first.reshape_us, 1.0);
  EXPECT_DOUBLE_EQ(first.kv_save_us, 0.0);  // no attn_kv_cache_save column in this file
  // Line 4001: decode, batch 32 after 1024 cached tokens: 0.064 ms, reshapes 0 + 0.002.
  const AttentionTime& decode = rows[4001 - 2];
  EXPECT_FALSE(decode.prefill);
  EXPECT_EQ(decode.batch_size, 32);
  EXPECT_EQ(decode.kv_cache, 1024);
  EXPECT_DOUBLE_EQ(decode.median_us, 64.0);
  EXPECT_DOUBLE_EQ(decode.reshape_us, 2.0);
  // Line 12687: prefill of a 1024-token chunk with nothing cached: attn_prefill 0.216 ms.
  const AttentionTime& prefill = rows[12687 - 2];
  EXPECT_TRUE(prefill.prefill);
  EXPECT_EQ(prefill.prefill_chunk, 1024);
  EXPECT_EQ(prefill.kv_cache, 0);
  EXPECT_EQ(prefill.batch_size, 1);
  EXPECT_DOUBLE_EQ(prefill.median_us, 216.0);
}

TEST(VidurReader, ReadsNetworkProfilesWithTheirIndexColumn) {
  const std::string all_reduce = shared_gpu_file("vidur/a100_dgx_all_reduce.csv");
  const std::string send_recv = shared_gpu_file("vidur/a100_dgx_send_recv.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(all_reduce);
  EXITSIM_SKIP_UNLESS_EXISTS(send_recv);
  const std::vector<NetworkTime> reduce = read_network(all_reduce);
  // 994 sizes for each of (2, 1), (2, 2), (4, 2), (4, 4), (8, 4), (8, 8), (16, 8).
  ASSERT_EQ(reduce.size(), 6958U);
  EXPECT_EQ(reduce.front().collective, "all_reduce");
  EXPECT_EQ(reduce.front().workers, 2);
  EXPECT_EQ(reduce.front().devices_per_node, 1);
  EXPECT_EQ(reduce.front().size_bytes, 2048);
  EXPECT_DOUBLE_EQ(reduce.front().median_us, 43.0);
  EXPECT_DOUBLE_EQ(reduce.front().min_us, 31.0);
  EXPECT_DOUBLE_EQ(reduce.front().max_us, 77.0);
  // Line 2994: 4 GPUs of one node, 83968 bytes, 0.019 ms.
  const NetworkTime& four = reduce[2994 - 2];
  EXPECT_EQ(four.workers, 4);
  EXPECT_EQ(four.devices_per_node, 4);
  EXPECT_EQ(four.size_bytes, 83968);
  EXPECT_DOUBLE_EQ(four.median_us, 19.0);
  const auto within_node = std::count_if(reduce.begin(), reduce.end(), [](const auto& r) {
    return r.workers == 4 && r.devices_per_node == 4;
  });
  EXPECT_EQ(within_node, 994);

  const std::vector<NetworkTime> send = read_network(send_recv);
  ASSERT_EQ(send.size(), 1988U);
  EXPECT_EQ(send.front().collective, "send_recv");
  EXPECT_EQ(send.front().devices_per_node, 1);
  EXPECT_DOUBLE_EQ(send.front().median_us, 24.0);
}

// A two-op mlp.csv in Vidur's layout, with `rows` appended after its header.
std::string mlp_file(const TempDir& dir, const std::string& rows) {
  return dir.write("mlp.csv",
                   "time_stats.add.min,time_stats.add.max,time_stats.add.median,"
                   "time_stats.emb.min,time_stats.emb.max,time_stats.emb.median,n_head,n_kv_head,"
                   "n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,"
                   "num_tensor_parallel_workers\n" +
                       rows);
}

TEST(VidurReader, ReadsColumnsByNameInAnyOrder) {
  TempDir dir;
  const std::string path = mlp_file(dir,
                                    "0.001,0.003,0.002,0.004,0.006,0.005,8,2,512,1024,1000,False,"
                                    "16,2\n"
                                    "\n"
                                    "0.001,0.003,0.002,0.004,0.006,0.005,8,2,512,1024,1000,False,"
                                    "16.0,2\n");
  const MlpProfile profile = read_mlp(path);
  EXPECT_EQ(profile.model.n_head, 8);
  EXPECT_EQ(profile.model.n_embd, 512);
  EXPECT_FALSE(profile.model.gated);
  ASSERT_EQ(profile.times.size(), 4U);  // the blank line skipped, the duplicate kept
  EXPECT_EQ(profile.times[0].op, "add");
  EXPECT_EQ(profile.times[1].op, "emb");
  EXPECT_DOUBLE_EQ(profile.times[1].median_us, 5.0);
  EXPECT_EQ(profile.times[3].tokens, 16);  // pandas' "16.0"
  EXPECT_EQ(profile.times[3].tensor_parallel, 2);
}

TEST(VidurReader, RefusesMalformedMlpFiles) {
  TempDir dir;
  const std::string row = "0.001,0.003,0.002,0.004,0.006,0.005,8,2,512,1024,1000,False,16,2\n";
  {
    const std::string path =
        mlp_file(dir, row + row.substr(0, row.find(",8,")) + ",8,2,1024,1024,1000,False,32,2\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path +
                  ":3:41: n_embd: expected 512 as on line 2 (one model per file), found "
                  "\"1024\"");
  }
  {
    const std::string path = mlp_file(dir,
                                      "0.001,0.003,x,0.004,0.006,0.005,8,2,512,1024,1000,"
                                      "False,16,2\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path +
                  ":2:13: time_stats.add.median: expected a time in milliseconds >= 0, found "
                  "\"x\"");
  }
  {
    const std::string path = mlp_file(dir,
                                      "0.001,0.003,-0.002,0.004,0.006,0.005,8,2,512,1024,"
                                      "1000,False,16,2\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path +
                  ":2:13: time_stats.add.median: expected a time in milliseconds >= 0, found "
                  "\"-0.002\"");
  }
  {
    const std::string path = mlp_file(dir,
                                      "0.001,0.003,0.002,0.004,0.006,0.005,8,2,512,1024,"
                                      "1000,maybe,16,2\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path + ":2:55: use_gated_mlp: expected True or False, found \"maybe\"");
  }
  {
    const std::string path = mlp_file(dir,
                                      "0.001,0.003,0.002,0.004,0.006,0.005,8,2,512,1024,"
                                      "1000,False,0,2\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path + ":2:61: num_tokens: expected a whole number >= 1, found \"0\"");
  }
  {
    const std::string path = mlp_file(dir, "0.001,0.003,0.002\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }), path + ":2: row: expected 14 fields, found 3");
  }
  {
    const std::string path = mlp_file(dir, "");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path + ":2: row: expected at least one row (Vidur's mlp.csv), found none");
  }
  {
    const std::string path = dir.write("no_tp.csv",
                                       "time_stats.add.min,time_stats.add.max,"
                                       "time_stats.add.median,n_head,n_kv_head,"
                                       "n_embd,n_expanded_embd,vocab_size,"
                                       "use_gated_mlp,num_tokens\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path +
                  ":1: num_tensor_parallel_workers: expected a column "
                  "\"num_tensor_parallel_workers\" (Vidur's mlp.csv), found none among the "
                  "header's 10 columns");
  }
  {
    const std::string path = dir.write("no_min.csv", "time_stats.add.max,time_stats.add.median\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path +
                  ":1: time_stats.add.min: expected a column \"time_stats.add.min\" (Vidur's "
                  "mlp.csv), found none among the header's 2 columns");
  }
  {
    const std::string path = dir.write("twice.csv", "n_head,n_embd,n_head\n");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path + ":1:15: header: expected each column name once, found \"n_head\" twice");
  }
  {
    const std::string path = dir.write("empty.csv", "");
    EXPECT_EQ(error_of([&] { read_mlp(path); }),
              path + ":1: header: expected a header line (Vidur's mlp.csv), found an empty file");
  }
  const std::string missing = dir.path("absent.csv");
  EXPECT_EQ(error_of([&] { read_mlp(missing); }),
            missing + ": expected a readable Vidur's mlp.csv, found a path that cannot be opened");
}

TEST(VidurReader, RefusesMalformedAttentionAndNetworkFiles) {
  TempDir dir;
  const std::string header =
      "time_stats.attn_input_reshape.median,time_stats.attn_decode.min,"
      "time_stats.attn_decode.max,time_stats.attn_decode.median,"
      "time_stats.attn_output_reshape.median,time_stats.attn_prefill.min,"
      "time_stats.attn_prefill.max,time_stats.attn_prefill.median,n_embd,n_q_head,n_kv_head,"
      "num_tensor_parallel_workers,batch_size,prefill_chunk_size,kv_cache_size,is_prefill\n";
  {
    // A decode row must time the decode.
    const std::string path =
        dir.write("attention.csv", header + "0.0,,,,0.001,0.1,0.2,0.15,512,8,2,1,4,0,64,False\n");
    EXPECT_EQ(error_of([&] { read_attention(path); }),
              path +
                  ":2:7: time_stats.attn_decode.median: expected a time in milliseconds >= 0, "
                  "found an empty field");
  }
  {
    const std::string path =
        dir.write("prefill.csv", header + "0.0,,,,0.001,0.1,0.2,0.15,512,8,2,1,1,0,64,True\n");
    EXPECT_EQ(error_of([&] { read_attention(path); }),
              path + ":2:39: prefill_chunk_size: expected a whole number >= 1, found \"0\"");
  }
  {
    const std::string path =
        dir.write("good.csv", header + "0.0,0.01,0.03,0.02,0.001,,,,512,8,2,1,4,0,64,False\n");
    const std::vector<AttentionTime> rows = read_attention(path);
    ASSERT_EQ(rows.size(), 1U);
    EXPECT_DOUBLE_EQ(rows[0].median_us, 20.0);
    EXPECT_DOUBLE_EQ(rows[0].reshape_us, 1.0);
    EXPECT_EQ(rows[0].batch_size, 4);
  }
  const std::string network_header =
      ",time_stats.all_reduce.min,time_stats.all_reduce.max,time_stats.all_reduce.median,rank,"
      "num_workers,size,collective,devices_per_node,max_devices_per_node\n";
  {
    const std::string path =
        dir.write("send.csv", network_header + "0,0.01,0.02,0.015,0,2,2048,send_recv,1,8\n");
    EXPECT_EQ(error_of([&] { read_network(path); }),
              path +
                  ":2:28: collective: expected a collective the header times (all_reduce), "
                  "found \"send_recv\"");
  }
  {
    const std::string path =
        dir.write("size.csv", network_header + "0,0.01,0.02,0.015,0,2,2 KB,all_reduce,1,8\n");
    EXPECT_EQ(error_of([&] { read_network(path); }),
              path + ":2:23: size: expected a whole number >= 1, found \"2 KB\"");
  }
}

}  // namespace
}  // namespace exitsim::analysis::vidur
