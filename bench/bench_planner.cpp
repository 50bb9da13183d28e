// Planning time of autopar's planner (< 50 ms for a 1T model on 3072 GPUs, full search;
// also for a mixture of experts on 2048 GPUs, a 128K-token context and FSDP's shard groups on
// 16,384 GPUs).
#include <benchmark/benchmark.h>

#include "core/plan/planner.h"

namespace {

autopar::PlanRequest Request(const char* model, int64_t gpus, int64_t batch) {
  autopar::PlanRequest r;
  r.model = autopar::ResolveModel(model).value();
  r.gpu = autopar::ResolveGpuType("a100-80gb").value();
  r.gpus = gpus;
  r.global_batch = batch;
  r.top_k = 3;
  return r;
}

void Plan(benchmark::State& state, const autopar::PlanRequest& r) {
  int64_t evaluated = 0;
  for (auto _ : state) {
    auto plan = autopar::PlanJob(r);
    if (!plan.ok()) {
      state.SkipWithError(plan.message().c_str());
      return;
    }
    evaluated = plan->candidates_evaluated;
    benchmark::DoNotOptimize(plan);
  }
  state.counters["configurations"] = static_cast<double>(evaluated);
}

// The full search: every t, p, d, micro-batch, recompute, sharding and interleaving.
void BM_Plan_1T_3072GPUs(benchmark::State& state) {
  Plan(state, Request("megatron-1t", 3072, 3072));
}
void BM_Plan_175B_1024GPUs(benchmark::State& state) {
  Plan(state, Request("gpt3-175b", 1024, 1536));
}
void BM_Plan_7B_8GPUs(benchmark::State& state) { Plan(state, Request("llama-2-7b", 8, 512)); }
// Expert parallelism in the search (every ep dividing the experts and d*c).
void BM_Plan_MoE_GptOss120B_2048GPUs(benchmark::State& state) {
  auto r = Request("gpt-oss-120b", 2048, 4096);
  r.gpu = autopar::ResolveGpuType("h100-80gb").value();
  Plan(state, r);
}
// Context parallelism in the search (128K tokens: cp up to 16).
void BM_Plan_405B_128K_16384GPUs(benchmark::State& state) {
  auto r = Request("llama-3-405b", 16384, 128);
  r.gpu = autopar::ResolveGpuType("h100-80gb").value();
  r.seq_len = 131072;
  Plan(state, r);
}
// FSDP in the search: every shard group dividing d for a dense model on 16,384 GPUs (8K tokens),
// a small one (many data-parallel sizes, each with its shard groups) and Llama 3 405B.
void BM_Plan_8B_Fsdp_16384GPUs(benchmark::State& state) {
  auto r = Request("llama-3-8b", 16384, 16384);
  r.gpu = autopar::ResolveGpuType("h100-80gb").value();
  r.seq_len = 8192;
  Plan(state, r);
}
void BM_Plan_405B_8K_16384GPUs(benchmark::State& state) {
  auto r = Request("llama-3-405b", 16384, 2048);
  r.gpu = autopar::ResolveGpuType("h100-80gb").value();
  r.seq_len = 8192;
  Plan(state, r);
}
// The refusal path: walks node counts to say how many GPUs would fit.
void BM_Refuse_405B_8GPUs(benchmark::State& state) {
  auto r = Request("llama-3-405b", 8, 64);
  for (auto _ : state) {
    auto plan = autopar::PlanJob(r);
    benchmark::DoNotOptimize(plan);
  }
}

BENCHMARK(BM_Plan_1T_3072GPUs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan_175B_1024GPUs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan_7B_8GPUs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan_MoE_GptOss120B_2048GPUs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan_405B_128K_16384GPUs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan_8B_Fsdp_16384GPUs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan_405B_8K_16384GPUs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Refuse_405B_8GPUs)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
