// Conv2D (conv2d.cu), the hand-written CUDA path: im2col + gemm_tiled over the whole
// micro-batch, a fixed number of launches per call (conv2d.cu says which).
// Contracts of kernels/reference/conv2d.h: dx overwritten; dw, db ACCUMULATED (+=).
//
// Workspace: every call but backward_bias takes `workspace`, device memory of
// `workspace_floats` floats, owned by the caller so that a step allocates nothing. A call
// lowers as many samples at once as it holds (at least one sample's share: its columns
// (C·R·S, P·Q)); conv2d_workspace_floats(s) is every sample's, up to a budget of 256 MiB, so
// the calls make the same launches for any batch up to that budget. The calls use it in
// stream order, so calls on ONE stream may share one workspace; calls on different streams
// need their own.
// Two compilations: brigade::cuda (nvcc) and brigade::emu (the emulator).
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// Floats of workspace the conv2d_* calls should get: min(N, budget) samples' shares.
int64_t conv2d_workspace_floats(const Conv2dShape& s);
// x: (N, C, H, W)  w: (K, C, R, S)  b: (K) or nullptr  y: (N, K, P, Q); relu fuses
// y = max(y, 0) (with the bias, into the GEMM's store).
void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, float* workspace, int64_t workspace_floats,
                    const Stream& stream, bool relu = false);
// dy: (N, K, P, Q)  w: (K, C, R, S)  dx: (N, C, H, W), overwritten
void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          float* workspace, int64_t workspace_floats, const Stream& stream);
// x: (N, C, H, W)  dy: (N, K, P, Q)  dw: (K, C, R, S), accumulated
void conv2d_backward_filter(const float* x, const float* dy, float* dw,
                            const Conv2dShape& s, float* workspace, int64_t workspace_floats,
                            const Stream& stream);
// Precision bf16 (kernels/precision.h): the same passes with x, w and dy in bfloat16 storage
// (ops::narrow_to_bf16), the columns of x lowered in bf16 and the products on tensor cores
// (gemm_mma_bf16); outputs float, the same workspace. `round_bf16`: y or dx rounded to bf16
// values by the kernel that writes it (the GEMM's epilogue; col2im).
void conv2d_forward_bf16(const cpu::bf16* x, const cpu::bf16* w, const float* b, float* y,
                         const Conv2dShape& s, float* workspace, int64_t workspace_floats,
                         const Stream& stream, bool relu = false, bool round_bf16 = false);
void conv2d_backward_data_bf16(const cpu::bf16* dy, const cpu::bf16* w, float* dx,
                               const Conv2dShape& s, float* workspace, int64_t workspace_floats,
                               const Stream& stream, bool round_bf16 = false);
void conv2d_backward_filter_bf16(const cpu::bf16* x, const cpu::bf16* dy, float* dw,
                                 const Conv2dShape& s, float* workspace,
                                 int64_t workspace_floats, const Stream& stream);
// dy: (N, K, P, Q)  db: (K), accumulated
void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s,
                          const Stream& stream);
// The lowering and its adjoint, all s.N samples in one launch (exposed for tests):
// x: (N, C, H, W) -> col: (N, C·R·S, P·Q); col: (N, C·R·S, P·Q) -> dx: (N, C, H, W), overwritten.
void im2col(const float* x, float* col, const Conv2dShape& s, const Stream& stream);
void im2col(const cpu::bf16* x, cpu::bf16* col, const Conv2dShape& s, const Stream& stream);
// `round_bf16`: each dx rounded to bf16 values as it is written.
void col2im(const float* col, float* dx, const Conv2dShape& s, const Stream& stream,
            bool round_bf16 = false);
