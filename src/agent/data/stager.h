// Stages one artifact into the node's cache (docs/data.md), reading each chunk where
// the controller's plan says: the origin (https://, http://, file://) or a peer's data port. One
// worker reads the origin (one connection per node, so the controller's cap on origin readers
// holds), four read peers; a peer that does not have a chunk and is not getting it, or stalls,
// sends that chunk back to the origin. The whole object is verified against its digest; when a
// mismatch involved peers' bytes the agent restages from the origin alone once, so a bad peer
// cannot fail a job, and a bad origin copy fails the staging with what its content hashed to.
// A file:// origin is opened as the job's user, only under the cluster's data.file_roots
// (open_as_user.h), before anything is staged.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "agent/data/object_cache.h"
#include "agent/open_as_user.h"
#include "agent/runner/task_credentials.h"
#include "common/status.h"
#include "common/time.h"
#include "proto/agent.pb.h"

namespace hangar::agent::data {

struct StageOutcome {
  bool ok = false;
  std::string message;  // why not, naming the artifact and its source
  int64_t origin_bytes = 0;
  int64_t peer_bytes = 0;
  Duration took = 0;
};

struct StagerOptions {
  int peer_workers = 4;
  Duration peer_wait = 5 * kSecond;    // one long-poll
  Duration peer_stall = 30 * kSecond;  // a peer that gains no chunk this long is given up
  Duration origin_timeout = 120 * kSecond;
  Duration peer_grace = 3 * kSecond;  // a peer that has not begun staging yet, at first
};

class Stager {
 public:
  Stager(ObjectCache* cache, std::function<std::string()> token, Clock* clock,
         StagerOptions o = {});
  // `who`: the job's user, who must be able to read a file:// source (nullopt: the agent's own).
  StageOutcome Stage(const pb::ArtifactStage& s, const std::optional<TaskCredentials>& who,
                     const std::atomic<bool>* stop);

 private:
  StageOutcome Attempt(const pb::ArtifactStage& s, const std::optional<TaskCredentials>& who,
                       bool origin_only, const std::atomic<bool>* stop);
  ObjectCache* cache_;
  std::function<std::string()> token_;
  Clock* clock_;
  StagerOptions o_;
};

// Reads [offset, offset+length) of an origin URL (https://, http://); the error names the source
// and what it answered. file:// sources are opened with OpenFileSource instead.
StatusOr<std::string> ReadOrigin(const std::string& source, int64_t total, int64_t offset,
                                 int64_t length, Duration timeout);

// A file:// source (s.source()) opened as `who`, under s.file_roots(), and checked to have the
// size the job says. A file the user cannot open gets the one sentence OpenAsUser gives.
StatusOr<OpenedPath> OpenFileSource(const pb::ArtifactStage& s,
                                    const std::optional<TaskCredentials>& who);

}  // namespace hangar::agent::data
