#include "agent/container/podman_env.h"

#include <set>

namespace hangar::agent {

bool PodmanMustNotInherit(const std::string& name) {
  static const char* const kPrefixes[] = {"LD_",     "CONTAINERS_", "_CONTAINERS_", "CONTAINER_",
                                          "PODMAN_", "BUILDAH_",    "STORAGE_",     "REGISTRY_",
                                          "XDG_",    "CNI_",        "NETAVARK_",    "CONMON_"};
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  static const std::set<std::string> kNames = {
      "PATH",          "HOME",         "TMPDIR",      "SHELL",          "GODEBUG",
      "GOGC",          "GOMAXPROCS",   "GOMEMLIMIT",  "GOTRACEBACK",    "GOCOVERDIR",
      "SSL_CERT_FILE", "SSL_CERT_DIR", "http_proxy",  "https_proxy",    "no_proxy",
      "all_proxy",     "HTTP_PROXY",   "HTTPS_PROXY", "NO_PROXY",       "ALL_PROXY",
      "NOTIFY_SOCKET", "LISTEN_FDS",   "LISTEN_PID",  "LISTEN_FDNAMES", "DBUS_SESSION_BUS_ADDRESS"};
  return kNames.count(name) > 0;
}

}  // namespace hangar::agent
