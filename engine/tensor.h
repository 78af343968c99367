// Tensor: a shape, a dtype, a device, and shared storage from the device's allocator.
//
// Shapes are contiguous, row-major, NCHW for images: element (n, c, h, w) of a (N, C, H, W)
// tensor is at ((n*C + c)*H + h)*W + w. Up to 4 dimensions. Copies of a Tensor share the
// storage (like shared_ptr); reshape() gives a view of the same storage.
//
// The storage is an allocator Block owned by a stream (allocator.h): the tensor is created
// for work on that stream, and when the last tensor using it goes, it is freed there.
//
// Nothing here blocks, except the host helpers from_vector / to_vector (for tests and I/O),
// which run their copy on the tensor's stream and wait for it.
//
// copy_async(dst, src, stream): a stream-ordered copy between any two devices:
//   CPU <-> CPU   a memcpy task on `stream` (a CPU stream);
//   CPU <-> CUDA  on a CUDA stream: cudaMemcpyAsync (H2D/D2H; pageable host memory, so
//                 the driver may block the caller for the transfer);
//                 on a CPU stream: a task that calls cudaMemcpy on the stream's worker;
//   CUDA <-> CUDA cudaMemcpyPeerAsync (or a device-to-device copy on one GPU).
// `stream` must belong to dst's or src's device. The copy is ordered after earlier work on
// `stream` only: work that produced `src` on another stream must be waited on first
// (`stream.wait(produced)`). A CUDA stream waiting on a CPU event blocks the host until the
// CPU work is done (stream_cuda.cpp); a CPU stream waiting on a CUDA event blocks only its
// worker. copy_async declares `stream` as a user of both storages (Block::record_stream),
// so freeing either tensor during the copy is safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/stream.h"

namespace brigade {

// The element type. float32 is every op's (kernels/ops.h checks it); bfloat16 (2 bytes, a
// float's upper half: kernels/cpu/bf16.h) is for storage in bf16 only so far: an op given a
// bfloat16 tensor refuses it by name, never reading its bits as floats. uint8 (1 byte) holds
// a data set's pixels as its files have them, the smallest exact form of a batch on its way
// to a GPU (ops::decode_pixels turns them into floats there); no other op takes it.
enum class DType : uint8_t { float32, bfloat16, uint8 };

uint64_t dtype_size(DType dtype);     // 4, 2, 1
const char* dtype_name(DType dtype);  // "float32", "bfloat16", "uint8"

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::float32; }
template <>
constexpr DType dtype_of<uint8_t>() { return DType::uint8; }

class Shape {
 public:
  static constexpr int max_rank = 4;

  Shape() = default;  // rank 0: a scalar (one element)
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  std::vector<int64_t> dims() const { return {dims_, dims_ + rank_}; }
  std::string str() const;  // "(32, 1, 28, 28)"

  friend bool operator==(const Shape& a, const Shape& b);

 private:
  int64_t dims_[max_rank] = {};
  int rank_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage

  // Uninitialised storage for work on `stream` (its device is the tensor's device).
  static Tensor empty(const Shape& shape, const Stream& stream, DType dtype = DType::float32);
  // The same, on the device's default stream.
  static Tensor empty(const Shape& shape, const Device& device, DType dtype = DType::float32);
  // The same on a CPU stream, in page-locked memory (Allocator::pinned_host): the host side of
  // copies to and from GPUs. CUDA builds only.
  static Tensor empty_pinned(const Shape& shape, const Stream& cpu_stream,
                             DType dtype = DType::float32);
  // Zeros, written in stream order (a memset task / cudaMemsetAsync).
  static Tensor zeros(const Shape& shape, const Stream& stream, DType dtype = DType::float32);
  static Tensor zeros(const Shape& shape, const Device& device, DType dtype = DType::float32);

  // Host helpers, blocking: copy in on `stream` (default: the device's default stream) and
  // wait; copy out on the tensor's stream and wait.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            const Device& device = Device::cpu(0));
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            const Stream& stream);
  std::vector<float> to_vector() const;

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  const Stream& stream() const;  // the stream that owns the storage
  int64_t numel() const { return shape_.numel(); }
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * dtype_size(dtype_); }

  // The elements, as T (checked against the dtype). Device memory for a CUDA tensor.
  template <class T>
  T* data() const {
    check_access(dtype_of<T>());
    return static_cast<T*>(storage_->data());
  }

  // A view with another shape of the same number of elements, sharing the storage (and what
  // is known of its values: holds_bf16_values).
  Tensor reshape(const Shape& shape) const;

  // Whether every element is known to be a bf16 value (precision bf16, kernels/precision.h): a
  // float whose low 16 bits are zero, which rounding to bf16 leaves as it is. Said by the op
  // that wrote the values (ops::round_to_bf16 and the ops its header lists) on the tensor it
  // returns, and kept by copies and views of that tensor; false on a tensor made any other
  // way. Ops skip rounding a tensor that holds bf16 values: exact, one launch fewer. The mark
  // is a fact about the values as written, so a tensor that carries it is never written again
  // (the ops' results are values: nothing writes into them after the op).
  bool holds_bf16_values() const { return bf16_values_; }
  // This tensor (the same storage), marked as holding bf16 values: for the op that wrote them.
  Tensor marked_bf16_values() const;

  // This tensor through `handle`, another owner of its own block (checked): only what keeps
  // the memory alive changes. A CUDA graph keeps the tensors it hands out again this way,
  // without holding their slots (engine/graph_memory.h).
  Tensor through(std::shared_ptr<Block> handle) const;

  // Declares that work on `user` reads or writes this tensor (see Block::record_stream).
  void record_stream(const Stream& user) const;
  const std::shared_ptr<Block>& storage() const { return storage_; }

  std::string str() const;  // "float32 (32, 1, 28, 28) on cpu:0"

 private:
  static Tensor allocate(Allocator& allocator, const Shape& shape, const Stream& stream,
                         DType dtype);
  void check_access(DType requested) const;

  std::shared_ptr<Block> storage_;
  Shape shape_;
  DType dtype_ = DType::float32;
  bool bf16_values_ = false;  // holds_bf16_values()
};

void copy_async(const Tensor& dst, const Tensor& src, const Stream& stream);
// The same for `count` elements: src's from src_first into dst's from dst_first (one word of
// a small table, say), both ranges inside their tensors.
void copy_async(const Tensor& dst, int64_t dst_first, const Tensor& src, int64_t src_first,
                int64_t count, const Stream& stream);

}  // namespace brigade
