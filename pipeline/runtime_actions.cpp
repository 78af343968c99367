// The four actions of the runtime (runtime.h: F, B, W, BW) and how a tensor crosses to the
// neighbouring stage through a Link (a Channel in this process, or one to another process).
#include <cmath>
#include <string>

#include "engine/event.h"
#include "kernels/ops.h"
#include "pipeline/runtime_internal.h"

namespace brigade::pipeline {

namespace {
// Throws naming the first non-finite element of host memory p[0, n) (shape `shape`).
void throw_if_not_finite(const float* p, int64_t n, const Shape& shape, const std::string& what,
                         const Action& a) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      throw NonFinite("non-finite value " + std::to_string(p[i]) + " at element " +
                          std::to_string(i) + " of " + what + " " + shape.str(),
                      a);
}
}  // namespace

// The NaN check (RuntimeOptions::check_finite) of `t`, written by `a` on device d's compute
// stream; no host synchronisation either way.
//   CPU: a task on the compute stream. Its failure is the stream's sticky error and travels
//        along the event waits, so every later task downstream is skipped.
//   CUDA: a CUDA stream runs no host tasks, so the device's check stream (a CPU stream) waits
//        for the write — its worker blocks, not this thread —, copies t into host memory and
//        checks it there. The GPU carries on; step() reports the check after its final sync.
void Runtime::check_finite(int d, const Action& a, const Tensor& t, const std::string& what) {
  const Streams& mine = *streams_[static_cast<size_t>(d)];
  if (!t.device().is_cuda()) {
    mine.compute.enqueue(
        [t, what, a] { throw_if_not_finite(t.data<float>(), t.numel(), t.shape(), what, a); });
    return;
  }
  const Stream& check = *mine.check;
  Event written;
  written.record(mine.compute);
  check.wait(written);
  const Tensor host = Tensor::empty(t.shape(), check);  // on cpu:0
  copy_async(host, t, check);
  check.enqueue([host, what, a] {
    throw_if_not_finite(host.data<float>(), host.numel(), host.shape(), what, a);
  });
}

void Runtime::run_action(int d, const Action& a) {
  if (a.op == Op::F) forward(d, a);
  else backward(d, a);
}

// The tensor of micro-batch `mb` from `link`, usable on this device's compute stream.
Tensor Runtime::receive(int d, Link& link, int mb) {
  Message msg = link.receive(mb);  // the event is recorded: waiting on it is always legal
  const Streams& mine = *streams_[static_cast<size_t>(d)];
  if (msg.tensor.device() != devices_[static_cast<size_t>(d)]) {
    // A sender in another Runtime of this process handed over its own tensor (send() below):
    // the receive stream copies it here once it is written.
    mine.recv.wait(msg.ready);
    Tensor here = Tensor::empty(msg.tensor.shape(), mine.recv);
    copy_async(here, msg.tensor, mine.recv);
    Event arrived;  // not msg.ready.record(): copies of an Event are one event, the sender's
    arrived.record(mine.recv);
    msg = {here, arrived};
  }
  mine.compute.wait(msg.ready);
  return msg.tensor;
}

// Hands `t` (written on device d's compute stream) to stage `to_stage`. Same device, or a
// device run by another process: the tensor itself and the event after its writing (the
// link moves it). Another device here: the send stream waits for the compute stream,
// copies into a buffer of the receiver's device (owned by its receive stream), and the event
// recorded after the copy goes with it.
void Runtime::send(int d, const Action& produced, int to_stage, Link& channel,
                   const Tensor& t) {
  const int mb = produced.microbatch;
  const Streams& mine = *streams_[static_cast<size_t>(d)];
  const int to = schedule_.device_of(to_stage);
  Event written;
  written.record(mine.compute);
  if (to == d || !runs(to)) {
    channel.send(mb, {t, written});
    return;
  }
  mine.send.wait(written);
  trace(d, 1, produced, mine.send, true);  // the send lane shows the action whose result goes
  Tensor there = Tensor::empty(t.shape(), streams_[static_cast<size_t>(to)]->recv);
  copy_async(there, t, mine.send);
  trace(d, 1, produced, mine.send, false);
  Event arrived;
  arrived.record(mine.send);
  channel.send(mb, {there, arrived});
}

void Runtime::forward(int d, const Action& a) {
  const Stream& compute = streams_[static_cast<size_t>(d)]->compute;
  const StageRange& range = partition_.stages[static_cast<size_t>(a.stage)];
  const bool last = a.stage == schedule_.stages() - 1;
  Slot& s = slot(a);
  const Tensor x = a.stage == 0 ? inputs_[static_cast<size_t>(a.microbatch)]
                                : receive(d, *activations_[static_cast<size_t>(a.stage - 1)],
                                          a.microbatch);
  trace(d, 0, a, compute, true);
  layers::ForwardContext ctx;
  ctx.seed = options_.seed;
  ctx.step = step_;
  ctx.sample_offset = offsets_[static_cast<size_t>(a.microbatch)];
  ctx.streams = {{devices_[static_cast<size_t>(d)], compute}};
  if (options_.recompute) {
    s.input = x;  // the forward below records nothing: its activations go at once
  } else {
    s.tape = std::make_unique<layers::Tape>();
    ctx.tape = s.tape.get();
  }
  const Tensor y = model_.forward(x, ctx, range.begin, range.end);
  if (options_.check_finite) check_finite(d, a, y, "the output of stage " + std::to_string(a.stage));
  if (last) {
    // Every sample weighs 1/N of the mini-batch, whichever micro-batch it is in.
    ops::LossResult loss = ops::softmax_cross_entropy(
        y, labels_[static_cast<size_t>(a.microbatch)], static_cast<float>(batch_size_), compute);
    if (options_.check_finite) check_finite(d, a, loss.loss, "the loss");
    s.loss = loss.loss;
    s.dy = loss.dlogits;
    s.logits = y;  // counted after the step's final synchronisation: no host wait inside it
  }
  trace(d, 0, a, compute, false);
  if (!last)
    send(d, a, a.stage + 1, *activations_[static_cast<size_t>(a.stage)], y);
}

void Runtime::backward(int d, const Action& a) {
  const Stream& compute = streams_[static_cast<size_t>(d)]->compute;
  const bool last = a.stage == schedule_.stages() - 1;
  const bool first = a.stage == 0;
  Slot& s = slot(a);
  if (a.op != Op::W && !last)
    s.dy = receive(d, *gradients_[static_cast<size_t>(a.stage)], a.microbatch);
  trace(d, 0, a, compute, true);
  if (a.op != Op::W && options_.recompute) {
    // GPipe's re-materialisation: the same forward again (same seed, step and sample offset,
    // so the same dropout masks), this time with a tape.
    const StageRange& range = partition_.stages[static_cast<size_t>(a.stage)];
    s.tape = std::make_unique<layers::Tape>();
    layers::ForwardContext ctx;
    ctx.seed = options_.seed;
    ctx.step = step_;
    ctx.sample_offset = offsets_[static_cast<size_t>(a.microbatch)];
    ctx.streams = {{devices_[static_cast<size_t>(d)], compute}};
    ctx.tape = s.tape.get();
    model_.forward(s.input, ctx, range.begin, range.end);
    s.input = Tensor();
  }
  BRIGADE_CHECK(s.tape != nullptr, to_string(a) << ": no tape for this micro-batch");
  Tensor dx;
  switch (a.op) {
    case Op::B: dx = s.tape->backward_input(s.dy, !first); break;
    case Op::BW: dx = s.tape->backward(s.dy, !first); break;
    case Op::W: s.tape->backward_params(s.dy); break;
    case Op::F: break;
  }
  if (a.op != Op::B) {  // both halves ran: the micro-batch leaves nothing on this stage
    s.tape.reset();
    s.dy = Tensor();
  }
  trace(d, 0, a, compute, false);
  if (a.op != Op::W && !first)
    send(d, a, a.stage - 1, *gradients_[static_cast<size_t>(a.stage - 1)], dx);
}

}  // namespace brigade::pipeline
