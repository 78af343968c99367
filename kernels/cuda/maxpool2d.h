// MaxPooling2D with argmax (maxpool2d.cu): the contract of kernels/reference/maxpool2d.h —
// argmax holds h·W + w inside the (H, W) plane; ties go to the FIRST maximum in row-major
// window order; a window holding a NaN outputs its first NaN (NaN propagates, as in PyTorch);
// cells in the padding never win. Bit-identical to the reference in float.
// Two compilations: brigade::cuda (nvcc) and brigade::emu (the emulator).
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// x: (N, C, H, W)  y, argmax: (N, C, P, Q)
void maxpool2d_forward(const float* x, float* y, int32_t* argmax, const Pool2dShape& s,
                       const Stream& stream);
// dy, argmax: (N, C, P, Q)  dx: (N, C, H, W), overwritten; with `round_bf16`, each dx (a sum of
// the dy its windows chose) rounded to bf16 values as it is written (bf16_bits.cuh).
void maxpool2d_backward(const float* dy, const int32_t* argmax, float* dx,
                        const Pool2dShape& s, const Stream& stream, bool round_bf16 = false);
