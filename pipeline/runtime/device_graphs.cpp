// The phases of a device's graphs (device_graphs.h): size, capture, replay.
#include "pipeline/runtime/device_graphs.h"

#include <utility>

#include "engine/error.h"

namespace brigade::pipeline {
namespace {
// CUDA builds only (engine/cuda_graph_cuda.cpp). Without CUDA no device is a GPU, so no
// phase but size is ever reached (Runtime::graphs_on); these say so if one were.
CudaGraph capture_on(const Stream& stream, const std::function<void()>& record) {
#if defined(BRIGADE_HAVE_CUDA)
  return CudaGraph::capture(stream, record);
#else
  (void)record;
  throw Error("a CUDA graph needs CUDA, and this build has none (" + stream.str() + ")");
#endif
}

void launch_on(const CudaGraph& graph, const Stream& stream) {
#if defined(BRIGADE_HAVE_CUDA)
  graph.launch(stream);
#else
  (void)graph;
  throw Error("a CUDA graph needs CUDA, and this build has none (" + stream.str() + ")");
#endif
}
}  // namespace

GraphPhase DeviceGraphs::begin(const Key& key, const Stream& compute) {
  key_ = key;
  if (captured_key_ && *captured_key_ == key) {
    phase_ = GraphPhase::replay;
  } else if (sized_key_ && *sized_key_ == key) {
    phase_ = GraphPhase::capture;
    graphs_.clear();  // the graphs of another Key, and then their memory, go first
    captured_key_.reset();
    pool_.reset();
    pool_.emplace(compute, plan_);  // the plan's arena, taken before the first capture
  } else {
    phase_ = GraphPhase::size;
    trace_ = AllocationTrace::create(compute);
  }
  return phase_;
}

std::vector<Tensor> DeviceGraphs::run(
    const Action& action, const Stream& compute, const std::vector<Tensor>& moving,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& enqueue,
    StepVerdict& verdict, int d) {
  const ActionKey key = key_of(action);
  switch (phase_) {
    case GraphPhase::size: {
      AllocationTrace::Recording recording(*trace_);
      return enqueue(moving);
    }
    case GraphPhase::capture: {
      ActionGraph& a = graphs_[key];
      a = ActionGraph{};
      std::vector<Tensor> inputs;  // what the capture reads: leased, as the eager step's were
      for (const Tensor& m : moving) {
        if (pool_->holds(m)) {  // the output of an action captured before it: read in place
          inputs.push_back(m);
          a.inputs.push_back(pool_->unleased(m));
          a.read_in_place.push_back(true);
          continue;
        }
        // The copy holds m's values, and is said to as m is (engine/tensor.h): the captured
        // work then skips the roundings the eager work skipped, and allocates as it did.
        Tensor input = Tensor::empty(m.shape(), compute, m.dtype());
        if (m.holds_bf16_values()) input = input.marked_bf16_values();
        copy_async(input, m, compute);
        inputs.push_back(input);
        a.inputs.push_back(input);
        a.read_in_place.push_back(false);
      }
      const size_t notes_before = verdict.notes(d);
      std::vector<Tensor> outputs;
      {
        PoolScope scope(*pool_);
        a.graph = capture_on(compute, [&] { outputs = enqueue(inputs); });
      }  // the frees the capture held back are made here, outside it
      for (const Tensor& out : outputs)
        a.outputs.push_back(pool_->holds(out) ? pool_->unleased(out) : out);
      a.notes = verdict.notes_since(d, notes_before);
      launch_on(*a.graph, compute);
      return outputs;  // leased: freed where the eager step freed them, and serving later ones
    }
    case GraphPhase::replay: {
      const auto found = graphs_.find(key);
      BRIGADE_CHECK(found != graphs_.end() && found->second.inputs.size() == moving.size(),
                    to_string(action) << ": replayed without its graph");
      ActionGraph& a = found->second;
      for (size_t i = 0; i < moving.size(); ++i) {
        BRIGADE_CHECK(moving[i].shape() == a.inputs[i].shape() &&
                          moving[i].dtype() == a.inputs[i].dtype(),
                      to_string(action) << ": its graph was captured for an input of "
                                        << a.inputs[i].shape() << ", given " << moving[i].shape());
        // A graph captured on bf16 values rounds them no more: its input must hold them again.
        BRIGADE_CHECK(moving[i].holds_bf16_values() || !a.inputs[i].holds_bf16_values(),
                      to_string(action) << ": its graph was captured for bf16 values, given an "
                                           "input not known to hold them");
        if (a.read_in_place[i]) {  // where the replay of its producer, before it, wrote it
          BRIGADE_CHECK(moving[i].storage() == a.inputs[i].storage(),
                        to_string(action) << ": its graph reads its input " << i
                                          << " where its capture found it, and was given "
                                          << moving[i].str() << " elsewhere");
          continue;
        }
        copy_async(a.inputs[i], moving[i], compute);
      }
      launch_on(*a.graph, compute);
      verdict.note(d, a.notes);
      return a.outputs;
    }
  }
  throw Error("unreachable graph phase");
}

void DeviceGraphs::end() {
  if (phase_ == GraphPhase::size) {
    trace_->close();
    plan_ = plan_graph_memory(trace_->requests());
    trace_.reset();
    sized_key_ = key_;
  } else if (phase_ == GraphPhase::capture) {
    captured_key_ = key_;
    pool_->close();
  }
}

}  // namespace brigade::pipeline
