// MpiLink between the ranks of a line 0 - 1 - ... - (n-1), run with 2 and 3 ranks:
// values and shapes (the last micro-batch smaller), receives in another order than the
// sends, neighbours sending to each other at once with payloads over MPI's eager limit,
// sends whose event completes only after send() returned, close(), the deadline, errors.
#include <doctest/doctest.h>

#include <array>
#include <memory>
#include <thread>
#include <vector>

#include "pipeline/distributed/mpi_link.h"
#include "tests/pipeline/distributed/mpi_test.h"
#include "tests/support/deadline.h"
#include "tests/support/error_text.h"
#include "tests/support/gate.h"

using namespace brigade;
using namespace brigade::distributed;
using brigade::pipeline::ChannelClosed;
using brigade::pipeline::Message;

namespace {

// Micro-batch mb of the traffic from rank `from`: (rows, 4, 64) with rows = 5 except the
// last micro-batch (3 rows), i.e. 1280 floats (5 KiB: eager) or, with wide = true,
// (rows, 4, 16384) = 320 Ki floats (1.25 MiB: MPI's rendezvous, which needs both sides).
Shape shape_of(int mb, int microbatches, bool wide) {
  return Shape{mb == microbatches - 1 ? 3 : 5, 4, wide ? 16384 : 64};
}
float value_of(int from, int mb, int64_t i) {
  return static_cast<float>(from * 1000 + mb) + static_cast<float>(i % 997) / 1024.0f;
}
std::vector<float> expected(int from, int mb, const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = value_of(from, mb, static_cast<int64_t>(i));
  return v;
}

// Sends micro-batch mb with an event that completes only when `gate` opens: the tensor is
// written by a task queued behind the gate, so a link that sent before the event completed
// would carry zeros.
void send_gated(pipeline::Link& link, int from, int mb, const Shape& shape, const Stream& stream,
                const testing::Gate& gate) {
  Tensor t = Tensor::zeros(shape, stream);
  stream.enqueue(gate.blocker());
  stream.enqueue([t, from, mb] {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = value_of(from, mb, i);
  });
  Message message{t, Event()};
  message.ready.record(stream);
  link.send(mb, std::move(message));
}

void check_received(Message message, int from, int mb, const Shape& shape) {
  REQUIRE(message.ready.recorded());
  message.ready.synchronize();
  CHECK(message.tensor.shape() == shape);
  CHECK(message.tensor.device() == Device::cpu(0));
  CHECK(message.tensor.to_vector() == expected(from, mb, shape));
}

// Links of this rank in the line: link 2·r carries r -> r+1, link 2·r+1 carries r+1 -> r.
struct Line {
  std::unique_ptr<MpiLink> to_next, from_next, to_prev, from_prev;
};
Line make_line(MpiSession& session, int m) {
  const int r = session.rank(), n = session.size();
  Line line;
  const Device cpu = Device::cpu(0);
  if (r + 1 < n) {
    line.to_next = std::make_unique<MpiLink>("activations " + std::to_string(r) + "->" +
                                                 std::to_string(r + 1),
                                             session, MPI_COMM_WORLD, r + 1, 2 * r, m, cpu);
    line.from_next = std::make_unique<MpiLink>("gradients " + std::to_string(r + 1) + "->" +
                                                   std::to_string(r),
                                               session, MPI_COMM_WORLD, r + 1, 2 * r + 1, m, cpu);
  }
  if (r > 0) {
    line.from_prev = std::make_unique<MpiLink>("activations " + std::to_string(r - 1) + "->" +
                                                   std::to_string(r),
                                               session, MPI_COMM_WORLD, r - 1, 2 * (r - 1), m, cpu);
    line.to_prev = std::make_unique<MpiLink>("gradients " + std::to_string(r) + "->" +
                                                 std::to_string(r - 1),
                                             session, MPI_COMM_WORLD, r - 1, 2 * (r - 1) + 1, m, cpu);
  }
  return line;
}

// Every rank sends m micro-batches to each neighbour (before receiving anything), then
// receives the neighbours' in reverse order.
void exchange(bool wide) {
  MpiSession& session = testing::mpi_session();
  const int r = session.rank(), m = 4;
  Line line = make_line(session, m);
  Stream stream = Stream::create(Device::cpu(0));
  testing::Gate gate;
  for (int mb = 0; mb < m; ++mb) {
    if (line.to_next) send_gated(*line.to_next, r, mb, shape_of(mb, m, wide), stream, gate);
    if (line.to_prev) send_gated(*line.to_prev, r, mb, shape_of(mb, m, wide), stream, gate);
  }
  // Every send() returned while its data was not written yet: send never waits for it.
  gate.open();
  for (int mb = m - 1; mb >= 0; --mb) {
    if (line.from_prev) check_received(line.from_prev->receive(mb), r - 1, mb, shape_of(mb, m, wide));
    if (line.from_next) check_received(line.from_next->receive(mb), r + 1, mb, shape_of(mb, m, wide));
  }
  stream.synchronize();
  MPI_Barrier(MPI_COMM_WORLD);  // nobody destroys a link its neighbour still sends on
}

}  // namespace

TEST_CASE("MpiLink: neighbours exchange micro-batches, matched by micro-batch, last one smaller") {
  testing::Deadline deadline("MpiLink exchange", std::chrono::seconds(60));
  exchange(false);
}

TEST_CASE("MpiLink: both neighbours send 1.25 MiB payloads (rendezvous) before receiving") {
  testing::Deadline deadline("MpiLink rendezvous exchange", std::chrono::seconds(60));
  exchange(true);
}

TEST_CASE("MpiLink: close wakes a blocked receiver with ChannelClosed; reset reopens") {
  testing::Deadline deadline("MpiLink close", std::chrono::seconds(60));
  MpiSession& session = testing::mpi_session();
  if (session.rank() == 1) {
    // Link 1000 has no sender: the receive can only end by close().
    MpiLink link("activations 0->1", session, MPI_COMM_WORLD, 0, 1000, 4, Device::cpu(0));
    std::string error;
    std::thread receiver([&] {
      error = testing::error_text<ChannelClosed>([&] { link.receive(2); });
    });
    link.close("device 0 failed");
    receiver.join();
    CHECK(error == "activations 0->1: closed while waiting for micro-batch 2 (device 0 failed)");
    CHECK(testing::error_text<ChannelClosed>([&] { link.receive(3); }) ==
          "activations 0->1: closed while waiting for micro-batch 3 (device 0 failed)");
    link.reset();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // After reset the link carries pairs again (rank 0 sends one on the same link number).
  if (session.rank() == 0) {
    MpiLink link("activations 0->1", session, MPI_COMM_WORLD, 1, 1000, 4, Device::cpu(0));
    Message message{Tensor::from_vector({1, 2, 3}, Shape{3}), Event()};
    message.ready.record(Stream::default_for(Device::cpu(0)));
    link.send(0, message);
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (session.rank() == 1) {
    MpiLink link("activations 0->1", session, MPI_COMM_WORLD, 0, 1000, 4, Device::cpu(0));
    link.close("first step failed");
    link.reset();
    Message got = link.receive(0);
    got.ready.synchronize();
    CHECK(got.tensor.to_vector() == std::vector<float>{1, 2, 3});
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_CASE("MpiLink: a receive from a rank that never sends ends at the deadline, naming it") {
  testing::Deadline deadline("MpiLink deadline", std::chrono::seconds(60));
  MpiSession& session = testing::mpi_session();
  if (session.rank() == 1) {
    MpiLinkOptions options;
    options.timeout = std::chrono::milliseconds(200);
    MpiLink link("gradients 0->1", session, MPI_COMM_WORLD, 0, 1001, 8, Device::cpu(0),
                 options);
    const std::string error = testing::error_text<MpiError>([&] { link.receive(7); });
    CHECK(error == "gradients 0->1: micro-batch 7 from rank 0: still waiting after 0.2 s "
                   "(BRIGADE_MPI_TIMEOUT_S); has that rank died or hung?");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("MpiLink: a receive given up between header and payload leaves its tensor to MPI") {
  // A header whose payload never comes (sent by hand: a link sends both): the receive posts
  // the payload's MPI_Irecv and gives it up at the deadline. A matched receive completes
  // whatever the cancel, so MPI may still fill that tensor: it is kept for the process
  // (poll.h, keep_for_mpi), not with the link, which a failed step destroys before MPI ends.
  testing::Deadline deadline("MpiLink payload given up", std::chrono::seconds(60));
  MpiSession& session = testing::mpi_session();
  constexpr int kLink = 1002, kMicrobatches = 4;
  if (session.rank() == 0) {
    const LinkTags tags("gradients 0->1", MPI_COMM_WORLD, 1, kLink, kMicrobatches);
    // ProcessLink's header: shape rank, dims, dtype (a float32 vector of 3).
    const std::array<int64_t, 6> header{1, 3, 0, 0, 0, static_cast<int64_t>(DType::float32)};
    CHECK(MPI_Send(header.data(), 6, MPI_INT64_T, 1, tags.message(0, 0), MPI_COMM_WORLD) ==
          MPI_SUCCESS);
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the header is on its way
  if (session.rank() == 1) {
    MpiLinkOptions options;
    options.timeout = std::chrono::milliseconds(200);
    const size_t kept_before = kept_request_buffers();
    {
      MpiLink link("gradients 0->1", session, MPI_COMM_WORLD, 0, kLink, kMicrobatches,
                   Device::cpu(0), options);
      const std::string error = testing::error_text<MpiError>([&] { link.receive(0); });
      CHECK(error == "gradients 0->1: micro-batch 0 from rank 0: still waiting after 0.2 s "
                     "(BRIGADE_MPI_TIMEOUT_S); has that rank died or hung?");
    }
    CHECK(kept_request_buffers() == kept_before + 1);  // the payload's tensor outlives the link
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("MpiLink: the tags of neighbouring links and of the highest link number stay apart") {
  // A link's tags are (link·(m+1) + mb)·2 + part (link_tags.h): the last micro-batch of link
  // L and the first of link L+1 are one tag row apart, and the highest link number's last
  // micro-batch lies just under MPI_TAG_UB, where a tag one too large is an MPI error. On a
  // communicator made by MPI_Comm_split, as a pipeline's is: it does not carry MPI_TAG_UB,
  // which bounds its tags all the same.
  testing::Deadline deadline("MpiLink tags", std::chrono::seconds(60));
  MpiSession& session = testing::mpi_session();
  const int m = 6;
  const int top = LinkTags::max_link(m);
  REQUIRE(top >= 2);
  const Device cpu = Device::cpu(0);
  MPI_Comm split = MPI_COMM_NULL;
  BRIGADE_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, session.rank() < 2 ? 0 : 1, session.rank(), &split));
  const Communicator pair(split);
  if (session.rank() < 2) {
    const int peer = 1 - session.rank();
    const std::vector<int> numbers{0, 1, top - 1, top};
    std::vector<std::unique_ptr<MpiLink>> links;
    for (const int link : numbers)
      links.push_back(std::make_unique<MpiLink>("link " + std::to_string(link), session,
                                                pair.get(), peer, link, m, cpu));
    // (link mod 4096, link / 4096, mb): exact in floats for any link number this MPI allows
    const auto values = [](int link, int mb) {
      return std::vector<float>{static_cast<float>(link % 4096), static_cast<float>(link / 4096),
                                static_cast<float>(mb)};
    };
    if (session.rank() == 0) {
      const Stream stream = Stream::default_for(cpu);
      for (size_t i = 0; i < links.size(); ++i)
        for (const int mb : {0, m - 1}) {
          Message message{Tensor::from_vector(values(numbers[i], mb), Shape{3}), Event()};
          message.ready.record(stream);
          links[i]->send(mb, message);
        }
    } else {
      // Received in the reverse order: each pair is taken by its own tag, none by a neighbour's.
      for (size_t i = links.size(); i-- > 0;)
        for (const int mb : {m - 1, 0}) {
          CAPTURE(numbers[i]);
          Message got = links[i]->receive(mb);
          got.ready.synchronize();
          CHECK(got.tensor.to_vector() == values(numbers[i], mb));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_CASE("MpiLink: user errors name the link") {
  MpiSession& session = testing::mpi_session();
  const int peer = (session.rank() + 1) % session.size();
  CHECK(testing::error_text<Error>([&] {
          MpiLink("a", session, MPI_COMM_WORLD, session.size(), 0, 4, Device::cpu(0));
        }) == "a: peer rank " + std::to_string(session.size()) +
                  " is not in the communicator (" + std::to_string(session.size()) + " ranks)");
  // With m micro-batches per step, (MPI_TAG_UB + 1) / (2(m + 1)) link numbers.
  void* ub = nullptr;
  int found = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found));
  REQUIRE(found);
  const int64_t tag_ub = *static_cast<int*>(ub);
  const int most = LinkTags::max_link(8);
  CHECK(most == (tag_ub + 1) / 18 - 1);
  CHECK(most >= 1000);
  CHECK(testing::error_text<Error>([&] {
          MpiLink("b", session, MPI_COMM_WORLD, peer, most + 1, 8, Device::cpu(0));
        }) == "b: link number " + std::to_string(most + 1) +
                  " is out of range: with 8 micro-batches per step this MPI's tags (MPI_TAG_UB " +
                  std::to_string(tag_ub) + ") allow link numbers 0 to " + std::to_string(most));
  CHECK(testing::error_text<Error>([&] {
          MpiLink("c", session, MPI_COMM_WORLD, peer, 0, 0, Device::cpu(0));
        }) == "c: 0 micro-batches per step; a link needs at least 1");
  const int too_many = static_cast<int>((tag_ub + 1) / 2);
  CHECK(testing::error_text<Error>([&] {
          MpiLink("d", session, MPI_COMM_WORLD, peer, 0, too_many, Device::cpu(0));
        }) == "d: " + std::to_string(too_many) + " micro-batches per step are more than this "
                  "MPI's tags (MPI_TAG_UB " + std::to_string(tag_ub) + ") can number: at most " +
                  std::to_string((tag_ub + 1) / 4 - 1));
  MpiLink link("activations 0->1", session, MPI_COMM_WORLD, peer, 5, 4, Device::cpu(0));
  CHECK(testing::error_text<Error>([&] {
          link.send(0, Message{Tensor::from_vector({1}, Shape{1}), Event()});
        }) == "activations 0->1: micro-batch 0 sent with an event that was never recorded; "
              "record it after the work that writes the tensor, then send");
  CHECK(testing::error_text<Error>([&] { link.receive(4); }) ==
        "activations 0->1: cannot receive micro-batch 4: this link carries micro-batches 0 to 3 "
        "(4 per step)");
  CHECK(testing::error_text<Error>([&] { link.receive(-1); }) ==
        "activations 0->1: cannot receive micro-batch -1: this link carries micro-batches 0 to "
        "3 (4 per step)");
}
