// Channel: the in-process Link (link.h) — what one pipeline stage hands to its neighbour in
// the same process: (tensor, ready-event) pairs, one per micro-batch, activations forward
// (stage s -> s+1), gradients backward (s+1 -> s).
//
// The producer enqueues the work that writes the tensor, RECORDS the event after it, and only
// then sends the pair; so a consumer never holds an event that has not been recorded yet, and
// its stream can wait on it at once (`stream.wait(msg.ready)`) without the host waiting for
// the data. The host thread of the consumer blocks in receive() only until the pair has been
// handed over — i.e. until the producer's host thread has *described* the work, not until
// the work has run.
//
// Pairs are matched by micro-batch, not by arrival order, so a schedule may consume them in
// any order its validator accepted. close(why) poisons the channel: every receive() blocked
// now or later throws ChannelClosed, so one failing stage wakes every waiting one.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "pipeline/runtime/link.h"

namespace brigade::pipeline {

class Channel final : public Link {
 public:
  explicit Channel(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }  // "activations 0->1"

  // Hands over micro-batch `microbatch`'s pair; its event must already be recorded.
  void send(int microbatch, Message message) override;
  // Blocks until micro-batch `microbatch`'s pair is here, takes it out. Throws ChannelClosed
  // (naming the channel, the micro-batch and the reason) if the channel is closed first.
  Message receive(int microbatch) override;
  // Wakes every receiver with ChannelClosed; later sends are dropped. Idempotent.
  void close(const std::string& why) override;
  // Drops what was sent and not received, and reopens (between steps).
  void reset() override;
  size_t pending() const;

 private:
  std::string name_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<int, Message> waiting_;  // sent, not yet received, by micro-batch
  bool closed_ = false;
  std::string why_;
};

}  // namespace brigade::pipeline
