// How an op of kernels/ops.h reaches its device: the operand checks and the dispatch shared
// by ops.cpp and ops_train.cpp. Internal to kernels/.
#pragma once

#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/thread_pool.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/ops_cuda.h"
#endif

namespace brigade::ops::detail {

// "relu_forward: no kernel for cuda:0": a device that cannot run the op is an error, never
// a reason to run it somewhere else.
[[noreturn]] inline void no_kernel(const char* op, const Device& device) {
  throw Error(std::string(op) + ": no kernel for " + device.str());
}

// Every operand is defined, float32 and on the stream's device.
inline void check_operands(const char* op, const Stream& stream,
                           std::initializer_list<std::pair<const char*, const Tensor*>> operands) {
  for (const auto& [name, t] : operands) {
    BRIGADE_CHECK(t->defined(), op << ": " << name << " is an undefined tensor");
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

// The int32 view of a tensor that holds int32 bits (see ops.h, "Integer tensors").
inline int32_t* int32_data(const Tensor& t) { return static_cast<int32_t*>(t.storage()->data()); }

// Enqueues fn(pool) on the CPU stream, keeping `keep` alive until it has run and declaring
// the stream as a user of every operand it does not own (an undefined tensor in `keep`, an
// optional operand left out, is skipped).
template <class Fn>
void on_cpu(const Stream& stream, std::initializer_list<Tensor> keep, Fn fn) {
  std::vector<Tensor> alive(keep);
  for (const Tensor& t : alive)
    if (t.defined() && !(t.stream() == stream)) t.record_stream(stream);
  ThreadPool& pool = stream.thread_pool();  // retired pools live on: the reference stays valid
  stream.enqueue([alive = std::move(alive), fn = std::move(fn), &pool]() { fn(pool); });
}

}  // namespace brigade::ops::detail

// The CUDA branch of an op: `BRIGADE_OPS_CUDA(relu_forward, (x, y, stream))` calls
// cuda_ops::relu_forward(x, y, stream) in CUDA builds; a CPU-only build has no CUDA kernels.
#if defined(BRIGADE_HAVE_CUDA)
#define BRIGADE_OPS_CUDA(name, args) ::brigade::ops::cuda_ops::name args
#else
#define BRIGADE_OPS_CUDA(name, args) ::brigade::ops::detail::no_kernel(#name, stream.device())
#endif
