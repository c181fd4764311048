// REST request bodies as the routes read them (src/api/body.h): the UTF-8 and nesting checks,
// the object parse, then typed fields and the RunAs and dependency objects a job body carries.
// Whatever is accepted must dump back to JSON without throwing (SafeDump is what answers use).
#include <cstddef>
#include <cstdint>

#include "api/body.h"
#include "fuzz_util.h"
#include "job/batch_spec.h"
#include "job/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  const std::string_view text = fuzz::AsText(data, size);
  (void)api::CheckUtf8(text, "the body");
  (void)api::CheckNesting(text, "the body", 4);
  auto obj = api::ParseObject(text, "{\"reason\": \"bad fan\"}");
  if (!obj.ok()) return 0;
  if (!obj->is_object()) fuzz::Fail("ParseObject accepted something that is not an object");
  for (const char* key : {"reason", "name", "user", "queue", "state", "role", "node"}) {
    (void)api::OptString(*obj, key);
  }
  for (const char* key : {"count", "priority", "limit", "replicas", "attempt"}) {
    (void)api::OptInt(*obj, key, 0, 1'000'000);
    (void)api::OptInt(*obj, key, INT64_MIN, INT64_MAX);
  }
  if (auto r = obj->find("run_as"); r != obj->end()) (void)job::RunAs::FromJson(*r);
  if (auto a = obj->find("after"); a != obj->end()) (void)job::DependenciesFromJson(*a);
  (void)api::SafeDump(*obj);
  return 0;
}
