// Slurm's reservation commands over Hangar's reservations (docs/reservations.md):
//   scontrol create reservation ReservationName=maint1 StartTime=2027-01-04T10:00 Duration=60
//       Nodes=node-[1-2] Flags=MAINT
//   scontrol delete ReservationName=maint1
//   scontrol show reservation [NAME]
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/client.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::cli::slurm {

// The POST /v1/reservations body for scontrol create reservation's KEY=VALUE words (keys in any
// case): ReservationName, StartTime (UTC: 2027-01-04T10:00[:SS], or now[+N[minutes|hours|days]]),
// EndTime or Duration (minutes, HH:MM:SS, D-HH:MM:SS), Nodes (a host list) or NodeCnt (picked
// under one leaf switch), Users, Accounts (Hangar's queues), Flags=MAINT (a maintenance window).
StatusOr<nlohmann::json> ReservationFromScontrol(const std::vector<std::string>& pairs, Time now);

// scontrol's reservation verbs (`words` after the options); -1 when `words` is none of them.
int ScontrolReservation(ApiClient* api, const std::vector<std::string>& words, Time now);

}  // namespace hangar::cli::slurm
