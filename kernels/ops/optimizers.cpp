// The optimizer updates of kernels/ops.h, SGD and Adam/AdamW, in place with PyTorch's rules:
// the checks (hyper-parameters too, here on the host rather than as a failed task later),
// then the CPU branch (kernels/cpu/optimizers.h) beside the CUDA branch
// (kernels/cuda/optimizers.cu).
#include <atomic>
#include <cstring>
#include <stdexcept>

#include "kernels/cpu/optimizers.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"
#include "kernels/optimizer_scalars.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

void sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdParams& h,
              bool first_step, const Stream& stream) {
  detail::check_operands("sgd_step", stream, {{"p", &p}, {"g", &g}, {"buf", &buf}});
  detail::check_same_shape("sgd_step", "p", p, "g", g);
  detail::check_same_shape("sgd_step", "p", p, "buf", buf);
  try {
    check_sgd_params(h);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {p, g, buf}, [=](ThreadPool& pool) {
      cpu::sgd_update(p.data<float>(), g.data<float>(), buf.data<float>(), p.numel(), h,
                      first_step, pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&p, &g, &buf});
    cuda::sgd_update(p.data<float>(), g.data<float>(), buf.data<float>(), p.numel(), h,
                     first_step, stream);
#else
    detail::no_kernel("sgd_step", stream.device());
#endif
  }
}

void adam_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
               const AdamParams& h, int64_t step, const Stream& stream) {
  detail::check_operands("adam_step", stream, {{"p", &p}, {"g", &g}, {"m", &m}, {"v", &v}});
  detail::check_same_shape("adam_step", "p", p, "g", g);
  detail::check_same_shape("adam_step", "p", p, "m", m);
  detail::check_same_shape("adam_step", "p", p, "v", v);
  try {
    check_adam_params(h, step);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {p, g, m, v}, [=](ThreadPool& pool) {
      cpu::adam_update(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(),
                       p.numel(), h, step, pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&p, &g, &m, &v});
    cuda::adam_update(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(),
                      p.numel(), h, step, stream);
#else
    detail::no_kernel("adam_step", stream.device());
#endif
  }
}

namespace {
float* floats_of(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
}  // namespace

TensorTable::TensorTable(std::vector<Row> rows, const Stream& stream) : rows_(std::move(rows)) {
  BRIGADE_CHECK(stream.device().is_cuda(), "a multi-tensor table is for a GPU, and the stream is "
                                               << stream.str());
  for (const Row& r : rows_) {
    BRIGADE_CHECK(r[0].defined(), "a multi-tensor table's row has no tensor to update");
    for (const Tensor& t : r)
      if (t.defined()) {
        BRIGADE_CHECK(t.device() == stream.device(), "multi-tensor table: " << t.str()
                                                         << " is not on " << stream.str());
        detail::check_same_shape("a multi-tensor table", "p", r[0], "a row's tensor", t);
      }
    slots_.push_back({floats_of(r[0]), floats_of(r[1]), floats_of(r[2]), floats_of(r[3]),
                      r[0].numel()});
  }
  // The slots' bytes travel inside a float tensor, copied bytewise (as labels_tensor's int32s),
  // on the device's default stream, not on `stream`: a table outlives the streams that use
  // it (a pipeline replaces a stage's streams after a failed step), and a tensor keeps its
  // stream alive. from_vector waits for the copy, so any stream may read the table at once.
  static_assert(sizeof(TensorSlot) % sizeof(float) == 0);
  std::vector<float> bytes(slots_.size() * sizeof(TensorSlot) / sizeof(float));
  if (!slots_.empty()) std::memcpy(bytes.data(), slots_.data(), slots_.size() * sizeof(TensorSlot));
  device_ = Tensor::from_vector(bytes, Shape({static_cast<int64_t>(bytes.size())}), stream.device());
  // Unwritten until an update's write_scalars, on the stream of that update, which the launch
  // that reads them follows.
  scalars_ = Tensor::empty(Shape({kUpdateScalarWords}), Stream::default_for(stream.device()));
  static std::atomic<uint64_t> tables{0};
  id_ = ++tables;
}

void TensorTable::write_scalars(const void* bytes, size_t size, const Stream& stream) const {
  BRIGADE_CHECK(size <= static_cast<size_t>(scalars_.nbytes()),
                "an update's scalars of " << size << " bytes, more than a table keeps");
  const Tensor staged = Tensor::empty_pinned(scalars_.shape(), Stream::default_for(Device::cpu(0)));
  std::memcpy(staged.data<float>(), bytes, size);
  copy_async(scalars_, staged, stream);
}

bool TensorTable::holds(const std::vector<Row>& rows) const {
  if (rows.size() != rows_.size()) return false;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t k = 0; k < 4; ++k)
      if (floats_of(rows[i][k]) != floats_of(rows_[i][k]) ||
          rows[i][k].numel() != rows_[i][k].numel())
        return false;
  return true;
}

void TensorTable::use_on(const Stream& stream, const char* op) const {
  BRIGADE_CHECK(!rows_.empty(), op << ": an empty multi-tensor table");
  BRIGADE_CHECK(stream.device() == rows_[0][0].device(),
                op << ": the table's tensors are on " << rows_[0][0].device().str()
                   << ", not on the stream's device " << stream.str());
  detail::record_use(device_, stream);
  for (const Row& r : rows_)
    for (const Tensor& t : r) detail::record_use(t, stream);
}

namespace {
#if defined(BRIGADE_HAVE_CUDA)
const TensorSlot* device_slots(const Tensor& bytes) {
  return reinterpret_cast<const TensorSlot*>(bytes.data<float>());
}
const int32_t* verdict_words(const Tensor& verdict) {
  return verdict.defined() ? detail::int32_data(verdict) : nullptr;
}
#endif
// A step's verdict, when given, is on the stream's device (and used there).
void check_verdict(const char* op, const Tensor& verdict, const Stream& stream) {
  if (!verdict.defined()) return;
  BRIGADE_CHECK(verdict.device() == stream.device(),
                op << ": the step's verdict is on " << verdict.device().str()
                   << ", not on the stream's device " << stream.str());
  detail::record_use(verdict, stream);
}
}  // namespace

void sgd_step_all(const TensorTable& table, const SgdParams& h, bool first_step,
                  const Tensor& verdict, const Stream& stream) {
  write_sgd_scalars(table, h, first_step, stream);
  launch_sgd_all(table, h, verdict, stream);
}

void adam_step_all(const TensorTable& table, const AdamParams& h, int64_t step,
                   const Tensor& verdict, const Stream& stream) {
  write_adam_scalars(table, h, step, stream);
  launch_adam_all(table, verdict, stream);
}

void write_sgd_scalars(const TensorTable& table, const SgdParams& h, bool first_step,
                       const Stream& stream) {
  table.use_on(stream, "sgd_step_all");
  check_sgd_params(h);  // std::invalid_argument, before anything is written
  const SgdScalars scalars = sgd_scalars(h, first_step);
  table.write_scalars(&scalars, sizeof(scalars), stream);
}

void write_adam_scalars(const TensorTable& table, const AdamParams& h, int64_t step,
                        const Stream& stream) {
  table.use_on(stream, "adam_step_all");
  check_adam_params(h, step);
  const AdamScalars scalars = adam_scalars(h, step);
  table.write_scalars(&scalars, sizeof(scalars), stream);
}

void launch_sgd_all(const TensorTable& table, const SgdParams& h, const Tensor& verdict,
                    const Stream& stream) {
  table.use_on(stream, "sgd_step_all");
  check_verdict("sgd_step_all", verdict, stream);
#if defined(BRIGADE_HAVE_CUDA)
  cuda::sgd_update_all(device_slots(table.device_), table.slots_, h,
                       reinterpret_cast<const SgdScalars*>(table.scalars_.data<float>()),
                       verdict_words(verdict), verdict.defined() ? verdict.numel() : 0, stream);
#else
  (void)h;
  detail::no_kernel("sgd_step_all", stream.device());
#endif
}

void launch_adam_all(const TensorTable& table, const Tensor& verdict, const Stream& stream) {
  table.use_on(stream, "adam_step_all");
  check_verdict("adam_step_all", verdict, stream);
#if defined(BRIGADE_HAVE_CUDA)
  cuda::adam_update_all(device_slots(table.device_), table.slots_,
                        reinterpret_cast<const AdamScalars*>(table.scalars_.data<float>()),
                        verdict_words(verdict), verdict.defined() ? verdict.numel() : 0, stream);
#else
  detail::no_kernel("adam_step_all", stream.device());
#endif
}

void fill_all(const TensorTable& table, float a, const Stream& stream) {
  table.use_on(stream, "fill_all");
#if defined(BRIGADE_HAVE_CUDA)
  cuda::fill_all(device_slots(table.device_), table.slots_, a, stream);
#else
  (void)a;
  detail::no_kernel("fill_all", stream.device());
#endif
}

}  // namespace brigade::ops
