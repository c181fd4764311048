#include "controller/image_resolver.h"

#include <map>

#include "common/subprocess.h"

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
    return Status::FailedPrecondition("cannot check image " + ref.Reference() + ": " + r.status().message() +
                                      "; install skopeo on the controller (scripts/install-deps.sh)");
  }
  const std::string registry = ref.registry.empty() ? "the default registry" : ref.registry;
  if (!r->ok()) {
    const job::RegistryError e = job::ClassifyRegistryError(r->err);
    if (e == job::RegistryError::kNotFound) {
      return Status::NotFound("image " + ref.Reference() + " does not exist in registry " + registry +
                              "; push it there, or fix the name or tag");
    }
    if (r->timed_out || e == job::RegistryError::kUnreachable) {
      return Status::Unavailable("registry " + registry + " did not answer for image " + ref.Reference() +
                                 " (" + r->Describe() + "); nothing was submitted: submit again when it is up");
    }
    return Status::InvalidArgument("image " + ref.Reference() + " in registry " + registry +
                                   " cannot be used: " + r->Describe());
  }
  std::string digest = r->out;
  while (!digest.empty() && (digest.back() == '\n' || digest.back() == ' ')) digest.pop_back();
  if (digest.rfind("sha256:", 0) != 0) {
    return Status::Internal("skopeo gave no digest for " + ref.Reference() + " (it printed '" + digest + "')");
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

Status CheckMounts(const job::JobSpec& spec, const std::vector<std::string>& allowed) {
  for (const auto& g : spec.tasks) {
    if (Status s = job::CheckMountsAllowed(g.container.mounts, allowed); !s.ok()) {
      return Status(s.code(), "task group '" + g.name + "': " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace hangar::controller
