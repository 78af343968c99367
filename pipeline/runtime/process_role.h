// ProcessRole: the part THIS process plays in a pipelined, data-parallel step. Under
// `mpirun -np P·D` (P stages, D replicas) every process builds a Runtime over the SAME schedule
// and partition, and makes streams, stages, threads and optimizers for its own devices only.
// The other stages' layers may sit on any device (built from the same seed, so initialisation
// agrees: layers/init.h keys each value by (seed, layer, element)); they are never touched.
// The default role is one process running the whole pipeline.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "pipeline/runtime/gradient_reducer.h"
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
  // The schedule devices whose lists run here (rank p of a replica runs schedule device p:
  // stages p, p+P, ... of an interleaved schedule); empty = all.
  std::vector<int> devices{};
  // Makes the Links that cross to another process, once per direction of traffic with exactly
  // one end here; required when some device is not run here. Links with both ends here are
  // in-process Channels; links with no end here are not made.
  LinkFactory links{};
  // This process's replica of the pipeline, of `replicas`. A step is given the WHOLE
  // mini-batch of n samples and trains on rows [first, first + n_r): n_r = n/replicas (the
  // first n mod replicas replicas one more), first = the rows of the replicas before it.
  // Dropout masks are keyed by the sample's place in the whole mini-batch and each
  // micro-batch's loss is divided by n, so the replicas' gradients SUM to the mini-batch
  // mean's, and each StepResult::loss is the replica's share of the mean loss.
  int replica = 0;
  int replicas = 1;
  // [stage] or empty; nullptr = none for that stage. Called with the stage's gradients (every
  // parameter's .grad, in layer order) on its compute stream after the stage's last W, before
  // its optimizer step: the all-reduce across replicas.
  std::vector<GradientReducer*> reducers{};
  // For clipping by the global norm (RuntimeOptions::max_grad_norm) when some stages run
  // elsewhere: element-wise sums over the processes of this replica's pipeline, returned on
  // every one. It is given each parameter's sum of squares in the model's order, 0 where
  // another process owns the parameter: each entry has one owner, so the sums are exact and
  // every rank clips as one device would.
  std::function<std::vector<double>(std::vector<double>)> sum_over_pipeline{};
};

}  // namespace brigade::pipeline
