// Link: one direction of traffic between two neighbouring pipeline stages — activations
// forward (stage s -> s+1) or gradients backward (s+1 -> s) — as (tensor, ready-event)
// pairs matched by micro-batch. The runtime talks only to this interface, so the same
// action code runs whether the neighbour is a thread of this process (channel.h, a
// hand-over in memory) or another process (pipeline/distributed/: MPI on CPU devices, NCCL
// on GPUs).
//
// The contract, whatever carries the bytes:
// - send(mb, message): `message.ready` is already recorded after the work that wrote
//   `message.tensor` (a consumer never waits on an unrecorded event), and `message.checked`,
//   where that work has checks on a host stream, after them. send never waits for the
//   receiver (so two neighbours sending to each other cannot deadlock), and never blocks the
//   host on the data.
// - receive(mb): blocks until micro-batch mb's pair is here and returns it; the tensor is on
//   the receiving side's device and its `ready` event is recorded. Pairs may be received in
//   any order the schedule's validator accepted.
// - close(why): every receive blocked now or later throws ChannelClosed with `why`;
//   later sends are dropped. Idempotent. reset(): drop leftovers and reopen (between steps).
#pragma once
#include <string>

#include "engine/error.h"
#include "engine/event.h"
#include "engine/tensor.h"

namespace brigade::pipeline {

struct Message {
  Tensor tensor;
  Event ready;  // recorded after the work that wrote `tensor`
  // Where that work's checks run on a host stream behind its device (a GPU's NaN and label
  // checks, step_checks.h): recorded on that stream after them, so it fails if one failed.
  // Unrecorded where there are none. A link to another process sends the tensor only once it
  // has passed, and the failure in its place otherwise (pipeline/distributed/nccl_link.h).
  Event checked{};
};

class ChannelClosed : public Error {
 public:
  using Error::Error;
};

class Link {
 public:
  virtual ~Link() = default;
  virtual const std::string& name() const = 0;  // "activations 0->1"
  virtual void send(int microbatch, Message message) = 0;
  virtual Message receive(int microbatch) = 0;
  virtual void close(const std::string& why) = 0;
  virtual void reset() = 0;
};

}  // namespace brigade::pipeline
