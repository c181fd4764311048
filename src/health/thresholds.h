// The numbers behind the telemetry rules. Defaults are the anchors' (DCGM, gpud, the InfiniBand
// counter guidance), kept here so that they are visible and tunable.
#pragma once

#include <cstdint>

#include "common/time.h"

namespace hangar::health {

struct Thresholds {
  // ---- GPU memory (DCGM) ----
  uint32_t retired_pages_fatal = 63;                // retired pages >= this: drain for repair
  uint32_t remapped_rows_uncorrectable_warn = 512;  // uncorrectable remapped rows >= this: warn

  // ---- PCIe ----
  // An idle GPU's link drops its generation to save power, so a generation below the maximum
  // counts only while the GPU is at least this busy; a narrower width counts always.
  uint32_t pcie_busy_util_pct = 10;
  // Replays per minute are judged against ceil(lanes x 1e-12 x line rate x 60 s) (DCGM).

  // ---- thermal and power (gpud) ----
  Duration thermal_window = kMinute;  // any thermal violation time in it: warn
  Duration hw_slowdown_window = 10 * kMinute;
  double hw_slowdown_per_minute = 0.6;  // events/min over the window at or above: degrade

  // ---- InfiniBand (per port) ----
  double ib_symbol_error_per_s = 10;   // above: degrade
  double ib_symbol_error_per_h = 120;  // above: fatal
  double ib_link_error_recovery_per_min = 5;
  double ib_port_rcv_errors_per_s = 10;
  double ib_port_xmit_discards_per_s = 100;
  double ib_local_ack_timeout_per_s = 1;
  // link_downed, local_link_integrity_errors, excessive_buffer_overrun_errors, rnr_nak_retry_err:
  // any increase is fatal.

  // ---- how long findings last ----
  Duration rate_quiet = 10 * kMinute;  // a rate warning closes after this long below its limit
  Duration app_xid_window = kDay;      // Xid 13/31/43 twice on one GPU within this: suspect
  Duration xid_incident = kMinute;     // the same Xid again within this is the same incident
  // The same for Xid 13/31/43. A crash prints its burst within a second (one line per SM or
  // channel), read over at most two heartbeats; an application that crashes again on the same GPU
  // seconds after a restart is a second incident -- the very pattern the 24 h rule looks for.
  Duration app_xid_incident = 5 * kSecond;
  Duration info_quiet = kHour;  // informational findings fade after this
  // A straggler's node stays suspect this long after its rank was last reported slow (or until a
  // validation passes or a remedy is recorded).
  Duration straggler_quiet = kHour;
};

}  // namespace hangar::health
