// The cluster's own certificate authority: `hangar certs init` makes a CA, and
// `hangar certs issue --controller | --node NAME` the certificates signed by it -- the
// controller's (HTTPS on the API, TLS on the agent channel) and each node agent's (mutual TLS:
// the agent's identity is its certificate's common name, checked against the node it claims).
// EC P-256 keys, SHA-256 signatures; keys are written mode 0600.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::cli {

struct IssuedFiles {
  std::string cert, key;
};

// Writes DIR/ca.crt and DIR/ca.key. Refuses to overwrite an existing CA key.
StatusOr<IssuedFiles> InitCa(const std::string& dir, const std::string& name, int days = 3650);
// The controller's certificate: SANs localhost, 127.0.0.1, ::1, this host's name and `hosts`
// (names or addresses); usable as a TLS server.
StatusOr<IssuedFiles> IssueController(const std::string& dir, const std::vector<std::string>& hosts,
                                      int days = 825);
// A node agent's certificate: CN and SAN the node's name; usable as a TLS client.
StatusOr<IssuedFiles> IssueNode(const std::string& dir, const std::string& node, int days = 825);
// The certificates of many nodes at once (the CA read once): how many were issued.
StatusOr<size_t> IssueNodes(const std::string& dir, const std::vector<std::string>& nodes,
                            int days = 825);

void RegisterCertsCommand(CLI::App& app, int* rc);

}  // namespace hangar::cli
