// Where each node staging an artifact reads each chunk from (docs/data.md): the
// controller is the tracker. A swarm's members are the nodes that hold the object (first) and
// the nodes staging it, in the order they joined. Each chunk has a root -- a holder, or, when no
// node holds the object, one of the first `roots` stagers, which reads that chunk from the
// origin -- and every other member reads it from its parent in a `fanout`-ary tree over the
// members, rotated per chunk so that every root and inner node carries its share. A member's
// parent always joined before it, so a member that joins later never changes an earlier plan;
// and the origin serves each chunk once, to at most `roots` readers at a time.
#pragma once

#include <cstdint>
#include <vector>

namespace hangar::controller {

// Per chunk, the member that `position` reads it from (an index < the swarm's size, never
// `position`), or -1 for the origin. `holders` members at the front hold the object already (then
// no one reads the origin); otherwise members [0, roots) are the origin readers. Needs
// position >= holders, fanout >= 1, and 1 <= roots <= the members there were when the swarm
// began (the origin readers must exist).
std::vector<int32_t> PlanChunkSources(int64_t chunks, int holders, int roots, int position,
                                      int fanout);

}  // namespace hangar::controller
