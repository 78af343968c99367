// Each CUDA stream's cuBLAS and cuDNN handles, and the per-device pools of idle ones behind
// them (vendor_handles.h).
#include "kernels/cuda/vendor_handles.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cuda_graph.h"
#include "engine/error.h"
#include "kernels/math_mode.h"

namespace brigade::cuda::vendor {
namespace {

// The idle handles of one device and math mode, each set to the default stream; a handle a
// stream keeps is in no pool until the stream is destroyed. A cuBLAS handle's math mode is set
// once, when it is made, so no handle's mode ever changes; a cuDNN handle has no math mode (its
// convolution descriptors have), so its pools are fp32's only.
template <class Handle>
struct Pool {
  std::mutex mutex;
  std::vector<Handle> idle;
};

template <class Handle>
Pool<Handle>& pool_for(int device, MathMode mode) {
  static std::mutex map_mutex;
  static auto* pools =
      new std::map<std::pair<int, MathMode>, std::unique_ptr<Pool<Handle>>>();  // never freed
  std::lock_guard<std::mutex> lock(map_mutex);
  auto& pool = (*pools)[{device, mode}];
  if (!pool) pool = std::make_unique<Pool<Handle>>();
  return *pool;
}

cublasHandle_t create_handle(cublasHandle_t, MathMode mode) {
  cublasHandle_t h = nullptr;
  BRIGADE_CUBLAS_CHECK(cublasCreate(&h));
  // fp32: plain FP32, no TF32 tensor-core rounding, so results agree with gemm_tiled to float
  // rounding (cuBLAS's default too; saying it makes it independent of that). tf32: SGEMM may
  // run on tensor cores, its inputs rounded to TF32 (kernels/math_mode.h).
  BRIGADE_CUBLAS_CHECK(cublasSetMathMode(
      h, mode == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return h;
}

cudnnHandle_t create_handle(cudnnHandle_t, MathMode) {
  cudnnHandle_t h = nullptr;
  BRIGADE_CUDNN_CHECK(cudnnCreate(&h));
  return h;
}

// cublasCreate and cudnnCreate "allocate hardware resources on the host and device": a call
// CUDA refuses to a thread that records a graph, and a stream's first call of a library may
// come inside a capture. So a handle is made in a Relaxed scope (engine/cuda_graph.h), as
// PyTorch and NCCL make their allocations during a capture: it takes no part in the graph.
// And one at a time in the process: cuDNN's guide asks that "a single synchronous call of
// cudnnCreate() be made first before each thread creates its own handle asynchronously", and
// the stages of a pipeline make their first handles at once, each on its own thread. Making a
// handle is rare (a stream's first call of its library), so the lock costs nothing in a step.
template <class Handle>
Handle create_relaxed(MathMode mode) {
  static std::mutex one_at_a_time;
  const std::lock_guard<std::mutex> lock(one_at_a_time);
  const CudaGraph::Relaxed relaxed;
  return create_handle(Handle{}, mode);
}

// An idle handle of `device` (the current device) in `mode`, or a new one made on it.
template <class Handle>
Handle take(int device, MathMode mode) {
  Pool<Handle>& pool = pool_for<Handle>(device, mode);
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (!pool.idle.empty()) {
      Handle h = pool.idle.back();
      pool.idle.pop_back();
      return h;
    }
  }
  return create_relaxed<Handle>(mode);  // outside the lock: creating a handle is slow
}

void set_default_stream(cublasHandle_t h) { BRIGADE_CUBLAS_CHECK(cublasSetStream(h, nullptr)); }
void set_default_stream(cudnnHandle_t h) { BRIGADE_CUDNN_CHECK(cudnnSetStream(h, nullptr)); }

// `h`, set to the default stream (cublasSetStream also puts cuBLAS's own workspace back), into
// its pool. Where that fails the handle is left out of every pool, said on stderr: a handle
// still set to a stream about to be destroyed must never be set to another one.
template <class Handle>
void give_back(int device, MathMode mode, Handle h) noexcept {
  try {
    set_default_stream(h);
    Pool<Handle>& pool = pool_for<Handle>(device, mode);
    std::lock_guard<std::mutex> lock(pool.mutex);
    pool.idle.push_back(h);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade: a library handle of cuda:%d is not reused: %s\n", device,
                 e.what());
  }
}

int cuda_index_of(const Stream& stream, const char* library) {
  BRIGADE_CHECK(stream.device().is_cuda(), library << " needs a CUDA stream, got "
                                                   << stream.str()
                                                   << " (the vendor paths are GPU-only)");
  return stream.device().index;
}

size_t mode_index(MathMode mode) { return static_cast<size_t>(mode); }

}  // namespace

// What a CUDA stream keeps (Stream::kept): its handles, each set to the stream at its first
// lease, and cuBLAS's workspace. Destroyed by the stream after its work, before the CUDA
// stream goes (engine/stream_impl.h, drop_kept): each handle is then set to the default stream
// and pooled, and the workspace goes back to the allocator.
class StreamHandles {
 public:
  explicit StreamHandles(int device) : device(device) {}
  StreamHandles(const StreamHandles&) = delete;
  StreamHandles& operator=(const StreamHandles&) = delete;
  ~StreamHandles() {
    if (cudaSetDevice(device) != cudaSuccess) {  // a handle is set on its own device
      std::fprintf(stderr, "brigade: cudaSetDevice(%d) failed: %s; the stream's library "
                   "handles are not reused\n", device, cudaGetErrorString(cudaGetLastError()));
      return;
    }
    for (size_t m = 0; m < blas.size(); ++m)
      if (blas[m]) give_back(device, static_cast<MathMode>(m), blas[m]);
    if (dnn) give_back(device, MathMode::fp32, dnn);
  }

  const int device;
  // Held by a lease for its call. Recursive: a thread may lease its stream's handle again
  // inside a lease (the same handle, its calls in the thread's order).
  std::recursive_mutex blas_mutex, dnn_mutex;
  std::array<cublasHandle_t, 2> blas{};  // [math mode]: set to the stream, or null
  cudnnHandle_t dnn = nullptr;           // set to the stream, or null
  std::shared_ptr<Block> workspace;      // cuBLAS's (kCublasWorkspaceBytes), or null
};

namespace {

// The handles `stream` keeps, made empty at its first call of either library.
std::shared_ptr<StreamHandles> handles_of(const Stream& stream, const char* library) {
  static const char key = 0;  // its address names the handles among what a stream keeps
  const int device = cuda_index_of(stream, library);
  return std::static_pointer_cast<StreamHandles>(
      stream.kept(&key, [&] { return std::make_shared<StreamHandles>(device); }));
}

// cuBLAS's workspace for `stream`'s handles, made at its first cuBLAS call.
std::shared_ptr<Block> make_workspace(const Stream& stream) {
  // A block holds its owner stream, and a stream that kept a block of its own would never be
  // destroyed: the device's default stream owns it (it lives forever and does no work on it),
  // and `stream` is declared its user, so the allocator knows whose work to wait for. Relaxed:
  // the stream's first cuBLAS call may come inside a capture (its cudaMalloc, the allocator's
  // query of the block's earlier work), and the workspace outlives the graph with the stream.
  const CudaGraph::Relaxed relaxed;
  const Stream owner = Stream::default_for(stream.device());
  std::shared_ptr<Block> block =
      Allocator::of(owner.device()).allocate(kCublasWorkspaceBytes, owner);
  block->record_stream(stream);
  return block;
}

// A handle taken from the pool and set to `stream`, or nothing kept: where setting it fails,
// it goes back to the pool first.
template <class Handle, class SetUp>
Handle set_up(const StreamHandles& kept, MathMode mode, SetUp set_up_on_stream) {
  const Handle h = take<Handle>(kept.device, mode);
  try {
    set_up_on_stream(h);
  } catch (...) {
    give_back(kept.device, mode, h);
    throw;
  }
  return h;
}

}  // namespace

CublasLease::CublasLease(const Stream& stream)
    : handles_(handles_of(stream, "cuBLAS")), lock_(handles_->blas_mutex) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(handles_->device));  // a new handle belongs to this device
  const MathMode mode = math_mode();
  cublasHandle_t& kept = handles_->blas[mode_index(mode)];
  if (!kept) {
    if (!handles_->workspace) handles_->workspace = make_workspace(stream);
    kept = set_up<cublasHandle_t>(*handles_, mode, [&](cublasHandle_t h) {
      BRIGADE_CUBLAS_CHECK(cublasSetStream(h, stream.cuda_handle()));
      // After the stream: cublasSetStream resets the workspace to cuBLAS's own pool.
      BRIGADE_CUBLAS_CHECK(
          cublasSetWorkspace(h, handles_->workspace->data(), kCublasWorkspaceBytes));
    });
  }
  handle_ = kept;
}

void* CublasLease::workspace() const { return handles_->workspace->data(); }

CudnnLease::CudnnLease(const Stream& stream)
    : handles_(handles_of(stream, "cuDNN")), lock_(handles_->dnn_mutex) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(handles_->device));
  if (!handles_->dnn)
    handles_->dnn = set_up<cudnnHandle_t>(*handles_, MathMode::fp32, [&](cudnnHandle_t h) {
      BRIGADE_CUDNN_CHECK(cudnnSetStream(h, stream.cuda_handle()));
    });
  handle_ = handles_->dnn;
}

}  // namespace brigade::cuda::vendor
