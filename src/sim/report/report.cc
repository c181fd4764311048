#include "sim/report/report.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

namespace hangar::sim {

extern const char* const kChartJs;

namespace {

// JSON inside <script>: "</" must not close the script element.
std::string ScriptSafe(const nlohmann::json& j) {
  std::string s = j.dump();
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

constexpr const char* kStyle = R"css(
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2330}
h1{font-size:1.5rem;margin-bottom:.2rem} .sub{color:#5b6475;margin-top:0}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:1.5rem} .card{border:1px solid #e2e6ee;border-radius:8px;padding:1rem}
table{border-collapse:collapse;width:100%} td,th{padding:.3rem .6rem;border-bottom:1px solid #eef0f4;text-align:right}
td:first-child,th:first-child{text-align:left} canvas{max-height:320px}
)css";

std::string Page(const std::string& title, const std::string& subtitle, const std::string& body,
                 const nlohmann::json& data, const std::string& script) {
  return "<!doctype html><html><head><meta charset=\"utf-8\"><title>" + Escape(title) +
         "</title><style>" + kStyle + "</style><script>" + kChartJs + "</script></head><body><h1>" +
         Escape(title) + "</h1><p class=\"sub\">" + Escape(subtitle) + "</p>" + body +
         "<script>const DATA=" + ScriptSafe(data) + ";\n" + script + "</script></body></html>\n";
}

std::string MetricsTable(const nlohmann::json& j,
                         const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string t = "<table><tr><th>metric</th><th>value</th></tr>";
  for (const auto& [key, label] : rows) {
    if (!j.contains(key)) continue;
    std::string v = j[key].is_number_float() ? std::to_string(j[key].get<double>()) : j[key].dump();
    t += "<tr><td>" + Escape(label) + "</td><td>" + Escape(v) + "</td></tr>";
  }
  return t + "</table>";
}

}  // namespace

std::string RenderReplayReport(const nlohmann::json& r) {
  const std::string body =
      "<div class=\"grid\"><div class=\"card\"><h3>Job completion time (CDF)</h3><canvas "
      "id=\"cdf\"></canvas></div>"
      "<div class=\"card\"><h3>Summary</h3>" +
      MetricsTable(r, {{"jobs", "jobs"},
                       {"avg_jct_s", "average JCT (s)"},
                       {"p50_jct_s", "p50 JCT (s)"},
                       {"p99_jct_s", "p99 JCT (s)"},
                       {"avg_queue_s", "average queueing (s)"},
                       {"p99_queue_s", "p99 queueing (s)"},
                       {"makespan_s", "makespan (s)"},
                       {"gpu_util_pct", "GPU utilisation (%)"},
                       {"avg_slowdown", "average slowdown"},
                       {"preemptions", "preemptions"},
                       {"wall_s", "replay wall time (s)"}}) +
      "</div><div class=\"card\"><h3>GPU utilisation over time</h3><canvas "
      "id=\"util\"></canvas></div>"
      "<div class=\"card\"><h3>Jobs waiting over time</h3><canvas "
      "id=\"queue\"></canvas></div></div>";
  const std::string script = R"js(
const days = t => t / 86400;
new Chart(document.getElementById('cdf'), {type: 'line', data: {datasets: [{label: 'fraction of jobs',
  data: DATA.jct_cdf.map(p => ({x: p.jct_s, y: p.fraction})), pointRadius: 0, borderColor: '#2f6fde'}]},
  options: {scales: {x: {type: 'logarithmic', title: {display: true, text: 'JCT (s)'}},
  y: {min: 0, max: 1, title: {display: true, text: 'fraction of jobs'}}}}});
new Chart(document.getElementById('util'), {type: 'line', data: {datasets: [{label: 'GPU utilisation %',
  data: DATA.timeline.map(p => ({x: days(p.t_s), y: p.gpu_util_pct})), pointRadius: 0, borderColor: '#1f9d55'}]},
  options: {scales: {x: {type: 'linear', title: {display: true, text: 'days'}}, y: {min: 0, max: 100}}}});
new Chart(document.getElementById('queue'), {type: 'line', data: {datasets: [{label: 'jobs waiting',
  data: DATA.timeline.map(p => ({x: days(p.t_s), y: p.pending})), pointRadius: 0, borderColor: '#d9822b'}]},
  options: {scales: {x: {type: 'linear', title: {display: true, text: 'days'}}}}});
)js";
  const std::string title = "hangar sim replay: " + r.value("policy", std::string("?"));
  const std::string sub =
      r.value("trace", std::string("")) + ", load " + r.value("load", nlohmann::json(1)).dump();
  return Page(title, sub, body, r, script);
}

std::string RenderFgdReport(const nlohmann::json& f) {
  const std::string body =
      "<div class=\"grid\"><div class=\"card\"><h3>GPU allocation vs arrived</h3><canvas "
      "id=\"alloc\"></canvas></div>"
      "<div class=\"card\"><h3>Summary (means over seeds)</h3>" +
      MetricsTable(f, {{"alloc_at_100", "allocation at 100% arrived (%)"},
                       {"alloc_at_130", "allocation at 130% (%)"},
                       {"frag_at_100", "fragmented GPUs at 100% (% of all)"},
                       {"wall_s", "wall time (s)"}}) +
      "</div><div class=\"card\"><h3>Fragmented GPUs vs arrived</h3><canvas "
      "id=\"frag\"></canvas></div></div>";
  const std::string script = R"js(
const curve = (c) => (c || []).map((y, k) => ({x: k, y: y})).filter(p => p.y !== null);
function draw(id, ours, ref, label) {
  const sets = [{label: DATA.policy + ' (Hangar)', data: curve(ours), pointRadius: 0, borderColor: '#2f6fde'}];
  if (ref) sets.push({label: 'published ' + (DATA.reference ? DATA.reference.policy : ''), data: curve(ref),
    pointRadius: 0, borderColor: '#999', borderDash: [6, 4]});
  new Chart(document.getElementById(id), {type: 'line', data: {datasets: sets}, options: {scales: {
    x: {type: 'linear', min: 0, max: 130, title: {display: true, text: 'arrived GPU requests, % of capacity'}},
    y: {title: {display: true, text: label}}}}});
}
const ref = DATA.reference || {};
draw('alloc', DATA.alloc_curve, ref.alloc_curve, 'GPU allocation %');
draw('frag', DATA.frag_curve, ref.frag_curve, 'fragmented GPUs, % of all');
)js";
  return Page("hangar sim fgd: " + f.value("policy", std::string("?")),
              f.value("workload", std::string("")), body, f, script);
}

Status WriteReport(const std::string& path, const std::string& html) {
  std::ofstream out(path);
  if (!out) return Status::InvalidArgument("cannot write the report to " + path);
  out << html;
  return out ? Status::Ok() : Status::Unavailable("writing " + path + " failed");
}

Status CheckWritableFolder(const std::string& path) {
  if (path.empty()) return Status::Ok();
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  if (access(folder.c_str(), W_OK) != 0) {
    return Status::InvalidArgument("cannot write " + path + ": its folder " + folder +
                                   (errno == ENOENT ? " does not exist" : " is not writable") +
                                   "; create it or name another file");
  }
  return Status::Ok();
}

Status WriteJsonFile(const std::string& path, const nlohmann::json& j, int indent) {
  std::ofstream out(path);
  if (!out)
    return Status::InvalidArgument("cannot write " + path +
                                   "; check that its folder exists and is writable");
  out << j.dump(indent) << "\n";
  out.close();
  if (!out) return Status::Unavailable("writing " + path + " failed; is its disk full?");
  return Status::Ok();
}

}  // namespace hangar::sim
