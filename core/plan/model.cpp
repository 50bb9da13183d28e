// Model presets, SIZE mapping, JSON architectures and parameter counting (docs/planner.md).
#include "core/plan/model.h"

#include <json/json.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/json_fields.h"

namespace autopar {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct Preset {
  const char* name;
  int64_t layers, hidden, heads, kv_heads, vocab, ffn_hidden, seq_len;
  bool gated_mlp, tied_embeddings, learned_pos_emb, bias;
  const char* source;
  // Mixtures of experts (and heads not hidden/heads wide); 0 for the others.
  int64_t head_dim = 0, experts = 0, experts_per_token = 0, expert_ffn_hidden = 0;
};

constexpr char kGpt3[] = "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1";
constexpr char kLlama2[] = "Touvron et al. 2023, Llama 2 (params.json of the released weights)";
constexpr char kLlama3[] = "Llama Team 2024, The Llama 3 Herd of Models, Table 3";
constexpr char kMegatron[] =
    "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU Clusters Using "
    "Megatron-LM, Table 1; Korthikanti et al. 2022, Table 3";

// GPT-3 sizes use GPT-2's tokenizer (50257), learned positions, tied embeddings and biases.
// GPT-3 1.3B's table lists 24 heads of 128 (inconsistent with d_model 2048); we use 16 x 128.
// GPT-3 13B's table lists d_model 5140; the heads (40 x 128) give 5120, which we use.
// Megatron's GPT runs pad GPT-2's vocabulary to 51200 (a multiple of 128 * t).
const Preset kPresets[] = {
    {"gpt3-125m", 12, 768, 12, 12, 50257, 3072, 2048, false, true, true, true, kGpt3},
    {"gpt3-350m", 24, 1024, 16, 16, 50257, 4096, 2048, false, true, true, true, kGpt3},
    {"gpt3-760m", 24, 1536, 16, 16, 50257, 6144, 2048, false, true, true, true, kGpt3},
    {"gpt3-1.3b", 24, 2048, 16, 16, 50257, 8192, 2048, false, true, true, true, kGpt3},
    {"gpt3-2.7b", 32, 2560, 32, 32, 50257, 10240, 2048, false, true, true, true, kGpt3},
    {"gpt3-6.7b", 32, 4096, 32, 32, 50257, 16384, 2048, false, true, true, true, kGpt3},
    {"gpt3-13b", 40, 5120, 40, 40, 50257, 20480, 2048, false, true, true, true, kGpt3},
    {"gpt3-175b", 96, 12288, 96, 96, 50257, 49152, 2048, false, true, true, true, kGpt3},
    {"llama-2-7b", 32, 4096, 32, 32, 32000, 11008, 4096, true, false, false, false, kLlama2},
    {"llama-2-13b", 40, 5120, 40, 40, 32000, 13824, 4096, true, false, false, false, kLlama2},
    {"llama-2-70b", 80, 8192, 64, 8, 32000, 28672, 4096, true, false, false, false, kLlama2},
    {"llama-3-8b", 32, 4096, 32, 8, 128256, 14336, 8192, true, false, false, false, kLlama3},
    {"llama-3-70b", 80, 8192, 64, 8, 128256, 28672, 8192, true, false, false, false, kLlama3},
    {"llama-3-405b", 126, 16384, 128, 8, 128256, 53248, 8192, true, false, false, false, kLlama3},
    {"opt-175b", 96, 12288, 96, 96, 50272, 49152, 2048, false, true, true, true,
     "Zhang et al. 2022, OPT: Open Pre-trained Transformer Language Models, Table 1"},
    {"bloom-176b", 70, 14336, 112, 112, 250880, 57344, 2048, false, true, false, true,
     "BigScience 2022, BLOOM: A 176B-Parameter Open-Access Multilingual Language Model, Table 3"},
    {"megatron-22b", 48, 6144, 64, 64, 51200, 24576, 2048, false, true, true, true, kMegatron},
    {"megatron-145b", 80, 12288, 96, 96, 51200, 49152, 2048, false, true, true, true, kMegatron},
    {"megatron-310b", 96, 16384, 128, 128, 51200, 65536, 2048, false, true, true, true, kMegatron},
    {"mt-nlg-530b", 105, 20480, 128, 128, 51200, 81920, 2048, false, true, true, true,
     "Smith et al. 2022, Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B, Sec. 3"},
    {"megatron-1t", 128, 25600, 160, 160, 51200, 102400, 2048, false, true, true, true, kMegatron},
    // Mixtures of experts.
    {"mixtral-8x7b", 32, 4096, 32, 8, 32000, 14336, 32768, true, false, false, false,
     "Jiang et al. 2024, Mixtral of Experts, Table 1", 0, 8, 2, 14336},
    // 36 layers alternating full and 128-token sliding-window attention (costed as full here),
    // attention biases and sinks left out; 5.1B parameters active per token.
    {"gpt-oss-120b", 36, 2880, 64, 8, 201088, 2880, 4096, true, false, false, false,
     "OpenAI 2025, gpt-oss-120b & gpt-oss-20b Model Card, Table 1 (config.json of the released "
     "weights)",
     64, 128, 4, 2880},
};

// SIZE -> architecture: nominal sizes people type, and the preset each means.
struct NominalSize {
  double params;
  const char* preset;
};
const NominalSize kSizes[] = {
    {125e6, "gpt3-125m"},   {350e6, "gpt3-350m"},     {760e6, "gpt3-760m"},
    {1.3e9, "gpt3-1.3b"},   {2.7e9, "gpt3-2.7b"},     {6.7e9, "gpt3-6.7b"},
    {7e9, "llama-2-7b"},    {8e9, "llama-3-8b"},      {13e9, "llama-2-13b"},
    {22e9, "megatron-22b"}, {70e9, "llama-2-70b"},    {145e9, "megatron-145b"},
    {175e9, "gpt3-175b"},   {310e9, "megatron-310b"}, {405e9, "llama-3-405b"},
    {530e9, "mt-nlg-530b"}, {1e12, "megatron-1t"},
};

ModelArch FromPreset(const Preset& p) {
  ModelArch m;
  m.name = p.name;
  m.layers = p.layers;
  m.hidden = p.hidden;
  m.heads = p.heads;
  m.kv_heads = p.kv_heads;
  m.vocab = p.vocab;
  m.ffn_hidden = p.ffn_hidden;
  m.seq_len = p.seq_len;
  m.gated_mlp = p.gated_mlp;
  m.tied_embeddings = p.tied_embeddings;
  m.learned_pos_emb = p.learned_pos_emb;
  m.bias = p.bias;
  m.source = p.source;
  m.dropout = !p.gated_mlp;  // the Llama families train without dropout
  m.explicit_head_dim = p.head_dim;
  m.experts = p.experts;
  m.experts_per_token = p.experts_per_token;
  m.expert_ffn_hidden = p.expert_ffn_hidden;
  return m;
}

std::string PresetList() {
  std::string out;
  for (const auto& name : ModelPresetNames()) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string FormatSize(double params) {
  std::ostringstream os;
  if (params >= 1e12) {
    os << params / 1e12 << "T";
  } else if (params >= 1e9) {
    os << params / 1e9 << "B";
  } else {
    os << params / 1e6 << "M";
  }
  return os.str();
}

bool IsSizeLike(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.');
}

}  // namespace

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  return names;
}

Result<ModelArch> ModelPreset(const std::string& name) {
  const std::string key = Lower(name);
  for (const auto& p : kPresets) {
    if (key == p.name) return FromPreset(p);
  }
  return Status::Error("unknown model '" + name + "' (presets: " + PresetList() +
                       ", a size like 7B, or FILE.json)");
}

ParamCount CountParams(const ModelArch& m) {
  const double h = static_cast<double>(m.hidden);
  const double kv_width = static_cast<double>(m.kv_heads * m.head_dim());
  const double q_width = static_cast<double>(m.q_width());
  const double bias = m.bias ? 1.0 : 0.0;
  // Attention: Q and output projections are h x (heads * head_dim), K and V are
  // h x (kv_heads * head_dim).
  const double attention = 2 * h * q_width + 2 * h * kv_width + bias * (q_width + h + 2 * kv_width);
  // MLP of width f: up (+ gate) h x f and down f x h.
  auto mlp = [&](double f) {
    return (m.gated_mlp ? 3.0 : 2.0) * h * f + bias * ((m.gated_mlp ? 2 : 1) * f + h);
  };
  // Two norms per block: LayerNorm (scale + bias) or RMSNorm (scale only).
  const double norms = 2 * h * (m.bias ? 2.0 : 1.0);
  ParamCount c;
  if (m.moe()) {
    const double fe = static_cast<double>(m.expert_ffn_hidden);
    const double router = h * static_cast<double>(m.experts);
    c.per_layer = attention + norms + router + static_cast<double>(m.shared_experts) * mlp(fe);
    c.expert = mlp(fe);
    c.routed_per_layer = static_cast<double>(m.experts) * c.expert;
  } else {
    c.per_layer = attention + mlp(static_cast<double>(m.ffn_hidden)) + norms;
  }
  c.embedding = static_cast<double>(m.vocab) * h +
                (m.learned_pos_emb ? static_cast<double>(m.seq_len) * h : 0.0);
  c.output =
      (m.tied_embeddings ? 0.0 : static_cast<double>(m.vocab) * h) + h * (m.bias ? 2.0 : 1.0);
  const double layers = static_cast<double>(m.layers);
  c.total = layers * (c.per_layer + c.routed_per_layer) + c.embedding + c.output;
  c.active = layers * (c.per_layer + static_cast<double>(m.experts_per_token) * c.expert) +
             c.embedding + c.output;
  return c;
}

Status ValidateModel(const ModelArch& m) {
  struct Field {
    const char* name;
    int64_t value;
  };
  const Field fields[] = {{"layers", m.layers},  {"hidden", m.hidden},
                          {"heads", m.heads},    {"kv_heads", m.kv_heads},
                          {"vocab", m.vocab},    {"ffn_hidden", m.ffn_hidden},
                          {"seq_len", m.seq_len}};
  for (const auto& f : fields) {
    if (f.value <= 0) {
      return Status::Error(std::string(f.name) + ": must be a positive integer, got " +
                           std::to_string(f.value));
    }
  }
  if (m.explicit_head_dim < 0) return Status::Error("head_dim: must be a positive integer");
  if (m.explicit_head_dim == 0 && m.hidden % m.heads != 0) {
    return Status::Error("hidden: " + std::to_string(m.hidden) + " is not divisible by heads (" +
                         std::to_string(m.heads) + ")");
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    return Status::Error("kv_heads: " + std::to_string(m.kv_heads) + " does not divide heads (" +
                         std::to_string(m.heads) + ")");
  }
  if (m.experts < 0 || m.shared_experts < 0) {
    return Status::Error(std::string(m.experts < 0 ? "experts" : "shared_experts") +
                         ": must not be negative");
  }
  if (m.moe()) {
    if (m.experts_per_token < 1 || m.experts_per_token > m.experts) {
      return Status::Error(
          "experts_per_token: must be in [1, experts=" + std::to_string(m.experts) + "], got " +
          std::to_string(m.experts_per_token));
    }
    if (m.expert_ffn_hidden <= 0) {
      return Status::Error("expert_ffn_hidden: must be a positive integer, got " +
                           std::to_string(m.expert_ffn_hidden));
    }
  } else if (m.experts_per_token != 0 || m.shared_experts != 0) {
    return Status::Error(std::string(m.experts_per_token ? "experts_per_token" : "shared_experts") +
                         ": needs experts");
  }
  return Status::Ok();
}

Result<double> ParseModelSize(const std::string& text) {
  const std::string s = Lower(text);
  if (s.size() < 2)
    return Status::Error("invalid size '" + text + "' (expected e.g. 7B, 1.3b, 500M)");
  double scale = 0;
  switch (s.back()) {
    case 'k':
      scale = 1e3;
      break;
    case 'm':
      scale = 1e6;
      break;
    case 'b':
      scale = 1e9;
      break;
    case 't':
      scale = 1e12;
      break;
    default:
      return Status::Error("invalid size '" + text +
                           "' (expected a number with K, M, B or T, e.g. 7B)");
  }
  const std::string number = s.substr(0, s.size() - 1);
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end == number.c_str() || *end != '\0' || !std::isfinite(value) || value <= 0) {
    return Status::Error("invalid size '" + text + "' (expected e.g. 7B, 1.3b, 500M)");
  }
  const double params = value * scale;
  if (params < 10e6 || params > 100e12) {
    return Status::Error("size '" + text + "' is outside 10M..100T parameters");
  }
  return params;
}

ModelArch ModelForSize(double params) {
  const NominalSize* best = nullptr;
  double best_distance = 0;
  for (const auto& s : kSizes) {
    const double distance = std::fabs(std::log(params / s.params));
    if (best == nullptr || distance < best_distance) {
      best = &s;
      best_distance = distance;
    }
  }
  if (best != nullptr && best_distance <= std::log(1.05)) {
    ModelArch m = ModelPreset(best->preset).value();
    return m;
  }
  // Synthesized GPT-style architecture: hidden = 128 * layers (GPT-3 175B's aspect ratio),
  // 128-wide heads, ffn = 4h, Megatron's padded GPT-2 vocabulary. Layers are rounded to an even
  // number; hidden is then solved from 12*L*h^2 + V*h = N.
  const double vocab = 51200;
  double layers_f = std::cbrt(params / (12.0 * 128 * 128));
  for (int i = 0; i < 20; ++i) {
    const double h = 128 * layers_f;
    const double body = std::max(params - vocab * h, params * 0.2);
    layers_f = std::cbrt(body / (12.0 * 128 * 128));
  }
  // Layers a multiple of 4 and heads a multiple of 8 (of 2 below 16 heads) so that the model
  // splits over common pipeline and tensor-parallel sizes.
  const int64_t layers = std::max<int64_t>(4, 4 * static_cast<int64_t>(std::llround(layers_f / 4)));
  const double l = static_cast<double>(layers);
  // 12*L*h^2 + V*h - N = 0
  const double h_f = (-vocab + std::sqrt(vocab * vocab + 48.0 * l * params)) / (24.0 * l);
  const double heads_f = h_f / 128;
  const int64_t heads =
      heads_f >= 16 ? 8 * static_cast<int64_t>(std::llround(heads_f / 8))
                    : std::max<int64_t>(2, 2 * static_cast<int64_t>(std::llround(heads_f / 2)));
  const int64_t hidden = 128 * heads;
  ModelArch m;
  m.name = "gpt-" + Lower(FormatSize(params));
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = m.heads;
  m.vocab = static_cast<int64_t>(vocab);
  m.ffn_hidden = 4 * hidden;
  m.seq_len = 2048;
  m.tied_embeddings = true;
  m.learned_pos_emb = true;
  m.bias = true;
  m.source = "synthesized from the size " + FormatSize(params) +
             " (docs/planner.md, Sizes: hidden ~ 128 * layers, 128-wide heads)";
  return m;
}

namespace {

// The keys a model's JSON may have: any other is refused, so that a misspelt one is not ignored.
constexpr const char* kModelKeys[] = {
    "name",          "layers",  "hidden",   "heads",     "kv_heads",          "vocab",
    "ffn_hidden",    "seq_len", "head_dim", "gated_mlp", "tied_embeddings",   "learned_pos_emb",
    "bias",          "dropout", "source",   "experts",   "experts_per_token", "expert_ffn_hidden",
    "shared_experts"};

// The object of a model's JSON text, or why it is not one: not JSON, not an object, an unknown
// key.
Result<Json::Value> ParseModelObject(const std::string& json_text, const std::string& origin) {
  Json::CharReaderBuilder builder;
  builder["collectComments"] = false;
  Json::Value root;
  std::string errors;
  std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
  if (!reader->parse(json_text.data(), json_text.data() + json_text.size(), &root, &errors)) {
    return Status::Error(origin + ": " + JsonParseError(errors));
  }
  if (!root.isObject()) return Status::Error(origin + ": expected a JSON object");
  for (const auto& key : root.getMemberNames()) {
    if (std::find_if(std::begin(kModelKeys), std::end(kModelKeys),
                     [&](const char* k) { return key == k; }) == std::end(kModelKeys)) {
      std::string message = origin;
      message += ": unknown key '";
      message += key;
      message += "'";
      return Status::Error(message);
    }
  }
  return root;
}

// A model's JSON object and the file it came from, which every error names.
struct ModelJson {
  const Json::Value& root;
  const std::string& origin;

  bool Has(const char* key) const { return root.isMember(key); }

  // A positive integer; a missing key is an error when `required`, else `fallback`.
  Status Int(const char* key, bool required, int64_t fallback, int64_t* out) const {
    if (!root.isMember(key)) {
      if (required) return Status::Error(origin + ": missing required key '" + key + "'");
      *out = fallback;
      return Status::Ok();
    }
    const Json::Value& v = root[key];
    if (!v.isIntegral() || v.asInt64() <= 0) {
      return Status::Error(origin + ": " + key + ": must be a positive integer");
    }
    *out = static_cast<int64_t>(v.asInt64());
    return Status::Ok();
  }

  // true or false; a missing key is `fallback`.
  Status Bool(const char* key, bool fallback, bool* out) const {
    if (!root.isMember(key)) {
      *out = fallback;
      return Status::Ok();
    }
    if (!root[key].isBool()) return Status::Error(origin + ": " + key + ": must be true or false");
    *out = root[key].asBool();
    return Status::Ok();
  }
};

// The sizes: layers, hidden, heads and vocab required; the others default as a GPT's.
Status ReadSizes(const ModelJson& json, ModelArch* m) {
  const std::pair<const char*, int64_t*> required[] = {
      {"layers", &m->layers}, {"hidden", &m->hidden}, {"heads", &m->heads}, {"vocab", &m->vocab}};
  for (const auto& [key, field] : required) {
    if (Status s = json.Int(key, true, 0, field); !s) return s;
  }
  if (Status s = json.Int("ffn_hidden", false, 4 * m->hidden, &m->ffn_hidden); !s) return s;
  if (Status s = json.Int("kv_heads", false, m->heads, &m->kv_heads); !s) return s;
  if (Status s = json.Int("seq_len", false, 2048, &m->seq_len); !s) return s;
  return json.Int("head_dim", false, 0, &m->explicit_head_dim);
}

// A mixture of experts: experts and experts_per_token, with the others only beside them.
Status ReadExperts(const ModelJson& json, ModelArch* m) {
  if (!json.Has("experts")) {
    for (const char* key : {"experts_per_token", "expert_ffn_hidden", "shared_experts"}) {
      if (json.Has(key)) return Status::Error(json.origin + ": " + key + ": needs experts");
    }
    return Status::Ok();
  }
  for (auto [key, field] : {std::pair<const char*, int64_t*>{"experts", &m->experts},
                            {"experts_per_token", &m->experts_per_token}}) {
    if (Status s = json.Int(key, true, 0, field); !s) return s;
  }
  if (Status s = json.Int("expert_ffn_hidden", false, m->ffn_hidden, &m->expert_ffn_hidden); !s) {
    return s;
  }
  if (json.Has("shared_experts")) {
    const Json::Value& v = json.root["shared_experts"];
    if (!v.isIntegral() || v.asInt64() < 0) {
      return Status::Error(json.origin + ": shared_experts: must be an integer >= 0");
    }
    m->shared_experts = v.asInt64();
  }
  return Status::Ok();
}

// The architecture's switches: all off unless set, dropout on.
Status ReadFlags(const ModelJson& json, ModelArch* m) {
  const std::pair<const char*, bool*> flags[] = {{"gated_mlp", &m->gated_mlp},
                                                 {"tied_embeddings", &m->tied_embeddings},
                                                 {"learned_pos_emb", &m->learned_pos_emb},
                                                 {"bias", &m->bias}};
  for (const auto& [key, field] : flags) {
    if (Status s = json.Bool(key, false, field); !s) return s;
  }
  return json.Bool("dropout", true, &m->dropout);
}

// The name and the source, both the file's when not given.
Status ReadNames(const ModelJson& json, ModelArch* m) {
  const Json::Value& root = json.root;
  if (root.isMember("name")) {
    if (!root["name"].isString()) return Status::Error(json.origin + ": name: must be a string");
    m->name = root["name"].asString();
  } else {
    m->name = json.origin;
  }
  m->source = root.isMember("source") && root["source"].isString() ? root["source"].asString()
                                                                   : json.origin;
  return Status::Ok();
}

}  // namespace

Result<ModelArch> ModelFromJson(const std::string& json_text, const std::string& origin) {
  auto root = ParseModelObject(json_text, origin);
  if (!root.ok()) return root.status();
  const ModelJson json{*root, origin};
  ModelArch m;
  if (Status s = ReadSizes(json, &m); !s) return s;
  if (Status s = ReadExperts(json, &m); !s) return s;
  if (Status s = ReadFlags(json, &m); !s) return s;
  if (Status s = ReadNames(json, &m); !s) return s;
  Status valid = ValidateModel(m);
  if (!valid.ok()) return Status::Error(origin + ": " + valid.message());
  return m;
}

Result<ModelArch> ResolveModel(const std::string& spec) {
  if (spec.empty()) {
    return Status::Error("empty model (presets: " + PresetList() +
                         ", a size like 7B, or FILE.json)");
  }
  if (EndsWith(Lower(spec), ".json")) {
    std::ifstream in(spec, std::ios::binary);
    if (!in) return Status::Error("cannot read '" + spec + "'");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return Status::Error("cannot read '" + spec + "'");
    return ModelFromJson(text.str(), "model file " + spec);
  }
  auto preset = ModelPreset(spec);
  if (preset.ok()) return preset;
  if (IsSizeLike(spec)) {
    auto size = ParseModelSize(spec);
    if (!size.ok()) return size.status();
    return ModelForSize(*size);
  }
  return preset.status();
}

}  // namespace autopar
