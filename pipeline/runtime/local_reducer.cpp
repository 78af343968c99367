#include "pipeline/runtime/local_reducer.h"

#include "engine/error.h"
#include "engine/tensor.h"

namespace brigade::pipeline {

class LocalReducer::Member final : public GradientReducer {
 public:
  Member(LocalReducer& group, int replica) : group_(group), replica_(replica) {}

  void sum(const std::vector<Tensor>& tensors, const Stream& stream) override {
    try {
      stream.synchronize();  // the gradients are written
    } catch (const std::exception& e) {
      abandon(e.what());  // they never will be: the other replicas must not wait for them
      throw;
    }
    std::vector<std::vector<float>> values;
    for (const Tensor& t : tensors) values.push_back(t.to_vector());
    const std::vector<std::vector<float>> sums = group_.exchange(replica_, std::move(values));
    for (size_t i = 0; i < tensors.size(); ++i)
      copy_async(tensors[i], Tensor::from_vector(sums[i], tensors[i].shape(), stream), stream);
  }

  void abandon(const std::string& why) override { group_.abandon(replica_, why); }

 private:
  LocalReducer& group_;
  int replica_;
};

LocalReducer::LocalReducer(int replicas) {
  BRIGADE_CHECK(replicas >= 1, "LocalReducer: " << replicas << " replicas; at least one");
  for (int r = 0; r < replicas; ++r) members_.push_back(std::make_unique<Member>(*this, r));
  in_.resize(static_cast<size_t>(replicas));
}

LocalReducer::~LocalReducer() = default;

GradientReducer& LocalReducer::member(int replica) {
  BRIGADE_CHECK(replica >= 0 && replica < replicas(),
                "LocalReducer: replica " << replica << " of " << replicas());
  return *members_[static_cast<size_t>(replica)];
}

std::vector<std::vector<float>> LocalReducer::exchange(int r,
                                                       std::vector<std::vector<float>> values) {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t round = round_;
  in_[static_cast<size_t>(r)] = std::move(values);
  if (++arrived_ < replicas()) {
    done_.wait(lock, [&] { return round_ != round || !abandoned_.empty(); });
    if (round_ == round) throw Error(abandoned_);  // a replica abandoned the round
    if (!error_.empty()) throw Error(error_);
    return sums_;
  }
  finish_round();
  if (!error_.empty()) throw Error(error_);
  return sums_;
}

void LocalReducer::abandon(int r, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (abandoned_.empty())
    abandoned_ = "LocalReducer: replica " + std::to_string(r) + "'s step failed: " + why;
  if (++arrived_ == replicas())
    finish_round();
  else
    done_.notify_all();  // the members waiting in this round throw now
}

void LocalReducer::finish_round() {
  // Unless a replica abandoned the round, check that the replicas agree (else every member
  // throws the same message, and none waits for ever), then add in replica order.
  error_ = abandoned_.empty() ? mismatch() : abandoned_;
  if (error_.empty()) {
    sums_ = in_[0];
    for (int q = 1; q < replicas(); ++q)
      for (size_t t = 0; t < sums_.size(); ++t)
        for (size_t i = 0; i < sums_[t].size(); ++i)
          sums_[t][i] += in_[static_cast<size_t>(q)][t][i];
  }
  arrived_ = 0;
  abandoned_.clear();
  ++round_;
  done_.notify_all();
}

std::string LocalReducer::mismatch() const {
  const auto& first = in_[0];
  for (int q = 1; q < replicas(); ++q) {
    const auto& other = in_[static_cast<size_t>(q)];
    if (other.size() != first.size())
      return "LocalReducer: replica " + std::to_string(q) + " reduces " +
             std::to_string(other.size()) + " tensors, replica 0 " + std::to_string(first.size());
    for (size_t t = 0; t < first.size(); ++t)
      if (other[t].size() != first[t].size())
        return "LocalReducer: tensor " + std::to_string(t) + " has " +
               std::to_string(other[t].size()) + " values on replica " + std::to_string(q) +
               " and " + std::to_string(first[t].size()) + " on replica 0";
  }
  return "";
}

}  // namespace brigade::pipeline
