#include "engine/tensor.h"

#include <cstring>
#include <ostream>
#include <utility>

#include "engine/event.h"

namespace brigade {

namespace detail {
// tensor_cuda.cpp (CUDA builds). Pointers are on the devices named beside them.
void cuda_memcpy_async(void* dst, const Device& dst_device, const void* src,
                       const Device& src_device, uint64_t bytes, const Stream& stream);
void cuda_memcpy_blocking(void* dst, const Device& dst_device, const void* src,
                          const Device& src_device, uint64_t bytes);
void cuda_memset_async(void* dst, uint64_t bytes, const Stream& stream);
}  // namespace detail

// --- DType and Shape ------------------------------------------------------------------

uint64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::float32: return 4;
    case DType::bfloat16: return 2;
    case DType::uint8: return 1;
  }
  throw Error("dtype_size: unknown dtype");
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32: return "float32";
    case DType::bfloat16: return "bfloat16";
    case DType::uint8: return "uint8";
  }
  return "unknown";
}

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::vector<int64_t>(dims)) {}

Shape::Shape(const std::vector<int64_t>& dims) {
  BRIGADE_CHECK(dims.size() <= max_rank, "a shape has at most " << max_rank
                                             << " dimensions, got " << dims.size());
  rank_ = static_cast<int>(dims.size());
  for (int i = 0; i < rank_; ++i) dims_[i] = dims[static_cast<size_t>(i)];
  for (int i = 0; i < rank_; ++i)
    BRIGADE_CHECK(dims_[i] >= 0, "negative dimension in shape " << str());
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

std::string Shape::str() const {
  std::string text = "(";
  for (int i = 0; i < rank_; ++i) text += (i ? ", " : "") + std::to_string(dims_[i]);
  return text + ")";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i)
    if (a.dims_[i] != b.dims_[i]) return false;
  return true;
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

// --- Tensor -----------------------------------------------------------------------------

Tensor Tensor::allocate(Allocator& allocator, const Shape& shape, const Stream& stream,
                        DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = allocator.allocate(t.nbytes(), stream);
  return t;
}

Tensor Tensor::empty(const Shape& shape, const Stream& stream, DType dtype) {
  return allocate(Allocator::of(stream.device()), shape, stream, dtype);
}

Tensor Tensor::empty_pinned(const Shape& shape, const Stream& cpu_stream, DType dtype) {
  return allocate(Allocator::pinned_host(cpu_stream.device()), shape, cpu_stream, dtype);
}

Tensor Tensor::empty(const Shape& shape, const Device& device, DType dtype) {
  return empty(shape, Stream::default_for(device), dtype);
}

Tensor Tensor::zeros(const Shape& shape, const Stream& stream, DType dtype) {
  Tensor t = empty(shape, stream, dtype);
  if (stream.device().is_cpu()) {
    stream.enqueue([data = t.storage_->data(), bytes = t.nbytes()] { std::memset(data, 0, bytes); });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::cuda_memset_async(t.storage_->data(), t.nbytes(), stream);
#endif
  }
  return t;
}

Tensor Tensor::zeros(const Shape& shape, const Device& device, DType dtype) {
  return zeros(shape, Stream::default_for(device), dtype);
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape,
                           const Device& device) {
  return from_vector(values, shape, Stream::default_for(device));
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape,
                           const Stream& stream) {
  BRIGADE_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
                "from_vector: " << values.size() << " values for shape " << shape << " ("
                                << shape.numel() << " elements)");
  Tensor t = empty(shape, stream);
  const uint64_t bytes = t.nbytes();
  if (stream.device().is_cpu()) {
    // On the stream, not directly: the block may be one this stream freed and its earlier
    // work may still be reading it.
    stream.enqueue([dst = t.storage_->data(), src = values.data(), bytes] {
      std::memcpy(dst, src, bytes);
    });
    Event done;
    done.record(stream);
    done.synchronize();
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::cuda_memcpy_async(t.storage_->data(), t.device(), values.data(), Device::cpu(0),
                              bytes, stream);
    stream.synchronize();
#endif
  }
  return t;
}

std::vector<float> Tensor::to_vector() const {
  check_access(DType::float32);
  std::vector<float> values(static_cast<size_t>(numel()));
  const Stream& s = stream();
  if (s.device().is_cpu()) {
    s.enqueue([dst = values.data(), src = storage_->data(), bytes = nbytes()] {
      std::memcpy(dst, src, bytes);
    });
    Event done;
    done.record(s);
    done.synchronize();
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::cuda_memcpy_async(values.data(), Device::cpu(0), storage_->data(), device(), nbytes(),
                              s);
    s.synchronize();
#endif
  }
  return values;
}

Device Tensor::device() const {
  BRIGADE_CHECK(defined(), "device() of an undefined tensor");
  return storage_->device();
}

const Stream& Tensor::stream() const {
  BRIGADE_CHECK(defined(), "stream() of an undefined tensor");
  return storage_->stream();
}

Tensor Tensor::reshape(const Shape& shape) const {
  BRIGADE_CHECK(defined(), "reshape of an undefined tensor to " << shape);
  BRIGADE_CHECK(shape.numel() == numel(), "cannot reshape " << shape_ << " (" << numel()
                                              << " elements) to " << shape << " ("
                                              << shape.numel() << " elements)");
  Tensor view = *this;
  view.shape_ = shape;
  return view;
}

Tensor Tensor::through(std::shared_ptr<Block> handle) const {
  BRIGADE_CHECK(defined() && handle.get() == storage_.get(),
                "Tensor::through: a handle of another block than "
                    << (defined() ? str() : "an undefined tensor") << "'s");
  Tensor held = *this;
  held.storage_ = std::move(handle);
  return held;
}

Tensor Tensor::marked_bf16_values() const {
  BRIGADE_CHECK(defined() && dtype_ == DType::float32,
                "marked_bf16_values: " << (defined() ? str() : "an undefined tensor")
                                       << " is not a float32 tensor");
  Tensor marked = *this;
  marked.bf16_values_ = true;
  return marked;
}

void Tensor::record_stream(const Stream& user) const {
  BRIGADE_CHECK(defined(), "record_stream on an undefined tensor");
  storage_->record_stream(user);
}

std::string Tensor::str() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype_)) + " " + shape_.str() + " on " + device().str();
}

void Tensor::check_access(DType requested) const {
  BRIGADE_CHECK(defined(), "data access to an undefined tensor");
  BRIGADE_CHECK(requested == dtype_, "data<" << dtype_name(requested) << ">() of a "
                                             << str());
}

// --- Copies -------------------------------------------------------------------------------

void copy_async(const Tensor& dst, const Tensor& src, const Stream& stream) {
  BRIGADE_CHECK(dst.defined() && src.defined(), "copy_async: undefined tensor");
  BRIGADE_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel(),
                "copy_async: cannot copy " << src.str() << " into " << dst.str());
  copy_async(dst, 0, src, 0, src.numel(), stream);
}

void copy_async(const Tensor& dst, int64_t dst_first, const Tensor& src, int64_t src_first,
                int64_t count, const Stream& stream) {
  BRIGADE_CHECK(dst.defined() && src.defined(), "copy_async: undefined tensor");
  BRIGADE_CHECK(dst.dtype() == src.dtype() && count >= 0 && src_first >= 0 && dst_first >= 0 &&
                    src_first + count <= src.numel() && dst_first + count <= dst.numel(),
                "copy_async: cannot copy elements [" << src_first << ", " << src_first + count
                                                     << ") of " << src.str() << " to ["
                                                     << dst_first << ", " << dst_first + count
                                                     << ") of " << dst.str());
  const Device from = src.device(), to = dst.device();
  BRIGADE_CHECK(stream.device() == from || stream.device() == to,
                "copy_async from " << from << " to " << to << " on " << stream.str()
                                   << ": the stream must belong to one of the two devices");
  // `stream` now uses both storages: neither block may be reused elsewhere before the copy.
  src.record_stream(stream);
  dst.record_stream(stream);
  const uint64_t element = dtype_size(src.dtype());
  const uint64_t bytes = static_cast<uint64_t>(count) * element;
  const uint64_t dst_at = static_cast<uint64_t>(dst_first) * element;
  const uint64_t src_at = static_cast<uint64_t>(src_first) * element;
  if (stream.device().is_cpu()) {
    // The task holds both storages until it has run.
    stream.enqueue([d = dst.storage(), s = src.storage(), bytes, dst_at, src_at, from, to] {
      char* out = static_cast<char*>(d->data()) + dst_at;
      const char* in = static_cast<const char*>(s->data()) + src_at;
      if (from.is_cpu() && to.is_cpu()) {
        std::memcpy(out, in, bytes);
        return;
      }
#if defined(BRIGADE_HAVE_CUDA)
      detail::cuda_memcpy_blocking(out, to, in, from, bytes);
#endif
    });
    return;
  }
#if defined(BRIGADE_HAVE_CUDA)
  detail::cuda_memcpy_async(static_cast<char*>(dst.storage()->data()) + dst_at, to,
                            static_cast<const char*>(src.storage()->data()) + src_at, from, bytes,
                            stream);
#endif
}

}  // namespace brigade
