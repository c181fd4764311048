// The web dashboard's server side (docs/dashboard.md): the app's files, compiled into
// the binary from web/dashboard/ at build time and served at / and /ui/..., and the reads the REST
// API lacked for it -- the cluster map in one compact answer, the queue in the scheduler's order
// with positions and estimated starts (dashboard_map.h), and a live feed of changes (server-sent
// events, live_feed.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "controller/dashboard_map.h"

namespace hangar::controller::web {

struct Asset {
  std::string_view path;  // relative to web/dashboard/, e.g. "app.js"
  std::string_view body;
};
// The dashboard's files (generated: web_assets.cc).
const std::vector<Asset>& Assets();
// The asset at `path`, or null.
const Asset* FindAsset(std::string_view path);
std::string_view ContentTypeOf(std::string_view path);

}  // namespace hangar::controller::web
