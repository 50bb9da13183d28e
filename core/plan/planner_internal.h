// What the planner's two files share (planner.cpp: the memory and time model; planner_search.cpp:
// the layout search). Internal to core/plan.
#pragma once

#include <cstdint>

namespace autopar {
namespace planner_detail {

inline double D(int64_t v) { return static_cast<double>(v); }

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace planner_detail
}  // namespace autopar
