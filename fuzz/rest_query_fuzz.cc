// Query strings as the REST routes see them: cpp-httplib's own parse (what the server does before
// a route runs), then the value parsers the list and log routes apply to each parameter: counts
// (limit, cursor, array, count, attempt), job states, and the time bounds since/until (UTC
// timestamps and durations back from now).
#include <httplib.h>

#include <cstddef>
#include <cstdint>

#include "api/body.h"
#include "common/time.h"
#include "fuzz_util.h"
#include "job/job_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  httplib::Params params;
  httplib::detail::parse_query_text(std::string(fuzz::AsText(data, size)), params);
  for (const auto& [name, value] : params) {
    (void)api::ParseCount(value, name, 1, INT64_MAX);
    (void)api::ParseCount(value, name, 0, 100'000);
    (void)job::ParseJobState(value);
    if (auto t = ParseUtcTimestamp(value); t.ok()) (void)FormatUtcTimestamp(*t);
    if (auto d = ParseDuration(value); d.ok()) {
      if (*d < 0) fuzz::Fail("ParseDuration gave a negative duration for '" + value + "'");
      (void)FormatDuration(*d);
    }
    (void)api::CheckUtf8(value, name);
  }
  return 0;
}
