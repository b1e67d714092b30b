// `exitsim calibrate --vidur-mlp`: Vidur's public profiles of Llama-2-7B on A100
// (../shared/gpu/vidur, skipped when absent) in, a TP-4 profile out that `simulate` prices a TP-4
// replica with, saying what the roofline priced; the command line's mistakes refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
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

namespace cli_support {
namespace {

// `calibrate --fit-hardware`: the H100 preset's collective latency and bus-bandwidth share fitted
// to Vidur's H100 all-reduces, written as a hardware section that `simulate` runs with and names
// as the scenario's; the mistakes refused in one line with no file left.
TEST_F(Cli, FitsTheHardwaresKernelCorrectionsIntoAScenarioSection) {
  const std::string all_reduce = k_vidur + "h100_dgx_all_reduce.csv";
  if (!fs::exists(all_reduce))
    GTEST_SKIP() << k_vidur << " is absent";
  const fs::path section = dir_ / "h100.yaml";
  const Result fitted = run("calibrate --fit-hardware --hardware h100-sxm --vidur-all-reduce '" +
                            all_reduce + "' -o '" + section.string() + "'");
  ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
  EXPECT_NE(fitted.out.find("fit        all_reduce (2979 points): "), std::string::npos)
      << fitted.out;
  EXPECT_NE(fitted.out.find("fit        GEMMs and element-wise ops: not measured"),
            std::string::npos)
      << fitted.out;
  const std::string yaml = slurp(section);
  EXPECT_NE(yaml.find("hardware:\n  preset: h100-sxm\n"), std::string::npos) << yaml;

  const Result simulated = run("simulate '" + section.string() +
                               "' --set workload.requests=20 --set parallel.tensor=2 --no-output");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_NE(simulated.out.find("priced with kernel corrections set by the scenario"),
            std::string::npos)
      << simulated.out;

  const fs::path refused = dir_ / "refused.yaml";
  for (const std::string& args :
       {std::string("calibrate --fit-hardware --vidur-all-reduce '") + all_reduce + "'",
        std::string("calibrate --fit-hardware --hardware h100 --vidur-all-reduce '") + all_reduce +
            "'",
        std::string("calibrate --fit-hardware --hardware h100-sxm --model-name llama-2-7b "
                    "--vidur-all-reduce '") +
            all_reduce + "'",
        std::string("calibrate --fit-hardware --hardware h100-sxm")}) {
    const Result r = run(args + " -o '" + refused.string() + "'");
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(refused)) << args;
  }
}

}  // namespace
}  // namespace cli_support
