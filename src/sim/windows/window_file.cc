#include "sim/windows/window_file.h"

#include <fstream>
#include <sstream>

#include "common/yaml_util.h"

namespace hangar::sim {
namespace {

// The REST body's JSON for one YAML entry: lists stay lists, `maintenance` a boolean, every other
// scalar a string (as the CLI sends them).
nlohmann::json Body(const YAML::Node& n) {
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : n) a.push_back(Body(e));
    return a;
  }
  if (n.IsMap()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& kv : n) {
      const std::string key = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (key == "maintenance" && v.IsScalar() && (v.Scalar() == "true" || v.Scalar() == "false")) {
        o[key] = v.Scalar() == "true";
      } else {
        o[key] = Body(v);
      }
    }
    return o;
  }
  return n.IsScalar() ? nlohmann::json(n.Scalar()) : nlohmann::json();
}

}  // namespace

StatusOr<std::vector<SimReservation>> ParseSimReservations(std::string_view text,
                                                           const std::string& source,
                                                           const cluster::Topology& topology) {
  const YamlSource src(source);
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, src.Parse(text));
  if (!root.IsMap() || !root["reservations"] || !root["reservations"].IsSequence()) {
    return src.Error(root, "write the windows as a list under reservations: (docs/sim-windows.md)");
  }
  HANGAR_RETURN_IF_ERROR(src.CheckKeys(root, "a reservations file", {"reservations"}));
  controller::reservation::ReservationBook book(topology);
  std::vector<SimReservation> out;
  for (const auto& entry : root["reservations"]) {
    HANGAR_RETURN_IF_ERROR(src.CheckKeys(
        entry, "a reservation",
        {"name", "nodes", "start", "end", "duration", "users", "queues", "maintenance"}));
    auto r = controller::reservation::ParseRequest(Body(entry), topology);
    if (!r.ok()) return src.Error(entry, r.status().message());
    // Checked as the controller checks a new reservation: at its own start, so none is "over".
    if (Status s = book.Add(*r, r->start); !s.ok()) return src.Error(entry, s.message());
    out.push_back(std::move(*r));
  }
  if (out.empty()) return src.Error(root, "reservations: lists no reservation");
  return out;
}

StatusOr<std::vector<SimReservation>> LoadSimReservations(const std::string& path,
                                                          const cluster::Topology& topology) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read the reservations file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseSimReservations(text.str(), path, topology);
}

}  // namespace hangar::sim
