// See optimizers.h. The per-range work is the reference's loop body on float: the reference
// is already a straight loop the compiler vectorises, so each range simply calls it.
#include "kernels/cpu/optimizers.h"

#include "kernels/reference/optimizers.h"  // the loop body each range runs

namespace brigade::cpu {

namespace {
constexpr int64_t kGrain = 1 << 14;
}

void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdParams& h,
                bool first_step, ThreadPool& pool) {
  check_sgd_params(h);
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    ref::sgd_update(p + i0, g + i0, buf + i0, i1 - i0, h, first_step);
  }, kGrain);
}

void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamParams& h,
                 int64_t step, ThreadPool& pool) {
  check_adam_params(h, step);
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    ref::adam_update(p + i0, g + i0, m + i0, v + i0, i1 - i0, h, step);
  }, kGrain);
}

}  // namespace brigade::cpu
