// SGD and Adam/AdamW updates (optimizers.cu): PyTorch's rules exactly as in
// kernels/reference/optimizers.h, same hyper-parameter structs, checked the same way (the
// launchers throw std::invalid_argument before launching). Two compilations: brigade::cuda
// (nvcc) and brigade::emu (the emulator); launches are asynchronous.
// The multi-tensor forms launch one grid for all of an optimizer's tensors on one device.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// p, g, buf: (n); first_step: PyTorch initialises the momentum buffer to the first g.
void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdParams& h,
                bool first_step, const Stream& stream);
// p, g, m, v: (n); step counts from 1.
void adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                 const AdamParams& h, int64_t step, const Stream& stream);

// Multi-tensor forms, one launch for many tensors: `table` (device memory) holds the same
// slots as `slots` (host memory, where the launcher reads the sizes and, on an emulated GPU,
// declares each tensor's accesses). `scalars` (device memory, kernels/optimizer_scalars.h):
// the step's scalars, written in stream order before the launch; the kernel reads them there,
// so that a captured launch replays with each step's values. Each element is updated exactly as the per-tensor kernels
// update it: the bits are the same. `verdict` (device memory, `verdict_words` int32 words,
// or null and 0): a step's verdict (kernels/step_verdict.h); when any word is not kStepOk the
// kernel updates nothing. SGD: p, g, s1 = buf (null without momentum).
// `h`: checked, and its momentum says whether s1 is used; its values are in `scalars`.
void sgd_update_all(const TensorSlot* table, const std::vector<TensorSlot>& slots,
                    const SgdParams& h, const SgdScalars* scalars, const int32_t* verdict,
                    int64_t verdict_words, const Stream& stream);
// Adam: p, g, s1 = m, s2 = v.
void adam_update_all(const TensorSlot* table, const std::vector<TensorSlot>& slots,
                     const AdamScalars* scalars, const int32_t* verdict, int64_t verdict_words,
                     const Stream& stream);
// Every slot's p = value (an optimizer's zero_grad: the slots' p are the gradients).
void fill_all(const TensorSlot* table, const std::vector<TensorSlot>& slots, float value,
              const Stream& stream);
