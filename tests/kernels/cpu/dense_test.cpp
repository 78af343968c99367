// Dense: CPU (SGEMM) against the reference in double, and the reference backward against
// finite differences.
#include <doctest/doctest.h>

#include "kernels/cpu/dense.h"
#include "kernels/reference/dense.h"
#include "kernels/reference/relu.h"
#include "tests/kernels/cpu/check.h"

using namespace brigade;
using namespace brigade::test;

TEST_CASE("dense: the CPU path matches the reference, 1, 2 and 3 threads") {
  struct Case { int64_t N, in, out; };
  // The question's two Dense layers, batch 1, odd sizes, sizes off any block multiple.
  const Case cases[] = {{128, 64, 1500}, {33, 1500, 10}, {1, 1, 1}, {1, 7, 3}, {7, 33, 65}, {37, 129, 17}};
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (const Case& c : cases) {
      INFO("N=" << c.N << " in=" << c.in << " out=" << c.out << " threads=" << threads);
      const auto x = to_double(to_float(random_vector(c.N * c.in, 51)));
      const auto w = to_double(to_float(random_vector(c.out * c.in, 52)));
      const auto b = to_double(to_float(random_vector(c.out, 53)));
      const auto dy = to_double(to_float(random_vector(c.N * c.out, 54)));
      const auto dw0 = to_double(to_float(random_vector(c.out * c.in, 55)));
      const auto db0 = to_double(to_float(random_vector(c.out, 56)));
      const auto xf = to_float(x), wf = to_float(w), bf = to_float(b), dyf = to_float(dy);

      std::vector<double> y(c.N * c.out), ymag(y.size());
      ref::dense_forward(x.data(), w.data(), b.data(), y.data(), c.N, c.in, c.out);
      ref::dense_forward(abs_of(x).data(), abs_of(w).data(), abs_of(b).data(), ymag.data(), c.N, c.in, c.out);
      const auto ytol = sum_tolerance(ymag, c.in + 1);
      std::vector<float> yf(y.size());
      cpu::dense_forward(xf.data(), wf.data(), bf.data(), yf.data(), c.N, c.in, c.out, pool);
      CHECK(all_close("dense_forward", yf.data(), y, ytol));
      std::vector<double> yr(y.size());
      ref::relu_forward(y.data(), yr.data(), static_cast<int64_t>(y.size()));
      cpu::dense_forward(xf.data(), wf.data(), bf.data(), yf.data(), c.N, c.in, c.out, pool, true);
      CHECK(all_close("dense_forward+relu", yf.data(), yr, ytol));

      std::vector<double> dx(c.N * c.in), dxmag(dx.size());
      ref::dense_backward_data(dy.data(), w.data(), dx.data(), c.N, c.in, c.out);
      ref::dense_backward_data(abs_of(dy).data(), abs_of(w).data(), dxmag.data(), c.N, c.in, c.out);
      std::vector<float> dxf(dx.size(), -5.0f);
      cpu::dense_backward_data(dyf.data(), wf.data(), dxf.data(), c.N, c.in, c.out, pool);
      CHECK(all_close("dense_backward_data", dxf.data(), dx, sum_tolerance(dxmag, c.out)));

      std::vector<double> dw = dw0, dwmag = abs_of(dw0);
      ref::dense_backward_weight(x.data(), dy.data(), dw.data(), c.N, c.in, c.out);
      ref::dense_backward_weight(abs_of(x).data(), abs_of(dy).data(), dwmag.data(), c.N, c.in, c.out);
      std::vector<float> dwf = to_float(dw0);
      cpu::dense_backward_weight(xf.data(), dyf.data(), dwf.data(), c.N, c.in, c.out, pool);
      CHECK(all_close("dense_backward_weight", dwf.data(), dw, sum_tolerance(dwmag, c.N + 1)));

      std::vector<double> db = db0, dbmag = abs_of(db0);
      ref::dense_backward_bias(dy.data(), db.data(), c.N, c.out);
      ref::dense_backward_bias(abs_of(dy).data(), dbmag.data(), c.N, c.out);
      std::vector<float> dbf = to_float(db0);
      cpu::dense_backward_bias(dyf.data(), dbf.data(), c.N, c.out, pool);
      CHECK(all_close("dense_backward_bias", dbf.data(), db, sum_tolerance(dbmag, c.N + 1)));
    }
  }
}

TEST_CASE("dense: every pass gives the same bits on 1, 2 and 3 threads") {
  // Rows and units are cut into chunks from the shape alone (kernels/cpu/chunks.h), so every
  // SGEMM call has the same shape on any thread count: OpenBLAS picks its kernel, and with
  // it the order of its sums, by the shape (a direct kernel for small NN products).
  struct Case { int64_t N, in, out; };
  // The question's two Dense layers at batch 36 and 128, rows and units cut unevenly.
  const Case cases[] = {{36, 64, 1500}, {36, 1500, 10}, {128, 64, 1500}, {128, 1500, 10},
                        {37, 129, 17}, {200, 33, 130}};
  for (const Case& c : cases) {
    INFO("N=" << c.N << " in=" << c.in << " out=" << c.out);
    const auto x = to_float(random_vector(c.N * c.in, 61));
    const auto w = to_float(random_vector(c.out * c.in, 62));
    const auto b = to_float(random_vector(c.out, 63));
    const auto dy = to_float(random_vector(c.N * c.out, 64));
    const auto dw0 = to_float(random_vector(c.out * c.in, 65));
    auto passes_on = [&](int threads) {
      ThreadPool pool(threads);
      std::vector<float> y(c.N * c.out), dx(c.N * c.in), dw = dw0, db(c.out, 0.0f);
      cpu::dense_forward(x.data(), w.data(), b.data(), y.data(), c.N, c.in, c.out, pool, true);
      cpu::dense_backward_data(dy.data(), w.data(), dx.data(), c.N, c.in, c.out, pool);
      cpu::dense_backward_weight(x.data(), dy.data(), dw.data(), c.N, c.in, c.out, pool);
      cpu::dense_backward_bias(dy.data(), db.data(), c.N, c.out, pool);
      return std::vector<std::vector<float>>{y, dx, dw, db};
    };
    const auto one = passes_on(1);
    for (int threads : {2, 3}) {
      const auto more = passes_on(threads);
      INFO(threads << " threads against 1");
      CHECK(same_bits(more[0], one[0]));  // forward
      CHECK(same_bits(more[1], one[1]));  // backward-data
      CHECK(same_bits(more[2], one[2]));  // backward-weight
      CHECK(same_bits(more[3], one[3]));  // bias
    }
  }
}

TEST_CASE("dense: the reference backward matches finite differences (double)") {
  const int64_t N = 3, in = 5, out = 4;
  auto x = random_vector(N * in, 57), w = random_vector(out * in, 58), b = random_vector(out, 59);
  const auto G = random_vector(N * out, 60);
  auto loss = [&] {
    std::vector<double> y(N * out);
    ref::dense_forward(x.data(), w.data(), b.data(), y.data(), N, in, out);
    return dot(y, G);
  };
  std::vector<double> dx(N * in), dw(out * in, 0.0), db(out, 0.0);
  ref::dense_backward_data(G.data(), w.data(), dx.data(), N, in, out);
  ref::dense_backward_weight(x.data(), G.data(), dw.data(), N, in, out);
  ref::dense_backward_bias(G.data(), db.data(), N, out);
  CHECK(gradient_matches("x", x, dx, loss));
  CHECK(gradient_matches("w", w, dw, loss));
  CHECK(gradient_matches("b", b, db, loss));
}
