// Whether a schedule accumulates like one device: every stage adds its weight gradients (W or
// BW) in micro-batch order 0, 1, ..., m-1, as a single device adds them. Where it does, the
// runtime's parity with one device is bit for bit (parity_test.cpp); shared by the schedule
// tests, which need nothing but the lists.
#pragma once

#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline::test {

inline bool accumulates_in_order(const Schedule& s) {
  std::vector<int> next(static_cast<size_t>(s.stages()), 0);
  for (const auto& list : s.lists)
    for (const Action& a : list)
      if (a.op == Op::W || a.op == Op::BW) {
        if (a.microbatch != next[static_cast<size_t>(a.stage)]) return false;
        ++next[static_cast<size_t>(a.stage)];
      }
  return true;
}

}  // namespace brigade::pipeline::test
