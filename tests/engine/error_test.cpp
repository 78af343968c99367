// Errors: user checks carry exactly their message; library checks carry call, code, file:line.
#include <doctest/doctest.h>

#include <string>

#include "engine/device.h"
#include "engine/error.h"
#include "tests/support/stderr_capture.h"

static std::string message_of(void (*f)()) {
  try {
    f();
  } catch (const brigade::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_CASE("BRIGADE_CHECK throws exactly the streamed message, and nothing when true") {
  CHECK(message_of([] {
          const int got = 3;
          BRIGADE_CHECK(got == 4, "dense: expected 4 inputs, got " << got);
        }) == "dense: expected 4 inputs, got 3");
  CHECK(message_of([] { BRIGADE_CHECK(1 + 1 == 2, "unreachable"); }) == "(no error)");
}

TEST_CASE("a failed library call names the library, code, string, call and place") {
  const std::string text = message_of([] {
    brigade::detail::throw_library_error("cuBLAS", "cublasSgemm(h, ...)", "kernels/x.cpp", 12, 13,
                                         "the GPU program failed to execute");
  });
  CHECK(text ==
        "cuBLAS error 13 (the GPU program failed to execute) in cublasSgemm(h, ...) at "
        "kernels/x.cpp:12");
}

#if defined(BRIGADE_HAVE_CUDA)
#include <cuda_runtime_api.h>  // the library the check calls

TEST_CASE("BRIGADE_CUDA_CHECK reports the failing call's text and this file") {
  // An invalid device index fails with or without a GPU (without one: no driver).
  const std::string text = message_of([] { BRIGADE_CUDA_CHECK(cudaSetDevice(-1)); });
  CHECK(text.rfind("CUDA error ", 0) == 0);
  CHECK(text.find(" in cudaSetDevice(-1) at ") != std::string::npos);
  CHECK(text.find("error_test.cpp:") != std::string::npos);
}

TEST_CASE("BRIGADE_CUDA_REPORT, for destructors: the same text on stderr, no throw, error read") {
  // Unread, a failed call stays the thread's last error...
  REQUIRE(cudaSetDevice(-1) != cudaSuccess);
  REQUIRE(cudaGetLastError() != cudaSuccess);
  brigade::testing::StderrCapture captured;
  CHECK_NOTHROW(BRIGADE_CUDA_REPORT(cudaSetDevice(-1)));
  const std::string text = captured.text();
  CHECK(text.rfind("brigade: CUDA error ", 0) == 0);
  CHECK(text.find(" in cudaSetDevice(-1) at ") != std::string::npos);
  CHECK(text.find("error_test.cpp:") != std::string::npos);
  // ...reported, it is read, as BRIGADE_CUDA_CHECK reads it: the next check does not see it.
  // (Without a usable GPU, no driver, every call fails anew, cudaGetLastError included.)
  if (brigade::cuda_device_count() > 0) CHECK(cudaGetLastError() == cudaSuccess);
}
#endif

TEST_CASE("a reported library error is the thrown one's text, on stderr") {
  brigade::testing::StderrCapture captured;
  brigade::detail::report_library_error("cuDNN", "cudnnDestroyTensorDescriptor(x)",
                                        "kernels/x.cpp", 7, 3, "CUDNN_STATUS_BAD_PARAM");
  CHECK(captured.text() ==
        "brigade: cuDNN error 3 (CUDNN_STATUS_BAD_PARAM) in cudnnDestroyTensorDescriptor(x) at "
        "kernels/x.cpp:7\n");
}

// Text from a file, made fit for a terminal: valid UTF-8 stays as written, every other byte
// (control bytes, and bytes >= 0x80 that are no valid UTF-8) is shown as \xNN.
TEST_CASE("printable escapes control bytes and invalid UTF-8, keeps valid UTF-8") {
  using brigade::printable;
  CHECK(printable("conv2d\r\x7f") == "conv2d\\x0d\\x7f");
  CHECK(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // é, €, an emoji
  CHECK(printable("a\xff\xfe" "b") == "a\\xff\\xfeb");
  CHECK(printable("\xc3" "a") == "\\xc3" "a");                   // a sequence cut short
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                  // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");         // a UTF-16 surrogate
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  CHECK(printable("\xc2\x9b" "31m") == "\\xc2\\x9b" "31m");      // C1 control CSI
  // The cut never splits a character: a sequence that does not fit is left to the "...".
  CHECK(printable("ab\xc3\xa9", 3) == "ab...");
  CHECK(printable("ab\xc3\xa9", 4) == "ab\xc3\xa9");
}
