// A container registry for tests (issue 17): Debian's docker-registry on 127.0.0.1 and a free
// port, its storage in a temp dir; and test images built from busybox-static (no outside
// registry exists here) with a podman store of their own, pushed to it. Everything it starts is
// stopped, and everything it writes removed, when it goes away.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace hangar::testing {

// The containers.conf this host needs for podman (../shared/reference/containers.md), written
// into `dir`; returns its path.
std::string WritePodmanConf(const std::string& dir);

class LoopbackRegistry {
 public:
  explicit LoopbackRegistry(const std::string& dir);  // starts it; ok() says whether it runs
  ~LoopbackRegistry();
  bool ok() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  // Builds repository:tag from busybox (plus `files`: path in image -> content, and `pad_mb` of
  // random data, for size), pushes it, and returns "127.0.0.1:PORT/repository:tag"; "" and a
  // logged reason on failure.
  std::string Push(const std::string& repository, const std::string& tag,
                   const std::vector<std::pair<std::string, std::string>>& files = {},
                   int pad_mb = 0);
  void Stop();   // the registry goes down (a test of an unreachable registry)
  void Start();  // and comes back, on the same port and storage

 private:
  std::string dir_;
  std::string conf_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// Removes every container of every podman store under `root` (agents' <state>/podman/storage).
void RemoveContainersUnder(const std::string& root);
// Detaches every mount under `root` (what podman's overlay storage leaves), deepest first.
void UnmountUnder(const std::string& root);

}  // namespace hangar::testing
