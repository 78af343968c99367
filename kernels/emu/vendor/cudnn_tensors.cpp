// Emulated cuDNN: the handle, the status texts, the tensor / filter / convolution / activation
// descriptors, and the two pointwise calls Brigade makes (cudnnAddTensor for a bias,
// cudnnActivationForward for a fused ReLU).
#include <cmath>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"
#include "kernels/emu/vendor/cudnn_internal.h"

using namespace brigade::emu;
using namespace brigade::emu::vendor;

namespace brigade::emu::vendor {

namespace {
const char* nvidia_text(cudnnStatus_t s) {
  switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
  }
  return "CUDNN_STATUS_UNKNOWN";
}

std::mutex descriptors_mutex;
std::set<const Descriptor*>& descriptors() {
  static auto* all = new std::set<const Descriptor*>();  // never freed, like the descriptors
  return *all;
}

template <class Struct, class Pointer>
cudnnStatus_t create(Pointer* out, const char* kind, const char* call) {
  if (out == nullptr) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call) + ": null");
  auto* d = new Struct();
  d->kind = kind;
  register_descriptor(d);
  *out = d;
  return CUDNN_STATUS_SUCCESS;
}

template <class Pointer>
cudnnStatus_t destroy(Pointer d, const char* call) {
  std::lock_guard lock(descriptors_mutex);
  if (d == nullptr) return CUDNN_STATUS_SUCCESS;  // cuDNN: destroying null does nothing
  if (descriptors().count(d) == 0 || d->destroyed)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM,
                      std::string(call) + ": the descriptor was never created, or already destroyed");
  d->destroyed = true;  // kept: a later use is refused by name
  return CUDNN_STATUS_SUCCESS;
}
}  // namespace

cudnnStatus_t cudnn_fail(cudnnStatus_t status, const std::string& detail) {
  return static_cast<cudnnStatus_t>(remember(Library::cudnn, status, nvidia_text(status), detail));
}

cudnnStatus_t cudnn_refused(const Refusal& r) {
  switch (r.failure) {
    case Failure::none: return CUDNN_STATUS_SUCCESS;
    case Failure::dead_handle: return cudnn_fail(CUDNN_STATUS_BAD_PARAM, r.detail);
    case Failure::stream_not_set: return cudnn_fail(CUDNN_STATUS_BAD_PARAM, r.detail);
    case Failure::stream_device: return cudnn_fail(CUDNN_STATUS_BAD_PARAM, r.detail);
    case Failure::wrong_device:
    case Failure::dead_stream: return cudnn_fail(CUDNN_STATUS_EXECUTION_FAILED, r.detail);
  }
  return cudnn_fail(CUDNN_STATUS_INTERNAL_ERROR, r.detail);
}

void register_descriptor(const Descriptor* d) {
  std::lock_guard lock(descriptors_mutex);
  descriptors().insert(d);
}

std::string why_unusable(const Descriptor* d, const char* role, bool must_be_set) {
  std::lock_guard lock(descriptors_mutex);
  if (d == nullptr) return std::string(role) + " is null";
  if (descriptors().count(d) == 0) return std::string(role) + " was never created";
  if (d->destroyed) return std::string(role) + " (a " + d->kind + " descriptor) was destroyed";
  if (must_be_set && !d->set) return std::string(role) + " (a " + d->kind + " descriptor) was never set";
  return "";
}

std::string first_reason(std::initializer_list<std::string> reasons) {
  for (const std::string& r : reasons)
    if (!r.empty()) return r;
  return "";
}

Refusal check_cudnn_handle(cudnnHandle_t handle, const std::string& call) {
  std::lock_guard lock(gpu::Emulation::get().mutex);
  return check_handle(handle, call);
}

std::string dims(const cudnnTensorStruct& t) {
  std::ostringstream s;  // (not string +: GCC 12's -Wrestrict misfires on it here)
  s << "(" << t.n << ", " << t.c << ", " << t.h << ", " << t.w << ")";
  return s.str();
}

}  // namespace brigade::emu::vendor

extern "C" {

const char* cudnnGetErrorString(cudnnStatus_t status) {
  brigade::emu::gpu::count_call("cudnnGetErrorString");
  return text_of(Library::cudnn, status, nvidia_text(status));
}

// "The cuDNN library handle is tied to the current CUDA device (context). To use the library
// on multiple devices, one cuDNN handle needs to be created for each device." (cudnnCreate)
cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  brigade::emu::gpu::count_call("cudnnCreate");
  if (handle == nullptr) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreate: null");
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  if (gpu::current_gpu("cudnnCreate") == nullptr)
    return cudnn_fail(CUDNN_STATUS_NOT_INITIALIZED,
                      std::string("cudnnCreate: ") + cudaGetErrorString(cudaGetLastError()));
  // "This function ... allocates hardware resources on the host and device": a potentially
  // unsafe call while the thread's stream captures a graph (capture.cpp), as cudaMalloc is.
  if (gpu::unsafe_call_refused("cudnnCreate") != cudaSuccess)
    return cudnn_fail(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
                      std::string("cudnnCreate: ") + cudaGetErrorString(cudaGetLastError()));
  auto* h = new cudnnContext();
  h->device = gpu::current_device();
  register_handle(h);
  *handle = h;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  brigade::emu::gpu::count_call("cudnnDestroy");
  std::lock_guard lock(gpu::Emulation::get().mutex);
  const Refusal r = check_handle(handle, "cudnnDestroy");
  if (r.failure == Failure::dead_handle) return cudnn_refused(r);  // any current device will do
  handle->destroyed = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  brigade::emu::gpu::count_call("cudnnSetStream");
  std::lock_guard lock(gpu::Emulation::get().mutex);
  const Refusal r = set_stream(handle, stream, "cudnnSetStream");
  if (r.failure == Failure::dead_handle || r.failure == Failure::dead_stream)
    return cudnn_refused(r);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) {
  brigade::emu::gpu::count_call("cudnnCreateTensorDescriptor");
  return create<cudnnTensorStruct>(d, "tensor", "cudnnCreateTensorDescriptor");
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  brigade::emu::gpu::count_call("cudnnDestroyTensorDescriptor");
  return destroy(d, "cudnnDestroyTensorDescriptor");
}
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c, int h, int w) {
  brigade::emu::gpu::count_call("cudnnSetTensor4dDescriptor");
  if (const std::string why = why_unusable(d, "tensorDesc", false); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetTensor4dDescriptor: " + why);
  // "CUDNN_STATUS_BAD_PARAM: At least one of the parameters n, c, h, w was negative or format
  // has an invalid enumerant value or dataType has an invalid enumerant value."
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT)
    return cudnn_fail(n <= 0 || c <= 0 || h <= 0 || w <= 0 ? CUDNN_STATUS_BAD_PARAM
                                                           : CUDNN_STATUS_NOT_SUPPORTED,
                      "cudnnSetTensor4dDescriptor: (" + std::to_string(n) + ", " +
                          std::to_string(c) + ", " + std::to_string(h) + ", " +
                          std::to_string(w) + "); the emulation has NCHW float only");
  d->n = n, d->c = c, d->h = h, d->w = w;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  brigade::emu::gpu::count_call("cudnnCreateFilterDescriptor");
  return create<cudnnFilterStruct>(d, "filter", "cudnnCreateFilterDescriptor");
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  brigade::emu::gpu::count_call("cudnnDestroyFilterDescriptor");
  return destroy(d, "cudnnDestroyFilterDescriptor");
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  brigade::emu::gpu::count_call("cudnnSetFilter4dDescriptor");
  if (const std::string why = why_unusable(d, "filterDesc", false); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetFilter4dDescriptor: " + why);
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0 || format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT)
    return cudnn_fail(k <= 0 || c <= 0 || h <= 0 || w <= 0 ? CUDNN_STATUS_BAD_PARAM
                                                           : CUDNN_STATUS_NOT_SUPPORTED,
                      "cudnnSetFilter4dDescriptor: (" + std::to_string(k) + ", " +
                          std::to_string(c) + ", " + std::to_string(h) + ", " +
                          std::to_string(w) + "); the emulation has KCRS float only");
  d->k = k, d->c = c, d->r = h, d->s = w;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  brigade::emu::gpu::count_call("cudnnCreateConvolutionDescriptor");
  if (d == nullptr) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreateConvolutionDescriptor: null");
  auto* made = new cudnnConvolutionStruct();
  made->kind = "convolution";
  register_descriptor(made);
  *d = made;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  brigade::emu::gpu::count_call("cudnnDestroyConvolutionDescriptor");
  if (d == nullptr) return CUDNN_STATUS_SUCCESS;
  if (const std::string why = why_unusable(d, "convDesc", false); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroyConvolutionDescriptor: " + why);
  d->destroyed = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w,
                                              int u, int v, int dilation_h, int dilation_w,
                                              cudnnConvolutionMode_t mode, cudnnDataType_t type) {
  brigade::emu::gpu::count_call("cudnnSetConvolution2dDescriptor");
  const std::string call = "cudnnSetConvolution2dDescriptor";
  if (const std::string why = why_unusable(d, "convDesc", false); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": " + why);
  // "CUDNN_STATUS_BAD_PARAM: ... One of the parameters pad_h, pad_w is strictly negative. One
  // of the parameters u, v is negative or zero. One of the parameters dilation_h, dilation_w
  // is negative or zero."
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": a negative padding, or a stride or dilation below 1");
  if (u != v || dilation_h != 1 || dilation_w != 1 || mode != CUDNN_CROSS_CORRELATION ||
      type != CUDNN_DATA_FLOAT)
    return cudnn_fail(CUDNN_STATUS_NOT_SUPPORTED,
                      call + ": the emulation has float cross-correlation with one stride and no dilation");
  d->pad_h = pad_h, d->pad_w = pad_w, d->u = u, d->v = v;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
  brigade::emu::gpu::count_call("cudnnSetConvolutionMathType");
  if (const std::string why = why_unusable(d, "convDesc", false); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType: " + why);
  if (math < CUDNN_DEFAULT_MATH || math > CUDNN_FMA_MATH)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType: unknown math type");
  d->math = math;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                    const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int* n,
                                                    int* c, int* h, int* wo) {
  brigade::emu::gpu::count_call("cudnnGetConvolution2dForwardOutputDim");
  const std::string call = "cudnnGetConvolution2dForwardOutputDim";
  if (const std::string why = first_reason({why_unusable(conv, "convDesc"), why_unusable(x, "inputTensorDesc"),
                                            why_unusable(w, "filterDesc")});
      !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": " + why);
  if (x->c != w->c) return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": input and filter channels differ");
  // "outputDim = 1 + ( inputDim + 2*pad - (((filterDim-1)*dilation)+1) )/convolutionStride"
  *n = x->n;
  *c = w->k;
  *h = 1 + (x->h + 2 * conv->pad_h - w->r) / conv->u;
  *wo = 1 + (x->w + 2 * conv->pad_w - w->s) / conv->v;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* d) {
  brigade::emu::gpu::count_call("cudnnCreateActivationDescriptor");
  return create<cudnnActivationStruct>(d, "activation", "cudnnCreateActivationDescriptor");
}
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) {
  brigade::emu::gpu::count_call("cudnnDestroyActivationDescriptor");
  return destroy(d, "cudnnDestroyActivationDescriptor");
}
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t nan, double) {
  brigade::emu::gpu::count_call("cudnnSetActivationDescriptor");
  if (const std::string why = why_unusable(d, "activationDesc", false); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetActivationDescriptor: " + why);
  if (mode != CUDNN_ACTIVATION_RELU && mode != CUDNN_ACTIVATION_IDENTITY)
    return cudnn_fail(CUDNN_STATUS_NOT_SUPPORTED,
                      "cudnnSetActivationDescriptor: the emulation has ReLU and the identity only");
  if (nan != CUDNN_PROPAGATE_NAN && nan != CUDNN_NOT_PROPAGATE_NAN)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetActivationDescriptor: unknown NaN option");
  d->mode = mode;
  d->nan = nan;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

// "This function adds the scaled values of a bias tensor to another tensor. Each dimension of
// the bias tensor A must match the corresponding dimension of the destination tensor C or
// must be equal to 1." C = alpha · A + beta · C.
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha,
                             const cudnnTensorDescriptor_t aDesc, const void* A, const void* beta,
                             const cudnnTensorDescriptor_t cDesc, void* C) {
  brigade::emu::gpu::count_call("cudnnAddTensor");
  const char* call = "cudnnAddTensor";
  if (const std::string why = first_reason({why_unusable(aDesc, "aDesc"), why_unusable(cDesc, "cDesc")});
      !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": " + why);
  const cudnnTensorStruct a = *aDesc, c = *cDesc;
  auto fits = [](int av, int cv) { return av == cv || av == 1; };
  if (!fits(a.n, c.n) || !fits(a.c, c.c) || !fits(a.h, c.h) || !fits(a.w, c.w))
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": A " + dims(a) +
                                                  " does not broadcast to C " + dims(c));
  if (!alpha || !beta || !A || !C) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call) + ": a null pointer");
  const float al = scalar(alpha), be = scalar(beta);
  const auto* src = static_cast<const float*>(A);
  auto* dst = static_cast<float*>(C);
  return cudnn_refused(run_on_stream(
      handle, call, {{A, a.bytes(), "A"}, {C, c.bytes(), "C", true}}, [=] {
        for (int n = 0; n < c.n; ++n)
          for (int ch = 0; ch < c.c; ++ch)
            for (int h = 0; h < c.h; ++h)
              for (int w = 0; w < c.w; ++w) {
                const int64_t ai = ((int64_t{a.n == 1 ? 0 : n} * a.c + (a.c == 1 ? 0 : ch)) * a.h +
                                    (a.h == 1 ? 0 : h)) * a.w + (a.w == 1 ? 0 : w);
                float& out = dst[((int64_t{n} * c.c + ch) * c.h + h) * c.w + w];
                out = blend(al, src[ai], be, out);
              }
      }));
}

// y = alpha · relu(x) + beta · y. "CUDNN_NOT_PROPAGATE_NAN: NaN numbers are not propagated";
// CUDNN_PROPAGATE_NAN: a NaN input gives a NaN output.
cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle, cudnnActivationDescriptor_t act,
                                     const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                     const void* x, const void* beta,
                                     const cudnnTensorDescriptor_t yDesc, void* y) {
  brigade::emu::gpu::count_call("cudnnActivationForward");
  const char* call = "cudnnActivationForward";
  if (const std::string why = first_reason({why_unusable(act, "activationDesc"),
                                            why_unusable(xDesc, "xDesc"), why_unusable(yDesc, "yDesc")});
      !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": " + why);
  if (xDesc->n != yDesc->n || xDesc->c != yDesc->c || xDesc->h != yDesc->h || xDesc->w != yDesc->w)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": x " + dims(*xDesc) +
                                                  " and y " + dims(*yDesc) + " differ");
  // CUDNN_ACTIVATION_IDENTITY "Does not work with cudnnActivationForward()" (cudnnActivationMode_t).
  if (act->mode == CUDNN_ACTIVATION_IDENTITY)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM,
                      std::string(call) + ": CUDNN_ACTIVATION_IDENTITY is for "
                                          "cudnnConvolutionBiasActivationForward only");
  if (!alpha || !beta || !x || !y) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call) + ": a null pointer");
  const float al = scalar(alpha), be = scalar(beta);
  const cudnnActivationStruct activation = *act;
  const int64_t count = xDesc->size();
  const auto* in = static_cast<const float*>(x);
  auto* out = static_cast<float*>(y);
  return cudnn_refused(run_on_stream(
      handle, call, {{x, xDesc->bytes(), "x"}, {y, yDesc->bytes(), "y", true}}, [=] {
        for (int64_t i = 0; i < count; ++i) out[i] = blend(al, activate(in[i], activation), be, out[i]);
      }));
}

}  // extern "C"
