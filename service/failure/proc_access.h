// The real ProcAccess (core/failure/stack_capture.h) of autopard: /proc, kill(2), sigqueue(3)
// and nanosleep. Core's failure logic gets it injected, so that its tests need no processes.
#pragma once

#include "core/failure/stack_capture.h"

namespace autopar {

ProcAccess RealProcAccess();

}  // namespace autopar
