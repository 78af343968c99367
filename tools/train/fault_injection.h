// BRIGADE_INJECT_NAN=RANK:STEP — a fault on purpose, to see what a --distributed job does when
// one rank's values go bad (tests/pipeline/distributed/parity_test.cpp uses it).
//
// Before step STEP (counted from 1, as the progress counts), rank RANK (in mpirun's
// numbering) writes a NaN into the first element of the first parameter of the first stage
// it trains that has parameters, as a weight gone bad would. That stage's output is then NaN
// from the first micro-batch on: with --check-finite the rank's check fails on its stream and
// the job ends naming the rank, the stage, the action and the micro-batch (faults.h); without
// it, the step's loss is NaN and the run stops as diverged. Unset, nothing happens.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "layers/tape.h"

namespace brigade::train {

struct NanInjection {
  int rank = 0;
  int64_t step = 1;  // from 1
};

// BRIGADE_INJECT_NAN, read once at start; empty if unset. Throws brigade::Error naming the
// variable when it is not RANK:STEP (RANK >= 0, STEP >= 1).
std::optional<NanInjection> nan_injection_from_environment();

// Writes a NaN into the first element of the first parameter of `params` that has one,
// waiting for the write (a blocking copy, as a step's start allows). Returns false when
// `params` has no element to write.
bool write_nan_into(const std::vector<layers::Parameter*>& params);

}  // namespace brigade::train
