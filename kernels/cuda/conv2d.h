// Conv2D (conv2d.cu), the hand-written CUDA path: im2col + gemm_tiled, one sample at a time.
// Contracts of kernels/reference/conv2d.h: dx overwritten; dw, db ACCUMULATED (+=).
//
// Workspace: every call but backward_bias takes `workspace`, device memory of at least
// conv2d_workspace_floats(s) floats (one sample's im2col matrix), owned by the caller so that
// a step allocates nothing. The calls use it in stream order, so calls on ONE stream may
// share one workspace; calls on different streams need their own.
// Two compilations: brigade::cuda (nvcc) and brigade::emu (the emulator).
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// Floats of workspace the conv2d_* calls need: (C·R·S, P·Q), one sample's columns.
int64_t conv2d_workspace_floats(const Conv2dShape& s);
// x: (N, C, H, W)  w: (K, C, R, S)  b: (K) or nullptr  y: (N, K, P, Q); relu fuses
// y = max(y, 0).
void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, float* workspace, const Stream& stream,
                    bool relu = false);
// dy: (N, K, P, Q)  w: (K, C, R, S)  dx: (N, C, H, W), overwritten
void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          float* workspace, const Stream& stream);
// x: (N, C, H, W)  dy: (N, K, P, Q)  dw: (K, C, R, S), accumulated
void conv2d_backward_filter(const float* x, const float* dy, float* dw,
                            const Conv2dShape& s, float* workspace, const Stream& stream);
// dy: (N, K, P, Q)  db: (K), accumulated
void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s,
                          const Stream& stream);
// The lowering and its adjoint, one sample (exposed for tests):
// x: (C, H, W) -> col: (C·R·S, P·Q); col: (C·R·S, P·Q) -> dx: (C, H, W), overwritten.
void im2col(const float* x, float* col, const Conv2dShape& s, const Stream& stream);
void col2im(const float* col, float* dx, const Conv2dShape& s, const Stream& stream);
