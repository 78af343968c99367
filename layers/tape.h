// Reverse-mode autodiff on a tape of op nodes, with the backward split in two halves.
//
// A forward with a Tape in its ForwardContext records one Node per op (what its backward needs).
// A Tape is ONE forward of ONE range of layers (a pipeline stage) on ONE micro-batch, used by
// one host thread. Given dy, the gradient w.r.t. its output, its two halves are independent:
//   backward_input(dy)   the gradient w.r.t. the tape's input ("B" in pipeline schedules);
//   backward_params(dy)  every parameter's gradient, ACCUMULATED into .grad ("W"), so
//                        micro-batches add up;
// so a zero-bubble schedule runs B now, sends the input gradient upstream, and W later. Each
// runs once, in either order, or fused (backward); the inner gradients are computed by the
// first and kept for the other. Each releases what is no longer needed as soon as it has run
// (after B the nodes without parameters and their gradients; after W all but the first node
// and its output gradient); after both the Tape holds no tensor. Without a tape (no-grad mode,
// evaluation) nothing is recorded or saved. A node's backward runs on its forward's stream;
// nothing here blocks the host.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/stream.h"
#include "engine/tensor.h"

namespace brigade::layers {

// A trainable tensor of a layer, with its gradient (same shape, device and owner stream).
struct Parameter {
  std::string name;  // "conv2d_1.weight": PyTorch's naming, see param_file.h
  Tensor value;
  Tensor grad;       // accumulated by backward_params; zero_grad() clears it
};

// One op's backward. A node knows its own op only: where a fact spans two layers (a ReLU's
// mask, applied by the layer after it), Sequential, which knows both, passes it to their
// modules at forward time, and they build their nodes accordingly (module.h, ReluHandoff).
class Node {
 public:
  virtual ~Node() = default;
  virtual std::string name() const = 0;  // the layer's name, for messages
  virtual Tensor backward_input(const Tensor& dy) = 0;
  virtual bool has_params() const { return false; }
  virtual void backward_params(const Tensor& /*dy*/) {}
};

class Tape {
 public:
  void record(std::unique_ptr<Node> node);
  // Takes the last node recorded back out (to record it again wrapped: bf16_boundary.h). Only
  // before a backward half has run, and only when there is one.
  std::unique_ptr<Node> take_last();
  size_t size() const { return nodes_.size(); }

  // B. need_input_grad = false skips the first node's input gradient (the first stage's
  // input is data: nobody wants its gradient) and returns an undefined tensor.
  Tensor backward_input(const Tensor& dy, bool need_input_grad = true);
  // W.
  void backward_params(const Tensor& dy);
  // BW, fused: node by node from the last, its W right after its B, each node released as
  // soon as it is done (the lowest peak memory; what a schedule without split backward runs).
  Tensor backward(const Tensor& dy, bool need_input_grad = true);

  bool input_done() const { return input_done_; }
  bool params_done() const { return params_done_; }
  // Nodes and inner gradients still held (for tests of the release rules).
  size_t live_nodes() const;
  size_t live_gradients() const;

 private:
  void propagate(const Tensor& dy);  // the gradients at every node's output, once
  void release_after_input();
  void release_after_params();
  void release_all();

  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Tensor> grads_;  // grads_[i]: gradient w.r.t. node i's output
  std::shared_ptr<void> dy_storage_;  // identifies the output gradient given first
  bool propagated_ = false;
  bool input_done_ = false;
  bool params_done_ = false;
};

// What one forward needs besides its input: the training step and the micro-batch's place in
// the mini-batch (for the dropout masks), the tape (null: no-grad) and the streams.
struct ForwardContext {
  bool training = true;       // dropout active
  uint64_t seed = 0;          // the run's seed (dropout masks)
  uint32_t step = 0;          // the optimizer step (mini-batch number)
  int64_t sample_offset = 0;  // this micro-batch's first sample in the mini-batch
  // On a GPU, optionally: a (1) tensor there whose 4 bytes hold `step` (a uint32), which dropout's kernels
  // read instead of the step they were launched with, so that a CUDA graph of the forward
  // and backward replays the masks of the step it runs in (pipeline/runtime/device_graphs.h).
  Tensor step_word;
  Tape* tape = nullptr;       // record here; null = no-grad mode

  // The stream each device's ops run on: `streams` if it names the device, else the
  // device's default stream.
  std::map<Device, Stream> streams;
  Stream stream_for(const Device& device) const;
};

// x on another device, copied onto `to` (a stream of the destination device), ordered after
// the work that produced x (on x's owner stream). With a tape, records a node whose
// backward copies the gradient back.
Tensor to_device(const Tensor& x, const Stream& to, Tape* tape);

}  // namespace brigade::layers
