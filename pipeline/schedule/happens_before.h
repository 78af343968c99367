// Happens-before: the proof that lowered lists cannot deadlock, or the cycle that says why
// they would.
//
// One node per instruction; an edge a -> b says "a must have happened before b can":
//   order     a is right before b in a device's list (a device issues its list in order,
//             and a receive holds up everything after it);
//   transfer  a is the send whose tensor the receive b waits for;
//   data      b uses what a made on the same device (F before its B, a receive before the
//             compute that uses it, a compute before the send of its result, and, with every
//             stage on one device, stage s-1's F before stage s's F).
// The lists can run to the end exactly when this graph has no cycle: without one, a
// topological order is an execution in which every instruction finds what it waits for;
// with one, no instruction on it can ever start. Sends never wait for their receivers
// (lowering.h), so there are no other waits to add.
//
// The graph also gives the lowered grid its clock: the tick of an instruction is the length
// of the longest chain of edges before it (each instruction takes one tick, as in dry_run.h).
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule/grid.h"
#include "pipeline/schedule/lowering.h"

namespace brigade::pipeline {

enum class Edge { Order, Transfer, Data };

struct Step {
  Cell from, to;  // from happens before to
  Edge why;
};

struct HappensBefore {
  std::vector<std::vector<int>> tick;  // tick[d][i]; -1: never (behind a cycle, or behind a
                                       // receive whose send is nowhere)
  int ticks = 0;
  std::vector<Step> cycle;  // a cycle, edge after edge; empty when there is none
  bool acyclic() const { return cycle.empty(); }
};

// Stages and micro-batches must be in range (validate() checks that first). A receive with
// no send never runs; a compute with no receive has no edge for it (validate() reports both).
HappensBefore happens_before(const LoweredSchedule& s);

// The cycle told as waits, from its first receive: "0RB0 at d0 position 2 waits for 1SB0 at
// d1 position 3, which comes after 1RF1 at d1 position 0, which waits for ...".
std::string describe_cycle(const LoweredSchedule& s, const HappensBefore& hb);

// The cell a cycle is reported at: its first receive (or first step) on the lowest device.
Cell cycle_cell(const HappensBefore& hb, const LoweredSchedule& s);

}  // namespace brigade::pipeline
