// A PlanRequest for a model and GPU of the built-in tables, for the tests of the planner and of
// what uses it.
#pragma once

#include <cstdint>
#include <string>

#include "core/plan/hardware.h"
#include "core/plan/model.h"
#include "core/plan/planner.h"

namespace autopar {

inline PlanRequest PlanRequestFor(const std::string& model, int64_t gpus, const std::string& gpu,
                           int64_t batch, int64_t seq = 0) {
  PlanRequest r;
  r.model = ResolveModel(model).value();
  r.gpu = ResolveGpuType(gpu).value();
  r.gpus = gpus;
  r.global_batch = batch;
  r.seq_len = seq;
  return r;
}

}  // namespace autopar
