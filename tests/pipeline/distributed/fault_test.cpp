// A rank that throws, dies, or whose stream fails ends the whole job: every rank exits,
// mpirun's status is non-zero, and the output names the failed rank, within a deadline. Runs
// fault_worker under mpirun (paths from meson: BRIGADE_MPIRUN, BRIGADE_FAULT_WORKER) and
// reads what it prints.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

struct Job {
  int status = -1;       // as waitpid gives it
  bool timed_out = false;
  std::string output;    // stdout and stderr of mpirun and every rank
};

// Runs `mpirun -np 3 fault_worker scenario` in a process group of its own, collecting its
// output; past `limit` the group is killed and timed_out set.
Job run_job(const std::string& scenario, std::chrono::seconds limit) {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pipe_fds[1], 1);
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    const char* argv[] = {BRIGADE_MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "3",
                          BRIGADE_FAULT_WORKER, scenario.c_str(), nullptr};
    execv(argv[0], const_cast<char* const*>(argv));
    _exit(127);
  }
  setpgid(pid, pid);
  close(pipe_fds[1]);
  Job job;
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      job.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;  // every writer is gone: the job has ended
    job.output.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  waitpid(pid, &job.status, 0);
  return job;
}

#if defined(BRIGADE_CUDA_EMULATED)
// run_job with one emulated GPU for each rank, whatever the environment says (CI's sanitizer
// runs set 0: a machine without a GPU), restored after the job.
Job run_job_on_emulated_gpus(const std::string& scenario, std::chrono::seconds limit) {
  const char* before = std::getenv("BRIGADE_EMULATED_GPUS");
  const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
  setenv("BRIGADE_EMULATED_GPUS", "1", 1);
  Job job = run_job(scenario, limit);
  if (saved)
    setenv("BRIGADE_EMULATED_GPUS", saved->c_str(), 1);
  else
    unsetenv("BRIGADE_EMULATED_GPUS");
  return job;
}
#endif

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

bool failed(const Job& job) {
  return !job.timed_out && !(WIFEXITED(job.status) && WEXITSTATUS(job.status) == 0);
}

// Each rank of the 3 said why it ends, naming rank 1's failure `cause`: rank 1 "failed", the
// others "stop" (rank 1 aborts the job only once they have said so, or after 5 s: faults.h).
void check_every_rank_says(const Job& job, const std::string& cause) {
  CHECK(job.output.find("brigade: rank 1 failed: " + cause) != std::string::npos);
  for (int r : {0, 2}) {
    CAPTURE(r);
    CHECK(job.output.find("brigade: rank " + std::to_string(r) + " stops: rank 1 failed: " +
                          cause) != std::string::npos);
  }
}

// A job that the link's failure message must end (30 s is the hang detector, far below the
// links' BRIGADE_MPI_TIMEOUT_S): every rank names rank 1's `cause`, none gave up waiting,
// none carried on.
void check_ended_by_the_link(const Job& job, const std::string& cause) {
  CHECK_FALSE(job.timed_out);
  CHECK(failed(job));
  check_every_rank_says(job, cause);
  CHECK(job.output.find("still waiting") == std::string::npos);
  CHECK(job.output.find("without an error") == std::string::npos);
}

}  // namespace

// The limit is a hang detector, not a timing assertion: these jobs end in a few seconds.
constexpr auto limit = std::chrono::seconds(60);

TEST_CASE("fault: a rank that throws while others wait on its link ends the job, named") {
  const Job job = run_job("throw", limit);
  INFO(job.output);
  CHECK(failed(job));
  check_every_rank_says(job, "out of memory on cpu:0 in stage 1 (a test's failure)");
  CHECK(job.output.find("without an error") == std::string::npos);
}

TEST_CASE("fault: a rank that throws while the others are in an all-reduce ends the job") {
  const Job job = run_job("throw-reduce", limit);
  INFO(job.output);
  CHECK(failed(job));
  check_every_rank_says(job, "out of memory on cpu:0 in stage 1 (a test's failure)");
  CHECK(job.output.find("without an error") == std::string::npos);
}

TEST_CASE("fault: a rank killed by SIGKILL ends the job; mpirun names it") {
  const Job job = run_job("kill", limit);
  INFO(job.output);
  CHECK(failed(job));
  CHECK(job.output.find("process rank 1") != std::string::npos);
  CHECK(job.output.find("signal 9") != std::string::npos);
}

TEST_CASE("fault: ranks whose hosts wait on their own slow device still say why they stop") {
  // Rank 1 throws; ranks 0 and 2 wait, on the host, for work of their own device that is
  // slower than the job may live (rank 0 a CPU stream's, rank 2 an emulated GPU's where the
  // build has them). Rank 1 aborts the job once both have said why they stop, or after 5 s
  // (faults.h): only a wait that hears the notice while it waits (engine/host_wait.h) lets
  // them say it. 30 s is the hang detector.
#if defined(BRIGADE_CUDA_EMULATED)
  const Job job = run_job_on_emulated_gpus("device-wait", std::chrono::seconds(30));
#else
  const Job job = run_job("device-wait", std::chrono::seconds(30));
#endif
  INFO(job.output);
  CHECK_FALSE(job.timed_out);
  CHECK(failed(job));
  check_every_rank_says(job, "out of memory on cpu:0 in stage 1 (a test's failure)");
  // Each said where it was: in its wait on the device, not after it.
  CHECK(count_of(job.output, "(here: waiting on its device's work: ") == 2);
  CHECK(job.output.find("without an error") == std::string::npos);
}

TEST_CASE("fault: work that fails on a rank's stream ends the job with its cause, not a timeout") {
  // Rank 1's host waits in a receive and never sees its stream fail; its neighbours wait on
  // it. Only the link's failure message (mpi_link.h) ends this before BRIGADE_MPI_TIMEOUT_S
  // (600 s): rank 2 receives it, and rank 1's host hears it from its own link, so it ends too
  // and tells rank 0, which waits on rank 1 for what rank 2 would have sent back. 30 s is
  // the hang detector.
  const Job job = run_job("stream", std::chrono::seconds(30));
  INFO(job.output);
  check_ended_by_the_link(job, "activations 1->2: micro-batch 0 not sent: non-finite value in "
                               "stage 1 (a test's failure)");
}

#if BRIGADE_FAULT_WORKER_NCCL && defined(BRIGADE_CUDA_EMULATED)
// The same over NcclLinks, where the failure is not on a stream at all: rank 1's GPU wrote the
// tensor, but its check, on a host stream behind the GPU, failed. Its link sends the failure
// in the tensor's place (nccl_link.h): rank 2 never receives the tensor (it would say so and
// send it back), and every rank names rank 1's check, its action and micro-batch. Emulated
// builds only: each rank has emulated GPUs of its own (a real machine needs three GPUs).
TEST_CASE("fault: a check that fails behind a GPU ends the job with its cause, not the tensor") {
  const Job job = run_job_on_emulated_gpus("nccl-check", std::chrono::seconds(30));
  INFO(job.output);
  check_ended_by_the_link(job, "activations 1->2: micro-batch 0 not sent: action 1F0 (stage 1, "
                               "micro-batch 0): non-finite value nan (a test's failure)");
  CHECK(job.output.find("received the tensor of a failed check") == std::string::npos);
}
#endif
