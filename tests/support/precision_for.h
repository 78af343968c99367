// PrecisionFor: the process's precision (kernels/precision.h) set for one scope, fp32 again
// when the scope ends, however it ends (a failed REQUIRE throws), so one test's bf16 never
// leaks into the next test of the executable.
#pragma once

#include "kernels/precision.h"

namespace brigade::testing {

struct PrecisionFor {
  explicit PrecisionFor(Precision p) { set_precision(p); }
  ~PrecisionFor() { set_precision(Precision::fp32); }
  PrecisionFor(const PrecisionFor&) = delete;
  PrecisionFor& operator=(const PrecisionFor&) = delete;
};

}  // namespace brigade::testing
