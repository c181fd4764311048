// The reservations and maintenance windows `hangar sim windows` replays (docs/sim-windows.md): a
// YAML file whose `reservations:` list holds what `hangar reservation create` sends, field for
// field (name, nodes, start, end or duration, users, queues, maintenance), read by the
// controller's own parser and checked against each other as the controller's book checks them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "controller/reservation/reservation_book.h"

namespace hangar::sim {

using SimReservation = controller::reservation::Reservation;

StatusOr<std::vector<SimReservation>> ParseSimReservations(std::string_view text,
                                                           const std::string& source,
                                                           const cluster::Topology& topology);
StatusOr<std::vector<SimReservation>> LoadSimReservations(const std::string& path,
                                                          const cluster::Topology& topology);

}  // namespace hangar::sim
