#include "common/tls_files.h"

#include <fstream>
#include <sstream>

namespace hangar {

StatusOr<TlsFiles> ResolveTls(const std::string& dir, const std::string& stem, TlsFiles f) {
  if (!dir.empty()) {
    if (f.ca.empty()) f.ca = dir + "/ca.crt";
    if (f.cert.empty()) f.cert = dir + "/" + stem + ".crt";
    if (f.key.empty()) f.key = dir + "/" + stem + ".key";
  }
  if (f.empty()) return f;
  if (f.ca.empty() || f.cert.empty() || f.key.empty()) {
    return Status::InvalidArgument(
        "TLS needs all three of --tls-ca, --tls-cert and --tls-key (or --tls-dir DIR as "
        "written by `hangar certs`)");
  }
  return f;
}

StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound("cannot read " + path +
                            "; make the cluster's certificates with `hangar certs init` and "
                            "`hangar certs issue` (docs/operations.md)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN") == std::string::npos)
    return Status::InvalidArgument(path + " is not a PEM file");
  return ss.str();
}

}  // namespace hangar
