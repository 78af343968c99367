#include "pipeline/distributed/transport.h"

#include "pipeline/distributed/mpi_reducer.h"
#if defined(BRIGADE_HAVE_NCCL)
#include "pipeline/distributed/nccl_link.h"
#include "pipeline/distributed/nccl_reducer.h"
#endif

namespace brigade::distributed {

std::shared_ptr<pipeline::Link> make_link(const std::string& name, const MpiSession& session,
                                          MPI_Comm comm, int peer, int link, int microbatches,
                                          Device device,
                                          [[maybe_unused]] bool sending) {  // NCCL's ends only
  if (device.is_cuda()) {
#if defined(BRIGADE_HAVE_NCCL)
    return std::make_shared<NcclLink>(name, session, comm, peer, link, microbatches, device,
                                      sending);
#else
    throw Error(name + ": its end is on " + device.str() + ", and this build has no NCCL");
#endif
  }
  return std::make_shared<MpiLink>(name, session, comm, peer, link, microbatches, device);
}

std::unique_ptr<pipeline::GradientReducer> make_reducer(const MpiSession& session,
                                                        MPI_Comm replicas, Device device) {
  if (device.is_cuda()) {
#if defined(BRIGADE_HAVE_NCCL)
    return std::make_unique<NcclReducer>(session.faults(), replicas, device);
#else
    throw Error("the gradients' all-reduce on " + device.str() + ": this build has no NCCL");
#endif
  }
  return std::make_unique<MpiReducer>(session, replicas);
}

}  // namespace brigade::distributed
