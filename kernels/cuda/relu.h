// ReLU (relu.cu): the contract of kernels/reference/relu.h — backward reads the OUTPUT y,
// the gradient at 0 is 0, in-place use is allowed. Two compilations: brigade::cuda (nvcc)
// and brigade::emu (the emulator); launches are asynchronous.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// x, y: (n); y may alias x. y = max(x, 0).
void relu_forward(const float* x, float* y, int64_t n, const Stream& stream);
// y, dy, dx: (n); dx may alias dy. dx = y > 0 ? dy : 0; with `round_bf16`, dy rounded to bf16
// values as it is written (bf16_bits.cuh).
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, const Stream& stream,
                   bool round_bf16 = false);
