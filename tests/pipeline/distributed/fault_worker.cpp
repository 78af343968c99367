// fault_worker SCENARIO: an MPI program in which rank 1 fails while the other ranks wait on
// it; run under mpirun by fault_test.cpp, which checks how the job ends.
//   throw          rank 1 throws while ranks 0 and 2 wait in MpiLink::receive for it
//   throw-reduce   rank 1 throws while the others wait in MpiReducer::sum with it
//   kill           rank 1 dies by SIGKILL while the others wait in MpiLink::receive
//   device-wait    rank 1 throws while the others wait, on the host, for their own device's
//                  work, which is slower than the job may live: rank 0 for a CPU stream's, in
//                  Event::synchronize; rank 2 for an emulated GPU's (emulated builds; else a
//                  CPU stream's too), in Stream::synchronize
//   stream         the work behind rank 1's send to rank 2 fails on its stream, and rank 1
//                  waits for rank 2's reply, rank 2 for that send and rank 0 for rank 1: the
//                  host of rank 1 never learns of the failure, so only the link can tell
//   nccl-check     the same over NcclLinks on a GPU per rank (builds with NCCL only): rank
//                  1's GPU work succeeds, but its check (on a host stream behind the GPU,
//                  as pipeline/runtime/step_checks.h makes it) fails: its NcclLink sends
//                  the failure to rank 2 in the tensor's place, never the tensor
// Every rank ends the way the trainer does: catch, report_failure_and_abort.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <memory>
#include <cstring>
#include <exception>
#include <string>

#include "pipeline/distributed/faults.h"
#include "pipeline/distributed/mpi_link.h"
#include "pipeline/distributed/mpi_reducer.h"
#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>
#endif
#if BRIGADE_FAULT_WORKER_NCCL
#include "pipeline/distributed/nccl_link.h"
#include "pipeline/runtime/step_checks.h"
#endif

using namespace brigade;
using namespace brigade::distributed;

namespace {

// Link numbers of the stream scenario: activations 1->2, gradients 2->1, gradients 1->0.
constexpr int activations_1_2 = 0, gradients_2_1 = 1, gradients_1_0 = 2;

void stream_failure(const MpiSession& session) {
  const Device cpu = Device::cpu(0);
  switch (session.rank()) {
    case 0:
      MpiLink("gradients 1->0", session, MPI_COMM_WORLD, 1, gradients_1_0, 1, cpu).receive(0);
      break;
    case 1: {
      MpiLink to_2("activations 1->2", session, MPI_COMM_WORLD, 2, activations_1_2, 1, cpu);
      MpiLink from_2("gradients 2->1", session, MPI_COMM_WORLD, 2, gradients_2_1, 1, cpu);
      Stream stream = Stream::create(cpu);
      Tensor t = Tensor::zeros(Shape{4}, stream);
      stream.enqueue([] { throw Error("non-finite value in stage 1 (a test's failure)"); });
      pipeline::Message message{t, Event()};
      message.ready.record(stream);
      to_2.send(0, std::move(message));
      from_2.receive(0);
      break;
    }
    default: {
      MpiLink from_1("activations 1->2", session, MPI_COMM_WORLD, 1, activations_1_2, 1, cpu);
      MpiLink to_1("gradients 2->1", session, MPI_COMM_WORLD, 1, gradients_2_1, 1, cpu);
      pipeline::Message got = from_1.receive(0);
      to_1.send(0, std::move(got));
    }
  }
}

// A device slower than the job may live, on purpose (rank 1 aborts the job at most 5 s after
// its notice: faults.h): work that ends only after 60 s, by which time the test that runs
// this has killed the job as hung. A CPU stream's task waits for a promise nobody keeps; an
// emulated GPU's stream stops behind a hold that is released only as the process ends.
void wait_on_a_slow_device(const MpiSession& session) {
  auto never = std::make_shared<std::promise<void>>();
  const auto stall = [never] { never->get_future().wait_for(std::chrono::seconds(60)); };
#if defined(BRIGADE_CUDA_EMULATED)
  if (session.rank() == 2) {
    const Stream gpu = Stream::create(Device::cuda(0));
    static std::unique_ptr<emu::gpu::StreamHold> hold;  // released as the process ends
    hold = std::make_unique<emu::gpu::StreamHold>(gpu.cuda_handle());
    const Tensor behind = Tensor::zeros(Shape{4}, gpu);  // (4): work behind the hold
    gpu.synchronize();
    return;
  }
#endif
  const Stream cpu = Stream::create(Device::cpu(0));
  cpu.enqueue(stall);
  if (session.rank() == 2) {
    cpu.synchronize();
    return;
  }
  Event done;
  done.record(cpu);
  done.synchronize();
}

#if BRIGADE_FAULT_WORKER_NCCL
// The stream scenario over NcclLinks (made by each pair in ascending link number, as their
// constructors are collective), with the failure in the check behind the GPU, not on it.
void check_failure(const MpiSession& session) {
  const Device gpu = Device::cuda(0);
  switch (session.rank()) {
    case 0:
      NcclLink("gradients 1->0", session, MPI_COMM_WORLD, 1, gradients_1_0, 1, gpu, false)
          .receive(0);
      break;
    case 1: {
      NcclLink to_2("activations 1->2", session, MPI_COMM_WORLD, 2, activations_1_2, 1, gpu, true);
      NcclLink from_2("gradients 2->1", session, MPI_COMM_WORLD, 2, gradients_2_1, 1, gpu, false);
      NcclLink to_0("gradients 1->0", session, MPI_COMM_WORLD, 0, gradients_1_0, 1, gpu, true);
      Stream compute = Stream::create(gpu);
      Stream check = Stream::create(Device::cpu(0));
      Tensor t = Tensor::zeros(Shape{4}, compute);  // (4): what the GPU wrote, fine
      pipeline::Message message{t, Event()};
      message.ready.record(compute);
      check.wait(message.ready);
      check.enqueue([] {
        throw pipeline::FailedCheck("non-finite value nan (a test's failure)",
                                    pipeline::Action{1, pipeline::Op::F, 0});
      });
      message.checked.record(check);
      to_2.send(0, std::move(message));
      from_2.receive(0);
      break;
    }
    default: {
      NcclLink from_1("activations 1->2", session, MPI_COMM_WORLD, 1, activations_1_2, 1, gpu,
                      false);
      NcclLink to_1("gradients 2->1", session, MPI_COMM_WORLD, 1, gradients_2_1, 1, gpu, true);
      pipeline::Message got = from_1.receive(0);
      std::printf("rank 2: received the tensor of a failed check\n");
      to_1.send(0, std::move(got));
    }
  }
}
#endif

void run(const MpiSession& session, const std::string& scenario) {
  const int r = session.rank();
  if (scenario == "stream") {
    stream_failure(session);
  } else if (scenario == "device-wait" && r != 1) {
    wait_on_a_slow_device(session);
#if BRIGADE_FAULT_WORKER_NCCL
  } else if (scenario == "nccl-check") {
    check_failure(session);
#endif
  } else if (r == 1) {
    if (scenario == "kill") std::raise(SIGKILL);
    throw Error("out of memory on cpu:0 in stage 1 (a test's failure)");
  } else if (scenario == "throw-reduce") {
    Tensor g = Tensor::zeros(Shape{16}, Device::cpu(0));
    MpiReducer(session, MPI_COMM_WORLD).sum({g}, Stream::default_for(Device::cpu(0)));
  } else {
    MpiLink link("gradients 1->" + std::to_string(r), session, MPI_COMM_WORLD, 1, r,
                 /*microbatches=*/1, Device::cpu(0));
    link.receive(0);
  }
  std::printf("rank %d: the wait on rank 1 ended without an error\n", r);
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  if (argc != 2 || session.size() < 2) {
    std::fprintf(stderr,
                 "usage: mpirun -np 3 fault_worker throw|throw-reduce|kill|device-wait|stream|nccl-check\n");
    return 2;
  }
  try {
    run(session, argv[1]);
  } catch (const std::exception& e) {
    report_failure_and_abort(session, e.what());
  }
  return 0;
}
