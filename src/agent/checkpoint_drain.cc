#include "agent/checkpoint_drain.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

namespace hangar::agent {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

Duration MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Where the store's companions live: beside ROOT/job-N.
struct StorePaths {
  std::string parent, base;  // ROOT, job-N
  std::string Gen(uint64_t seq) const {
    char digits[32];
    std::snprintf(digits, sizeof digits, "%010llu", static_cast<unsigned long long>(seq));
    return "." + base + ".gen-" + digits;
  }
  std::string Lock() const { return parent + "/." + base + ".lock"; }
  std::string LinkTmp() const { return parent + "/." + base + ".link.tmp"; }
  std::string Prefix() const { return "." + base + ".gen-"; }
};

StorePaths PathsOf(const std::string& store_dir) {
  const fs::path p = fs::path(store_dir).lexically_normal();
  const fs::path clean = p.has_filename() ? p : p.parent_path();
  return {clean.parent_path().string(), clean.filename().string()};
}

// The generation number of `name` (".job-N.gen-0000000007"), or nullopt when it names none.
std::optional<uint64_t> SeqOf(const StorePaths& s, const std::string& name) {
  const std::string prefix = s.Prefix();
  if (name.size() != prefix.size() + 10 || name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  uint64_t seq = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    seq = seq * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return seq;
}

Status FsyncPath(const std::string& path, bool dir) {
  const int fd =
      open(path.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::Internal(Errno("cannot open " + path + " to sync it"));
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) {
    errno = err;
    return Status::Internal(Errno("cannot sync " + path));
  }
  return Status::Ok();
}

// flock(2) on the store's lock file, held until destroyed.
class StoreLock {
 public:
  static StatusOr<StoreLock> Take(const std::string& path, bool exclusive, Duration timeout) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
      return Status::Unavailable(Errno("cannot open the checkpoint store's lock " + path));
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout);
    while (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        const std::string why = Errno("cannot lock " + path +
                                      " (the shared file system must support flock: NFSv4, "
                                      "Lustre mounted with -o flock, GPFS)");
        close(fd);
        return Status::Unavailable(why);
      }
      if (Clock::now() >= deadline) {
        close(fd);
        return Status::Unavailable("another drain or restore of this job has held " + path +
                                   " for more than " + std::to_string(timeout / kSecond) + " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return StoreLock(fd);
  }
  StoreLock(StoreLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  StoreLock& operator=(StoreLock&&) = delete;
  ~StoreLock() {
    if (fd_ >= 0) close(fd_);  // releases the flock
  }

 private:
  explicit StoreLock(int fd) : fd_(fd) {}
  int fd_;
};

// One entry of a checkpoint tree, as the manifest remembers it.
struct Entry {
  int64_t size = 0;
  int64_t mtime_ns = 0;
  bool link = false;
  bool operator==(const Entry& o) const {
    return size == o.size && mtime_ns == o.mtime_ns && link == o.link;
  }
};

Entry EntryOf(const struct stat& st) {
  return {static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          S_ISLNK(st.st_mode)};
}

// What a node holds beside its local copy: the generation and its files.
struct Marker {
  std::string generation;
  std::map<std::string, Entry> files;
};

std::string MarkerPath(const std::string& local_dir) {
  const fs::path p = fs::path(local_dir).lexically_normal();
  return (p.parent_path() / ("." + p.filename().string() + ".synced")).string();
}

std::optional<Marker> ReadMarker(const std::string& local_dir) {
  std::ifstream in(MarkerPath(local_dir));
  if (!in) return std::nullopt;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("generation")) return std::nullopt;
  Marker m;
  m.generation = j.value("generation", "");
  if (j.contains("files") && j["files"].is_object()) {
    for (const auto& [rel, e] : j["files"].items()) {
      if (!e.is_array() || e.size() != 3) continue;
      m.files[rel] = {e[0].get<int64_t>(), e[1].get<int64_t>(), e[2].get<bool>()};
    }
  }
  return m;
}

Status WriteMarker(const std::string& local_dir, const Marker& m) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [rel, e] : m.files) files[rel] = {e.size, e.mtime_ns, e.link};
  const std::string path = MarkerPath(local_dir);
  {
    std::ofstream out(path + ".tmp");
    out << nlohmann::json{{"generation", m.generation}, {"files", files}}.dump() << "\n";
    if (!out) return Status::Internal("cannot write " + path + ".tmp");
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    return Status::Internal(Errno("cannot rename " + path));
  return Status::Ok();
}

// The files and links under `root` (relative paths), and its folders, parents first. Anything
// else (a FIFO, a socket, a device) is refused: it is no checkpoint data.
struct Tree {
  std::map<std::string, Entry> files;  // regular files and symbolic links
  std::vector<std::string> dirs;
};

StatusOr<Tree> Walk(const std::string& root) {
  Tree t;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) return Status::Internal("cannot read " + root + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::Internal("cannot read " + root + ": " + ec.message());
    const std::string path = it->path().string();
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return Status::Internal(Errno("cannot stat " + path));
    const std::string rel = it->path().lexically_relative(root).string();
    if (S_ISDIR(st.st_mode)) {
      t.dirs.push_back(rel);
    } else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
      t.files[rel] = EntryOf(st);
    } else {
      return Status::FailedPrecondition(
          path +
          " is neither a file, a folder nor a symbolic link; a checkpoint "
          "holds only those (remove it from the checkpoint directory)");
    }
  }
  return t;
}

// Copies the file or link `src` to the new path `dst` (fsynced, with src's mode and mtime, owned
// by `owner`); the bytes copied.
StatusOr<int64_t> CopyEntry(const std::string& src, const std::string& dst,
                            const std::optional<FileOwner>& owner) {
  struct stat st {};
  if (lstat(src.c_str(), &st) != 0) return Status::Internal(Errno("cannot stat " + src));
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(src, ec);
    if (ec) return Status::Internal("cannot read the link " + src + ": " + ec.message());
    if (symlink(target.c_str(), dst.c_str()) != 0)
      return Status::Internal(Errno("cannot create the link " + dst));
    if (owner && lchown(dst.c_str(), owner->uid, owner->gid) != 0) {
      return Status::Internal(
          Errno("cannot give the link " + dst + " to uid " + std::to_string(owner->uid)));
    }
    return int64_t{0};
  }
  const int in = open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return Status::Internal(Errno("cannot open " + src));
  // The agent copies as itself (root, when tasks run as their users): only the task user's own
  // files, so that a link swapped in under a folder cannot make it copy someone else's.
  if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode) || (owner && st.st_uid != owner->uid)) {
    close(in);
    return Status::PermissionDenied(
        src + " is not a file of uid " +
        (owner ? std::to_string(owner->uid) : std::string("the agent's")) +
        " (the task's user); a checkpoint holds only the task's own files");
  }
  const int out = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) {
    const std::string why = Errno("cannot create " + dst);
    close(in);
    return Status::Internal(why);
  }
  Status s = Status::Ok();
  int64_t copied = 0;
  bool plain = false;  // copy_file_range refused: read and write
  std::vector<char> buf;
  while (s.ok()) {
    ssize_t n = -1;
    if (!plain) {
      n = copy_file_range(in, nullptr, out, nullptr, 64 << 20, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
                    errno == EPERM)) {
        plain = true;
        continue;
      }
    } else {
      if (buf.empty()) buf.resize(1 << 20);
      n = read(in, buf.data(), buf.size());
      for (ssize_t off = 0; n > 0 && off < n;) {
        const ssize_t w = write(out, buf.data() + off, static_cast<size_t>(n - off));
        if (w < 0) {
          if (errno == EINTR) continue;
          s = Status::Internal(Errno("cannot write " + dst));
          break;
        }
        off += w;
      }
    }
    if (!s.ok()) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      s = Status::Internal(Errno("cannot copy " + src + " to " + dst));
    } else if (n == 0) {
      break;
    } else {
      copied += n;
    }
  }
  if (s.ok() && owner && fchown(out, owner->uid, owner->gid) != 0) {
    s = Status::Internal(Errno("cannot give " + dst + " to uid " + std::to_string(owner->uid)));
  }
  if (s.ok() && fchmod(out, st.st_mode & 0777) != 0)
    s = Status::Internal(Errno("cannot set the mode of " + dst));
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (s.ok() && futimens(out, times) != 0)
    s = Status::Internal(Errno("cannot set the times of " + dst));
  if (s.ok() && fsync(out) != 0) s = Status::Internal(Errno("cannot sync " + dst));
  close(in);
  if (close(out) != 0 && s.ok()) s = Status::Internal(Errno("cannot close " + dst));
  if (!s.ok()) return s;
  return copied;
}

Status MakeDir(const std::string& path, const std::optional<FileOwner>& owner, mode_t mode = 0700) {
  if (mkdir(path.c_str(), 0700) != 0) {
    if (errno == EEXIST) return Status::Ok();
    return Status::Internal(Errno("cannot create " + path));
  }
  if (owner && chown(path.c_str(), owner->uid, owner->gid) != 0) {
    return Status::Internal(Errno("cannot give " + path + " to uid " + std::to_string(owner->uid)));
  }
  if (chmod(path.c_str(), mode & 0777) != 0)
    return Status::Internal(Errno("cannot set the mode of " + path));
  return Status::Ok();
}

// The folders of `rel` (a/b/c -> a, a/b), created under `root` where missing.
Status MakeParents(const std::string& root, const std::string& rel,
                   const std::optional<FileOwner>& owner) {
  fs::path p;
  const fs::path parent = fs::path(rel).parent_path();
  for (const auto& part : parent) {
    p /= part;
    HANGAR_RETURN_IF_ERROR(MakeDir(root + "/" + p.string(), owner));
  }
  return Status::Ok();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 ? st.st_mode : 0700;
}

// A hard link to the previous generation's copy of a file, or a copy where links are refused.
StatusOr<bool> LinkOrCopy(const std::string& from, const std::string& to,
                          const std::optional<FileOwner>& owner, int64_t* bytes) {
  struct stat st {};
  if (lstat(from.c_str(), &st) == 0 && S_ISREG(st.st_mode) && link(from.c_str(), to.c_str()) == 0)
    return true;
  HANGAR_ASSIGN_OR_RETURN(int64_t n, CopyEntry(from, to, owner));
  *bytes += n;
  return false;
}

// Copies the tree at `src` into the new folder `dst` (files fsynced); its manifest and bytes.
StatusOr<std::pair<Tree, int64_t>> CopyTree(const std::string& src, const std::string& dst,
                                            const std::optional<FileOwner>& owner) {
  HANGAR_ASSIGN_OR_RETURN(Tree t, Walk(src));
  HANGAR_RETURN_IF_ERROR(MakeDir(dst, owner));
  for (const auto& d : t.dirs)
    HANGAR_RETURN_IF_ERROR(MakeDir(dst + "/" + d, owner, ModeOf(src + "/" + d)));
  int64_t bytes = 0;
  for (const auto& [rel, e] : t.files) {
    HANGAR_ASSIGN_OR_RETURN(int64_t n, CopyEntry(src + "/" + rel, dst + "/" + rel, owner));
    bytes += n;
  }
  for (auto d = t.dirs.rbegin(); d != t.dirs.rend(); ++d)
    HANGAR_RETURN_IF_ERROR(FsyncPath(dst + "/" + *d, true));
  HANGAR_RETURN_IF_ERROR(FsyncPath(dst, true));
  return std::make_pair(std::move(t), bytes);
}

// Points the store's link at `generation` (a name beside it): a new link, renamed over the old.
Status PointLink(const StorePaths& s, const std::string& store_dir, const std::string& generation) {
  const std::string tmp = s.LinkTmp();
  unlink(tmp.c_str());
  if (symlink(generation.c_str(), tmp.c_str()) != 0)
    return Status::Internal(Errno("cannot create the link " + tmp));
  if (std::rename(tmp.c_str(), store_dir.c_str()) != 0) {
    const std::string why = Errno("cannot point " + store_dir + " at " + generation);
    unlink(tmp.c_str());
    return Status::Internal(why);
  }
  return FsyncPath(s.parent, true);
}

Status EnsureLocalDir(const std::string& local_dir, const std::optional<FileOwner>& owner) {
  std::error_code ec;
  fs::create_directories(fs::path(local_dir).parent_path(), ec);
  if (ec)
    return Status::FailedPrecondition(
        "cannot create " + fs::path(local_dir).parent_path().string() + ": " + ec.message());
  struct stat st {};
  if (lstat(local_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return Status::FailedPrecondition(local_dir + " is not a folder; remove it");
  }
  HANGAR_RETURN_IF_ERROR(MakeDir(local_dir, owner));
  if (owner && lstat(local_dir.c_str(), &st) == 0 && st.st_uid != owner->uid &&
      chown(local_dir.c_str(), owner->uid, owner->gid) != 0) {
    return Status::FailedPrecondition(
        Errno("cannot give " + local_dir + " to uid " + std::to_string(owner->uid)));
  }
  return Status::Ok();
}

Status DrainLocked(const std::string& local_dir, const std::string& store_dir, const StorePaths& s,
                   const std::optional<FileOwner>& owner, DrainResult* result) {
  std::error_code ec;
  // Leftovers of a drain that died (under the lock, every .tmp is one).
  for (const auto& e : fs::directory_iterator(s.parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(s.Prefix(), 0) == 0 && name.size() > 4 &&
        name.compare(name.size() - 4, 4, ".tmp") == 0) {
      fs::remove_all(e.path(), ec);
    }
  }
  unlink(s.LinkTmp().c_str());
  // A plain folder at the store's path (agents without scratch dirs wrote it) becomes generation 0.
  struct stat st {};
  if (lstat(store_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    const std::string gen0 = s.Gen(0);
    fs::remove_all(s.parent + "/" + gen0, ec);
    if (std::rename(store_dir.c_str(), (s.parent + "/" + gen0).c_str()) != 0) {
      return Status::Internal(Errno("cannot move the folder " + store_dir + " aside as " + gen0));
    }
    HANGAR_RETURN_IF_ERROR(PointLink(s, store_dir, gen0));
  }
  const std::optional<StoreGeneration> cur = CurrentGeneration(store_dir);
  if (!cur && lstat(store_dir.c_str(), &st) == 0) {
    return Status::FailedPrecondition(
        store_dir + " is neither a folder nor a link to a generation beside it; move it away");
  }
  // This node's last sync counts only if it is an ancestor of the current generation.
  Marker base;
  if (auto m = ReadMarker(local_dir)) {
    auto mseq = SeqOf(s, m->generation);
    if (mseq && cur && *mseq <= cur->seq) base = std::move(*m);
  }
  HANGAR_ASSIGN_OR_RETURN(Tree local, Walk(local_dir));
  Tree current;
  if (cur) {
    HANGAR_ASSIGN_OR_RETURN(current, Walk(cur->path));
  }
  const uint64_t seq = cur ? cur->seq + 1 : 1;
  const std::string name = s.Gen(seq);
  const std::string tmp = s.parent + "/" + name + ".tmp";
  auto build = [&]() -> Status {
    HANGAR_RETURN_IF_ERROR(MakeDir(tmp, owner));
    for (const auto& d : local.dirs)
      HANGAR_RETURN_IF_ERROR(MakeDir(tmp + "/" + d, owner, ModeOf(local_dir + "/" + d)));
    for (const auto& [rel, e] : local.files) {
      auto was = base.files.find(rel);
      const bool unchanged = was != base.files.end() && was->second == e;
      auto there = current.files.find(rel);
      if (unchanged) {
        // Not changed here since this node's last sync: the store's copy is as new or newer
        // (another node wrote it), and if the store has none another node removed it.
        if (there == current.files.end()) continue;
        HANGAR_RETURN_IF_ERROR(MakeParents(tmp, rel, owner));
        HANGAR_ASSIGN_OR_RETURN(bool linked, LinkOrCopy(cur->path + "/" + rel, tmp + "/" + rel,
                                                        owner, &result->bytes_copied));
        (linked ? result->files_linked : result->files_copied)++;
        continue;
      }
      HANGAR_RETURN_IF_ERROR(MakeParents(tmp, rel, owner));
      HANGAR_ASSIGN_OR_RETURN(int64_t n, CopyEntry(local_dir + "/" + rel, tmp + "/" + rel, owner));
      result->bytes_copied += n;
      result->files_copied++;
    }
    for (const auto& [rel, e] : current.files) {
      if (local.files.count(rel)) continue;
      if (base.files.count(rel)) continue;  // this node had it and removed it since
      HANGAR_RETURN_IF_ERROR(MakeParents(tmp, rel, owner));
      HANGAR_ASSIGN_OR_RETURN(bool linked, LinkOrCopy(cur->path + "/" + rel, tmp + "/" + rel, owner,
                                                      &result->bytes_copied));
      (linked ? result->files_linked : result->files_copied)++;
    }
    // Every folder synced, deepest first, so that the new names are on disk before the rename.
    std::vector<std::string> dirs;
    for (auto it = fs::recursive_directory_iterator(tmp, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path().string());
    }
    if (ec) return Status::Internal("cannot read " + tmp + ": " + ec.message());
    for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) HANGAR_RETURN_IF_ERROR(FsyncPath(*d, true));
    HANGAR_RETURN_IF_ERROR(FsyncPath(tmp, true));
    if (std::rename(tmp.c_str(), (s.parent + "/" + name).c_str()) != 0) {
      return Status::Internal(Errno("cannot rename " + tmp + " to " + name));
    }
    return FsyncPath(s.parent, true);
  };
  Status built = build();
  if (!built.ok()) {
    fs::remove_all(tmp, ec);
    return built;
  }
  Status pointed = PointLink(s, store_dir, name);
  if (!pointed.ok()) {
    fs::remove_all(s.parent + "/" + name, ec);
    return pointed;
  }
  result->generation = name;
  // The previous generation goes (what did not change lives on in the new one's hard links).
  if (cur && cur->name != name) {
    fs::remove_all(cur->path, ec);
    if (ec)
      spdlog::warn("checkpoint store: cannot remove the old generation {}: {}", cur->path,
                   ec.message());
  }
  Marker mine{name, local.files};
  Status marked = WriteMarker(local_dir, mine);
  if (!marked.ok())
    spdlog::warn("checkpoint drain: {} (the next restore copies the store again)",
                 marked.message());
  return Status::Ok();
}

}  // namespace

std::optional<StoreGeneration> CurrentGeneration(const std::string& store_dir) {
  const StorePaths s = PathsOf(store_dir);
  struct stat st {};
  if (lstat(store_dir.c_str(), &st) != 0) return std::nullopt;
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    if (fs::is_empty(store_dir, ec) || ec) return std::nullopt;
    return StoreGeneration{"plain", store_dir, 0};
  }
  if (!S_ISLNK(st.st_mode)) return std::nullopt;
  std::error_code ec;
  const std::string target = fs::read_symlink(store_dir, ec).string();
  if (ec) return std::nullopt;
  auto seq = SeqOf(s, target);
  if (!seq) return std::nullopt;
  const std::string path = s.parent + "/" + target;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return StoreGeneration{target, path, *seq};
}

std::string ResolveStoreLink(const std::string& path) {
  auto g = CurrentGeneration(path);
  return g && g->name != "plain" ? g->path : path;
}

StatusOr<RestoreResult> RestoreCheckpoint(const std::string& store_dir,
                                          const std::string& local_dir,
                                          const std::optional<FileOwner>& owner,
                                          Duration lock_timeout) {
  const auto t0 = Clock::now();
  RestoreResult r;
  const StorePaths s = PathsOf(store_dir);
  std::optional<StoreLock> lock;
  std::error_code ec;
  if (fs::is_directory(s.parent, ec)) {
    HANGAR_ASSIGN_OR_RETURN(StoreLock l,
                            StoreLock::Take(s.Lock(), /*exclusive=*/false, lock_timeout));
    lock.emplace(std::move(l));
  }
  const std::optional<StoreGeneration> cur = CurrentGeneration(store_dir);
  const std::optional<Marker> mine = ReadMarker(local_dir);
  const bool local_there = fs::is_directory(local_dir, ec);
  if (!cur) {
    HANGAR_RETURN_IF_ERROR(EnsureLocalDir(local_dir, owner));
    r.generation = local_there && mine ? mine->generation : "";
    r.why = "the store holds no checkpoint of this job";
    r.took = MsSince(t0);
    return r;
  }
  if (cur->name != "plain" && local_there && mine) {
    auto mseq = SeqOf(s, mine->generation);
    if (mseq && *mseq >= cur->seq) {
      HANGAR_RETURN_IF_ERROR(EnsureLocalDir(local_dir, owner));
      r.generation = mine->generation;
      r.why = *mseq == cur->seq
                  ? "this node holds the store's generation " + cur->name + " already"
                  : "this node holds " + mine->generation + ", newer than the store's " + cur->name;
      r.took = MsSince(t0);
      return r;
    }
  }
  std::error_code parent_ec;
  fs::create_directories(fs::path(local_dir).parent_path(), parent_ec);
  const std::string tmp = local_dir + ".restore";
  fs::remove_all(tmp, ec);
  auto copied = CopyTree(cur->path, tmp, owner);
  if (!copied.ok()) {
    fs::remove_all(tmp, ec);
    return Status(copied.status().code(),
                  "restoring " + cur->path + " to " + local_dir + ": " + copied.status().message());
  }
  if (local_there) {
    const std::string old = local_dir + ".old";
    fs::remove_all(old, ec);
    if (std::rename(local_dir.c_str(), old.c_str()) != 0)
      return Status::Internal(Errno("cannot move " + local_dir + " aside"));
    fs::remove_all(old, ec);
  }
  if (std::rename(tmp.c_str(), local_dir.c_str()) != 0)
    return Status::Internal(Errno("cannot rename " + tmp + " to " + local_dir));
  HANGAR_RETURN_IF_ERROR(WriteMarker(local_dir, Marker{cur->name, copied->first.files}));
  r.restored = true;
  r.generation = cur->name;
  r.bytes = copied->second;
  r.took = MsSince(t0);
  r.why = "restored " + cur->name + " from the store (" +
          std::to_string(copied->first.files.size()) + " files, " + std::to_string(r.bytes) +
          " bytes, " + std::to_string(r.took) + " ms)";
  return r;
}

StatusOr<DrainResult> DrainCheckpoint(const std::string& local_dir, const std::string& store_dir,
                                      const std::optional<FileOwner>& owner,
                                      Duration lock_timeout) {
  const auto t0 = Clock::now();
  const std::string what = "draining " + local_dir + " to " + store_dir;
  std::error_code ec;
  if (!fs::is_directory(local_dir, ec))
    return Status::FailedPrecondition(what + ": " + local_dir + " is not a folder");
  const StorePaths s = PathsOf(store_dir);
  fs::create_directories(s.parent, ec);
  if (ec) {
    return Status::Unavailable(what + ": cannot create the checkpoint store " + s.parent + " (" +
                               ec.message() +
                               "); --checkpoint-root must be shared storage mounted on this node");
  }
  auto lock = StoreLock::Take(s.Lock(), /*exclusive=*/true, lock_timeout);
  if (!lock.ok()) return Status(lock.status().code(), what + ": " + lock.status().message());
  DrainResult result;
  Status st = DrainLocked(local_dir, store_dir, s, owner, &result);
  if (!st.ok())
    return Status(st.code(),
                  what + ": " + st.message() + "; the store keeps its previous checkpoint");
  result.took = MsSince(t0);
  return result;
}

CheckpointDrainer::CheckpointDrainer(Done done, Duration lock_timeout)
    : done_(std::move(done)), lock_timeout_(lock_timeout), thread_([this] { Loop(); }) {}

CheckpointDrainer::~CheckpointDrainer() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CheckpointDrainer::Enqueue(Request r) {
  {
    MutexLock l(mu_);
    queue_.push_back(std::move(r));
  }
  cv_.notify_all();
}

void CheckpointDrainer::Loop() {
  for (;;) {
    Request r;
    {
      MutexLock l(mu_);
      l.Wait(cv_, [this]() HANGAR_REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (stop_) return;
      r = std::move(queue_.front());
      queue_.pop_front();
    }
    done_(r, DrainCheckpoint(r.local_dir, r.store_dir, r.owner, lock_timeout_));
  }
}

}  // namespace hangar::agent
