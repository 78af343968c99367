// SGD and Adam/AdamW updates (optimizers.cu): PyTorch's rules exactly as in
// kernels/reference/optimizers.h, same hyper-parameter structs, checked the same way (the
// launchers throw std::invalid_argument before launching). Two compilations: brigade::cuda
// (nvcc) and brigade::emu (the emulator); launches are asynchronous.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// p, g, buf: (n); first_step: PyTorch initialises the momentum buffer to the first g.
void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdParams& h,
                bool first_step, const Stream& stream);
// p, g, m, v: (n); step counts from 1.
void adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                 const AdamParams& h, int64_t step, const Stream& stream);
