// What every op of kernels/ops.h shares on its way to a device: the operand checks, the CPU
// task helper, the CUDA operand helper, and the error for a device without a kernel. Each
// op's own file, kernels/ops/<op>.cpp, has its checks, its CPU branch and its CUDA branch.
// Internal to kernels/.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/thread_pool.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cuda/path.h"
#include "kernels/math_mode.h"
#include "kernels/precision.h"

namespace brigade::ops::detail {

// "relu_forward: no kernel for cuda:0": a device that cannot run the op is an error, never
// a reason to run it somewhere else.
[[noreturn]] inline void no_kernel(const char* op, const Device& device) {
  throw Error(std::string(op) + ": no kernel for " + device.str());
}

// A GEMM or convolution (Dense, Conv2D) in math mode tf32 where only fp32 exists: a CPU
// device or the hand-written CUDA kernels (kernels/math_mode.h). An error naming the op, the
// device and the path, never fp32 computed in tf32's place.
inline void check_math_mode(const char* op, const Stream& stream) {
  if (math_mode() == MathMode::fp32) return;  // every device and path computes fp32
  const Device& device = stream.device();
  const std::string why =
      math_mode_refusal(math_mode(), device.is_cuda(), device.str(), cuda_path_name(cuda_path()));
  if (!why.empty()) throw Error(std::string(op) + ": " + why);
}

// An operand of cuDNN's Conv2D in precision bf16 (kernels/ops/conv2d.cpp says why cuDNN's own
// bf16 convolution is not used): when `bf16`, t rounded to bf16 values in a new float tensor of
// the stream (round_to_bf16), which cuDNN's fp32 convolution then multiplies: products of bf16
// values are exact in float (8 + 8 significant bits), so it computes precision bf16's rule
// (bf16 operands, float accumulation). t itself when not, or when it already holds bf16 values
// (Tensor::holds_bf16_values: a layer's input, or the gradient of its output, in precision bf16
// — layers/bf16_boundary.h), which rounding would leave as they are.
// (cuBLAS's bf16 GEMM and the hand-written tensor-core kernels read bfloat16 storage instead:
// ops::narrow_to_bf16, then bf16_data.)
Tensor bf16_operand(const Tensor& t, bool bf16, const Stream& stream);
// A GEMM operand in bfloat16 storage, for cuBLAS's bf16 GEMM and the tensor-core kernels: t
// itself when it is (ops::dense_weights, ops::conv2d_weights made it), else t narrowed.
Tensor bf16_storage(const Tensor& t, const Stream& stream);

// An op's result under Bf16Rounding (ops.h): marked as holding bf16 values when its kernel
// rounded it (`rounded`: the op asked it to), as it is otherwise.
inline Tensor rounded_if(bool rounded, const Tensor& result) {
  return rounded ? result.marked_bf16_values() : result;
}

// A GEMM operand `t` (named `name`) of a Dense or Conv2D pass — its weights, its input x or
// its output gradient dy — as it is given: float32, or — in precision bf16 on a GPU only —
// bfloat16 storage (ops::dense_weights, conv2d_weights, dense_operand, conv2d_operand); on the
// stream's device.
void check_gemm_operand(const char* op, const char* name, const Tensor& t, const Stream& stream);
// A weight gradient's `dy_gemm`: undefined, or dy's GEMM form (ops::dense_operand,
// conv2d_operand), which must be a GEMM operand of dy's shape.
void check_dy_gemm(const char* op, const Tensor& dy_gemm, const Tensor& dy, const Stream& stream);

// A bfloat16 tensor's elements (Tensor::data<T> has float32's accessor only).
inline cpu::bf16* bf16_data(const Tensor& t) {
  return static_cast<cpu::bf16*>(t.storage()->data());
}

// ---- Operand checks ------------------------------------------------------------------------

// Every operand is defined, float32 and on the stream's device.
inline void check_operands(const char* op, const Stream& stream,
                           std::initializer_list<std::pair<const char*, const Tensor*>> operands) {
  for (const auto& [name, t] : operands) {
    BRIGADE_CHECK(t->defined(), op << ": " << name << " is an undefined tensor");
    BRIGADE_CHECK(t->dtype() == DType::float32,
                  op << ": " << name << " " << t->str() << " is not float32, the only element "
                     << "type its kernels take");
    BRIGADE_CHECK(t->device() == stream.device(), op << ": " << name << " " << t->str()
                                                     << " is not on the stream's device "
                                                     << stream.str());
  }
}

inline void check_same_shape(const char* op, const char* a_name, const Tensor& a,
                             const char* b_name, const Tensor& b) {
  BRIGADE_CHECK(a.shape() == b.shape(), op << ": " << a_name << " " << a.shape() << " and "
                                           << b_name << " " << b.shape()
                                           << " must have the same shape");
}

// A bias of Conv2D or Dense: (units).
inline void check_bias(const char* op, const Tensor& b, int64_t units) {
  BRIGADE_CHECK(b.shape() == Shape({units}),
                op << ": bias " << b.shape() << " does not match " << units << " outputs");
}

// (N, classes) logits or probabilities, and (N) labels when given: softmax and the loss.
inline void check_rows(const char* op, const Tensor& x, const Tensor* labels) {
  BRIGADE_CHECK(x.shape().rank() == 2 && x.shape()[1] >= 1,
                op << ": expects (N, classes), got " << x.shape());
  if (labels)
    BRIGADE_CHECK(labels->shape() == Shape({x.shape()[0]}),
                  op << ": labels " << labels->shape() << " do not match logits " << x.shape());
}

// ---- Memory --------------------------------------------------------------------------------

// The int32 view of a tensor that holds int32 bits (see ops.h, "Integer tensors").
inline int32_t* int32_data(const Tensor& t) { return static_cast<int32_t*>(t.storage()->data()); }

// A scratch tensor of at least `bytes` bytes on the stream (never empty: the allocator's
// smallest bin), so the allocator caches it between calls and frees it only after the work
// that uses it has run.
inline Tensor workspace(uint64_t bytes, const Stream& stream) {
  const int64_t floats = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  return Tensor::empty(Shape({floats > 0 ? floats : 1}), stream);
}

// Declares `stream` a user of t when another stream owns it, so that the caching allocator
// does not hand t's memory to its owner's next allocation while `stream` may still read it
// (allocator.h). An undefined tensor (an optional operand left out) is skipped.
inline void record_use(const Tensor& t, const Stream& stream) {
  if (t.defined() && !(t.stream() == stream)) t.record_stream(stream);
}

// ---- The two branches ----------------------------------------------------------------------

// CPU: enqueues fn(pool) on the CPU stream, keeping `keep` alive until it has run and
// declaring the stream a user of every operand it does not own.
template <class Fn>
void on_cpu(const Stream& stream, std::initializer_list<Tensor> keep, Fn fn) {
  std::vector<Tensor> alive(keep);
  for (const Tensor& t : alive) record_use(t, stream);
  ThreadPool& pool = stream.thread_pool();  // retired pools live on: the reference stays valid
  stream.enqueue([alive = std::move(alive), fn = std::move(fn), &pool]() { fn(pool); });
}

// CUDA: a kernel holds no tensors, so before launching, the op declares the stream a user
// of every operand it does not own; the caching allocator then keeps their memory until the
// stream has passed the launch.
inline void on_cuda(const Stream& stream, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands) record_use(*t, stream);
}

// A step's verdict on a GPU (kernels/step_verdict.h): `verdict` holds word `word` and lives on
// the stream's GPU, or an error naming `op` (kernels/ops/step_verdict.cpp).
void check_verdict(const char* op, const Tensor& verdict, int64_t word, const Stream& stream);

}  // namespace brigade::ops::detail
