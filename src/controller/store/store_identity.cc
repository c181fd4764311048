// EnsureStoreId: a store's identity, made once and kept in its meta table (so a backup and its
// restore keep it too).
#include <random>
#include <sstream>

#include "controller/store/state_store.h"

namespace hangar::controller {

StatusOr<std::string> EnsureStoreId(StateStore& store, const StoreContents& contents) {
  for (const auto& v : contents.values) {
    if (v.table == "meta" && v.key == "store_id" && !v.value.empty()) return v.value;
  }
  std::random_device rd;  // the kernel's entropy
  std::ostringstream id;
  id << std::hex;
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = rd();
    for (int shift = 28; shift >= 0; shift -= 4) id << ((word >> shift) & 0xf);
  }
  StoreBatch b;
  b.values.push_back({"meta", "store_id", id.str(), false});
  HANGAR_RETURN_IF_ERROR(store.Commit(b));
  return id.str();
}

}  // namespace hangar::controller
