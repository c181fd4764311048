#include "cli/certs.h"

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/cli_common.h"
#include "cluster/cluster_yaml.h"

namespace hangar::cli {
namespace {

namespace fs = std::filesystem;

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

std::string OpenSslError(const std::string& what) { return what + " failed (OpenSSL)"; }

StatusOr<Pkey> NewKey() {
  Pkey k(EVP_EC_gen("P-256"));
  if (!k) return Status::Internal(OpenSslError("making an EC P-256 key"));
  return k;
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return Status::Internal(OpenSslError("the certificate extension " + value));
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return Status::Ok();
}

// A certificate for `key` named `cn`, signed by (issuer, issuer_key), or self-signed when issuer
// is null. `extensions` are (nid, value) in OpenSSL's config syntax.
StatusOr<Cert> MakeCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key,
                        int days, const std::vector<std::pair<int, std::string>>& extensions) {
  Cert c(X509_new());
  if (!c) return Status::Internal(OpenSslError("X509_new"));
  X509_set_version(c.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -60 * 60);  // an hour of clock skew
  X509_gmtime_adj(X509_getm_notAfter(c.get()), static_cast<long>(days) * 24 * 60 * 60);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("Hangar"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(c.get(), issuer ? X509_get_subject_name(issuer) : name);
  for (const auto& [nid, value] : extensions) {
    HANGAR_RETURN_IF_ERROR(AddExtension(c.get(), issuer ? issuer : c.get(), nid, value));
  }
  if (X509_sign(c.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0) {
    return Status::Internal(OpenSslError("signing the certificate"));
  }
  return c;
}

Status WritePem(const std::string& path, mode_t mode, const std::function<int(FILE*)>& write) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  FILE* f = std::fopen(tmp.c_str(), "wx");
  if (!f) return Status::Unavailable("cannot write " + tmp + "; is the directory writable?");
  ::fchmod(fileno(f), mode);
  const bool ok = write(f) == 1;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Unavailable("cannot write " + path);
  return Status::Ok();
}

Status WritePair(const std::string& dir, const std::string& stem, X509* cert, EVP_PKEY* key) {
  HANGAR_RETURN_IF_ERROR(WritePem(dir + "/" + stem + ".key", 0600, [&](FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  }));
  return WritePem(dir + "/" + stem + ".crt", 0644,
                  [&](FILE* f) { return PEM_write_X509(f, cert); });
}

struct Ca {
  Cert cert;
  Pkey key;
};

StatusOr<Ca> LoadCa(const std::string& dir) {
  const std::string crt = dir + "/ca.crt", key = dir + "/ca.key";
  FILE* f = std::fopen(crt.c_str(), "r");
  if (!f)
    return Status::NotFound("no CA in " + dir + " (" + crt +
                            "); make one with `hangar certs init --dir " + dir + "`");
  Ca ca;
  ca.cert.reset(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  f = std::fopen(key.c_str(), "r");
  if (!f)
    return Status::NotFound("the CA key " + key +
                            " cannot be read; certificates are issued where the CA key is");
  ca.key.reset(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!ca.cert || !ca.key)
    return Status::InvalidArgument(crt + " or " + key + " is not a PEM certificate or key");
  return ca;
}

std::string San(const std::string& host) {
  unsigned char buf[16];
  const bool ip =
      inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
  return (ip ? "IP:" : "DNS:") + host;
}

}  // namespace

StatusOr<IssuedFiles> InitCa(const std::string& dir, const std::string& name, int days) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (fs::exists(dir + "/ca.key")) {
    return Status::AlreadyExists(
        dir +
        "/ca.key exists: this directory has a CA already (remove it to start over; "
        "every certificate it issued stops being trusted)");
  }
  HANGAR_ASSIGN_OR_RETURN(Pkey key, NewKey());
  HANGAR_ASSIGN_OR_RETURN(Cert cert,
                          MakeCert(key.get(), name, nullptr, nullptr, days,
                                   {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                                    {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                    {NID_subject_key_identifier, "hash"}}));
  HANGAR_RETURN_IF_ERROR(WritePair(dir, "ca", cert.get(), key.get()));
  return IssuedFiles{dir + "/ca.crt", dir + "/ca.key"};
}

StatusOr<IssuedFiles> IssueController(const std::string& dir, const std::vector<std::string>& hosts,
                                      int days) {
  HANGAR_ASSIGN_OR_RETURN(Ca ca, LoadCa(dir));
  HANGAR_ASSIGN_OR_RETURN(Pkey key, NewKey());
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
  if (host[0]) names.push_back(host);
  names.insert(names.end(), hosts.begin(), hosts.end());
  std::string san;
  for (const auto& n : names) san += (san.empty() ? "" : ",") + San(n);
  HANGAR_ASSIGN_OR_RETURN(
      Cert cert, MakeCert(key.get(), "hangar-controller", ca.cert.get(), ca.key.get(), days,
                          {{NID_basic_constraints, "critical,CA:FALSE"},
                           {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                           {NID_ext_key_usage, "serverAuth"},
                           {NID_subject_alt_name, san},
                           {NID_authority_key_identifier, "keyid"}}));
  HANGAR_RETURN_IF_ERROR(WritePair(dir, "controller", cert.get(), key.get()));
  return IssuedFiles{dir + "/controller.crt", dir + "/controller.key"};
}

namespace {

Status CheckNodeName(const std::string& node) {
  if (node.empty() || node.find_first_of("/ ,") != std::string::npos) {
    return Status::InvalidArgument("'" + node + "' is not a node name (as in cluster.yaml)");
  }
  return Status::Ok();
}

StatusOr<IssuedFiles> IssueNodeWith(const Ca& ca, const std::string& dir, const std::string& node,
                                    int days) {
  HANGAR_ASSIGN_OR_RETURN(Pkey key, NewKey());
  HANGAR_ASSIGN_OR_RETURN(Cert cert,
                          MakeCert(key.get(), node, ca.cert.get(), ca.key.get(), days,
                                   {{NID_basic_constraints, "critical,CA:FALSE"},
                                    {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                                    {NID_ext_key_usage, "clientAuth"},
                                    {NID_subject_alt_name, San(node)},
                                    {NID_authority_key_identifier, "keyid"}}));
  HANGAR_RETURN_IF_ERROR(WritePair(dir, "node-" + node, cert.get(), key.get()));
  return IssuedFiles{dir + "/node-" + node + ".crt", dir + "/node-" + node + ".key"};
}

}  // namespace

StatusOr<IssuedFiles> IssueNode(const std::string& dir, const std::string& node, int days) {
  HANGAR_RETURN_IF_ERROR(CheckNodeName(node));
  HANGAR_ASSIGN_OR_RETURN(Ca ca, LoadCa(dir));
  return IssueNodeWith(ca, dir, node, days);
}

StatusOr<size_t> IssueNodes(const std::string& dir, const std::vector<std::string>& nodes,
                            int days) {
  for (const auto& n : nodes) HANGAR_RETURN_IF_ERROR(CheckNodeName(n));
  HANGAR_ASSIGN_OR_RETURN(Ca ca, LoadCa(dir));
  for (const auto& n : nodes) {
    HANGAR_RETURN_IF_ERROR(IssueNodeWith(ca, dir, n, days).status());
  }
  return nodes.size();
}

void RegisterCertsCommand(CLI::App& app, int* rc) {
  struct Args {
    std::string dir = "./hangar-certs", name = "Hangar cluster CA", node, nodes_of;
    bool controller = false;
    std::vector<std::string> hosts;
  };
  auto a = std::make_shared<Args>();
  CLI::App* certs = app.add_subcommand(
      "certs", "The cluster's certificate authority: TLS for the API and mutual TLS for agents");
  certs->require_subcommand(1);
  CLI::App* init = certs->add_subcommand("init", "Make the cluster's CA (DIR/ca.crt, DIR/ca.key)");
  init->add_option("--dir", a->dir, "Where the CA and certificates live")->capture_default_str();
  init->add_option("--name", a->name, "The CA's name")->capture_default_str();
  init->callback([=] {
    Guard(rc, [&]() -> Status {
      HANGAR_ASSIGN_OR_RETURN(auto f, InitCa(a->dir, a->name));
      std::printf("made the CA: %s (share it) and %s (keep it secret; it issues certificates)\n",
                  f.cert.c_str(), f.key.c_str());
      return Status::Ok();
    });
  });
  CLI::App* issue = certs->add_subcommand(
      "issue", "Issue a certificate signed by the CA: the controller's or a node's");
  issue->add_option("--dir", a->dir, "Where the CA is; the certificate is written beside it")
      ->capture_default_str();
  auto* ctl = issue->add_flag("--controller", a->controller,
                              "The controller's: DIR/controller.crt and .key");
  issue->add_option("--host", a->hosts,
                    "With --controller: a name or address agents and users reach it by (repeat)");
  auto* node = issue->add_option("--node", a->node,
                                 "A node agent's: DIR/node-NAME.crt and .key, for --node NAME");
  auto* all =
      issue->add_option("--nodes-of", a->nodes_of,
                        "Every node of this cluster.yaml: DIR/node-NAME.crt and .key for each");
  ctl->excludes(node);
  ctl->excludes(all);
  node->excludes(all);
  issue->callback([=] {
    Guard(rc, [&]() -> Status {
      if (!a->nodes_of.empty()) {
        HANGAR_ASSIGN_OR_RETURN(auto file, cluster::LoadClusterFile(a->nodes_of));
        std::vector<std::string> names;
        for (const auto& n : file.topology->nodes()) names.push_back(n.name);
        HANGAR_ASSIGN_OR_RETURN(size_t issued, IssueNodes(a->dir, names));
        std::printf(
            "issued %zu node certificates in %s (node-NAME.crt and .key for each node of %s)\n",
            issued, a->dir.c_str(), a->nodes_of.c_str());
        return Status::Ok();
      }
      if (!a->controller && a->node.empty()) {
        return Status::InvalidArgument(
            "say whose certificate: --controller, --node NAME or --nodes-of cluster.yaml");
      }
      auto f = a->controller ? IssueController(a->dir, a->hosts) : IssueNode(a->dir, a->node);
      if (!f.ok()) return f.status();
      std::printf("issued %s and %s\n", f->cert.c_str(), f->key.c_str());
      return Status::Ok();
    });
  });
}

}  // namespace hangar::cli
