// Emulated cuDNN's objects: its handle and descriptors, how a refused call becomes a status,
// and the shapes a call's descriptors describe. Internal to kernels/emu/vendor/.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <string>

#include "kernels/emu/vendor/library.h"
#include "kernels/shapes.h"

struct cudnnContext : brigade::emu::vendor::Handle {};

namespace brigade::emu::vendor {

// What every descriptor has: created by cudnnCreate*Descriptor, usable once set, refused after
// cudnnDestroy*Descriptor (the object is kept, marked, so the refusal can name it).
struct Descriptor {
  const char* kind = "";  // "tensor", "filter", ...
  bool set = false;
  bool destroyed = false;
};

}  // namespace brigade::emu::vendor

struct cudnnTensorStruct : brigade::emu::vendor::Descriptor {
  int n = 0, c = 0, h = 0, w = 0;  // NCHW float, packed
  int64_t size() const { return int64_t{n} * c * h * w; }
  uint64_t bytes() const { return static_cast<uint64_t>(size()) * sizeof(float); }
};
struct cudnnFilterStruct : brigade::emu::vendor::Descriptor {
  int k = 0, c = 0, r = 0, s = 0;  // KCRS float
  uint64_t bytes() const { return static_cast<uint64_t>(int64_t{k} * c * r * s) * sizeof(float); }
};
struct cudnnConvolutionStruct : brigade::emu::vendor::Descriptor {
  int pad_h = 0, pad_w = 0, u = 1, v = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};
struct cudnnActivationStruct : brigade::emu::vendor::Descriptor {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
  cudnnNanPropagation_t nan = CUDNN_NOT_PROPAGATE_NAN;
};
struct cudnnPoolingStruct : brigade::emu::vendor::Descriptor {
  cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
  cudnnNanPropagation_t nan = CUDNN_NOT_PROPAGATE_NAN;
  int r = 0, s = 0, pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
};

namespace brigade::emu::vendor {

// The status of a cuDNN call: `status` kept as this thread's last, with `detail` after
// NVIDIA's text in cudnnGetErrorString.
cudnnStatus_t cudnn_fail(cudnnStatus_t status, const std::string& detail);
// A refused call's status (library.h's Failure, as cuDNN answers it).
cudnnStatus_t cudnn_refused(const Refusal& refusal);

// Registers a new descriptor; `why_unusable` says why one may not be used ("" if it may):
// never created, destroyed, or never set. `role` names it in the text ("xDesc").
void register_descriptor(const Descriptor* d);
std::string why_unusable(const Descriptor* d, const char* role, bool must_be_set = true);
// The first reason among several, or "".
std::string first_reason(std::initializer_list<std::string> reasons);

// The handle checked under the emulation's lock, for calls that enqueue nothing (queries).
Refusal check_cudnn_handle(cudnnHandle_t handle, const std::string& call);

// alpha and beta are host floats for float tensors: read at the call.
inline float scalar(const void* p) { return *static_cast<const float*>(p); }
// y = alpha · value + beta · y, y not read when beta is 0 (garbage, NaN included, is overwritten).
inline float blend(float alpha, float value, float beta, float old) {
  return beta == 0.0f ? alpha * value : alpha * value + beta * old;
}

// "(n, c, h, w)"
std::string dims(const cudnnTensorStruct& t);

// The activation of one value: ReLU with its NaN option ("CUDNN_NOT_PROPAGATE_NAN: NaN numbers
// are not propagated"; CUDNN_PROPAGATE_NAN: a NaN input gives a NaN output), or the identity
// (cudnnConvolutionBiasActivationForward only).
inline float activate(float v, const cudnnActivationStruct& a) {
  if (a.mode == CUDNN_ACTIVATION_IDENTITY) return v;
  if (v != v) return a.nan == CUDNN_PROPAGATE_NAN ? v : 0.0f;  // NaN
  return v > 0.0f ? v : 0.0f;
}

}  // namespace brigade::emu::vendor
