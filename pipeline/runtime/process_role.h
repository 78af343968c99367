// ProcessRole: the part THIS process plays in a pipelined, data-parallel training step — the
// schedule devices it runs, its links to the other processes, its replica, and the all-reduces
// it takes part in (each stage's gradients across replicas, the norm for clipping).
//
// A production pipeline runs one process per stage (mpirun -np P), and D replicas of that
// pipeline for throughput (P·D processes). Every process builds a Runtime over the SAME
// schedule and partition and plays only its role in it:
//
//   devices       the schedule devices whose action lists it runs (rank p of a replica runs
//                 schedule device p: stages p, p+P, ... of an interleaved schedule). Empty:
//                 every device (one process runs the whole pipeline, the default).
//   links         a factory for the Links (link.h) that cross to another process: called
//                 once per direction of traffic with exactly one end here. Links with both
//                 ends here are in-process Channels; links with no end here are not made.
//   replica       this process's replica (0 .. replicas-1) of the pipeline: a step is given
//   replicas      the WHOLE mini-batch of n samples and trains on rows [first, first + n_r),
//                 n_r = n/replicas (the first n mod replicas replicas one more), first = the
//                 rows of the replicas before it. Dropout masks are keyed by the sample's
//                 place in the whole mini-batch and each micro-batch's loss is divided by n,
//                 so the replicas' gradients SUM to the gradient of the mini-batch mean, and
//                 each StepResult::loss is the replica's share of the mean loss.
//   reducers      [stage], optional: called with the stage's gradients (every parameter's
//                 .grad, in layer order) on its device's compute stream after the stage's
//                 last W, before its optimizer step — the all-reduce across replicas.
//   sum_over_pipeline  clipping by the global norm (RuntimeOptions::max_grad_norm) when some
//                 stages run elsewhere: element-wise sums of a vector of doubles over the
//                 processes of this replica's pipeline (an all-reduce), returned on every one.
//                 The runtime gives it each parameter's sum of squares, in the model's order,
//                 0 where another process owns the parameter: every entry has one owner, so
//                 the sums are exact, and every rank clips as one device would.
//
// A process needs the parameters of its own stages only on a device: the caller may build
// the whole Sequential (the same seed everywhere, so initialisation agrees: layers/init.h
// keys each value by (seed, layer, element)) with the other stages' blocks on a CPU device;
// the runtime never touches them and makes no streams or optimizers for them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "pipeline/distributed/reducer.h"
#include "pipeline/runtime/link.h"

namespace brigade::pipeline {

// One direction of traffic between neighbouring stages, seen from this process.
struct LinkEnd {
  enum class Kind { activations, gradients };
  Kind kind = Kind::activations;
  std::string name;             // "activations 0->1", "gradients 1->0"
  int from_stage = 0, to_stage = 0;
  int from_device = 0, to_device = 0;  // schedule devices (= ranks within a replica)
  bool sending = false;         // this process holds the sending end, else the receiving one
  Device local = Device::cpu(0);  // this end's device: a receiver's tensors must land there
};

using LinkFactory = std::function<std::shared_ptr<Link>(const LinkEnd&)>;

struct ProcessRole {
  std::vector<int> devices{};  // schedule devices run here; empty = all
  LinkFactory links{};         // required when some device is not run here
  int replica = 0;             // which replica of the pipeline this process is part of
  int replicas = 1;            // how many replicas share each mini-batch
  std::vector<GradientReducer*> reducers{};  // [stage] or empty; nullptr = none for that stage
  std::function<std::vector<double>(std::vector<double>)> sum_over_pipeline{};
};

}  // namespace brigade::pipeline
