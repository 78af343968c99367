// Which instruction set the hand-written CPU kernels use, decided at run time.
//
// The build uses no -m flags (the binaries run on any x86-64), so the compiler's own loops get
// SSE2 only. A few hot loops (kernels/cpu/conv2d/avx512.cpp) also exist as AVX-512 versions,
// compiled with __attribute__((target("avx512f"))); kernel_isa() says which ones run:
//   avx512     the CPU (and the OS, for the wider registers) supports AVX-512F;
//   portable   otherwise: the plain C++ loops, which run everywhere.
// BRIGADE_CPU_ISA=portable in the environment forces the portable path (to compare, or to
// rule the AVX-512 kernels out); tests force each path in turn with force_kernel_isa.
#pragma once

#include <optional>

namespace brigade::cpu {

enum class Isa { portable, avx512 };

const char* isa_name(Isa isa);

// What the CPU supports, ignoring the environment and any forcing.
Isa detected_isa();

// The path the kernels take now: the forced one, else BRIGADE_CPU_ISA, else detected_isa().
// Throws brigade::Error when BRIGADE_CPU_ISA names an unknown ISA or one this CPU lacks.
Isa kernel_isa();

// Tests: run the kernels on `isa` from now on (std::nullopt: back to the environment and the
// detection). Forcing avx512 on a CPU without it throws brigade::Error.
void force_kernel_isa(std::optional<Isa> isa);

// The bf16 kernels (bf16.h, gemm_bf16.h) need more than AVX-512F: the AVX-512 BF16 extension
// (vcvtne2ps2bf16, vdpbf16ps; AMD Zen 4, Intel Cooper Lake and Sapphire Rapids onwards). They
// take it when kernel_isa() is avx512 and the CPU has the extension, else their portable path:
// forcing (or BRIGADE_CPU_ISA=) portable rules it out as it does the other AVX-512 kernels.
bool detected_avx512_bf16();
bool use_avx512_bf16();

}  // namespace brigade::cpu
