// The loss a pipeline trains on: given to the Runtime (RuntimeOptions::loss) and applied by the
// last stage to each micro-batch's output. Softmax cross-entropy, with accuracy as its count of
// correct samples, is the one Brigade ships; a model with another objective brings its own.
//
//   RuntimeOptions options;
//   options.loss = std::make_shared<SoftmaxCrossEntropy>();  // the default
#pragma once
#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/ops.h"

namespace brigade::pipeline {

class Loss {
 public:
  virtual ~Loss() = default;
  // output: the last stage's output for one micro-batch (rows, ...); targets: its labels
  // (rows), int32, on the same device. Enqueued on `stream`, never blocking. Returns
  //   loss:    (1), the rows' losses summed and divided by `normaliser` (the mini-batch size, so
  //            that the micro-batches' losses add up to the mini-batch's mean);
  //   dlogits: d loss / d output, the output's shape: where the backward pass starts;
  //   status:  where a device cannot throw (a CUDA kernel) for a bad target, a verdict the
  //            runtime copies to the host and hands to check_status; undefined otherwise.
  virtual ops::LossResult apply(const Tensor& output, const Tensor& targets, float normaliser,
                                const Stream& stream) const = 0;
  // Throws brigade::Error naming the bad target that `host_status` (apply()'s status, copied
  // into host memory) tells of; `output` is the shape apply() was given.
  virtual void check_status(const Tensor& host_status, const Shape& output) const = 0;
  // Row `slot` of the step's tally (kernels/micro_batch_tally.h; `tally` on the stream's device,
  // (micro-batches, kTallyFloats)): result's loss, how many of the micro-batch's samples the
  // model got right (StepResult::correct), and apply()'s label verdict where it has a status.
  // Enqueued on `stream`, never blocking: the runtime copies the whole tally to the host once
  // per step (step_tally.h). `labels_verdict` (null on the host path): where the step's
  // verdict lives on the GPUs (step_verdict.h), a bad target also writes its failure into that
  // word, in the same launch.
  virtual void tally(const Tensor& output, const Tensor& targets, const ops::LossResult& result,
                     const Tensor& tally, int64_t slot, const Stream& stream,
                     const ops::VerdictWord* labels_verdict) const = 0;
};

// Softmax over the classes of (rows, classes) logits and the cross-entropy against the label,
// PyTorch's CrossEntropyLoss (ops::softmax_cross_entropy); a sample is correct when its first
// largest logit is its label.
class SoftmaxCrossEntropy final : public Loss {
 public:
  ops::LossResult apply(const Tensor& output, const Tensor& targets, float normaliser,
                        const Stream& stream) const override {
    return ops::softmax_cross_entropy(output, targets, normaliser, stream);
  }
  void check_status(const Tensor& host_status, const Shape& output) const override {
    ops::check_loss_status(host_status, output[1]);
  }
  void tally(const Tensor& output, const Tensor& targets, const ops::LossResult& result,
             const Tensor& tally, int64_t slot, const Stream& stream,
             const ops::VerdictWord* labels_verdict) const override {
    ops::tally_cross_entropy(output, targets, result, tally, slot, stream, labels_verdict);
  }
};

}  // namespace brigade::pipeline
