// A job file as `hangar submit` and the controller read it: YAML (JSON is YAML too), then the
// checks any cluster applies, then the JSON round trip the store and the API use. A spec that
// parses must come back from its own JSON unchanged.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "job/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  auto spec = job::ParseJobSpec(fuzz::AsText(data, size), "job.yaml");
  if (!spec.ok()) return 0;
  (void)job::ValidateJobSpec(*spec);
  (void)job::RequireAbsoluteWorkdirs(*spec);
  (void)spec->TotalReplicas();
  (void)spec->TotalMilliGpu();
  const nlohmann::json j = job::JobSpecToJson(*spec);
  auto back = job::JobSpecFromJson(j);
  if (!back.ok()) fuzz::Fail("a parsed spec's own JSON is refused: " + back.status().message());
  if (job::JobSpecToJson(*back) != j) fuzz::Fail("a parsed spec changes on its JSON round trip");
  job::ResolveWorkdirs(&*spec, "/home/ada/proj");
  return 0;
}
