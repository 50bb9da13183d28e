#include "core/plan/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

namespace autopar {
namespace {

// Published parameter counts, reproduced from the architectures alone.
TEST(CountParams, MatchesPublishedCounts) {
  struct Case {
    const char* model;
    double published;  // parameters
    double tolerance;  // relative
  } cases[] = {
      {"llama-2-7b", 6.74e9, 0.002},    // Llama 2 paper / HF card: 6,738,415,616
      {"llama-2-13b", 13.02e9, 0.002},  // 13,015,864,320
      {"llama-2-70b", 68.98e9, 0.002},  // 68,976,648,192
      {"llama-3-8b", 8.03e9, 0.002},    // 8,030,261,248
      {"llama-3-70b", 70.55e9, 0.002},  // 70,553,706,496
      {"llama-3-405b", 405.8e9, 0.005},
      {"gpt3-175b", 174.6e9, 0.003},  // Brown et al. report 175.0B (rounded)
      {"gpt3-125m", 125e6, 0.01},
      {"gpt3-13b", 12.85e9, 0.01},     // 13B nominal; 12.85B with d_model 5120
      {"bloom-176b", 176.2e9, 0.005},  // BLOOM paper: 176,247,271,424
      {"opt-175b", 174.6e9, 0.005},
      {"mt-nlg-530b", 530e9, 0.01},
      {"megatron-1t", 1008e9, 0.01},  // Narayanan et al. Table 1: 1008.0B
      {"megatron-22b", 22e9, 0.03},
      {"mixtral-8x7b", 46.7e9, 0.002},   // Jiang et al. 2024: 47B; HF card: 46.7B
      {"gpt-oss-120b", 116.8e9, 0.002},  // OpenAI model card, Table 1: 116.83B
  };
  for (const auto& c : cases) {
    auto m = ModelPreset(c.model);
    ASSERT_TRUE(m.ok()) << c.model << ": " << m.message();
    const double total = CountParams(*m).total;
    EXPECT_NEAR(total / c.published, 1.0, c.tolerance) << c.model << " counted " << total;
  }
}

TEST(CountParams, ExactLlama2_7B) {
  // The released checkpoint has exactly 6,738,415,616 parameters.
  EXPECT_EQ(CountParams(*ModelPreset("llama-2-7b")).total, 6738415616.0);
  // Llama-2-70B (GQA, 8 kv heads): 68,976,648,192.
  EXPECT_EQ(CountParams(*ModelPreset("llama-2-70b")).total, 68976648192.0);
  // Llama-3-8B: 8,030,261,248.
  EXPECT_EQ(CountParams(*ModelPreset("llama-3-8b")).total, 8030261248.0);
}

TEST(CountParams, PerLayerIs12HSquaredForGpt) {
  // Kaplan et al. 2020 / Narayanan et al. 2021: a GPT block has 12 h^2 weights (+13h biases/norms).
  ModelArch m = *ModelPreset("gpt3-175b");
  const double h = static_cast<double>(m.hidden);
  EXPECT_DOUBLE_EQ(CountParams(m).per_layer, 12 * h * h + 13 * h);
}

TEST(CountParams, GqaAndTiedChangeTheCount) {
  ModelArch m = *ModelPreset("llama-2-7b");
  const double full = CountParams(m).total;
  m.kv_heads = 8;  // K and V shrink from h x h to h x h/4
  const double h = static_cast<double>(m.hidden);
  EXPECT_DOUBLE_EQ(full - CountParams(m).total, 32 * 2 * (h * h - h * h / 4));
  m.kv_heads = 32;
  m.tied_embeddings = true;
  EXPECT_DOUBLE_EQ(full - CountParams(m).total, 32000 * h);
}

TEST(ResolveModel, PresetsAreCaseInsensitive) {
  for (const char* spec : {"llama-2-7b", "LLaMA-2-7B", "Llama-2-7b"}) {
    auto m = ResolveModel(spec);
    ASSERT_TRUE(m.ok()) << spec;
    EXPECT_EQ(m->name, "llama-2-7b");
  }
  auto g = ResolveModel("GPT3-175B");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->layers, 96);
}

TEST(ResolveModel, EveryPresetIsValid) {
  for (const auto& name : ModelPresetNames()) {
    auto m = ResolveModel(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_TRUE(ValidateModel(*m).ok()) << name << ": " << ValidateModel(*m).message();
    EXPECT_FALSE(m->source.empty()) << name;
  }
}

TEST(ResolveModel, SizesMapToStandardArchitectures) {
  struct Case {
    const char* spec;
    const char* expected_name;
  } cases[] = {
      {"7B", "llama-2-7b"},     {"7b", "llama-2-7b"},    {"6.7B", "gpt3-6.7b"},
      {"1.3b", "gpt3-1.3b"},    {"70B", "llama-2-70b"},  {"175B", "gpt3-175b"},
      {"1T", "megatron-1t"},    {"125M", "gpt3-125m"},   {"8B", "llama-3-8b"},
      {"405B", "llama-3-405b"}, {"530b", "mt-nlg-530b"},
  };
  for (const auto& c : cases) {
    auto m = ResolveModel(c.spec);
    ASSERT_TRUE(m.ok()) << c.spec << ": " << m.message();
    EXPECT_EQ(m->name, c.expected_name) << c.spec;
  }
}

TEST(ResolveModel, OtherSizesAreSynthesizedNearTheSize) {
  for (const char* spec : {"500M", "3B", "30B", "100B", "2T"}) {
    auto size = ParseModelSize(spec);
    ASSERT_TRUE(size.ok());
    auto m = ResolveModel(spec);
    ASSERT_TRUE(m.ok()) << spec << ": " << m.message();
    EXPECT_TRUE(ValidateModel(*m).ok()) << spec;
    EXPECT_EQ(m->hidden % 128, 0) << spec;
    EXPECT_EQ(m->layers % 4, 0) << spec;
    EXPECT_EQ(m->heads % (m->heads >= 16 ? 8 : 2), 0) << spec;
    EXPECT_NEAR(CountParams(*m).total / *size, 1.0, 0.12) << spec << " -> " << m->name;
  }
}

TEST(ResolveModel, ErrorsNameTheValueAndTheChoices) {
  struct Case {
    const char* spec;
    const char* expected_start;
  } cases[] = {
      {"banana", "unknown model 'banana' (presets: gpt3-125m, "},
      {"", "empty model (presets: "},
      {"7X", "invalid size '7X'"},
      {"0B", "invalid size '0B'"},
      {"1.2.3B", "invalid size '1.2.3B'"},
      {"5K", "size '5K' is outside 10M..100T parameters"},
      {"/nonexistent/model.json", "cannot read '/nonexistent/model.json'"},
  };
  for (const auto& c : cases) {
    auto m = ResolveModel(c.spec);
    ASSERT_FALSE(m.ok()) << c.spec;
    EXPECT_EQ(m.message().rfind(c.expected_start, 0), 0u) << m.message();
  }
  EXPECT_NE(ResolveModel("banana").message().find("a size like 7B, or FILE.json)"),
            std::string::npos);
}

TEST(ModelFromJson, DefaultsAndOverrides) {
  auto m =
      ModelFromJson(R"({"layers": 24, "hidden": 2048, "heads": 16, "vocab": 50000})", "m.json");
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->ffn_hidden, 4 * 2048);
  EXPECT_EQ(m->kv_heads, 16);
  EXPECT_EQ(m->seq_len, 2048);
  EXPECT_EQ(m->name, "m.json");
  auto g = ModelFromJson(
      R"({"name": "mine", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 128256,
          "ffn_hidden": 14336, "seq_len": 8192, "gated_mlp": true})",
      "m.json");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->name, "mine");
  EXPECT_EQ(g->kv_heads, 8);
  EXPECT_TRUE(g->gated_mlp);
  // Same architecture as llama-3-8b: same count.
  EXPECT_DOUBLE_EQ(CountParams(*g).total, CountParams(*ModelPreset("llama-3-8b")).total);
}

TEST(ModelFromJson, Errors) {
  struct Case {
    const char* json;
    const char* expected;
  } cases[] = {
      {"{", "m.json: line 1, column 2: "},
      {R"({"layers": 2 "hidden": 64})",
       "m.json: line 1, column 14: Missing ',' or '}' in object declaration"},
      {"[1]", "m.json: expected a JSON object"},
      {R"({"hidden": 1, "heads": 1, "vocab": 1})", "m.json: missing required key 'layers'"},
      {R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "colour": 1})",
       "m.json: unknown key 'colour'"},
      {R"({"layers": -2, "hidden": 64, "heads": 4, "vocab": 10})",
       "m.json: layers: must be a positive integer"},
      {R"({"layers": 2, "hidden": 65, "heads": 4, "vocab": 10})",
       "m.json: hidden: 65 is not divisible by heads (4)"},
      {R"({"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 3, "vocab": 10})",
       "m.json: kv_heads: 3 does not divide heads (4)"},
      {R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "gated_mlp": 1})",
       "m.json: gated_mlp: must be true or false"},
      {R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "experts": 8})",
       "m.json: missing required key 'experts_per_token'"},
      {R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "experts": 8,
           "experts_per_token": 9})",
       "m.json: experts_per_token: must be in [1, experts=8], got 9"},
      {R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "experts_per_token": 2})",
       "m.json: experts_per_token: needs experts"},
      {R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "experts": 8,
           "experts_per_token": 2, "shared_experts": -1})",
       "m.json: shared_experts: must be an integer >= 0"},
      {R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "head_dim": 0})",
       "m.json: head_dim: must be a positive integer"},
  };
  for (const auto& c : cases) {
    auto m = ModelFromJson(c.json, "m.json");
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_EQ(m.message().rfind(c.expected, 0), 0u) << m.message();
    EXPECT_EQ(m.message().find('\n'), std::string::npos) << m.message();
  }
}

TEST(ResolveModel, MalformedFileIsNamedWithWhereAndWhat) {
  const std::string path = ::testing::TempDir() + "/autopar_model_malformed.json";
  {
    std::ofstream out(path);
    out << R"({"layers": 2, "hidden": 64, "heads": 4 "vocab": 10})";
  }
  auto m = ResolveModel(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(), "model file " + path +
                             ": line 1, column 40: Missing ',' or '}' in object declaration");
  std::remove(path.c_str());
}

TEST(CountParams, MixtureOfExperts) {
  // Active parameters per token: Mixtral "13B" (Jiang et al. 2024, Sec. 2: 13B active); gpt-oss
  // "5.1B" without its 0.58B embedding (OpenAI model card, Table 1), 5.71B with it.
  const ParamCount mixtral = CountParams(*ModelPreset("mixtral-8x7b"));
  EXPECT_NEAR(mixtral.active / 12.88e9, 1.0, 0.005);
  EXPECT_DOUBLE_EQ(mixtral.routed_per_layer, 8 * mixtral.expert);
  const ModelArch oss = *ModelPreset("gpt-oss-120b");
  EXPECT_EQ(oss.q_width(), 64 * 64);  // heads wider than hidden / heads
  const ParamCount p = CountParams(oss);
  EXPECT_NEAR((p.active - p.embedding) / 5.13e9, 1.0, 0.01);
  // A dense model's active parameters are all of them.
  const ParamCount dense = CountParams(*ModelPreset("llama-2-7b"));
  EXPECT_DOUBLE_EQ(dense.active, dense.total);
  // The same architecture from JSON, with a shared expert added.
  auto json = ModelFromJson(R"({"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
      "vocab": 32000, "ffn_hidden": 14336, "gated_mlp": true, "experts": 8,
      "experts_per_token": 2, "shared_experts": 1})", "moe.json");
  ASSERT_TRUE(json.ok()) << json.message();
  EXPECT_EQ(json->expert_ffn_hidden, 14336);
  EXPECT_EQ(json->active_ffn(), 3 * 14336);
  EXPECT_NEAR(CountParams(*json).total - mixtral.total, 32 * mixtral.expert + 0.0, 1e6);
}

TEST(ResolveModel, ReadsJsonFile) {
  const std::string path = ::testing::TempDir() + "autopar_model_test.JSON";
  {
    std::ofstream out(path);
    out << R"({"layers": 4, "hidden": 256, "heads": 4, "vocab": 1000})";
  }
  auto m = ResolveModel(path);
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->layers, 4);
}

}  // namespace
}  // namespace autopar
