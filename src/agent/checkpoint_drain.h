// Checkpoints at NVMe speed: with `hangar agent --scratch-dir DIR` a task
// writes its checkpoints to node-local scratch (HANGAR_CHECKPOINT_DIR=DIR/checkpoints/job-N) and
// the agent drains them, in the background, to the shared checkpoint store (the controller's
// --checkpoint-root/job-N, HANGAR_CHECKPOINT_STORE), where a requeued job finds them on any node.
//
// The store's layout, for a job whose store path is ROOT/job-N:
//
//   ROOT/job-N                   a symbolic link to the newest durable generation, replaced by
//                                rename(2) (atomic on every POSIX file system, NFS included)
//   ROOT/.job-N.gen-0000000007   a generation: a complete checkpoint tree, never changed once
//                                published (files that did not change since the previous one are
//                                hard links to it)
//   ROOT/.job-N.gen-0000000008.tmp   a drain in progress; never read, removed by the next drain
//   ROOT/.job-N.lock             flock(2)ed by every drain (exclusive) and restore (shared)
//
// A drain copies the node's files into a new generation, fsyncs every file and folder, renames it
// into place and only then points the link at it: a reader sees the old checkpoint or the new one
// whole, never half of one; a drain that fails leaves the previous generation where it was. The
// tasks of a gang on several nodes each drain their own files into the same store: a drain starts
// from the current generation and lays this node's files over it, so that what the other nodes
// published stays; a file this node had published (its last drain's manifest) and has since
// removed is removed (a task rotating its checkpoints).
//
// Agents without --scratch-dir see ROOT/job-N as today (a directory reached through the link), so
// a cluster may mix both. A plain directory at ROOT/job-N (written by such an agent, or before
// scratch dirs) is taken as generation 0 by the first drain.
//
// Each node keeps, beside its local copy, DIR/checkpoints/.job-N.synced: the generation it holds
// and the files (size, mtime) it last drained or restored. Before a task starts, the agent restores
// the store's generation into local scratch unless this node holds that generation already (then
// the local copy, perhaps with newer files the task wrote after, is kept).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::agent {

// Who the copied files belong to (the task's user); nullopt: whoever the agent runs as.
struct FileOwner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// The newest durable generation of the store at `store_dir`: its name (".job-N.gen-0000000007",
// or "plain" for a plain directory there) and its path; nullopt when the store holds nothing.
struct StoreGeneration {
  std::string name;
  std::string path;
  uint64_t seq = 0;  // 0 for "plain"
};
std::optional<StoreGeneration> CurrentGeneration(const std::string& store_dir);

// For agents without scratch dirs: the directory the store's link points at, when `path` is such a
// link (to a generation beside it); otherwise `path` itself.
std::string ResolveStoreLink(const std::string& path);

struct RestoreResult {
  bool restored =
      false;  // copied from the store (else the local copy was kept, or nothing was there)
  std::string generation;  // what local scratch holds now ("" when nothing)
  std::string why;         // one line for the log
  int64_t bytes = 0;       // copied
  Duration took = 0;
};

// Makes `local_dir` hold the newest checkpoint of the job: the store's generation, unless local
// scratch holds that one (or a newer) already. `local_dir` exists (owned by `owner`) afterwards.
StatusOr<RestoreResult> RestoreCheckpoint(const std::string& store_dir,
                                          const std::string& local_dir,
                                          const std::optional<FileOwner>& owner,
                                          Duration lock_timeout = 60 * kSecond);

struct DrainResult {
  std::string generation;  // the one published
  int64_t files_copied = 0;
  int64_t bytes_copied = 0;
  int64_t files_linked = 0;  // unchanged since the previous generation: hard links to it
  Duration took = 0;
};

// Publishes `local_dir` into the store as a new generation (see above). On failure the store keeps
// its previous generation and the error says what failed and where.
StatusOr<DrainResult> DrainCheckpoint(const std::string& local_dir, const std::string& store_dir,
                                      const std::optional<FileOwner>& owner,
                                      Duration lock_timeout = 60 * kSecond);

// Drains in the background, one at a time, in the order asked. Each request gets one call of
// `done`, on the drainer's thread.
class CheckpointDrainer {
 public:
  struct Request {
    uint64_t job_id = 0;
    std::string task_id;  // whose report it is
    std::string local_dir, store_dir;
    std::optional<FileOwner> owner;
    std::string path;  // what the task reported (local), and the step
    uint64_t step = 0;
  };
  using Done = std::function<void(const Request&, const StatusOr<DrainResult>&)>;

  explicit CheckpointDrainer(Done done, Duration lock_timeout = 60 * kSecond);
  ~CheckpointDrainer();  // finishes the drain in progress; the waiting ones are dropped
  CheckpointDrainer(const CheckpointDrainer&) = delete;
  CheckpointDrainer& operator=(const CheckpointDrainer&) = delete;

  void Enqueue(Request r) HANGAR_EXCLUDES(mu_);

 private:
  void Loop() HANGAR_EXCLUDES(mu_);

  Done done_;
  Duration lock_timeout_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_ HANGAR_GUARDED_BY(mu_);
  bool stop_ HANGAR_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hangar::agent
