// Running a test on every instruction-set path of kernels/cpu (cpu_isa.h) this CPU has.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <vector>

#include "kernels/cpu/cpu_isa.h"

namespace brigade::test {

// The ISAs this CPU can run: portable always, avx512 where detected (elsewhere said, not run).
inline std::vector<cpu::Isa> runnable_isas() {
  std::vector<cpu::Isa> isas = {cpu::Isa::portable};
  if (cpu::detected_isa() == cpu::Isa::avx512)
    isas.push_back(cpu::Isa::avx512);
  else
    MESSAGE("this CPU lacks AVX-512F: only the portable paths are tested");
  return isas;
}

// Forces an ISA for the lifetime of the object, then returns to detection.
struct ForcedIsa {
  explicit ForcedIsa(cpu::Isa isa) { cpu::force_kernel_isa(isa); }
  ~ForcedIsa() { cpu::force_kernel_isa(std::nullopt); }
  ForcedIsa(const ForcedIsa&) = delete;
  ForcedIsa& operator=(const ForcedIsa&) = delete;
};

}  // namespace brigade::test
