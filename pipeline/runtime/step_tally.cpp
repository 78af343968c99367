#include "pipeline/runtime/step_tally.h"

#include <cstring>

#include "engine/error.h"

namespace brigade::pipeline {

StepTally::StepTally(int microbatches, const DeviceStreams& streams)
    : microbatches_(microbatches),
      rows_(Tensor::empty(Shape({microbatches, kTallyFloats}), streams.compute)) {
  if (streams.compute.device().is_cuda()) {
    BRIGADE_CHECK(streams.check.has_value(),
                  "StepTally: " << streams.compute.str() << " has no host stream beside it");
    host_ = Tensor::empty_pinned(rows_.shape(), *streams.check);
  } else {
    host_ = rows_;  // a CPU device's memory is the host's: read after the stream's wait
  }
}

void StepTally::copy_to_host(const Stream& compute) {
  if (host_.storage() != rows_.storage()) copy_async(host_, rows_, compute);
}

MicroBatchTally StepTally::row(int i) const {
  BRIGADE_CHECK(i >= 0 && i < microbatches_,
                "StepTally: micro-batch " << i << " of " << microbatches_);
  MicroBatchTally r{};
  std::memcpy(&r, static_cast<const char*>(host_.storage()->data()) + i * sizeof(r), sizeof(r));
  return r;
}

double StepTally::loss() const {
  double sum = 0;
  for (int i = 0; i < microbatches_; ++i) sum += row(i).loss;
  return sum;
}

int64_t StepTally::correct() const {
  int64_t sum = 0;
  for (int i = 0; i < microbatches_; ++i) sum += row(i).correct;
  return sum;
}

}  // namespace brigade::pipeline
