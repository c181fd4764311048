// OpenStore: a store URL to the store behind it.
#include "controller/store/state_store.h"

namespace hangar::controller {

StatusOr<std::unique_ptr<StateStore>> OpenStore(const std::string& url) {
  if (url == "memory://" || url == "memory") return NewMemoryStore();
  const std::string prefix = "sqlite://";
  if (url.compare(0, prefix.size(), prefix) == 0) return OpenSqliteStore(url.substr(prefix.size()));
  return Status::InvalidArgument("store '" + url +
                                 "' is not understood; use sqlite:///path/to/state.db or memory://");
}

}  // namespace hangar::controller
