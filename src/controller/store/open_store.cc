// OpenStore: a store URL to the store behind it.
#include "controller/store/postgres_conn.h"
#include "controller/store/state_store.h"
#include "controller/store/store_integrity.h"

namespace hangar::controller {
namespace {

bool IsPostgres(const std::string& url) {
  return url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0;
}

}  // namespace

StatusOr<std::unique_ptr<StateStore>> OpenStore(const std::string& url,
                                                const StoreOpenOptions& options) {
  if (url == "memory://" || url == "memory") return NewMemoryStore();
  const std::string prefix = "sqlite://";
  if (url.compare(0, prefix.size(), prefix) == 0) {
    const std::string path = url.substr(prefix.size());
    if (options.check) HANGAR_RETURN_IF_ERROR(CheckSqliteFileAtOpen(path, options.start_new));
    HANGAR_ASSIGN_OR_RETURN(auto store, OpenSqliteStore(path));
    return WithIntegrityChecks(std::move(store), options, options.check ? path : "");
  }
  if (IsPostgres(url)) {
    HANGAR_ASSIGN_OR_RETURN(auto store, OpenPostgresStore(url));
    return WithIntegrityChecks(std::move(store), options, "");
  }
  return Status::InvalidArgument("store '" + ShownStoreUrl(url) +
                                 "' is not understood; use sqlite:///path/to/state.db, "
                                 "postgres://USER@HOST:PORT/DATABASE or memory://");
}

std::string ShownStoreUrl(const std::string& url) {
  if (IsPostgres(url)) return pg::RedactUrl(url);
  const auto scheme = url.find("://"), at = url.rfind('@');
  if (scheme != std::string::npos && at != std::string::npos && at > scheme) {
    return url.substr(0, scheme + 3) + "...@" + url.substr(at + 1);
  }
  return url;
}

}  // namespace hangar::controller
