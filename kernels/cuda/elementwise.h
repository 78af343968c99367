// Elementwise helpers for autodiff and the optimizers (elementwise.cu): the same contracts as
// kernels/reference/elementwise.h. Two compilations: brigade::cuda (nvcc) and brigade::emu
// (the emulator); pointers are memory of the stream's device; launches are asynchronous.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// x, y: (n). y += x (gradient accumulation).
void add_to(const float* x, float* y, int64_t n, const Stream& stream);
// y: (n). y *= a.
void scale(float* y, float a, int64_t n, const Stream& stream);
// y: (n). y = a.
void fill(float* y, float a, int64_t n, const Stream& stream);
// x, y: (n). y = x.
void copy(const float* x, float* y, int64_t n, const Stream& stream);
