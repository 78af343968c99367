// The update graph of a stage (update_graph.h): the copies its launch reads, then the launch;
// the capture the first time, or again when the optimizer made its tables again.
#include "pipeline/runtime/update_graph.h"

namespace brigade::pipeline {

void UpdateGraph::run(layers::Optimizer& optimizer, const Stream& compute, const Tensor& verdict) {
#if !defined(BRIGADE_HAVE_CUDA)
  (void)optimizer, (void)verdict;
  throw Error("a stage's update graph needs CUDA, and this build has none (" + compute.str() + ")");
#else
  BRIGADE_CHECK(compute.device().is_cuda() && verdict.defined(),
                "a stage's update graph runs on a GPU's stream with the step's verdict, not on "
                    << compute.str());
  // The scalars: one copy, before the graph that reads them. Both tables made again here, if
  // their tensors changed, never inside the capture (a table's making allocates and copies).
  optimizer.prepare_update(compute);
  optimizer.prepare_zero_grad(compute);
  if (!verdict_.defined() || !(verdict_.shape() == verdict.shape())) {
    graph_.reset();  // a graph reads the verdict_ it was captured with
    // On the device's default stream, like the optimizer's tables: it outlives the streams
    // that use it (a failed step's streams are replaced).
    verdict_ = Tensor::empty(verdict.shape(), Stream::default_for(compute.device()), verdict.dtype());
  }
  copy_async(verdict_, verdict, compute);
  if (!graph_ || tables_ != optimizer.launch_tables()) {
    graph_ = CudaGraph::capture(compute, [&] {
      optimizer.launch_update(compute, verdict_);
      optimizer.zero_grad(compute);
    });
    tables_ = optimizer.launch_tables();
  }
  graph_->launch(compute);
  zeroed_on_ = compute.weak();
#endif
}

bool UpdateGraph::zeroed(const Stream& compute) const {
  const std::optional<Stream> last = Stream::from_weak(zeroed_on_);
  return last && *last == compute;
}

}  // namespace brigade::pipeline
