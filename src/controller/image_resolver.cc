#include "controller/image_resolver.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "common/subprocess.h"
#include "controller/state_owner.h"

namespace hangar::controller {
namespace {

StatusOr<std::string> Resolve(const job::ImageRef& ref, const ImageResolverOptions& o) {
  std::vector<std::string> argv = {o.skopeo};
  if (!o.registries_conf.empty()) argv.insert(argv.end(), {"--registries-conf", o.registries_conf});
  argv.insert(argv.end(), {"inspect", "--retry-times", "0", "--format", "{{.Digest}}"});
  if (ref.OnLoopback()) argv.push_back("--tls-verify=false");
  argv.push_back("docker://" + ref.Reference());
  CommandOptions co;
  co.timeout = o.timeout;
  auto r = RunCommand(argv, co);
  if (!r.ok()) {
    return Status::FailedPrecondition(
        "cannot check image " + ref.Reference() + ": " + r.status().message() +
        "; install skopeo on the controller (scripts/install-deps.sh)");
  }
  const std::string registry = ref.registry.empty() ? "the default registry" : ref.registry;
  if (!r->ok()) {
    const job::RegistryError e = job::ClassifyRegistryError(r->err);
    if (e == job::RegistryError::kNotFound) {
      return Status::NotFound("image " + ref.Reference() + " does not exist in registry " +
                              registry + "; push it there, or fix the name or tag");
    }
    if (r->timed_out || e == job::RegistryError::kUnreachable) {
      return Status::Unavailable("registry " + registry + " did not answer for image " +
                                 ref.Reference() + " (" + r->Describe() + ")");
    }
    return Status::InvalidArgument("image " + ref.Reference() + " in registry " + registry +
                                   " cannot be used: " + r->Describe());
  }
  std::string digest = r->out;
  while (!digest.empty() && (digest.back() == '\n' || digest.back() == ' ')) digest.pop_back();
  if (digest.rfind("sha256:", 0) != 0) {
    return Status::Internal("skopeo gave no digest for " + ref.Reference() + " (it printed '" +
                            digest + "')");
  }
  return digest;
}

}  // namespace

Status PinImages(job::JobSpec* spec, const ImageResolverOptions& options) {
  std::map<std::string, std::string> pinned;  // as written -> pinned
  for (auto& g : spec->tasks) {
    if (g.container.empty()) continue;
    auto& slot = pinned[g.container.image];
    if (slot.empty()) {
      HANGAR_ASSIGN_OR_RETURN(job::ImageRef ref, job::ParseImageRef(g.container.image));
      if (ref.digest.empty()) {
        HANGAR_ASSIGN_OR_RETURN(ref.digest, Resolve(ref, options));
      }
      slot = ref.Reference();
    }
    g.container.image = slot;
  }
  return Status::Ok();
}

ImagePinner::ImagePinner(StateOwner* owner, ImageResolverOptions options)
    : owner_(owner), options_(std::move(options)), thread_([this] { Loop(); }) {}

ImagePinner::~ImagePinner() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ImagePinner::Wake() {
  {
    MutexLock l(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void ImagePinner::Loop() {
  try {
    PinWhileRunning();
  } catch (const StoreCommitRefused&) {  // the store failed: the controller is stopping
  }
}

void ImagePinner::PinWhileRunning() {
  Duration backoff = kSecond;
  for (;;) {
    {
      MutexLock l(mu_);
      l.WaitFor(cv_, std::chrono::milliseconds(backoff),
                [&]() HANGAR_REQUIRES(mu_) { return stop_ || woken_; });
      if (stop_) return;
      woken_ = false;
    }
    auto work = owner_->Call<std::vector<std::pair<sched::JobId, job::JobSpec>>>(
        [](ClusterState& st, Effects*) { return st.UnpinnedJobs(64); });
    bool down = false;
    for (auto& [id, spec] : work) {
      {
        MutexLock l(mu_);
        if (stop_) return;
      }
      Status s = PinImages(&spec, options_);
      down |= s.code() == StatusCode::kUnavailable;
      const StatusOr<job::JobSpec> answer =
          s.ok() ? StatusOr<job::JobSpec>(std::move(spec)) : StatusOr<job::JobSpec>(s);
      if (!s.ok() && s.code() != StatusCode::kUnavailable) {
        spdlog::warn("job {}: its image cannot be pinned: {}", id, s.message());
      }
      owner_->Call<int>([&, id = id](ClusterState& st, Effects* fx) {
        st.OnPinned(id, answer, owner_->clock()->Now(), fx);
        return 0;
      });
      // A registry that does not answer may take skopeo's whole timeout per image: the rest wait
      // for the next round rather than hold this one for minutes.
      if (down) break;
    }
    backoff = down ? std::min<Duration>(backoff * 2, 30 * kSecond) : kSecond;
  }
}

Status CheckMounts(const job::JobSpec& spec, const std::vector<std::string>& allowed) {
  for (const auto& g : spec.tasks) {
    if (Status s = job::CheckMountsAllowed(g.container.mounts, allowed); !s.ok()) {
      return Status(s.code(), "task group '" + g.name + "': " + s.message());
    }
  }
  return Status::Ok();
}

bool HasFileSources(const job::JobSpec& spec) {
  for (const auto& g : spec.tasks) {
    for (const auto& a : g.artifacts) {
      for (const auto& o : a.objects) {
        if (o.source.starts_with("file://")) return true;
      }
    }
  }
  return false;
}

Status CheckFileSources(const job::JobSpec& spec, const std::vector<std::string>& roots) {
  for (const auto& g : spec.tasks) {
    for (const auto& a : g.artifacts) {
      if (Status s = job::CheckFileSources(a, roots); !s.ok())
        return Status(s.code(), "task group '" + g.name + "': " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace hangar::controller
