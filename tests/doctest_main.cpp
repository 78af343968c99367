// The main() of most test executables: doctest's, with its command line
// (e.g. `build/tests/engine/test_engine -tc="stream*"` runs matching cases only). Those that
// need more before doctest runs have their own: the MPI tests (test_transport, test_nccl:
// tests/pipeline/distributed/mpi_main.cpp), test_nccl_emu (nccl_emulation_test.cpp: MPI),
// test_cuda_vendor (vendor_test.cpp: a skip without a GPU) and the fuzz replays
// (tests/fuzz/replay_main.cpp, no doctest).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
