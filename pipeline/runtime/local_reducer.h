// LocalReducer: a GradientReducer (pipeline/runtime/gradient_reducer.h) for replicas that are
// threads of ONE process — data parallelism without MPI, and the in-process stand-in that the
// runtime's data-parallel tests use in place of MPI_Allreduce.
//
//   LocalReducer group(2);                    // two replicas of one stage
//   role0.reducers[s] = &group.member(0);     // replica 0's runtime
//   role1.reducers[s] = &group.member(1);     // replica 1's runtime
//
// member(r).sum(tensors, stream) is a barrier: it waits for `stream` (the gradients are
// written), hands its tensors' values in, and blocks until every replica has done the same.
// The last to arrive adds the contributions in REPLICA order, value by value
// ((g0 + g1) + g2 ...), on the host, so every replica receives bit-identical sums, and a
// reference that adds per-replica gradients in that order on the host reproduces them
// exactly. Each member then copies the sums into its tensors on `stream`.
//
// Every replica must call with the same number of tensors of the same sizes (else
// brigade::Error naming the replica and the tensor, thrown by every member). A replica whose
// step failed (its gradients' stream failed, or the runtime abandons the round for it) takes
// no part: every member's sum of that round throws "replica r's step failed: ...", so none
// waits for it. A replica that never calls nor abandons leaves the others waiting.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/runtime/gradient_reducer.h"

namespace brigade::pipeline {

class LocalReducer {
 public:
  explicit LocalReducer(int replicas);
  ~LocalReducer();
  LocalReducer(const LocalReducer&) = delete;
  LocalReducer& operator=(const LocalReducer&) = delete;

  int replicas() const { return static_cast<int>(members_.size()); }
  GradientReducer& member(int replica);  // what replica `replica`'s runtime is given

 private:
  class Member;
  // Replica r's values in; returns the sums once every replica's are in.
  std::vector<std::vector<float>> exchange(int r, std::vector<std::vector<float>> values);
  // Replica r leaves this round without values: every exchange of the round throws.
  void abandon(int r, const std::string& why);
  void finish_round();  // with mutex_ held, once every replica has come or abandoned
  std::string mismatch() const;  // why the replicas' tensors do not match; empty if they do

  std::vector<std::unique_ptr<Member>> members_;
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::vector<std::vector<float>>> in_;  // [replica][tensor][element]
  int arrived_ = 0;                          // replicas come (or abandoned) in this round
  std::string abandoned_;                    // this round's first abandonment, if any
  uint64_t round_ = 0;                       // counts completed sums
  std::vector<std::vector<float>> sums_;     // the last round's, [tensor][element]
  std::string error_;                        // the last round's failure or mismatch, if any
};

}  // namespace brigade::pipeline
