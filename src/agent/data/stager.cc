#include "agent/data/stager.h"

#include <fcntl.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace hangar::agent::data {
namespace {

// "https://host:port/a/b" -> {"https://host:port", "/a/b"}.
std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (slash == std::string::npos) return {url, "/"};
  return {url.substr(0, slash), url.substr(slash)};
}

std::unique_ptr<httplib::Client> MakeClient(const std::string& base, Duration timeout) {
  auto c = std::make_unique<httplib::Client>(base);
  c->set_connection_timeout(5, 0);
  c->set_read_timeout(static_cast<time_t>(timeout / 1000), 0);
  c->set_keep_alive(true);
  if (base.rfind("https://", 0) == 0) {
    c->enable_server_certificate_verification(true);
    if (std::filesystem::exists("/etc/ssl/certs/ca-certificates.crt"))
      c->set_ca_cert_path("/etc/ssl/certs/ca-certificates.crt");
  }
  return c;
}

}  // namespace

StatusOr<std::string> ReadOrigin(const std::string& source, int64_t total, int64_t offset,
                                 int64_t length, Duration timeout) {
  if (source.rfind("file://", 0) == 0) {
    return Status::InvalidArgument(
        source + ": a file:// source is opened as its user (OpenFileSource), not read here");
  }
  auto [base, path] = SplitUrl(source);
  auto client = MakeClient(base, timeout);
  const httplib::Headers h = {
      {"Range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1)}};
  auto res = client->Get(path, h);
  if (!res)
    return Status::Unavailable(source + " did not answer (" + httplib::to_string(res.error()) +
                               ")");
  if (res->status == 206 && static_cast<int64_t>(res->body.size()) == length)
    return std::move(res->body);
  if (res->status == 200 && static_cast<int64_t>(res->body.size()) == total)
    return res->body.substr(offset, length);
  if (res->status == 200 || res->status == 206 || res->status == 416) {
    return Status::FailedPrecondition(
        source + " answered " + std::to_string(res->status) + " with " +
        std::to_string(res->body.size()) + " bytes for bytes " + std::to_string(offset) + "-" +
        std::to_string(offset + length - 1) + " of a " + std::to_string(total) +
        "-byte object: is the job's size right?");
  }
  return Status(res->status == 404 ? StatusCode::kNotFound : StatusCode::kUnavailable,
                source + " answered HTTP " + std::to_string(res->status));
}

StatusOr<OpenedPath> OpenFileSource(const pb::ArtifactStage& s,
                                    const std::optional<TaskCredentials>& who) {
  const std::vector<std::string> roots(s.file_roots().begin(), s.file_roots().end());
  HANGAR_ASSIGN_OR_RETURN(OpenedPath f,
                          OpenAsUser(s.source().substr(7), who, roots, OpenFor::kReading,
                                     "data.file_roots", s.source()));
  // Facts about the file only now that the user has shown they may read it.
  struct stat st {};
  if (::fstat(f.fd(), &st) != 0) return Status::Internal(s.source() + ": " + std::strerror(errno));
  if (st.st_size != s.bytes()) {
    return Status::FailedPrecondition(s.source() + " is " + std::to_string(st.st_size) +
                                      " bytes, not the " + std::to_string(s.bytes()) +
                                      " the job's size says");
  }
  return f;
}

Stager::Stager(ObjectCache* cache, std::function<std::string()> token, Clock* clock,
               StagerOptions o)
    : cache_(cache), token_(std::move(token)), clock_(clock), o_(o) {}

StageOutcome Stager::Stage(const pb::ArtifactStage& s, const std::optional<TaskCredentials>& who,
                           const std::atomic<bool>* stop) {
  const Time start = clock_->Now();
  StageOutcome out;
  if (cache_->Holds(s.digest())) {
    out.ok = true;
    return out;
  }
  // Another Stage of this object on this node (another job's): wait for it.
  while (cache_->Staging(s.digest()) && !*stop)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (cache_->Holds(s.digest())) {
    out.ok = true;
    out.took = clock_->Now() - start;
    return out;
  }
  out = Attempt(s, who, /*origin_only=*/false, stop);
  if (!out.ok && out.peer_bytes > 0 && !*stop &&
      out.message.find("hashes to") != std::string::npos) {
    spdlog::warn("artifact {}: {}; staging again from the origin alone", s.digest(), out.message);
    StageOutcome again = Attempt(s, who, /*origin_only=*/true, stop);
    again.peer_bytes += out.peer_bytes;
    again.origin_bytes += out.origin_bytes;
    out = again;
  }
  out.took = clock_->Now() - start;
  return out;
}

namespace {

// What the workers of one staging share.
struct Work {
  const pb::ArtifactStage& s;
  Partial& p;
  const StagerOptions& o;
  Clock* clock;
  const std::atomic<bool>* stop;
  std::string auth;    // "Bearer <data token>"
  int origin_fd = -1;  // a file:// origin, opened as the job's user
  Time begun_at = 0;
  Mutex mu;
  std::condition_variable cv;
  std::deque<int64_t> origin HANGAR_GUARDED_BY(mu);                // chunks to read from the origin
  std::deque<std::pair<int64_t, int>> peer HANGAR_GUARDED_BY(mu);  // chunk, peer index
  int peer_busy HANGAR_GUARDED_BY(mu) = 0;
  Status failure HANGAR_GUARDED_BY(mu) = Status::Ok();
  std::atomic<int64_t> origin_bytes{0}, peer_bytes{0};

  void Fail(Status st) HANGAR_EXCLUDES(mu) {
    MutexLock l(mu);
    if (failure.ok()) failure = std::move(st);
    cv.notify_all();
  }
  bool Failed() HANGAR_EXCLUDES(mu) {
    MutexLock l(mu);
    return !failure.ok();
  }
};

// The origin worker: its chunks one at a time (one connection per node), until no peer worker
// can send it more.
void ReadOriginChunks(Work& w) {
  while (!*w.stop) {
    int64_t c;
    {
      MutexLock l(w.mu);
      l.WaitFor(w.cv, std::chrono::milliseconds(200), [&]() HANGAR_REQUIRES(w.mu) {
        return !w.origin.empty() || (w.peer.empty() && w.peer_busy == 0) || !w.failure.ok();
      });
      if (!w.failure.ok()) return;
      if (w.origin.empty()) {
        if (w.peer.empty() && w.peer_busy == 0) return;
        continue;
      }
      c = w.origin.front();
      w.origin.pop_front();
    }
    auto [off, len] = w.p.ChunkRange(c);
    auto data = w.origin_fd >= 0
                    ? ReadAt(w.origin_fd, off, len)
                    : ReadOrigin(w.s.source(), w.s.bytes(), off, len, w.o.origin_timeout);
    if (!data.ok()) return w.Fail(data.status());
    if (Status ws = w.p.Write(c, *data); !ws.ok()) return w.Fail(ws);
    w.origin_bytes += len;
  }
}

// Chunk `c` from a peer, waiting while the peer is still getting it; false: the origin must.
bool ReadFromPeer(Work& w, httplib::Client& client, int64_t c) {
  auto [off, len] = w.p.ChunkRange(c);
  const std::string path = "/v1/objects/" + w.s.digest() + "?offset=" + std::to_string(off) +
                           "&length=" + std::to_string(len) +
                           "&wait_ms=" + std::to_string(w.o.peer_wait);
  int64_t held = -1;
  Time progress = w.clock->Now();
  while (!*w.stop && !w.Failed()) {
    auto res = client.Get(path, {{"Authorization", w.auth}});
    if (res && res->status == 200 && static_cast<int64_t>(res->body.size()) == len) {
      if (!w.p.Write(c, res->body).ok()) return false;
      w.peer_bytes += len;
      return true;
    }
    // A peer told to stage in the same breath may not have begun yet: give it a moment.
    if (res && res->status == 404 && w.clock->Now() - w.begun_at < w.o.peer_grace) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (!res || res->status != 503) return false;  // not there and not coming
    const int64_t now_held = std::atoll(res->get_header_value("X-Hangar-Chunks-Held").c_str());
    if (now_held > held) {
      held = now_held;
      progress = w.clock->Now();
    } else if (w.clock->Now() - progress > w.o.peer_stall) {
      return false;
    }
  }
  return false;
}

// A peer worker: chunks from the peers the plan names; what a peer cannot give goes to the origin.
void ReadPeerChunks(Work& w) {
  std::map<int, std::unique_ptr<httplib::Client>> clients;
  while (!*w.stop) {
    std::pair<int64_t, int> item;
    {
      MutexLock l(w.mu);
      if (w.peer.empty() || !w.failure.ok()) return;
      item = w.peer.front();
      w.peer.pop_front();
      ++w.peer_busy;
    }
    auto [c, src] = item;
    auto& client = clients[src];
    if (!client) client = MakeClient(w.s.peers(src), w.o.peer_wait + 5 * kSecond);
    const bool got = ReadFromPeer(w, *client, c);
    MutexLock l(w.mu);
    --w.peer_busy;
    if (!got && !*w.stop) {
      spdlog::info("artifact {}: chunk {} not from peer {}; reading the origin", w.s.digest(), c,
                   w.s.peers(src));
      w.origin.push_back(c);
    }
    w.cv.notify_all();
  }
}

}  // namespace

StageOutcome Stager::Attempt(const pb::ArtifactStage& s, const std::optional<TaskCredentials>& who,
                             bool origin_only, const std::atomic<bool>* stop) {
  StageOutcome out;
  // A file:// origin is opened before anything is staged: a source its user may not read leaves
  // nothing behind, and the error says no more than the user could learn.
  OpenedPath file;
  if (s.source().rfind("file://", 0) == 0) {
    auto opened = OpenFileSource(s, who);
    if (!opened.ok()) {
      out.message = "artifact " + s.digest() + ": " + opened.status().message();
      return out;
    }
    file = std::move(*opened);
  }
  const int64_t chunk = s.chunk_bytes() > 0 ? s.chunk_bytes() : (8ll << 20);
  auto begun = cache_->Begin(s.digest(), s.bytes(), chunk);
  if (!begun.ok()) {
    out.message = "artifact " + s.digest() + ": " + begun.status().message();
    return out;
  }
  std::shared_ptr<Partial> p = *begun;
  Work w{s, *p, o_, clock_, stop, "Bearer " + token_(), file.fd(), clock_->Now()};
  {
    MutexLock l(w.mu);  // no worker yet; held for the analysis
    for (int64_t c = 0; c < p->chunks(); ++c) {
      const int src = c < s.chunk_source_size() ? s.chunk_source(static_cast<int>(c)) : -1;
      if (origin_only || src < 0 || src >= s.peers_size()) {
        w.origin.push_back(c);
      } else {
        w.peer.emplace_back(c, src);
      }
    }
  }
  std::vector<std::thread> threads;
  threads.emplace_back([&w] { ReadOriginChunks(w); });
  for (int i = 0; i < o_.peer_workers; ++i) threads.emplace_back([&w] { ReadPeerChunks(w); });
  for (auto& t : threads) t.join();
  out.origin_bytes = w.origin_bytes;
  out.peer_bytes = w.peer_bytes;
  Status failure = Status::Ok();
  {
    MutexLock l(w.mu);  // the workers have been joined; held for the analysis
    failure = w.failure;
  }
  if (*stop) {
    cache_->Drop(p);
    out.message = "artifact " + s.digest() + ": the agent stopped";
    return out;
  }
  if (!failure.ok() || !p->Complete()) {
    cache_->Drop(p);
    out.message = "artifact " + s.digest() + " from " + s.source() + ": " +
                  (failure.ok() ? std::string("not every chunk arrived") : failure.message());
    return out;
  }
  if (Status c = cache_->Commit(p, clock_->Now()); !c.ok()) {
    out.message =
        "artifact " + s.digest() + " from " + s.source() + ": " + c.message() +
        (out.peer_bytes > 0
             ? ""
             : ": the origin copy is not what the job names (corrupted, or changed since); "
               "fix the source or the job's sha256");
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace hangar::agent::data
