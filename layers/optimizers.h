// Optimizers over a set of parameters: SGD (momentum, dampening, Nesterov, weight decay) and
// Adam / AdamW, with PyTorch's update rules (kernels/reference/optimizers.h is the oracle).
//
//   SGD opt(model.parameters(), {.lr = 0.05f, .momentum = 0.9f});
//   ... forward, loss, backward halves ...
//   opt.step();        // enqueued on each parameter's own stream, in order
//   opt.zero_grad();
//
// State (momentum buffers, Adam's moments) lives on each parameter's device, allocated on
// its stream at construction. When every parameter lives on one GPU and is updated on one
// stream (a pipeline stage's), step() is one launch for all of them and zero_grad() another
// (ops::TensorTable: a table of the tensors in device memory, made at the first call and kept;
// the bits are those of the per-tensor updates). Elsewhere each tensor is updated on its own. step() and zero_grad() only enqueue work: a caller that
// computed the gradients on another stream makes that stream's work visible first (an event,
// or the pipeline's per-device ordering), or passes the stream to step(stream).
//
// The state is reachable by name (state()) and the step count settable (set_steps()), so a
// checkpoint (tools/train/checkpoint.h) can save and restore an optimizer exactly: a resumed
// run takes bit for bit the steps an uninterrupted one takes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/stream.h"
#include "kernels/ops.h"
#include "kernels/optimizer_params.h"
#include "layers/tape.h"

namespace brigade::layers {

// A tensor under the name a file stores it by: a parameter ("conv2d_1.weight") or a state
// tensor of its optimizer ("adam.m.conv2d_1.weight").
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<Parameter*> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;

  // One update of every parameter from its .grad; on `stream` if given (it must be on every
  // parameter's device), else on each parameter's own stream.
  void step(std::optional<Stream> stream = std::nullopt) { update(stream, Tensor()); }
  // The same on `gpu`, the one GPU stream of every parameter (the multi-tensor update), unless
  // a word of `verdict` (a step's verdict on that GPU, kernels/step_verdict.h) says the step
  // failed: then the launch changes nothing, and the host, once it reads the verdict, calls
  // undo_step() so that the step count (SGD's first step, Adam's bias correction) is as if
  // this step had not been taken.
  void step_unless_failed(const Stream& gpu, const Tensor& verdict);
  void undo_step() { --steps_; }
  void zero_grad(std::optional<Stream> stream = std::nullopt);

  // step_unless_failed in its two halves, for a CUDA graph of the update
  // (pipeline/runtime/update_graph.h), every parameter on `gpu`'s GPU: prepare_update
  // advances the step count and copies the step's scalars into device memory (one copy, never
  // in a graph); launch_update enqueues the one launch that reads them, the same at every
  // step: what a graph captures, with zero_grad(gpu). prepare_update comes first.
  void prepare_update(const Stream& gpu);
  void launch_update(const Stream& gpu, const Tensor& verdict);
  // zero_grad(gpu)'s table, made again if the gradients are other tensors than it holds,
  // without launching anything: before a capture, since making a table copies and allocates,
  // which a capturing stream must not see.
  void prepare_zero_grad(const Stream& gpu);
  // The tables that launch_update and zero_grad launch over (ops::TensorTable::id): another
  // value when one was made again, for other tensors; a graph holding the launches is stale.
  std::array<uint64_t, 2> launch_tables() const { return {table_.id(), grads_.id()}; }
  bool has_parameters() const { return !params_.empty(); }

  // Every state tensor (the parameter's shape, on its device), named after its parameter:
  // "sgd.momentum.<param>", "adam.m.<param>", "adam.v.<param>". Checkpoints store them under
  // these names, so they never change: old checkpoints must still load. Empty for SGD without
  // momentum. The tensors share storage with the optimizer's: copying into one restores it.
  virtual std::vector<NamedTensor> state() = 0;
  virtual std::string kind() const = 0;  // "sgd" or "adam"

  int64_t steps() const { return steps_; }
  // For a restored state: the update rules read the count (SGD's first step starts its
  // momentum from the gradient; Adam's bias correction), so it is restored with the tensors.
  void set_steps(int64_t steps) { steps_ = steps; }

 protected:
  Stream stream_of(const Parameter& p, const std::optional<Stream>& stream) const {
    return stream ? *stream : p.value.stream();
  }
  // The one stream of a GPU that every parameter is updated on, or nullopt (CPU devices, or
  // parameters on several devices or streams): then each tensor gets its own update.
  std::optional<Stream> one_gpu_stream(const std::optional<Stream>& stream) const;
  // `kept`, made again from `rows` on `stream` only when they are other tensors than it holds.
  // One update, on `stream` or each parameter's own, skipped on the GPU when `verdict` (when
  // defined) holds a failure (step_unless_failed).
  virtual void update(const std::optional<Stream>& stream, const Tensor& verdict) = 0;
  // The GPU halves of update (prepare_update, launch_update): table_ made (again) if needed and
  // the scalars written, the step counted; then the one launch over table_.
  virtual void prepare_update_on(const Stream& gpu) = 0;
  virtual void launch_update_on(const Stream& gpu, const Tensor& verdict) = 0;
  static const ops::TensorTable& table_of(ops::TensorTable& kept,
                                          std::vector<ops::TensorTable::Row> rows,
                                          const Stream& stream);
  std::vector<Parameter*> params_;
  int64_t steps_ = 0;
  ops::TensorTable table_;  // the multi-tensor update's table: a row per parameter

 private:
  const ops::TensorTable& grads_table(const Stream& gpu);  // grads_, made again if needed
  ops::TensorTable grads_;  // zero_grad's multi-tensor table: every gradient
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Parameter*> params, SgdParams h);
  std::vector<NamedTensor> state() override;
  std::string kind() const override { return "sgd"; }
  // The prefix of the state's names, one tensor per parameter when there is momentum.
  static constexpr std::string_view kMomentumPrefix = "sgd.momentum.";

 private:
  void update(const std::optional<Stream>& stream, const Tensor& verdict) override;
  void prepare_update_on(const Stream& gpu) override;  // table_'s rows: p, g, buf
  void launch_update_on(const Stream& gpu, const Tensor& verdict) override;
  SgdParams h_;
  std::vector<Tensor> buf_;  // momentum buffers, one per parameter (none without momentum)
};

// Adam, or AdamW with h.decoupled = true.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Parameter*> params, AdamParams h);
  std::vector<NamedTensor> state() override;
  std::string kind() const override { return "adam"; }
  // The prefixes of the state's names: two tensors per parameter.
  static constexpr std::string_view kFirstMomentPrefix = "adam.m.", kSecondMomentPrefix = "adam.v.";

 private:
  void update(const std::optional<Stream>& stream, const Tensor& verdict) override;
  void prepare_update_on(const Stream& gpu) override;  // table_'s rows: p, g, m, v
  void launch_update_on(const Stream& gpu, const Tensor& verdict) override;
  AdamParams h_;
  std::vector<Tensor> m_, v_;  // first and second moments, one per parameter
};

}  // namespace brigade::layers
