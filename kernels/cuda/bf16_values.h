// The bf16 value kernels (bf16_values.cu): the contracts and the bits of
// kernels/cpu/bf16_values.h (round to nearest, ties to even; NaN kept, made quiet; denormals
// rounded, never flushed). Plain declarations: launchers.h includes this list into
// brigade::emu and brigade::cuda (include that header, not this file).

// x, y: (n). y[i] = x[i] rounded to bf16, kept as float. y may be x.
void round_to_bf16_values(const float* x, float* y, int64_t n, const Stream& stream);
// x: (n) float, y: (n) bfloat16. y[i] = x[i] rounded to bf16 (exact when x holds bf16 values).
void narrow_to_bf16(const float* x, cpu::bf16* y, int64_t n, const Stream& stream);
// x: (n) bfloat16, y: (n) float. y[i] = x[i] widened: always exact.
void widen_from_bf16(const cpu::bf16* x, float* y, int64_t n, const Stream& stream);
