// ops::decode_pixels (kernels/ops.h): pixel bytes to the floats a model reads. The CPU branch
// beside the CUDA branch (kernels/cuda/pixels.cu, the same kernel on both CUDA paths: there
// is no vendor decode), both kernels/pixels.h's pixel_value: the same bits.
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"
#include "kernels/pixels.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

void decode_pixels(const Tensor& bytes, const Tensor& out, const Stream& stream) {
  BRIGADE_CHECK(bytes.defined() && bytes.dtype() == DType::uint8,
                "decode_pixels: bytes " << (bytes.defined() ? bytes.str() : "undefined")
                                        << " is not a uint8 tensor");
  BRIGADE_CHECK(bytes.device() == stream.device(), "decode_pixels: bytes " << bytes.str()
                                                       << " is not on the stream's device "
                                                       << stream.str());
  detail::check_operands("decode_pixels", stream, {{"out", &out}});
  detail::check_same_shape("decode_pixels", "bytes", bytes, "out", out);
  const int64_t n = bytes.numel();
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {bytes, out}, [=](ThreadPool&) {
      const uint8_t* b = bytes.data<uint8_t>();  // (n)
      float* y = out.data<float>();              // (n)
      for (int64_t i = 0; i < n; ++i) y[i] = pixel_value(b[i]);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&bytes, &out});
    cuda::decode_pixels(bytes.data<uint8_t>(), out.data<float>(), n, stream);
#else
    detail::no_kernel("decode_pixels", stream.device());
#endif
  }
}

}  // namespace brigade::ops
