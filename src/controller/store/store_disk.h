// What a store says when its disk is full: a commit that could not be written for want of space
// is refused as a whole (nothing of it is kept), with a sentence that names the device to free.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "common/status.h"
#include "common/time.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

// ResourceExhausted: "the store's disk is full: free space on DEVICE (mounted at MOUNT, holding
// PATH); nothing was accepted". `path` is the store's file (or, for a server, what it names).
Status StoreDiskFull(const std::string& path);

// True for StoreDiskFull's status.
bool IsStoreDiskFull(const Status& s);

// Commits one small row (meta/started_ms = now) before a controller serves. While the store's disk
// is full it says so every `every` (`log`) and tries again, rather than start a controller whose
// first commit fails and stops it, over and over. Returns the first other failure at once, and
// OK when the row went in or `stop` was set.
Status AwaitRoomToCommit(StateStore& store, Time now, const std::atomic<bool>& stop, Duration every,
                         const std::function<void(const Status&)>& log);

// The device holding `path` and where it is mounted, from /proc/self/mountinfo: e.g.
// {"/dev/nvme0n1p2", "/var/lib"}; empty strings when it cannot be told.
struct MountOf {
  std::string device, mount_point;
};
MountOf FindMount(const std::string& path);

}  // namespace hangar::controller
