// Errors: one exception type, and the macros that turn a failed check into it.
//
// brigade::Error is what every layer of Brigade throws. Two kinds of checks produce it:
//   BRIGADE_CHECK(cond, "message " << value)  a user error (bad shape, bad device name...):
//                                             the message alone, written for the user.
//   BRIGADE_CUDA_CHECK(cudaMalloc(&p, n))      a failed library call: the call's text, the
//   BRIGADE_CUBLAS_CHECK / _CUDNN_ / _NCCL_    library's error string, and file:line.
// A destructor must not throw, and a release (cudaStreamDestroy, cudnnDestroy...Descriptor)
// that fails there is still checked: BRIGADE_CUDA_REPORT, _CUDNN_REPORT and _NCCL_REPORT
// write the same text to standard error and carry on.
// The library macros exist only where the library does (BRIGADE_HAVE_CUDA; <nccl.h>), and
// they call the library's own error-string function, so the file that uses one includes
// that library's header itself (it is calling the library). This header includes none: it
// is part of brigade_base, the floor beneath both the engine and the emulated CUDA runtime.
#pragma once

#include <cstdint>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace brigade {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by an allocator that cannot satisfy a request; the message names the device,
// the request and the usage. A separate type so that a caller may catch only this.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// "64.0 MiB", "512 B", "1.5 GiB": sizes in error messages and reports.
std::string format_bytes(uint64_t bytes);

// Text from a file or a user, made fit for an error message: valid UTF-8 as it is, every
// other byte as \xNN — bytes below 0x20 and 0x7f (a stray \r must not make two different
// lines print alike), C1 controls, and bytes >= 0x80 that are no UTF-8 (a terminal must not
// be sent them) — at most max_bytes of it, never a character cut, then "..." if it was longer.
std::string printable(std::string_view text, size_t max_bytes = 80);

// The message of a caught exception: what() of a std::exception, else "unknown exception".
std::string what_of(const std::exception_ptr& error);

namespace detail {
[[noreturn]] void throw_library_error(const char* library, const char* call, const char* file,
                                      int line, long code, const char* what);
// The same text as throw_library_error's, on standard error ("brigade: " before it).
void report_library_error(const char* library, const char* call, const char* file, int line,
                          long code, const char* what) noexcept;
}  // namespace detail

}  // namespace brigade

// A user error: throws brigade::Error whose text is exactly the streamed message.
#define BRIGADE_CHECK(cond, message)            \
  do {                                          \
    if (!(cond)) {                              \
      std::ostringstream brigade_check_os_;     \
      brigade_check_os_ << message;             \
      throw ::brigade::Error(brigade_check_os_.str()); \
    }                                           \
  } while (0)

#if defined(BRIGADE_HAVE_CUDA)
// A failing CUDA call is also kept as the host thread's "last error" until cudaGetLastError
// reads it; the failure is reported here, so it is read here too: otherwise the next healthy
// launch's checked cudaGetLastError() would report it again, as that launch's. (A sticky
// error, a faulted GPU, is not cleared by the read: every later call returns it anyway.) The
// text is taken before the read.
#define BRIGADE_CUDA_CHECK(call)                                                           \
  do {                                                                                     \
    const cudaError_t brigade_status_ = (call);                                            \
    if (brigade_status_ != cudaSuccess) {                                                  \
      const std::string brigade_what_ = cudaGetErrorString(brigade_status_);               \
      (void)cudaGetLastError();                                                            \
      ::brigade::detail::throw_library_error("CUDA", #call, __FILE__, __LINE__,            \
                                             static_cast<long>(brigade_status_),           \
                                             brigade_what_.c_str());                       \
    }                                                                                      \
  } while (0)

#define BRIGADE_CUBLAS_CHECK(call)                                                         \
  do {                                                                                     \
    const cublasStatus_t brigade_status_ = (call);                                         \
    if (brigade_status_ != CUBLAS_STATUS_SUCCESS)                                          \
      ::brigade::detail::throw_library_error("cuBLAS", #call, __FILE__, __LINE__,          \
                                             static_cast<long>(brigade_status_),           \
                                             cublasGetStatusString(brigade_status_));      \
  } while (0)

#define BRIGADE_CUDNN_CHECK(call)                                                          \
  do {                                                                                     \
    const cudnnStatus_t brigade_status_ = (call);                                          \
    if (brigade_status_ != CUDNN_STATUS_SUCCESS)                                           \
      ::brigade::detail::throw_library_error("cuDNN", #call, __FILE__, __LINE__,           \
                                             static_cast<long>(brigade_status_),           \
                                             cudnnGetErrorString(brigade_status_));        \
  } while (0)

// For destructors: as the checks above, reported instead of thrown. The CUDA one reads the
// error it reported, as BRIGADE_CUDA_CHECK does.
#define BRIGADE_CUDA_REPORT(call)                                                          \
  do {                                                                                     \
    const cudaError_t brigade_status_ = (call);                                            \
    if (brigade_status_ != cudaSuccess) {                                                  \
      ::brigade::detail::report_library_error("CUDA", #call, __FILE__, __LINE__,           \
                                              static_cast<long>(brigade_status_),          \
                                              cudaGetErrorString(brigade_status_));        \
      (void)cudaGetLastError();                                                            \
    }                                                                                      \
  } while (0)

#define BRIGADE_CUDNN_REPORT(call)                                                         \
  do {                                                                                     \
    const cudnnStatus_t brigade_status_ = (call);                                          \
    if (brigade_status_ != CUDNN_STATUS_SUCCESS)                                           \
      ::brigade::detail::report_library_error("cuDNN", #call, __FILE__, __LINE__,          \
                                              static_cast<long>(brigade_status_),          \
                                              cudnnGetErrorString(brigade_status_));       \
  } while (0)
#endif  // BRIGADE_HAVE_CUDA

#if defined(__has_include)
#if __has_include(<nccl.h>)
#define BRIGADE_HAVE_NCCL_HEADER 1
#define BRIGADE_NCCL_CHECK(call)                                                           \
  do {                                                                                     \
    const ncclResult_t brigade_status_ = (call);                                           \
    if (brigade_status_ != ncclSuccess)                                                    \
      ::brigade::detail::throw_library_error("NCCL", #call, __FILE__, __LINE__,            \
                                             static_cast<long>(brigade_status_),           \
                                             ncclGetErrorString(brigade_status_));         \
  } while (0)
#define BRIGADE_NCCL_REPORT(call)                                                          \
  do {                                                                                     \
    const ncclResult_t brigade_status_ = (call);                                           \
    if (brigade_status_ != ncclSuccess)                                                    \
      ::brigade::detail::report_library_error("NCCL", #call, __FILE__, __LINE__,           \
                                              static_cast<long>(brigade_status_),          \
                                              ncclGetErrorString(brigade_status_));        \
  } while (0)
#endif
#endif
