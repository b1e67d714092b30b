// `exitsim calibrate --vidur-mlp`: Vidur's public profiles of Llama-2-7B on A100
// (../shared/gpu/vidur, skipped when absent) in, a TP-4 profile out that `simulate` prices a TP-4
// replica with, saying what the roofline priced; the command line's mistakes refused in one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_fixture.hpp"

namespace cli_support {
namespace {

const std::string k_vidur = std::string(EXITSIM_SHARED_GPU_DIR) + "/vidur/";

const std::string k_scenario =
    " --set model.preset=llama-2-7b --set hardware.preset=a100-80gb"
    " --set cost_model.kind=calibrated --set workload.requests=40"
    " --set 'workload.input_tokens={dist: fixed, value: 256}'"
    " --set 'workload.output_tokens={dist: fixed, value: 16}' --no-output";

TEST_F(Cli, ImportsVidursProfileAtTp4AndSimulatesATp4Replica) {
  const std::string mlp = k_vidur + "a100_Llama-2-7b-hf_mlp.csv";
  if (!fs::exists(mlp) || !fs::exists(k_vidur + "a100_dgx_all_reduce.csv"))
    GTEST_SKIP() << k_vidur << " is absent";
  const fs::path profile = dir_ / "tp4.json";
  const Result imported =
      run("calibrate --vidur-mlp '" + mlp + "' --vidur-all-reduce '" + k_vidur +
          "a100_dgx_all_reduce.csv' --vidur-send-recv '" + k_vidur +
          "a100_dgx_send_recv.csv' --model-name llama-2-7b --hardware a100 --tensor-parallel 4 "
          "-o '" +
          profile.string() + "'");
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  for (const char* line :
       {"source     vidur cuda on a100-80gb, model llama-2-7b (d4096 h32/32x128 ffn11008 v32000 "
        "gated depth 32+0x0+0 lora -), one GPU of 4 (tensor parallel)",
        "hardware   a100-80gb (Vidur's a100 is exitsim's a100-80gb)",
        "mapping    attn_norm = input_layernorm + add; mlp_norm = post_attention_layernorm + add",
        "attention  no attention file given: attention and attention.prefill fitted to the "
        "roofline's prices on a100-80gb at TP 4",
        "network    tp_all_reduce = all_reduce of 4 GPUs in one node, 993 sizes",
        "NOTE       not measured, fitted to exitsim's roofline (a100-80gb): attention, "
        "attention.prefill, kv_write, lm_head, sampling, state_copy.kv_proj",
        "wrote      "}) {
    EXPECT_NE(imported.out.find(line), std::string::npos) << line << "\n" << imported.out;
  }
  const std::string written = slurp(profile);
  EXPECT_NE(written.find("\"tensor_parallel\": 4"), std::string::npos);
  EXPECT_NE(written.find("\"measured_by\": \"roofline\""), std::string::npos);

  const Result simulated = run("simulate --set cost_model.profile='" + profile.string() +
                               "' --set parallel.tensor=4" + k_scenario);
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_NE(simulated.out.find("TPOT"), std::string::npos) << simulated.out;
  EXPECT_NE(simulated.out.find("not in the profile, priced by the roofline: the logits gather"),
            std::string::npos)
      << simulated.out;
  // Pipeline stages hand off by the measured send_recv.
  const Result pipelined = run("simulate --set cost_model.profile='" + profile.string() +
                               "' --set parallel.tensor=4 --set parallel.pipeline=2" + k_scenario);
  ASSERT_EQ(pipelined.exit_code, 0) << pipelined.err;
  EXPECT_NE(pipelined.out.find("pp_send_recv, qkv_proj"), std::string::npos) << pipelined.out;

  const Result other = run("simulate --set cost_model.profile='" + profile.string() +
                           "' --set parallel.tensor=2" + k_scenario);
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("parallel.tensor: expected 4 (the profile's source.tensor_parallel"),
            std::string::npos)
      << other.err;
}

TEST_F(Cli, CalibrateRefusesVidurOptionsItCannotUse) {
  const fs::path profile = dir_ / "p.json";
  const fs::path csv = file("mlp.csv", "n_head\n");
  const Result stray = run("calibrate --kineto '" + csv.string() + "' --vidur-attention '" +
                           csv.string() + "' -o '" + profile.string() + "'");
  EXPECT_EQ(stray.exit_code, 1);
  EXPECT_NE(stray.err.find("--vidur-attention: expected --vidur-mlp beside it, found none"),
            std::string::npos)
      << stray.err;
  const Result unnamed = run("calibrate --vidur-mlp '" + csv.string() +
                             "' --model-name llama-2-7b -o '" + profile.string() + "'");
  EXPECT_EQ(unnamed.exit_code, 1);
  EXPECT_NE(unnamed.err.find("--hardware: expected the exitsim hardware preset Vidur measured on "
                             "(a100-80gb for Vidur's a100, h100-sxm for its h100), found none"),
            std::string::npos)
      << unnamed.err;
  const Result degree = run("calibrate --kineto '" + csv.string() + "' --tensor-parallel 2 -o '" +
                            profile.string() + "'");
  EXPECT_EQ(degree.exit_code, 1);
  EXPECT_NE(degree.err.find("--tensor-parallel: expected --vidur-mlp beside it"), std::string::npos)
      << degree.err;
  const Result broken =
      run("calibrate --vidur-mlp '" + csv.string() +
          "' --model-name llama-2-7b --hardware a100-80gb -o '" + profile.string() + "'");
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("mlp.csv:1: header: expected time_stats.<op>.median columns (Vidur's "
                            "mlp.csv), found none"),
            std::string::npos)
      << broken.err;
  EXPECT_FALSE(fs::exists(profile));
}

}  // namespace
}  // namespace cli_support
