// Tensor-level ops: one entry point per op, forward and backward, on Tensors and a Stream.
//
// Everything above kernels/ (autodiff, layers, the pipeline runtime) computes through these
// functions only. Each one
//   1. checks the operands — defined, on the stream's device, shapes that fit — and throws
//      brigade::Error naming the op and the shapes ("dense_forward: x (8, 64) does not match
//      w (1500, 63)");
//   2. allocates its outputs on `stream` (stream-ordered, from the device's allocator);
//   3. enqueues the work on `stream` and returns at once, dispatching on the device:
//        cpu:N   a task on the CPU stream calling brigade::cpu::* with stream.thread_pool();
//        cuda:N  brigade::cuda::* launchers on the stream (kernels/ops/<op>.cpp, CUDA builds):
//                Conv2D, MaxPooling2D and Dense through cuDNN/cuBLAS or the hand-written
//                kernels as kernels/cuda/path.h's setting says, every other op hand-written.
//      An op without a kernel for the device throws "<op>: no kernel for <device>": there is
//      never a silent fallback to another device.
// The tensors a task touches stay alive until it has run: the task holds copies of them, and
// every operand not owned by `stream` is declared with record_stream (allocator.h).
//
// Contracts follow kernels/reference/: input gradients are returned fresh, parameter
// gradients are ACCUMULATED into caller-given tensors (so micro-batches add up in place).
//
// Integer tensors. The engine's Tensor has no int32 dtype; the two int32 buffers here
// (max-pool argmax, class labels) are float32-sized tensors whose bits are int32 — written
// and read only through int32 pointers, never as floats. labels_tensor() makes one.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/dropout_mask.h"
#include "kernels/optimizer_params.h"
#include "kernels/shapes.h"
#include "kernels/tensor_slot.h"

namespace brigade::ops {

// ---- Precision bf16's layer boundaries, fused into the kernel writing the tensor ----------
// In precision bf16 a layer's output and the gradient of its input are rounded to bf16 values
// (layers/bf16_boundary.h). The ops that write those tensors can round them in the kernel that
// writes them — no launch, no pass over the memory of its own — when the caller asks:
//   none   the result as always;
//   fused  where the op's kernel writing the result is hand-written (on a GPU: each op below
//          says where), it rounds every element as it stores it and the result says so
//          (Tensor::holds_bf16_values); elsewhere — a library's result (cuBLAS, cuDNN), a CPU
//          device — the result is as with none, unmarked, for the caller to round.
// Either way the values are round_to_bf16's of the plain result, bit for bit: rounding is
// applied last, to the value the kernel would have stored (a ReLU's 0 and a dropped element's
// 0 are bf16 values already).
enum class Bf16Rounding { none, fused };

// ---- Conv2D --------------------------------------------------------------------------------

struct Conv2dArgs {
  int64_t stride = 1;
  Padding padding = Padding::valid;
};

// The kernels' shape of a convolution of x (N, C, H, W) with w (K, C, R, S); throws naming
// the op and both shapes when they do not fit.
Conv2dShape conv2d_shape(const char* op, const Shape& x, const Shape& w, const Conv2dArgs& a);

// x: (N, C, H, W)  w: (K, C, R, S)  b: (K)  -> y: (N, K, P, Q); relu fuses y = max(y, 0)
// round fused: the hand-written path in precision bf16 rounds in the GEMM's epilogue (cuDNN's
// y is not rounded).
Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& a,
                      bool relu, const Stream& stream, Bf16Rounding round = Bf16Rounding::none);
// dy: (N, K, P, Q)  w: (K, C, R, S)  -> dx with x_shape (N, C, H, W)
// relu_x, when defined: the input x, a ReLU's output; dx then also goes through that ReLU's
// backward (relu_backward(relu_x, dx), the same bits), fused into the pass on CPU.
// round fused, on a GPU: the hand-written path in precision bf16 rounds in col2im; on either
// path the ReLU's mask kernel rounds when relu_x is given (cuDNN's dx alone is not rounded).
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape,
                            const Conv2dArgs& a, const Stream& stream,
                            const Tensor& relu_x = Tensor(),
                            Bf16Rounding round = Bf16Rounding::none);
// w: (K, C, R, S) as conv2d_forward and conv2d_backward_data read it, made once for both (as
// dense_weights): in precision bf16 on a GPU, narrowed to bfloat16 storage on the hand-written
// path, rounded to bf16 values (float32, marked: Tensor::holds_bf16_values) for cuDNN's fp32
// convolution on the vendor path; w itself in fp32 and on CPU devices. Both ops take it (or
// the other path's form) in place of w.
Tensor conv2d_weights(const Tensor& w, const Stream& stream);
// t: x (N, C, H, W) or dy (N, K, P, Q) as the passes that read it read it (x: conv2d_forward
// and conv2d_backward_params; dy: conv2d_backward_data and conv2d_backward_params), made once
// for both, in conv2d_weights's forms: t itself in fp32, on CPU devices, and on the vendor path
// when it holds bf16 values already (a layer's input and output gradient in precision bf16, but
// the model's input). The ops take it in place of x or dy.
Tensor conv2d_operand(const Tensor& t, const Stream& stream);
// x: (N, C, H, W)  dy: (N, K, P, Q)  dw: (K, C, R, S) += ...  db: (K) += column sums of dy
// dy_gemm, when defined: conv2d_operand(dy), which the filter gradient reads in place of dy
// (made once for this and conv2d_backward_data); the bias gradient sums the float dy.
void conv2d_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw,
                            const Tensor& db, const Conv2dArgs& a, const Stream& stream,
                            const Tensor& dy_gemm = Tensor());

// ---- MaxPooling2D ----------------------------------------------------------------------------

struct Pool2dArgs {
  int64_t pool_h = 2, pool_w = 2;
  int64_t stride = 2;
};

// What the forward leaves for the backward. The hand-written kernels (CPU and CUDA) record
// the argmax; cuDNN (the CUDA vendor path, kernels/cuda/path.h) has none and reads x and y
// in its backward instead, so then x is kept and argmax is undefined.
struct PoolResult {
  Tensor y;       // (N, C, P, Q)
  Tensor argmax;  // (N, C, P, Q), int32 bits: h * W + w of the winner in its plane
  Tensor x;       // (N, C, H, W): kept only on the cuDNN path
  Shape x_shape;  // (N, C, H, W)
};

// x: (N, C, H, W). Ties: the first maximum in row-major window order (kernels/reference;
// cuDNN breaks ties its own way).
PoolResult maxpool2d_forward(const Tensor& x, const Pool2dArgs& a, const Stream& stream);
// dy: (N, C, P, Q), fwd: the forward's result  -> dx: (N, C, H, W)
// relu_y, when defined: the pool's output y, its input having been a ReLU's output; dx then
// also goes through that ReLU's backward (the same bits as relu_backward on dx: see
// layers/tape.cpp), fused into the pass on CPU.
// round fused: the hand-written CUDA kernel rounds (cuDNN's dx is not rounded).
Tensor maxpool2d_backward(const Tensor& dy, const PoolResult& fwd, const Pool2dArgs& a,
                          const Stream& stream, const Tensor& relu_y = Tensor(),
                          Bf16Rounding round = Bf16Rounding::none);

// ---- ReLU, Dropout -------------------------------------------------------------------------

Tensor relu_forward(const Tensor& x, const Stream& stream);
// y: the forward's OUTPUT; dx = dy where y > 0. round fused: the CUDA kernel rounds.
Tensor relu_backward(const Tensor& y, const Tensor& dy, const Stream& stream,
                     Bf16Rounding round = Bf16Rounding::none);

// Inverted dropout of x (batch, ...): row b is mini-batch sample sample_offset + b, the mask
// a pure function of (key, sample, element) (kernels/reference/dropout.h). `step_word`, on a
// GPU only: undefined, or a (1) tensor on the stream's GPU whose 4 bytes hold key.step (a
// uint32, as int32 words are kept in float32 tensors), which the kernel then reads there (a CUDA graph replays the launch at later steps: layers/tape.h's
// ForwardContext::step_word). round fused: the CUDA kernel rounds.
Tensor dropout_forward(const Tensor& x, float rate, const DropoutKey& key,
                       int64_t sample_offset, const Stream& stream,
                       const Tensor& step_word = Tensor(),
                       Bf16Rounding round = Bf16Rounding::none);
Tensor dropout_backward(const Tensor& dy, float rate, const DropoutKey& key,
                        int64_t sample_offset, const Stream& stream,
                        const Tensor& step_word = Tensor(),
                        Bf16Rounding round = Bf16Rounding::none);

// ---- Dense ---------------------------------------------------------------------------------

// x: (N, in)  w: (out, in)  b: (out)  -> y: (N, out); relu fuses y = max(y, 0)
// round fused: in precision bf16 on a GPU, rounded where the bias and ReLU are added (the
// hand-written GEMM's epilogue; on the vendor path add_bias_rows, after cuBLAS).
Tensor dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, bool relu,
                     const Stream& stream, Bf16Rounding round = Bf16Rounding::none);
// dy: (N, out)  w: (out, in)  -> dx: (N, in)
// round fused: the hand-written path in precision bf16 rounds in the GEMM's epilogue (cuBLAS's
// dx is not rounded).
Tensor dense_backward_data(const Tensor& dy, const Tensor& w, const Stream& stream,
                           Bf16Rounding round = Bf16Rounding::none);
// w: (out, in) as dense_forward and dense_backward_data read it on the stream's device in the
// current precision, for a layer to make once and give both passes of a micro-batch (rather than
// each pass making its own): in precision bf16 on a GPU, narrowed to bfloat16 storage (one
// launch); w itself in fp32 and on CPU devices (whose kernels round inside). Both ops take it
// in place of w: a bfloat16 w only in precision bf16 on a GPU.
Tensor dense_weights(const Tensor& w, const Stream& stream);
// t: x (N, in) or dy (N, out) as the passes that read it read it (x: dense_forward and
// dense_backward_params; dy: dense_backward_data and dense_backward_params), made once for
// both, in dense_weights's forms. The ops take it in place of x or dy.
Tensor dense_operand(const Tensor& t, const Stream& stream);
// x: (N, in)  dy: (N, out)  dw: (out, in) += dyᵀ·x   db: (out) += column sums of dy
// dy_gemm, when defined: dense_operand(dy), which the weight gradient reads in place of dy
// (made once for this and dense_backward_data); the bias gradient sums the float dy.
void dense_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                           const Stream& stream, const Tensor& dy_gemm = Tensor());

// ---- Softmax, loss, accuracy ---------------------------------------------------------------

// x: (N, classes) -> y: (N, classes)
Tensor softmax_forward(const Tensor& x, const Stream& stream);
// y: the forward's output, dy -> dx
Tensor softmax_backward(const Tensor& y, const Tensor& dy, const Stream& stream);

// Labels (N) as an int32 tensor on `stream`'s device (a blocking host copy, like from_vector).
Tensor labels_tensor(const std::vector<int32_t>& labels, const Stream& stream);

struct LossResult {
  Tensor loss;     // (1): sum over rows of the cross-entropy / normaliser
  Tensor dlogits;  // (N, classes): (softmax - onehot) / normaliser
  Tensor status;   // CUDA: the kernel's CrossEntropyResult (bad labels); CPU: undefined
};

// logits: (N, classes)  labels: (N) int32. For the mean over a mini-batch of B samples cut
// into micro-batches, pass normaliser = B for every micro-batch (kernels/reference/softmax.h).
// A label outside [0, classes) fails the CPU stream's task (its sticky error); a CUDA kernel
// cannot throw, so it leaves a NaN loss and the bad row in `status`: loss_value() reports it.
LossResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float normaliser,
                                 const Stream& stream);
// The loss on the host (blocks until it is computed); throws for a bad label on any device.
float loss_value(const LossResult& r);
// A CUDA loss's `status` copied into host memory (a cpu tensor of its bytes): throws
// brigade::Error naming the row and the label when a label was outside [0, classes). For a
// check that must not block the device's thread (pipeline/runtime/step_checks.h).
void check_loss_status(const Tensor& host_status, int64_t classes);
// logits: (N, classes)  labels: (N). How many rows' first largest logit is the label.
// Blocks until counted (evaluation only, never inside a pipelined step).
int64_t accuracy_count(const Tensor& logits, const Tensor& labels, const Stream& stream);
// One micro-batch of a training step, told to the host without a wait of its own: writes row
// `slot` of `tally` ((micro-batches, kTallyFloats) float32 storage of MicroBatchTally rows,
// kernels/micro_batch_tally.h, on the stream's device) with r.loss, the accuracy count of
// logits against labels, and the bad row and label that r.status holds (-1: none; a CPU loss
// throws for a bad label instead). r: softmax_cross_entropy(logits, labels, ...). One launch
// on a GPU, a task on a CPU; never blocks. `labels_verdict` (GPUs only; null: none): the
// step's label check in the same launch, a bad label writes its failure into that word.
struct VerdictWord;
void tally_cross_entropy(const Tensor& logits, const Tensor& labels, const LossResult& r,
                         const Tensor& tally, int64_t slot, const Stream& stream,
                         const VerdictWord* labels_verdict = nullptr);

// ---- Optimizer updates (in place, PyTorch's rules) -----------------------------------------

// p, g, buf: the same shape. first_step: PyTorch sets buf = g on the first step.
void sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdParams& h,
              bool first_step, const Stream& stream);
// p, g, m, v: the same shape; step counts from 1.
void adam_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
               const AdamParams& h, int64_t step, const Stream& stream);

// Multi-tensor updates on a GPU: one launch for every tensor of a table (kernels/cuda/
// optimizers.cu), the bits of the per-tensor updates. A table's rows are {p, g, s1, s2}, each
// a tensor of one shape per row or undefined where the update does not use it (g when
// zeroing, s1 without momentum, s2 for SGD), all on the stream's GPU. The table is copied to
// device memory once (the host waits for that copy) and kept: an update allocates no device
// memory. The table also keeps the update's per-step scalars in device memory
// (kernels/optimizer_scalars.h), written before each update by one stream-ordered copy from
// page-locked memory, so that the update's launch reads nothing the host passes by value: a
// launch captured in a CUDA graph replays right at every step. CUDA streams only.
class TensorTable {
 public:
  using Row = std::array<Tensor, 4>;
  TensorTable() = default;
  TensorTable(std::vector<Row> rows, const Stream& stream);
  // True when `rows` are the same tensors (the same memory, the same sizes): the table may be
  // used for them as it is.
  bool holds(const std::vector<Row>& rows) const;
  bool empty() const { return rows_.empty(); }
  // Which table this is: a number no other table of the process has (0: none). A launch
  // captured in a CUDA graph holds this table's memory and sizes; another id, another graph.
  uint64_t id() const { return id_; }

 private:
  friend void write_sgd_scalars(const TensorTable&, const SgdParams&, bool, const Stream&);
  friend void launch_sgd_all(const TensorTable&, const SgdParams&, const Tensor&, const Stream&);
  friend void write_adam_scalars(const TensorTable&, const AdamParams&, int64_t, const Stream&);
  friend void launch_adam_all(const TensorTable&, const Tensor&, const Stream&);
  friend void fill_all(const TensorTable&, float, const Stream&);
  void use_on(const Stream& stream, const char* op) const;  // checks; record_stream each tensor
  // `size` bytes of scalars into scalars_, behind earlier work on `stream`: a page-locked copy
  // of them, copied by one cudaMemcpyAsync. The page-locked block goes back to its cache when
  // this returns, and the allocator hands it out again only once that copy has run.
  void write_scalars(const void* bytes, size_t size, const Stream& stream) const;
  std::vector<Row> rows_;
  std::vector<TensorSlot> slots_;  // the rows' pointers and sizes, on the host
  Tensor device_;                  // the same slots, their bytes, on the GPU
  Tensor scalars_;                 // (kUpdateScalarWords) the last update's scalars, on the GPU
  uint64_t id_ = 0;
};
// `verdict`: a step's verdict on the stream's GPU (step_verdict_* below), or undefined:
// when it is defined and any of its words holds a failure, the launch updates nothing.
// Every row: p, g, s1 = momentum buffer (undefined without momentum).
void sgd_step_all(const TensorTable& table, const SgdParams& h, bool first_step,
                  const Tensor& verdict, const Stream& stream);
// Every row: p, g, s1 = m, s2 = v.
void adam_step_all(const TensorTable& table, const AdamParams& h, int64_t step,
                   const Tensor& verdict, const Stream& stream);
// Each *_step_all in its two halves, for a CUDA graph that holds the launch: write_*_scalars
// copies the step's scalars into the table's device memory (one copy, outside any graph);
// launch_*_all is the one launch that reads them there, the same at every step.
void write_sgd_scalars(const TensorTable& table, const SgdParams& h, bool first_step,
                       const Stream& stream);
void launch_sgd_all(const TensorTable& table, const SgdParams& h, const Tensor& verdict,
                    const Stream& stream);
void write_adam_scalars(const TensorTable& table, const AdamParams& h, int64_t step,
                        const Stream& stream);
void launch_adam_all(const TensorTable& table, const Tensor& verdict, const Stream& stream);
// Every row's p = a (an optimizer's zero_grad: the rows' p are the gradients).
void fill_all(const TensorTable& table, float a, const Stream& stream);

// ---- A step's verdict on a GPU (kernels/step_verdict.h) ------------------------------------
// `verdict`: (words), int32 bits (see "Integer tensors"), kStepOk = 0 when made by
// Tensor::zeros, on the stream's GPU. One launch each, never blocking; CUDA streams only (a
// CPU stream's check is a task that throws). `failed`: step_check_word(stage, micro-batch,
// check).

// Word `word` = max(itself, failed) when `t` holds a NaN or an infinity.
void step_verdict_check_finite(const Tensor& t, const Tensor& verdict, int64_t word,
                               int32_t failed, const Stream& stream);
// Where a check writes its failure: word `word` of `verdict` becomes max(itself, failed).
// The label check is tally_cross_entropy's, given one of these.
struct VerdictWord {
  Tensor verdict;
  int64_t word = 0;
  int32_t failed = 0;
};

// ---- bf16 values (precision bf16's boundaries: kernels/precision.h) ------------------------
// CPU and CUDA devices (both CUDA paths: kernels/cuda/bf16_values.cu). A float32 tensor these
// ops return holds bf16 values, and says so (Tensor::holds_bf16_values); so do relu_forward's
// and relu_backward's when their x, dy do (each element is one of those or +0), and
// maxpool2d_forward's on CPU devices and the hand-written CUDA path (a copy of one of x's).

// out = x with every element rounded to bf16 (to nearest, ties to even), still float32;
// `out` may be x itself (in place). x, out: float32, the same shape. Returns out, marked as
// holding bf16 values.
Tensor round_to_bf16(const Tensor& x, const Tensor& out, const Stream& stream);
// x (float32) -> a bfloat16 tensor of x's shape, half the bytes: the same rounding, so exact
// when x holds bf16 values.
Tensor narrow_to_bf16(const Tensor& x, const Stream& stream);
// x (bfloat16) -> float32 of x's shape: exact, marked as holding bf16 values.
Tensor widen_to_float32(const Tensor& x, const Stream& stream);

// ---- Pixels --------------------------------------------------------------------------------

// out = bytes / 255 elementwise (kernels/pixels.h: the host decode's bits on every device and
// CUDA path). bytes: uint8, out: float32 of the same shape, both on the stream's device. The
// batch staged to a GPU as its bytes is decoded there by this (tools/train/staging.h).
void decode_pixels(const Tensor& bytes, const Tensor& out, const Stream& stream);

// ---- Elementwise -----------------------------------------------------------------------------

void accumulate(const Tensor& dst, const Tensor& src, const Stream& stream);  // dst += src
void scale(const Tensor& t, float a, const Stream& stream);                   // t *= a
void fill(const Tensor& t, float a, const Stream& stream);                    // t = a

}  // namespace brigade::ops
