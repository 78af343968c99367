// Device: parsing, printing, the exact error messages, CPU device configuration.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/thread_pool.h"

using brigade::Device;

TEST_CASE("device names parse and print back") {
  CHECK(Device::parse("cpu:1", 0) == Device::cpu(1));
  CHECK(Device::parse("cpu", 0) == Device::cpu(0));
  CHECK(Device::parse("cuda:1", 2) == Device::cuda(1));
  CHECK(Device::parse("cuda", 1) == Device::cuda(0));
  CHECK(Device::cpu(3).str() == "cpu:3");
  CHECK(Device::cuda(0).str() == "cuda:0");
  CHECK(Device::parse(Device::cpu(12).str()) == Device::cpu(12));  // never asks the driver
}

static std::string parse_error(const std::string& text, int cuda_devices) {
  try {
    Device::parse(text, cuda_devices);
  } catch (const brigade::Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST_CASE("bad device names are refused with a message that says what was expected") {
  CHECK(parse_error("gpu0", 2) ==
        "invalid device \"gpu0\": expected \"cpu:N\" or \"cuda:N\" with N a non-negative integer");
  CHECK(parse_error("cpu:-1", 2) ==
        "invalid device \"cpu:-1\": the index after ':' must be a non-negative integer");
  CHECK(parse_error("cpu:", 2) ==
        "invalid device \"cpu:\": the index after ':' must be a non-negative integer");
  // A non-negative integer past int's range: said so (it was called not one).
  CHECK(parse_error("cpu:99999999999", 2) ==
        "invalid device \"cpu:99999999999\": the index after ':' is too large (at most "
        "1048575: CPU devices from cpu:1048576 on are Brigade's own)");
  // The runtime's own scratch devices (a memory probe, a profiling twin) are no run's: a run
  // that named cpu:1048576 had its device reconfigured by the memory check.
  CHECK(parse_error("cpu:1048576", 2) ==
        "invalid device \"cpu:1048576\": the index after ':' is too large (at most "
        "1048575: CPU devices from cpu:1048576 on are Brigade's own)");
  CHECK(Device::parse("cpu:1048575", 2).index == 1048575);
  CHECK(parse_error("cpu:-99999999999", 2) ==
        "invalid device \"cpu:-99999999999\": the index after ':' must be a non-negative "
        "integer");
  CHECK(parse_error("cpu:1x", 2) ==
        "invalid device \"cpu:1x\": the index after ':' must be a non-negative integer");
  CHECK(parse_error("cuda:7", 2) ==
        "invalid device \"cuda:7\": this machine has 2 CUDA devices (cuda:0 to cuda:1)");
  CHECK(parse_error("cuda:1", 1) ==
        "invalid device \"cuda:1\": this machine has 1 CUDA device (cuda:0 to cuda:0)");
  CHECK(parse_error("cuda:0", 0) ==
        "invalid device \"cuda:0\": this machine has no usable CUDA device");
}

TEST_CASE("a device list parses in order, and a malformed one is refused naming the list") {
  CHECK(Device::parse_list("cpu:2,cpu:0") == std::vector<Device>{Device::cpu(2), Device::cpu(0)});
  CHECK(Device::parse_list("cpu") == std::vector<Device>{Device::cpu(0)});
  const auto refused = [](const std::string& list) {
    try {
      Device::parse_list(list);
    } catch (const brigade::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(refused("") == "device list \"\": empty (expected e.g. cpu:0,cpu:1)");
  CHECK(refused("cpu:0,") == "device list \"cpu:0,\": an empty entry");
  CHECK(refused(",cpu:0") == "device list \",cpu:0\": an empty entry");
  CHECK(refused("cpu:0,cpu:1,cpu:0") == "device list \"cpu:0,cpu:1,cpu:0\": cpu:0 is listed twice");
  CHECK(refused("cpu:0,cpu") == "device list \"cpu:0,cpu\": cpu:0 is listed twice");
  // An entry that is not a device: Device::parse's own message, which quotes the entry.
  CHECK(refused("cpu:0,gpu0").starts_with("invalid device \"gpu0\""));
}

TEST_CASE("cuda:0 on this machine agrees with cuda_device_count(), and never crashes") {
  const int count = brigade::cuda_device_count();  // 0 without GPU, driver or CUDA build
  CHECK(count >= 0);
  CHECK(brigade::no_gpu_reason().empty() == (count > 0));
  if (count == 0) {
    const std::string why = "invalid device \"cuda:0\": this machine has no usable CUDA device (" +
                            brigade::no_gpu_reason() + ")";
    CHECK_THROWS_WITH_AS(Device::parse("cuda:0"), why.c_str(), brigade::Error);
  } else {
    CHECK(Device::parse("cuda:0") == Device::cuda(0));
  }
}

// Worked from the CUDA C++ Programming Guide ("Binary Compatibility", "PTX Compatibility"):
// machine code for X.Y runs on X.Z, Z >= Y; PTX for X.Y on any capability from X.Y up.
TEST_CASE("which GPUs run kernels built for a list of architectures") {
  using brigade::ComputeCapability;
  const auto runs = [](ComputeCapability gpu, const std::vector<int>& archs) {
    return brigade::gpu_arch_refusal(Device::cuda(1), gpu, archs).empty();
  };
  const std::vector<int> built = {80, 90};  // the default -Dgpu_arch
  CHECK(runs({8, 0}, built));    // A100: sm_80's machine code
  CHECK(runs({8, 6}, built));    // RTX 3090: sm_80's, within major version 8
  CHECK(runs({8, 9}, built));    // RTX 4090, L40S
  CHECK(runs({9, 0}, built));    // H100, H200: sm_90's
  CHECK(runs({10, 0}, built));   // B200: compute_90's PTX, compiled by the driver
  CHECK(runs({12, 0}, built));   // RTX 5090: the same
  CHECK_FALSE(runs({7, 5}, built));  // T4: below 8.0, nothing
  CHECK_FALSE(runs({8, 6}, {90}));   // machine code for 9.0 only, PTX from 9.0 up
  CHECK_FALSE(runs({8, 0}, {86}));   // sm_86's code does not run on 8.0
  CHECK(runs({8, 9}, {86}));
  CHECK(runs({9, 0}, {80}));         // compute_80's PTX
  CHECK(brigade::gpu_arch_refusal(Device::cuda(1), {7, 5}, built) ==
        "device cuda:1 has compute capability 7.5; Brigade's CUDA kernels need 8.0 or later "
        "(bf16 tensor-core instructions)");
  CHECK(brigade::gpu_arch_refusal(Device::cuda(0), {8, 6}, {90}) ==
        "device cuda:0 has compute capability 8.6, which this build's CUDA kernels do not run "
        "on (machine code for 9.0, PTX for 9.0 and later): add 86 to the meson option gpu_arch "
        "and rebuild, for a build in ./build: meson configure build -Dgpu_arch=86,90 && "
        "meson compile -C build");
}

TEST_CASE("a CPU device's thread count and capacity are configurable, and checked") {
  brigade::configure_cpu_device(7, {2, 1 << 20});
  CHECK(brigade::cpu_device_options(7).threads == 2);
  CHECK(brigade::cpu_device_options(7).capacity_bytes == 1u << 20);
  CHECK(brigade::cpu_thread_pool(Device::cpu(7)).size() == 2);
  brigade::configure_cpu_device(7, {4, 0});  // reconfiguring gives later users a new pool
  CHECK(brigade::cpu_thread_pool(Device::cpu(7)).size() == 4);
  CHECK(brigade::cpu_device_options(8).threads == 1);  // the documented default
  CHECK_THROWS_WITH_AS(brigade::configure_cpu_device(7, {0, 0}),
                       "configure_cpu_device(cpu:7): threads must be at least 1, got 0",
                       brigade::Error);
  CHECK_THROWS_WITH_AS(brigade::cpu_thread_pool(Device::cuda(0)),
                       "cpu_thread_pool: cuda:0 is not a CPU device", brigade::Error);
}

TEST_CASE("sizes in messages are printed in binary units") {
  CHECK(brigade::format_bytes(512) == "512 B");
  CHECK(brigade::format_bytes(1536) == "1.5 KiB");
  CHECK(brigade::format_bytes(64ull << 20) == "64.0 MiB");
  CHECK(brigade::format_bytes(3ull << 30) == "3.0 GiB");
}
