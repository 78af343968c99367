// The tests of pipeline/distributed/ run as MPI programs: every rank runs the same doctest
// cases in the same order (so collectives and links pair up), under one MpiSession made by
// mpi_main.cpp. mpi_session() is that session.
#pragma once

#include "pipeline/distributed/mpi_session.h"

namespace brigade::testing {

distributed::MpiSession& mpi_session();

}  // namespace brigade::testing
