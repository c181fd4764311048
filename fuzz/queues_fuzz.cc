// queues.yaml (`queues: [...]`, docs/queues.md) as the controller reads it, and the JSON round
// trip the store and `hangar queues` use: a tree that parses must parse again from its JSON.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "job/queue_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  auto q = job::ParseQueues(fuzz::AsText(data, size), "queues.yaml");
  if (!q.ok()) return 0;
  std::string text;
  try {
    text = job::QueuesToJson(*q).dump();
  } catch (const nlohmann::json::exception&) {
    return 0;  // names that are not UTF-8 have no JSON form; the store keeps them as given
  }
  auto back = job::ParseQueues(text, "json");
  if (!back.ok())
    fuzz::Fail("a parsed queue tree's own JSON is refused: " + back.status().message());
  return 0;
}
