// Tensor: shapes, host round trips, views, stream-ordered copies between CPU devices.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "engine/event.h"
#include "engine/tensor.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"

using brigade::copy_async;
using brigade::Device;
using brigade::Event;
using brigade::Shape;
using brigade::Stream;
using brigade::Tensor;
using brigade::testing::Deadline;
using brigade::testing::Gate;

static std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_CASE("shapes count elements and print like tuples") {
  CHECK(Shape{32, 1, 28, 28}.numel() == 32 * 28 * 28);
  CHECK(Shape{32, 1, 28, 28}.str() == "(32, 1, 28, 28)");
  CHECK(Shape{5}.str() == "(5)");
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape{3, 0}.numel() == 0);
  CHECK_THROWS_WITH_AS(Shape({1, 2, 3, 4, 5}), "a shape has at most 4 dimensions, got 5",
                       brigade::Error);
  CHECK_THROWS_WITH_AS(Shape({2, -1}), "negative dimension in shape (2, -1)", brigade::Error);
}

TEST_CASE("from_vector / to_vector round-trip; a tensor knows its size and device") {
  Deadline deadline("round trip");
  const auto values = iota(24, 0.5f);
  Tensor t = Tensor::from_vector(values, {2, 3, 4}, Device::cpu(1));
  CHECK(t.numel() == 24);
  CHECK(t.nbytes() == 96);
  CHECK(t.device() == Device::cpu(1));
  CHECK(t.str() == "float32 (2, 3, 4) on cpu:1");
  CHECK(t.to_vector() == values);
  CHECK_THROWS_WITH_AS(Tensor::from_vector(values, {5, 5}),
                       "from_vector: 24 values for shape (5, 5) (25 elements)", brigade::Error);
}

TEST_CASE("zeros is zero even in memory a previous tensor filled") {
  Deadline deadline("zeros");
  Stream s = Stream::create(Device::cpu(2));
  { Tensor dirty = Tensor::from_vector(iota(100, 1.0f), {100}, s); }
  Tensor z = Tensor::zeros({10, 10}, s);  // likely the same (reused) block
  CHECK(z.to_vector() == std::vector<float>(100, 0.0f));
  CHECK(Tensor::zeros({3}, Device::cpu(2)).to_vector() == std::vector<float>(3, 0.0f));
}

TEST_CASE("reshape is a view: same storage, checked element count") {
  Deadline deadline("reshape");
  Tensor t = Tensor::from_vector(iota(12, 0), {3, 4});
  Tensor v = t.reshape({2, 2, 3});
  CHECK(v.data<float>() == t.data<float>());
  CHECK(v.shape() == Shape{2, 2, 3});
  CHECK(v.to_vector() == t.to_vector());
  CHECK_THROWS_WITH_AS(t.reshape({5}), "cannot reshape (3, 4) (12 elements) to (5) (5 elements)",
                       brigade::Error);
}

TEST_CASE("copy_async between two CPU devices, ordered after the producer by an event") {
  Deadline deadline("copy between CPU devices");
  Stream producer = Stream::create(Device::cpu(3));
  Stream copier = Stream::create(Device::cpu(4));
  Tensor src = Tensor::empty({2, 3, 2, 2}, producer);  // (N, C, H, W)
  Tensor dst = Tensor::empty({2, 3, 2, 2}, copier);
  Gate gate;
  producer.enqueue(gate.blocker());
  // The producer fills src with 3*i + 1 only after the gate opens.
  producer.enqueue([p = src.data<float>(), n = src.numel()] {
    for (int64_t i = 0; i < n; ++i) p[i] = 3.0f * static_cast<float>(i) + 1.0f;
  });
  Event filled;
  filled.record(producer);
  copier.wait(filled);
  copy_async(dst, src, copier);
  gate.open();
  std::vector<float> expected(24);
  for (size_t i = 0; i < 24; ++i) expected[i] = 3.0f * static_cast<float>(i) + 1.0f;
  CHECK(dst.to_vector() == expected);
}

TEST_CASE("freeing the source right after copy_async is safe: the copy holds it") {
  Deadline deadline("copy keeps source");
  Stream s = Stream::create(Device::cpu(5));
  Gate gate;
  Tensor dst = Tensor::empty({64}, s);
  s.enqueue(gate.blocker());
  {
    Tensor src = Tensor::from_vector(iota(64, 7.0f), {64}, Device::cpu(6));
    copy_async(dst, src, s);
  }  // the last handle to src is gone before the copy runs
  gate.open();
  CHECK(dst.to_vector() == iota(64, 7.0f));
}

TEST_CASE("copy_async refuses mismatched tensors and a stream of a third device") {
  Tensor a = Tensor::from_vector(iota(6, 0), {2, 3}, Device::cpu(0));
  Tensor b = Tensor::from_vector(iota(4, 0), {4}, Device::cpu(1));
  Tensor c = Tensor::from_vector(iota(6, 0), {6}, Device::cpu(1));
  Stream third = Stream::create(Device::cpu(2));
  CHECK_THROWS_WITH_AS(copy_async(b, a, Stream::default_for(Device::cpu(0))),
                       "copy_async: cannot copy float32 (2, 3) on cpu:0 into float32 (4) on cpu:1",
                       brigade::Error);
  CHECK_THROWS_WITH_AS(copy_async(c, a, third),
                       ("copy_async from cpu:0 to cpu:1 on " + third.str() +
                        ": the stream must belong to one of the two devices").c_str(),
                       brigade::Error);
}

TEST_CASE("copy_async of a range: those elements only, at their place; a range outside refused") {
  const Tensor src = Tensor::from_vector(iota(6, 10), {6}, Device::cpu(0));  // 10 .. 15
  const Tensor dst = Tensor::from_vector(iota(5, 0), {5}, Device::cpu(1));   // 0 .. 4
  const Stream s = Stream::default_for(Device::cpu(1));
  copy_async(dst, 3, src, 1, 2, s);  // 11, 12 into elements 3 and 4
  s.synchronize();
  CHECK(dst.to_vector() == std::vector<float>{0, 1, 2, 11, 12});
  CHECK_THROWS_WITH_AS(copy_async(dst, 4, src, 0, 2, s),
                       "copy_async: cannot copy elements [0, 2) of float32 (6) on cpu:0 to [4, 6) "
                       "of float32 (5) on cpu:1",
                       brigade::Error);
}
