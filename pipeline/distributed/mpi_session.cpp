#include "pipeline/distributed/mpi_session.h"

#include <atomic>
#include <cstdio>
#include <sstream>

#include "pipeline/distributed/faults.h"

namespace brigade::distributed {

namespace detail {

void throw_mpi_error(const char* call, const char* file, int line, int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) std::snprintf(text, sizeof text, "?");
  std::ostringstream os;
  os << call << " failed on rank " << MpiSession::world_rank() << ": " << text << " (code "
     << code << ", " << file << ":" << line << ")";
  throw MpiError(os.str());
}

}  // namespace detail

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize (a communicator that outlived the session) there is nothing to free.
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    Communicator gone(comm_);  // frees ours
    comm_ = other.comm_;
    other.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

int Communicator::rank() const {
  int r = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_rank(comm_, &r));
  return r;
}

int Communicator::size() const {
  int n = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_size(comm_, &n));
  return n;
}

namespace {
std::atomic<bool> session_exists{false};

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}
}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  BRIGADE_CHECK(!session_exists.exchange(true),
                "MpiSession: this process already has one; make it once, first thing in main()");
  int provided = MPI_THREAD_SINGLE;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) {
    session_exists = false;
    detail::throw_mpi_error("MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided)",
                            __FILE__, __LINE__, rc);
  }
  // From here on a failed call returns its code to BRIGADE_MPI_CHECK instead of aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    session_exists = false;
    throw MpiError(std::string("rank ") + std::to_string(rank_) +
                   ": MPI provides only " + thread_level_name(provided) +
                   ", Brigade needs MPI_THREAD_MULTIPLE (one host thread per device calls "
                   "the links); use an MPI built with thread support (OpenMPI: ompi_info | "
                   "grep 'Thread support')");
  }
  faults_ = std::make_unique<FaultLine>(rank_, size_);
  listening_ = std::make_unique<HostWaitListening>(
      [faults = faults_.get()](const std::function<std::string()>& waiting_on) {
        faults->end_job_if_heard(waiting_on);
      });
}

MpiSession::~MpiSession() {
  listening_.reset();  // before the line it listens to
  faults_.reset();  // frees its communicator while MPI is still up
  MPI_Finalize();
  session_exists = false;
}

int MpiSession::world_rank() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

Topology make_topology(const MpiSession& session, int pipeline_size) {
  BRIGADE_CHECK(pipeline_size >= 1 && session.size() % pipeline_size == 0,
                "cannot lay " << session.size() << " ranks out as pipelines of " << pipeline_size
                              << " stages: the number of ranks (mpirun -np) must be the number "
                                 "of stages times the number of replicas");
  Topology t;
  t.stages = pipeline_size;
  t.replicas = session.size() / pipeline_size;
  t.replica = session.rank() / pipeline_size;
  t.position = session.rank() % pipeline_size;
  MPI_Comm pipeline = MPI_COMM_NULL, replicas = MPI_COMM_NULL;
  // color picks the group, key orders the ranks inside it.
  BRIGADE_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, t.replica, t.position, &pipeline));
  t.pipeline = Communicator(pipeline);
  BRIGADE_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, t.position, t.replica, &replicas));
  t.stage_replicas = Communicator(replicas);
  return t;
}

}  // namespace brigade::distributed
