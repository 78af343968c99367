// NeedTable<T>: one value per Need (action.h), i.e. per (stage, phase, micro-batch), indexed
// by the Need itself — "has 2B1 happened, and when".
// The dry run stores done/not-done, the simulator the time each phase finished.
#pragma once

#include <vector>

#include "pipeline/schedule/action.h"

namespace brigade::pipeline {

template <class T>
class NeedTable {
 public:
  NeedTable(int stages, int microbatches, T init)
      : microbatches_(microbatches), values_(size_t(stages) * kPhases * microbatches, init) {}
  T& operator[](const Need& n) { return values_[index(n)]; }
  const T& operator[](const Need& n) const { return values_[index(n)]; }

 private:
  size_t index(const Need& n) const {
    return (size_t(n.stage) * kPhases + size_t(n.phase)) * microbatches_ + n.microbatch;
  }
  int microbatches_;
  std::vector<T> values_;
};

}  // namespace brigade::pipeline
