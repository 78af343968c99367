#include "pipeline/runtime/channel.h"

namespace brigade::pipeline {

void Channel::send(int microbatch, Message message) {
  BRIGADE_CHECK(message.ready.recorded(),
                name_ << ": micro-batch " << microbatch
                      << " sent with an event that was never recorded; record it after the "
                         "work that writes the tensor, then send");
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;  // nobody will receive it: the step is failing
  BRIGADE_CHECK(waiting_.count(microbatch) == 0,
                name_ << ": micro-batch " << microbatch << " sent twice");
  waiting_.emplace(microbatch, std::move(message));
  arrived_.notify_all();
}

Message Channel::receive(int microbatch) {
  std::unique_lock<std::mutex> lock(mutex_);
  arrived_.wait(lock, [&] { return closed_ || waiting_.count(microbatch) != 0; });
  if (closed_)
    throw ChannelClosed(name_ + ": closed while waiting for micro-batch " +
                        std::to_string(microbatch) + " (" + why_ + ")");
  auto it = waiting_.find(microbatch);
  Message m = std::move(it->second);
  waiting_.erase(it);
  return m;
}

void Channel::close(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  closed_ = true;
  why_ = why;
  waiting_.clear();
  arrived_.notify_all();
}

void Channel::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = false;
  why_.clear();
  waiting_.clear();
}

size_t Channel::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_.size();
}

}  // namespace brigade::pipeline
