#include "tools/train/runners.h"

#include <sstream>

#include "engine/allocator.h"
#include "kernels/ops.h"

namespace brigade::train {

PlainRunner::PlainRunner(layers::Sequential& model, const Options& options)
    : model_(model), seed_(options.seed), optimizer_(make_optimizer(options, model.parameters())) {}

std::string PlainRunner::describe() const {
  return "plain training on " + model_.layer(0).device().str() + " (one stage, one micro-batch)";
}

StagingLayout PlainRunner::staging() const {
  const Device device = model_.layer(0).device();
  return {.first = device, .last = device, .microbatches = 1};
}

StepOutcome PlainRunner::run(StagingArea& area, StagingArea::Slot& slot, uint32_t step) {
  const Device device = model_.layer(0).device();
  const Stream compute = Stream::default_for(device);  // the parameters' stream
  Allocator::of(device).reset_peak();

  const Tensor& images = slot.staged.inputs.at(0);  // (rows, C, H, W)
  const Tensor& labels = slot.staged.labels.at(0);  // (rows)
  compute.wait(slot.staged.inputs_ready);  // the staged batch, without blocking the host
  Event start = Event::timed(), forwarded = Event::timed(), done = Event::timed();
  start.record(compute);
  optimizer_->zero_grad();
  layers::Tape tape;
  layers::ForwardContext ctx;
  ctx.seed = seed_;
  ctx.step = step;
  ctx.tape = &tape;
  const Tensor logits = model_.forward(images, ctx);  // (rows, classes)
  const ops::LossResult loss =
      ops::softmax_cross_entropy(logits, labels, static_cast<float>(slot.rows), compute);
  forwarded.record(compute);
  tape.backward(loss.dlogits, /*need_input_grad=*/false);
  optimizer_->step();
  done.record(compute);
  area.release(slot, compute);

  StepOutcome out;
  out.correct = ops::accuracy_count(logits, labels, compute);  // waits for the stream
  out.loss = loss.loss.to_vector()[0];
  const double f = elapsed_ms(start, forwarded), total = elapsed_ms(start, done);
  out.timeline.title = "plain step";
  out.timeline.unit = "ms";
  out.timeline.microseconds_per_unit = 1000;
  out.timeline.events = {{0, 0, {0, pipeline::Op::F, 0}, 0, f},
                         {0, 0, {0, pipeline::Op::BW, 0}, f, total}};
  out.peak_memory[device.str()] = Allocator::of(device).stats().peak_in_use;
  return out;
}

PipelinedRunner::PipelinedRunner(layers::Sequential& model, pipeline::Partition partition,
                                 pipeline::Schedule schedule, const Options& options) {
  const pipeline::OptimizerFactory factory = [this, &options](std::vector<layers::Parameter*> p)
      -> std::unique_ptr<layers::Optimizer> {
    std::unique_ptr<CheckpointedOptimizer> opt = make_optimizer(options, std::move(p));
    optimizers_.push_back(opt.get());
    return opt;
  };
  runtime_ = std::make_unique<pipeline::Runtime>(
      model, std::move(partition), std::move(schedule), factory,
      pipeline::RuntimeOptions{.seed = options.seed,
                               .recompute = options.recompute,
                               .check_finite = options.check_finite});
}

std::string PipelinedRunner::describe() const {
  const pipeline::Schedule& s = runtime_->schedule();
  std::ostringstream os;
  os << "pipeline: schedule " << s.name << ", " << runtime_->partition().count() << " stages on "
     << runtime_->devices().size() << " devices, " << s.microbatches << " micro-batches";
  if (!runtime_->peer_access().empty()) os << "\n" << runtime_->peer_access();
  return os.str();
}

StagingLayout PipelinedRunner::staging() const {
  const pipeline::Schedule& s = runtime_->schedule();
  const std::vector<Device>& devices = runtime_->devices();
  return {.first = devices[static_cast<size_t>(s.device_of(0))],
          .last = devices[static_cast<size_t>(s.device_of(s.stages() - 1))],
          .microbatches = s.microbatches};
}

StepOutcome PipelinedRunner::run(StagingArea& area, StagingArea::Slot& slot, uint32_t step) {
  pipeline::StepResult r = runtime_->step(slot.staged, step);
  // step() returns after its final synchronisation: nothing reads the slot any more.
  area.release(slot, Stream::default_for(area.layout().first));
  StepOutcome out;
  out.loss = r.loss;
  out.correct = r.correct;
  out.timeline = std::move(r.timeline);
  for (size_t d = 0; d < r.peak_bytes.size(); ++d)
    out.peak_memory[runtime_->devices()[d].str()] = r.peak_bytes[d];
  return out;
}

}  // namespace brigade::train
