// The REST API's topology routes (docs/topology-discovery.md): GET /v1/topology/discovered, what
// the agents found of the fabric (each node's report, the tree assembled from them, and where
// cluster.yaml disagrees), and GET /v1/topology/diff, the disagreements alone.
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

void HttpApi::TopologyRoutes() {
  httplib::Server& s = *server_;
  s.Get("/v1/topology/discovered",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 Reply(res, 200, owner_->Call<nlohmann::json>([](ClusterState& st, Effects*) {
                   return st.discovered_fabric().Json();
                 }));
               }));
  s.Get("/v1/topology/diff",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 Reply(res, 200, owner_->Call<nlohmann::json>([](ClusterState& st, Effects*) {
                   const DiscoveredFabric& d = st.discovered_fabric();
                   nlohmann::json diff = nlohmann::json::array();
                   for (const auto& x : d.Diff())
                     diff.push_back({{"node", x.node}, {"message", x.message}});
                   return nlohmann::json{{"reported", d.reported()},
                                         {"declared", st.topology().nodes().size()},
                                         {"disagreements", std::move(diff)}};
                 }));
               }));
}

}  // namespace hangar::controller
