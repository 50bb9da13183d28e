// Model architectures: what the planner needs to know about a transformer to count its
// parameters, its memory and its FLOPs.
//
// ResolveModel() turns the user's `--model` value into a ModelArch:
//   - a preset name ("llama-2-7b", "LLaMA-3-70B", "gpt3-175b", ...; case-insensitive, see
//     ModelPresetNames()),
//   - a SIZE ("7B", "1.3b", "500M", "1T"): a size that is within 5% of a standard architecture's
//     nominal size maps to that architecture (docs/planner.md, "Sizes"); any other size maps to a
//     GPT-style architecture synthesized from the size (hidden = 128 * layers, 128-wide heads),
//   - a path ending in ".json" holding {"layers", "hidden", "heads", "vocab"} and optionally
//     "ffn_hidden" (default 4*hidden), "kv_heads" (default heads), "head_dim" (default
//     hidden/heads), "seq_len" (default 2048), "name", "gated_mlp", "tied_embeddings",
//     "learned_pos_emb", "bias", "dropout" (default true), and for a mixture of experts
//     "experts", "experts_per_token", "expert_ffn_hidden" (default ffn_hidden) and
//     "shared_experts" (default 0).
// On failure the Result carries one line without the option name, ready to print after
// "--model: ", e.g. "unknown model 'banana' (presets: ..., a size like 7B, or FILE.json)".
//
// All functions are pure (ResolveModel reads the JSON file when given one) and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

struct ModelArch {
  std::string name;
  int64_t layers = 0;            // transformer blocks
  int64_t hidden = 0;            // model width h
  int64_t heads = 0;             // attention (query) heads a
  int64_t kv_heads = 0;          // key/value heads (GQA/MQA when < heads)
  int64_t vocab = 0;             // vocabulary size v (as trained, before any padding)
  int64_t ffn_hidden = 0;        // MLP inner width
  int64_t seq_len = 0;           // default training sequence length
  bool gated_mlp = false;        // SwiGLU-style MLP: three h x ffn matrices instead of two
  bool tied_embeddings = false;  // output layer shares the input embedding matrix
  bool learned_pos_emb = false;  // learned absolute position embeddings (seq_len x h)
  bool bias = false;             // linear layers and norms carry biases (GPT-2/3 style)
  bool dropout = true;           // trained with dropout (its masks are stored activations)
  // Width of one attention head; 0: hidden / heads (gpt-oss: 64 heads of 64 on hidden 2880).
  int64_t explicit_head_dim = 0;
  // Mixture of experts (every layer's MLP): `experts` routed experts of width expert_ffn_hidden,
  // of which each token uses experts_per_token, plus shared_experts every token uses. 0: dense.
  int64_t experts = 0;
  int64_t experts_per_token = 0;
  int64_t expert_ffn_hidden = 0;
  int64_t shared_experts = 0;
  std::string source;            // where the architecture was published

  int64_t head_dim() const {
    return explicit_head_dim > 0 ? explicit_head_dim : heads > 0 ? hidden / heads : 0;
  }
  int64_t q_width() const { return heads * head_dim(); }  // query and attention-output width
  bool moe() const { return experts > 0; }
  // The MLP width a token passes through in one layer: ffn_hidden, or its experts' together.
  int64_t active_ffn() const {
    return moe() ? (experts_per_token + shared_experts) * expert_ffn_hidden : ffn_hidden;
  }
};

// Parameter counts, computed from the architecture (docs/planner.md, "Parameters").
struct ParamCount {
  // One transformer block (attention + MLP + its norms); of a mixture of experts: without the
  // routed experts (attention, norms, router, shared experts).
  double per_layer = 0;
  double expert = 0;          // one routed expert (its MLP); 0 for a dense model
  double routed_per_layer = 0;  // experts * expert
  double active = 0;          // the parameters one token passes through (dense: total)
  double embedding = 0;  // input token embedding (+ position embedding)
  double output = 0;     // output projection (0 when tied) + final norm
  double total = 0;      // layers * (per_layer + routed_per_layer) + embedding + output
};
ParamCount CountParams(const ModelArch& model);

// Checks the fields (positive sizes, heads divide hidden, kv_heads divide heads). The message
// names the field: "hidden: 4095 is not divisible by heads (32)".
Status ValidateModel(const ModelArch& model);

Result<ModelArch> ResolveModel(const std::string& spec);

// Parses a model size such as "7B", "1.3b", "500M", "1T" into a parameter count.
Result<double> ParseModelSize(const std::string& text);

// The architecture a SIZE maps to (see ResolveModel).
ModelArch ModelForSize(double params);

// Reads an architecture from JSON text; `origin` names the file in error messages.
Result<ModelArch> ModelFromJson(const std::string& json_text, const std::string& origin);

// The preset names in a stable order (families by size).
std::vector<std::string> ModelPresetNames();

// The preset with this exact (lower-case) name, or an error naming it.
Result<ModelArch> ModelPreset(const std::string& name);

}  // namespace autopar
