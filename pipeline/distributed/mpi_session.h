// MPI for Brigade: the session (MPI_Init_thread ... MPI_Finalize), the layout of the ranks
// into pipelines and replicas, and the checked call macro.
//
// Layout of P·D ranks (P stages per pipeline, D data-parallel replicas of it):
//
//   world rank  r = replica · P + position        e.g. P = 2, D = 2:
//   pipeline    the P ranks of one replica          pipelines {0, 1} and {2, 3}
//   replicas    the D ranks at one position         stage groups {0, 2} and {1, 3}
//
// Every MPI call goes through BRIGADE_MPI_CHECK: the session sets MPI_ERRORS_RETURN on
// MPI_COMM_WORLD (communicators split from it inherit it), so a failed call becomes a
// brigade::MpiError naming the call, this rank and MPI's own error string, instead of
// MPI's default (abort the job with a generic message).
#pragma once

// The C API only: OpenMPI's deprecated C++ bindings do not compile warning-free.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <memory>
#include <string>

#include "engine/error.h"
#include "engine/host_wait.h"

namespace brigade::distributed {

class MpiError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// "MPI_Send(...) failed on rank 2: MPI_ERR_RANK: invalid rank (pipeline/distributed/x.cpp:12)"
[[noreturn]] void throw_mpi_error(const char* call, const char* file, int line, int code);
}  // namespace detail

}  // namespace brigade::distributed

#define BRIGADE_MPI_CHECK(call)                                                              \
  do {                                                                                       \
    const int brigade_mpi_status_ = (call);                                                  \
    if (brigade_mpi_status_ != MPI_SUCCESS)                                                  \
      ::brigade::distributed::detail::throw_mpi_error(#call, __FILE__, __LINE__,             \
                                                      brigade_mpi_status_);                  \
  } while (0)

namespace brigade::distributed {

// A communicator this process owns: MPI_Comm_free when it goes. Move-only.
class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}
  ~Communicator();
  Communicator(Communicator&& other) noexcept : comm_(other.comm_) { other.comm_ = MPI_COMM_NULL; }
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  MPI_Comm get() const { return comm_; }
  int rank() const;  // this process's rank in it
  int size() const;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

class FaultLine;  // faults.h

// The MPI library's lifetime in this process: one per process, made first thing in main()
// and destroyed last — after every link, reducer and communicator made with it (their
// threads and destructors still call MPI). MPI_THREAD_MULTIPLE is required: the pipeline runtime calls its links
// from one host thread per device, and links have threads of their own.
class MpiSession {
 public:
  // MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE); throws MpiError if MPI provides less
  // (naming what it provides), or if a session already exists.
  MpiSession(int* argc, char*** argv);
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }  // in MPI_COMM_WORLD
  int size() const { return size_; }
  FaultLine& faults() const { return *faults_; }

  // The rank of this process, for messages before or without a session: -1 when MPI is not
  // initialised.
  static int world_rank();

 private:
  int rank_ = 0, size_ = 1;
  std::unique_ptr<FaultLine> faults_;
  // While the session lives, a host wait on a device's work hears the fault notices too
  // (FaultLine::end_job_if_heard, engine/host_wait.h).
  std::unique_ptr<HostWaitListening> listening_;
};

// Where this rank sits among P·D ranks (see the layout above), with the two communicators
// the runtime talks over. Made by make_topology, a collective call of every rank.
struct Topology {
  int stages = 1;    // P: ranks per pipeline
  int replicas = 1;  // D
  int replica = 0;   // rank / P: which pipeline this rank belongs to
  int position = 0;  // rank % P: its place in that pipeline (its rank in `pipeline`)
  Communicator pipeline;  // the P ranks of this replica, ranked by position
  Communicator stage_replicas;  // the D ranks at this position, ranked by replica
};

// Splits MPI_COMM_WORLD into size/P pipelines of P consecutive ranks (MPI_Comm_split).
// Throws a brigade::Error (on every rank alike) if the world size is not a multiple of P.
Topology make_topology(const MpiSession& session, int pipeline_size);

}  // namespace brigade::distributed
