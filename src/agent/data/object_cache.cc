#include "agent/data/object_cache.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/container/image_cache.h"

namespace hangar::agent::data {
namespace fs = std::filesystem;

std::string HexOf(const std::string& digest) {
  if (digest.size() != 71 || digest.rfind("sha256:", 0) != 0) return "";
  const std::string hex = digest.substr(7);
  const bool ok = std::all_of(hex.begin(), hex.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
  });
  return ok ? hex : "";
}

Partial::Partial(std::string digest, int64_t bytes, int64_t chunk_bytes, int fd, std::string path)
    : digest_(std::move(digest)),
      bytes_(bytes),
      chunk_bytes_(std::max<int64_t>(1, chunk_bytes)),
      chunks_((bytes + chunk_bytes_ - 1) / chunk_bytes_),
      fd_(fd),
      path_(std::move(path)),
      have_(chunks_, false) {}

Partial::~Partial() {
  if (fd_ >= 0) ::close(fd_);
}

std::pair<int64_t, int64_t> Partial::ChunkRange(int64_t i) const {
  const int64_t off = i * chunk_bytes_;
  return {off, std::min(chunk_bytes_, bytes_ - off)};
}

Status Partial::Write(int64_t i, const std::string& data) {
  if (i < 0 || i >= chunks_)
    return Status::InvalidArgument("chunk " + std::to_string(i) + " is out of range");
  auto [off, len] = ChunkRange(i);
  if (static_cast<int64_t>(data.size()) != len) {
    return Status::FailedPrecondition("chunk " + std::to_string(i) + " of " + digest_ +
                                      " came with " + std::to_string(data.size()) + " bytes, not " +
                                      std::to_string(len));
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w =
        ::pwrite(fd_, data.data() + done, data.size() - done, off + static_cast<int64_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::Internal("writing " + path_ + ": " + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
  {
    MutexLock l(mu_);
    if (!have_[i]) {
      have_[i] = true;
      ++have_count_;
    }
  }
  cv_.notify_all();
  return Status::Ok();
}

bool Partial::Has(int64_t i) const {
  MutexLock l(mu_);
  return i >= 0 && i < chunks_ && have_[i];
}

bool Partial::Complete() const {
  MutexLock l(mu_);
  return have_count_ == chunks_;
}

bool Partial::WaitFor(int64_t first, int64_t last, Duration timeout) {
  MutexLock l(mu_);
  auto all = [&]() HANGAR_REQUIRES(mu_) {
    if (abandoned_) return true;
    for (int64_t i = std::max<int64_t>(0, first); i <= last && i < chunks_; ++i) {
      if (!have_[i]) return false;
    }
    return true;
  };
  l.WaitFor(cv_, std::chrono::milliseconds(timeout), all);
  return !abandoned_ && all();
}

StatusOr<std::string> ReadAt(int fd, int64_t offset, int64_t length) {
  std::string out(static_cast<size_t>(length), '\0');
  int64_t done = 0;
  while (done < length) {
    ssize_t r = ::pread(fd, out.data() + done, length - done, offset + done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return Status::Internal(std::string("reading a cached object: ") +
                              (r == 0 ? "short file" : std::strerror(errno)));
    done += r;
  }
  return out;
}

StatusOr<std::string> Partial::Read(int64_t offset, int64_t length) const {
  return ReadAt(fd_, offset, length);
}

void Partial::Abandon() {
  {
    MutexLock l(mu_);
    abandoned_ = true;
  }
  cv_.notify_all();
}

StatusOr<std::string> Sha256OfFile(int fd, int64_t bytes) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  int64_t off = 0;
  while (off < bytes) {
    ssize_t r = ::pread(fd, buf.data(), std::min<int64_t>(buf.size(), bytes - off), off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      EVP_MD_CTX_free(ctx);
      return Status::Internal(std::string("reading the staged object: ") +
                              (r == 0 ? "short file" : std::strerror(errno)));
    }
    EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(r));
    off += r;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  static const char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

ObjectCache::ObjectCache(std::string dir, int64_t budget_bytes)
    : dir_(std::move(dir)), budget_bytes_(budget_bytes) {}

Status ObjectCache::Init(Time now) {
  std::error_code ec;
  fs::create_directories(dir_ + "/objects", ec);
  fs::remove_all(dir_ + "/partial", ec);
  fs::create_directories(dir_ + "/partial", ec);
  fs::create_directories(dir_ + "/views", ec);
  if (!fs::is_directory(dir_ + "/objects") || !fs::is_directory(dir_ + "/partial") ||
      !fs::is_directory(dir_ + "/views")) {
    return Status::FailedPrecondition(
        "cannot create the artifact cache in " + dir_ +
        "; give hangar agent a writable --cache-dir (the node's local scratch disk)");
  }
  // Objects are readable only through the views of the tasks that use them (and by the agent,
  // which serves peers): the other folders admit no one else. Set at every start, so that a cache
  // an older agent made open is closed too.
  for (const auto& [sub, mode] : {std::pair<std::string, mode_t>{"", 0711},
                                  {"/objects", 0700},
                                  {"/partial", 0700},
                                  {"/views", 0711}}) {
    if (::chmod((dir_ + sub).c_str(), mode) != 0) {
      return Status::FailedPrecondition("cannot restrict " + dir_ + sub + ": " +
                                        std::strerror(errno) +
                                        "; the artifact cache must belong to the agent's user");
    }
  }
  ::chmod((dir_ + "/index.json").c_str(), 0600);
  std::map<std::string, Time> last;
  {
    std::ifstream in(dir_ + "/index.json");
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_object()) {
      for (const auto& [d, t] : j.items()) {
        if (t.is_number_integer()) last[d] = t.get<Time>();
      }
    }
  }
  MutexLock l(mu_);
  objects_.clear();
  for (const auto& e : fs::directory_iterator(dir_ + "/objects", ec)) {
    const std::string digest = "sha256:" + e.path().filename().string();
    if (HexOf(digest).empty() || !e.is_regular_file()) continue;
    auto it = last.find(digest);
    objects_[digest] = {digest, static_cast<int64_t>(e.file_size()),
                        it != last.end() ? it->second : now};
  }
  SaveLocked();
  return Status::Ok();
}

std::string ObjectCache::PathOf(const std::string& digest) const {
  MutexLock l(mu_);
  return objects_.count(digest) ? dir_ + "/objects/" + HexOf(digest) : "";
}

int64_t ObjectCache::BytesOf(const std::string& digest) const {
  MutexLock l(mu_);
  auto it = objects_.find(digest);
  return it == objects_.end() ? -1 : it->second.bytes;
}

void ObjectCache::Touch(const std::string& digest, Time now) {
  MutexLock l(mu_);
  auto it = objects_.find(digest);
  if (it == objects_.end()) return;
  it->second.last_used = now;
  SaveLocked();
}

void ObjectCache::SetWanted(std::set<std::string> digests) {
  MutexLock l(mu_);
  wanted_ = std::move(digests);
}

StatusOr<std::shared_ptr<Partial>> ObjectCache::Begin(const std::string& digest, int64_t bytes,
                                                      int64_t chunk_bytes) {
  const std::string hex = HexOf(digest);
  if (hex.empty()) return Status::InvalidArgument("'" + digest + "' is not a sha256 digest");
  MutexLock l(mu_);
  if (staging_.count(digest)) return Status::AlreadyExists(digest + " is being staged already");
  const std::string path = dir_ + "/partial/" + hex;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Internal("cannot create " + path + ": " + std::strerror(errno));
  if (::ftruncate(fd, bytes) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Status::ResourceExhausted("cannot make room for " + std::to_string(bytes) +
                                     " bytes in " + path + ": " + why);
  }
  auto p = std::make_shared<Partial>(digest, bytes, chunk_bytes, fd, path);
  staging_[digest] = p;
  return p;
}

std::shared_ptr<Partial> ObjectCache::Staging(const std::string& digest) const {
  MutexLock l(mu_);
  auto it = staging_.find(digest);
  return it == staging_.end() ? nullptr : it->second;
}

Status ObjectCache::Commit(const std::shared_ptr<Partial>& p, Time now) {
  auto sum = Sha256OfFile(p->fd(), p->bytes());
  Status result = Status::Ok();
  if (!sum.ok()) {
    result = sum.status();
  } else if (*sum != p->digest()) {
    result = Status::FailedPrecondition("its content hashes to " + *sum + ", not " + p->digest());
  } else {
    ::fsync(p->fd());
    ::fchmod(p->fd(), 0444);
    const std::string to = dir_ + "/objects/" + HexOf(p->digest());
    if (::rename(p->path().c_str(), to.c_str()) != 0)
      result = Status::Internal("cannot move it into " + to + ": " + std::strerror(errno));
  }
  if (!result.ok()) {
    Drop(p);
    return result;
  }
  MutexLock l(mu_);
  staging_.erase(p->digest());
  objects_[p->digest()] = {p->digest(), p->bytes(), now};
  SaveLocked();
  return result;
}

void ObjectCache::Drop(const std::shared_ptr<Partial>& p) {
  p->Abandon();
  ::unlink(p->path().c_str());
  MutexLock l(mu_);
  if (auto it = staging_.find(p->digest()); it != staging_.end() && it->second == p)
    staging_.erase(it);
}

std::vector<std::string> ObjectCache::Evict(const std::set<std::string>& in_use) {
  std::vector<std::string> plan;
  {
    MutexLock l(mu_);
    std::vector<CachedImageState> states;
    for (const auto& [d, o] : objects_)
      states.push_back({LocalImage{d, {d}, {}, o.bytes}, o.last_used});
    std::set<std::string> keep = wanted_;
    keep.insert(in_use.begin(), in_use.end());
    plan = PlanEviction(states, keep, budget_bytes_);
  }
  std::vector<std::string> removed;
  for (const auto& d : plan) {
    std::error_code ec;
    fs::remove(dir_ + "/objects/" + HexOf(d), ec);
    if (ec) {
      spdlog::warn("artifact cache: cannot evict {}: {}", d, ec.message());
      continue;
    }
    removed.push_back(d);
  }
  MutexLock l(mu_);
  for (const auto& d : removed) objects_.erase(d);
  int64_t used = 0;
  for (const auto& [d, o] : objects_) used += o.bytes;
  over_budget_ = budget_bytes_ > 0 && used > budget_bytes_;
  SaveLocked();
  return removed;
}

void ObjectCache::FillInventory(pb::ImageInventory* inv) const {
  MutexLock l(mu_);
  int64_t used = 0;
  for (const auto& [d, o] : objects_) {
    pb::CachedImage* c = inv->add_artifacts();
    c->set_digest(d);
    c->set_bytes(o.bytes);
    c->set_last_used_ms(o.last_used);
    used += o.bytes;
  }
  inv->set_artifact_budget_bytes(budget_bytes_);
  inv->set_artifact_used_bytes(used);
  inv->set_artifacts_over_budget(over_budget_);
}

std::vector<CachedObject> ObjectCache::Objects() const {
  MutexLock l(mu_);
  std::vector<CachedObject> out;
  for (const auto& [d, o] : objects_) out.push_back(o);
  return out;
}

void ObjectCache::SaveLocked() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [d, o] : objects_) j[d] = o.last_used;
  const std::string file = dir_ + "/index.json";
  // Private: a digest is all a job needs to be given a cached object.
  const int fd = ::open((file + ".tmp").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string text = j.dump();
  const bool wrote = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::fchmod(fd, 0600);
  ::close(fd);
  if (wrote) std::rename((file + ".tmp").c_str(), file.c_str());
}

}  // namespace hangar::agent::data
