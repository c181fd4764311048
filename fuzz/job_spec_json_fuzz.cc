// A job spec as the REST API and the store read it: a JSON document (nlohmann, with the API's
// UTF-8 and nesting checks first) into JobSpecFromJson, then the batch fields' own parsers
// (array ranges, dependency flags) on the text the document carries.
#include <cstddef>
#include <cstdint>

#include "api/body.h"
#include "fuzz_util.h"
#include "job/batch_spec.h"
#include "job/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  const std::string_view text = fuzz::AsText(data, size);
  // The flag parsers take any bytes (`hangar submit --after` passes the shell's); the JSON
  // document only what the API's UTF-8 check lets through.
  (void)job::ParseArraySpec(text);
  (void)job::ParseDependencyFlag(text);
  if (!api::CheckUtf8(text, "the text").ok()) return 0;
  auto body = api::ParseObject(text, "{\"name\": \"x\"}");
  if (!body.ok()) return 0;
  (void)job::DependenciesFromJson(*body);
  auto spec = job::JobSpecFromJson(*body);
  if (!spec.ok()) return 0;
  (void)job::ValidateJobSpec(*spec);
  const nlohmann::json j = job::JobSpecToJson(*spec);
  auto back = job::JobSpecFromJson(j);
  if (!back.ok()) fuzz::Fail("an accepted spec's own JSON is refused: " + back.status().message());
  if (job::JobSpecToJson(*back) != j) fuzz::Fail("an accepted spec changes on its JSON round trip");
  (void)api::SafeDump(j);
  return 0;
}
