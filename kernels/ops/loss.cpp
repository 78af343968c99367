// The loss and the accuracy count of kernels/ops.h — both read logits (N, classes) against
// int32 labels (N): labels_tensor, softmax_cross_entropy, loss_value, accuracy_count. The
// checks, then the CPU branch (kernels/cpu/softmax.h) beside the CUDA branch
// (kernels/cuda/softmax.cu).
//
// A bad label: the CPU task throws, which fails the stream (its sticky error); a CUDA
// kernel cannot throw, so it leaves a CrossEntropyResult in `status`, which loss_value
// copies back and checks.
#include <cstring>
#include <memory>
#include <stdexcept>

#include "kernels/cpu/softmax.h"
#include "kernels/cuda/cross_entropy_result.h"
#include "kernels/micro_batch_tally.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

Tensor labels_tensor(const std::vector<int32_t>& labels, const Stream& stream) {
  // The int32 bits travel inside a float vector, copied bytewise, never converted.
  std::vector<float> bits(labels.size());
  static_assert(sizeof(float) == sizeof(int32_t));
  if (!labels.empty()) std::memcpy(bits.data(), labels.data(), labels.size() * sizeof(int32_t));
  return Tensor::from_vector(bits, Shape({static_cast<int64_t>(labels.size())}), stream);
}

LossResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float normaliser,
                                 const Stream& stream) {
  detail::check_operands("softmax_cross_entropy", stream,
                         {{"logits", &logits}, {"labels", &labels}});
  detail::check_rows("softmax_cross_entropy", logits, &labels);
  BRIGADE_CHECK(normaliser > 0, "softmax_cross_entropy: normaliser must be positive, got "
                                    << normaliser);
  const int64_t N = logits.shape()[0], classes = logits.shape()[1];
  LossResult r{Tensor::empty(Shape({1}), stream), Tensor::empty(logits.shape(), stream), Tensor()};
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {logits, labels, r.loss, r.dlogits},
           [=, loss = r.loss, d = r.dlogits](ThreadPool&) {
             *loss.data<float>() = cpu::softmax_cross_entropy(
                 logits.data<float>(), detail::int32_data(labels), d.data<float>(), N, classes,
                 normaliser);
           });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&logits, &labels, &r.loss, &r.dlogits});
    const Tensor ws = Tensor::empty(Shape({cuda::softmax_cross_entropy_workspace_floats(N)}),
                                    stream);  // (N): the row losses
    r.status = detail::workspace(sizeof(CrossEntropyResult), stream);
    auto* result = static_cast<CrossEntropyResult*>(r.status.storage()->data());
    cuda::softmax_cross_entropy(logits.data<float>(), detail::int32_data(labels),
                                r.dlogits.data<float>(), N, classes, normaliser, ws.data<float>(),
                                result, stream);
    // The loss tensor: the first field of the result, copied in stream order.
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(r.loss.data<float>(), &result->loss, sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream.cuda_handle()));
#else
    detail::no_kernel("softmax_cross_entropy", stream.device());
#endif
  }
  return r;
}

float loss_value(const LossResult& r) {
  BRIGADE_CHECK(r.loss.defined(), "loss_value: the loss is an undefined tensor");
#if defined(BRIGADE_HAVE_CUDA)
  if (r.status.defined()) {  // a CUDA kernel's result: copy it back, throw for a bad label
    CrossEntropyResult host{};
    const Stream& s = r.status.stream();
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(&host, r.status.storage()->data(), sizeof(host),
                                       cudaMemcpyDeviceToHost, s.cuda_handle()));
    s.synchronize();
    try {
      check_cross_entropy_result(host, r.dlogits.shape()[1]);
    } catch (const std::out_of_range& e) {
      throw Error(e.what());
    }
  }
#endif
  return r.loss.to_vector()[0];  // on a CPU stream, rethrows a failed task (a bad label)
}

void check_loss_status(const Tensor& host_status, int64_t classes) {
  BRIGADE_CHECK(host_status.device().is_cpu() &&
                    host_status.numel() * static_cast<int64_t>(sizeof(float)) >=
                        static_cast<int64_t>(sizeof(CrossEntropyResult)),
                "check_loss_status: expected a loss status copied to host memory, got "
                    << host_status.shape().str() << " on " << host_status.device().str());
  CrossEntropyResult result{};
  std::memcpy(&result, host_status.data<float>(), sizeof(result));
  try {
    check_cross_entropy_result(result, classes);
  } catch (const std::out_of_range& e) {
    throw Error(e.what());
  }
}

int64_t accuracy_count(const Tensor& logits, const Tensor& labels, const Stream& stream) {
  detail::check_operands("accuracy_count", stream, {{"logits", &logits}, {"labels", &labels}});
  detail::check_rows("accuracy_count", logits, &labels);
  const int64_t N = logits.shape()[0], classes = logits.shape()[1];
  if (stream.device().is_cpu()) {
    auto count = std::make_shared<int64_t>(0);
    detail::on_cpu(stream, {logits, labels}, [=](ThreadPool&) {
      *count = cpu::accuracy_count(logits.data<float>(), detail::int32_data(labels), N, classes);
    });
    stream.synchronize();  // the stream's worker wrote *count before it counted as done
    return *count;
  }
#if defined(BRIGADE_HAVE_CUDA)
  detail::on_cuda(stream, {&logits, &labels});
  const Tensor count = detail::workspace(sizeof(unsigned long long), stream);
  auto* device_count = static_cast<unsigned long long*>(count.storage()->data());
  cuda::accuracy_count(logits.data<float>(), detail::int32_data(labels), N, classes,
                       device_count, stream);
  unsigned long long host = 0;
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(&host, device_count, sizeof(host), cudaMemcpyDeviceToHost,
                                     stream.cuda_handle()));
  stream.synchronize();
  return static_cast<int64_t>(host);
#else
  detail::no_kernel("accuracy_count", stream.device());
#endif
}

void tally_cross_entropy(const Tensor& logits, const Tensor& labels, const LossResult& r,
                         const Tensor& tally, int64_t slot, const Stream& stream,
                         const VerdictWord* labels_verdict) {
  detail::check_operands("tally_cross_entropy", stream,
                         {{"logits", &logits}, {"labels", &labels}, {"loss", &r.loss},
                          {"tally", &tally}});
  detail::check_rows("tally_cross_entropy", logits, &labels);
  BRIGADE_CHECK(tally.shape().rank() == 2 && tally.shape()[1] == kTallyFloats && slot >= 0 &&
                    slot < tally.shape()[0],
                "tally_cross_entropy: row " << slot << " of a tally " << tally.shape().str()
                                            << "; expected (micro-batches, " << kTallyFloats
                                            << ")");
  const int64_t N = logits.shape()[0], classes = logits.shape()[1];
  auto* row = reinterpret_cast<MicroBatchTally*>(tally.data<float>()) + slot;
  if (labels_verdict)
    detail::check_verdict("tally_cross_entropy", labels_verdict->verdict, labels_verdict->word,
                          stream);
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {logits, labels, r.loss, tally}, [=, loss = r.loss](ThreadPool&) {
      const int64_t correct =
          cpu::accuracy_count(logits.data<float>(), detail::int32_data(labels), N, classes);
      *row = MicroBatchTally{*loss.data<float>(), static_cast<int32_t>(correct), -1, 0};
    });
    return;
  }
#if defined(BRIGADE_HAVE_CUDA)
  BRIGADE_CHECK(r.status.defined(), "tally_cross_entropy: a GPU loss without its status");
  detail::on_cuda(stream, {&logits, &labels, &r.status, &tally});
  int32_t* word = nullptr;
  if (labels_verdict) {
    detail::on_cuda(stream, {&labels_verdict->verdict});
    word = detail::int32_data(labels_verdict->verdict) + labels_verdict->word;
  }
  cuda::tally_cross_entropy(logits.data<float>(), detail::int32_data(labels), N, classes,
                            static_cast<const CrossEntropyResult*>(r.status.storage()->data()),
                            row, word, labels_verdict ? labels_verdict->failed : 0, stream);
#else
  detail::no_kernel("tally_cross_entropy", stream.device());
#endif
}

}  // namespace brigade::ops
