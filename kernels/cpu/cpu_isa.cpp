// See cpu_isa.h.
#include "kernels/cpu/cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "engine/error.h"

namespace brigade::cpu {

namespace {
// -1: not forced; otherwise the forced Isa's value. Atomic: a test may force while a device's
// helper threads, idle, could read it.
std::atomic<int> forced{-1};

void check_supported(Isa isa, const char* who) {
  BRIGADE_CHECK(isa != Isa::avx512 || detected_isa() == Isa::avx512,
                who << " asks for the avx512 CPU kernels, but this CPU (or OS) lacks AVX-512F");
}

Isa from_environment() {
  const char* v = std::getenv("BRIGADE_CPU_ISA");
  if (!v || !*v) return detected_isa();
  const std::string s(v);
  BRIGADE_CHECK(s == "portable" || s == "avx512",
                "BRIGADE_CPU_ISA=" << s << " is not an instruction set of the CPU kernels "
                                   << "(use portable or avx512, or leave it unset)");
  const Isa isa = s == "portable" ? Isa::portable : Isa::avx512;
  check_supported(isa, "BRIGADE_CPU_ISA=avx512");
  return isa;
}
}  // namespace

const char* isa_name(Isa isa) { return isa == Isa::avx512 ? "avx512" : "portable"; }

Isa detected_isa() {
  // GCC's and Clang's check includes the OS's XCR0 bits for the AVX-512 register state.
  static const Isa isa = __builtin_cpu_supports("avx512f") ? Isa::avx512 : Isa::portable;
  return isa;
}

Isa kernel_isa() {
  const int f = forced.load(std::memory_order_relaxed);
  if (f >= 0) return static_cast<Isa>(f);
  return from_environment();
}

bool detected_avx512_bf16() {
  static const bool has = detected_isa() == Isa::avx512 && __builtin_cpu_supports("avx512bf16");
  return has;
}

bool use_avx512_bf16() { return kernel_isa() == Isa::avx512 && detected_avx512_bf16(); }

void force_kernel_isa(std::optional<Isa> isa) {
  if (isa) check_supported(*isa, "force_kernel_isa");
  forced.store(isa ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

}  // namespace brigade::cpu
