// `exitsim calibrate --kineto`: a PyTorch-profiler trace in, a profile out that `simulate` prices
// a scenario of the same model with; the command line's mistakes refused in one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_fixture.hpp"

namespace cli_support {
namespace {

const std::string k_random_trace =
    std::string(EXITSIM_SOURCE_DIR) + "/tests/analysis/data/kineto/random.kineto.json.gz";

// The random model of training/kineto_traces.py as scenario keys.
const std::string k_random_model =
    " --set model.preset=null --set model.name=torch-random --set model.d_model=768"
    " --set model.n_heads=12 --set model.n_kv_heads=4 --set model.head_dim=64"
    " --set model.ffn_dim=2048 --set model.vocab=4096 --set model.depth.prelude=4";

TEST_F(Cli, CalibratesFromAKinetoTraceAndSimulatesWithTheProfile) {
  const fs::path profile = dir_ / "torch.json";
  const Result calibrated = run("calibrate --kineto '" + k_random_trace +
                                "' --hardware 'test "
                                "box' --model-name torch-random -o '" +
                                profile.string() + "'");
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  EXPECT_NE(calibrated.out.find("d768 h12/4x64 ffn2048 v4096 gated depth 4+0x0+0"),
            std::string::npos)
      << calibrated.out;
  EXPECT_NE(calibrated.out.find("residual "), std::string::npos) << calibrated.out;
  EXPECT_NE(calibrated.out.find("unmapped "), std::string::npos) << calibrated.out;
  const std::string written = slurp(profile);
  EXPECT_NE(written.find("\"engine\": \"pytorch 1.13"), std::string::npos) << written;
  EXPECT_NE(written.find("\"hardware\": \"test box\""), std::string::npos) << written;

  const Result simulated =
      run("simulate" + k_random_model +
          " --set cost_model.kind=calibrated --set cost_model.profile='" + profile.string() +
          "' --set hardware.name='test box' --set workload.requests=20 --set "
          "'workload.input_tokens={dist: fixed, value: 64}'"
          " --set 'workload.output_tokens={dist: fixed, value: 16}' --no-output");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_NE(simulated.out.find("TPOT"), std::string::npos) << simulated.out;

  // Another model's scenario is refused, naming the profile's model.
  const Result other = run("simulate --set cost_model.kind=calibrated --set cost_model.profile='" +
                           profile.string() + "' --set hardware.name='test box' --no-output");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("d768 h12/4x64"), std::string::npos) << other.err;
}

// A base model's trace (transformers' LlamaModel, no LM head; tests/analysis/data/kineto/hf):
// calibrate says the head is the roofline's and writes that into the profile's notes; a
// simulation with the profile prices the head by the roofline of the scenario's hardware and
// says so.
TEST_F(Cli, ABaseModelsProfileLeavesItsHeadToTheRoofline) {
  const fs::path profile = dir_ / "base.json";
  const Result calibrated =
      run("calibrate --kineto '" + std::string(EXITSIM_SOURCE_DIR) +
          "/tests/analysis/data/kineto/hf/llama3-base.mixed.kineto.json.gz' --hardware 'test box' "
          "-o '" +
          profile.string() + "'");
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  const std::string head_line =
      "head       10 of 10 steps have no LM head (a base model, e.g. AutoModel): the profile has "
      "no lm_head and no sampling; simulations price the final norm, LM head and sampling by "
      "the roofline and say so";
  EXPECT_NE(calibrated.out.find(head_line), std::string::npos) << calibrated.out;
  const std::string written = slurp(profile);
  EXPECT_NE(written.find("\"notes\""), std::string::npos);
  EXPECT_NE(written.find(head_line), std::string::npos);
  EXPECT_EQ(written.find("\"name\": \"lm_head\""), std::string::npos);
  const Result simulated =
      run("simulate --set model.preset=null --set model.name=llama3-base --set model.d_model=4096"
          " --set model.n_heads=32 --set model.n_kv_heads=8 --set model.head_dim=128"
          " --set model.ffn_dim=14336 --set model.vocab=32000 --set model.depth.prelude=2"
          " --set cost_model.kind=calibrated --set cost_model.profile='" +
          profile.string() +
          "' --set hardware.preset=null --set hardware.name='test box'"
          " --set hardware.peak_tflops.bf16=1 --set hardware.memory_bandwidth_gbps=50"
          " --set hardware.memory_gib=64 --set workload.requests=4"
          " --set 'workload.input_tokens={dist: fixed, value: 32}'"
          " --set 'workload.output_tokens={dist: fixed, value: 4}' --no-output");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_NE(simulated.out.find("not in the profile, priced by the roofline: the final norm, "
                               "lm_head and sampling (the profile's traces ran a model without an "
                               "LM head)"),
            std::string::npos)
      << simulated.out;
}

TEST_F(Cli, CalibrateRefusesMixingOrMisnamingItsInputs) {
  const fs::path profile = dir_ / "p.json";
  const fs::path op_trace = file("op_trace.csv", "x\n");
  const Result both = run("calibrate '" + op_trace.string() + "' --kineto '" + k_random_trace +
                          "' -o '" + profile.string() + "'");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("OPTRACE: expected exitsim op traces or grids, --kineto traces, or a "
                          "--vidur-mlp profile, found more than one"),
            std::string::npos)
      << both.err;
  const Result neither = run("calibrate -o '" + profile.string() + "'");
  EXPECT_EQ(neither.exit_code, 1);
  EXPECT_NE(neither.err.find("found none of them"), std::string::npos) << neither.err;
  const Result named =
      run("calibrate '" + op_trace.string() + "' --hardware h -o '" + profile.string() + "'");
  EXPECT_EQ(named.exit_code, 1);
  EXPECT_NE(named.err.find("--hardware: expected --kineto traces or a --vidur-mlp profile to "
                           "name"),
            std::string::npos)
      << named.err;
  const Result broken = run("calibrate --kineto '" + file("t.json", "{}").string() + "' -o '" +
                            profile.string() + "'");
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("t.json: traceEvents: expected a list of trace events"),
            std::string::npos)
      << broken.err;
  EXPECT_FALSE(fs::exists(profile));
}

}  // namespace
}  // namespace cli_support
