// Pins a job's images at submission: every task group's `image:` tag is resolved to
// its manifest digest once, so that every node of the job, and every later attempt, runs the very
// same image. Asks the registry with skopeo (loopback registries without TLS), off the state
// thread. A site's registry mirrors and credentials come from skopeo's own configuration
// (registries.conf, auth.json), or from --registries-conf.
#pragma once

#include <condition_variable>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"
#include "job/job_spec.h"

namespace hangar::controller {

class StateOwner;

struct ImageResolverOptions {
  std::string skopeo = "skopeo";
  std::string registries_conf;  // empty: skopeo's default
  Duration timeout = 30 * kSecond;
};

// Rewrites each container group's image to repository@digest. Errors: NotFound names the image
// and the registry; Unavailable when the registry does not answer (the submission is accepted
// with its tags, and ImagePinner pins them once it does); FailedPrecondition when skopeo is
// missing.
Status PinImages(job::JobSpec* spec, const ImageResolverOptions& options);

// Pins, in the background, the images of jobs accepted while their registry was down
// (ClusterState::UnpinnedJobs): every second while none fails, backing off to 30 s while their
// registry stays down. A job whose image turns out not to exist fails with that sentence.
class ImagePinner {
 public:
  ImagePinner(StateOwner* owner, ImageResolverOptions options);
  ~ImagePinner();                    // stops and joins
  void Wake() HANGAR_EXCLUDES(mu_);  // a submission was accepted unpinned: try now

 private:
  void Loop() HANGAR_EXCLUDES(mu_);
  void PinWhileRunning() HANGAR_EXCLUDES(mu_);  // Loop's work, until stopped
  StateOwner* owner_;
  ImageResolverOptions options_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ HANGAR_GUARDED_BY(mu_) = false;
  bool woken_ HANGAR_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Whether every mount of the spec is under the cluster's containers.mounts_allowed.
Status CheckMounts(const job::JobSpec& spec, const std::vector<std::string>& allowed);

// Whether the spec names a file:// artifact source, and whether each is under the cluster's
// data.file_roots (as spelled: the agent checks where links lead, as the job's user).
bool HasFileSources(const job::JobSpec& spec);
Status CheckFileSources(const job::JobSpec& spec, const std::vector<std::string>& roots);

}  // namespace hangar::controller
