// Dense (dense.cu): y = x · Wᵀ + b with W stored [out, in] (PyTorch's nn.Linear), the
// contracts of kernels/reference/dense.h: dx overwritten, dw and db ACCUMULATED (+=).
// The products go through gemm_tiled (gemm.h). Two compilations: brigade::cuda (nvcc) and
// brigade::emu (the emulator); launches are asynchronous.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// x: (N, in)  w: (out, in)  b: (out) or nullptr  y: (N, out); relu fuses y = max(y, 0)
void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, const Stream& stream, bool relu = false);
// dy: (N, out)  w: (out, in)  dx: (N, in), overwritten: dx = dy · W
void dense_backward_data(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                         int64_t out, const Stream& stream);
// x: (N, in)  dy: (N, out)  dw: (out, in), accumulated: dw += dyᵀ · x
void dense_backward_weight(const float* x, const float* dy, float* dw, int64_t N,
                           int64_t in, int64_t out, const Stream& stream);
// Precision bf16 (kernels/precision.h): the same three GEMMs with the operands in bfloat16
// storage, on tensor cores (gemm_mma_bf16); outputs float, dx overwritten, dw accumulated.
// `round_bf16`: y or dx rounded to bf16 values as the GEMM stores it (gemm_args.h's epilogue).
// x: (N, in)  w: (out, in)  b: (out) or nullptr  y: (N, out)
void dense_forward_bf16(const cpu::bf16* x, const cpu::bf16* w, const float* b, float* y,
                        int64_t N, int64_t in, int64_t out, const Stream& stream,
                        bool relu = false, bool round_bf16 = false);
// dy: (N, out)  w: (out, in)  dx: (N, in)
void dense_backward_data_bf16(const cpu::bf16* dy, const cpu::bf16* w, float* dx, int64_t N,
                              int64_t in, int64_t out, const Stream& stream,
                              bool round_bf16 = false);
// x: (N, in)  dy: (N, out)  dw: (out, in)
void dense_backward_weight_bf16(const cpu::bf16* x, const cpu::bf16* dy, float* dw, int64_t N,
                                int64_t in, int64_t out, const Stream& stream);
// dy: (N, out)  db: (out), accumulated: db += column sums of dy
void dense_backward_bias(const float* dy, float* db, int64_t N, int64_t out,
                         const Stream& stream);
// y: (rows, cols). y[i][j] += b[j], then y = max(y, 0) if relu (b may be nullptr), then y
// rounded to bf16 values if round_bf16 (bf16_bits.cuh).
void add_bias_rows(float* y, const float* b, int64_t rows, int64_t cols, bool relu,
                   const Stream& stream, bool round_bf16 = false);
