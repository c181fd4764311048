#include "controller/backup_command.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "controller/store/backup.h"
#include "controller/store/state_store.h"
#include "controller/store/store_integrity.h"

namespace hangar::controller {
namespace {

struct BackupFlags {
  std::string store, out;
};

struct RestoreFlags {
  std::string store, in;
  bool force = false;
};

// A SQLite store belongs to its running controller (it holds the file's lock): say so in the
// words of this command. `verb`: "back up"; `done`: "backed up".
StatusOr<std::unique_ptr<StateStore>> OpenForCommand(const std::string& url, const char* verb,
                                                     const char* done) {
  // Unchecked: a backup saves what is left of a damaged store, a restore replaces it.
  StoreOpenOptions unchecked;
  unchecked.check = false;
  unchecked.integrity_every = 0;
  auto store = OpenStore(url, unchecked);
  if (!store.ok() && store.status().code() == StatusCode::kFailedPrecondition &&
      url.rfind("sqlite://", 0) == 0) {
    const std::string& m = store.status().message();
    return Status::FailedPrecondition(
        m.substr(0, m.find("; stop it first")) +
        "; a SQLite store has one owner: stop that controller, then " + verb +
        " (a PostgreSQL store can be " + done + " while its controllers run)");
  }
  return store;
}

Status Backup(const BackupFlags& f) {
  if (f.store.empty() || f.out.empty())
    return Status::InvalidArgument("both --store URL and --out FILE are needed");
  HANGAR_ASSIGN_OR_RETURN(auto store, OpenForCommand(f.store, "back up", "backed up"));
  // Written beside the target and renamed into place: a failed backup never replaces a good one.
  // The rows hold jobs' specs and token records: the file is its owner's only.
  const std::string tmp = f.out + ".partial";
  ::umask(077);
  std::ofstream out(tmp, std::ios::trunc);
  if (!out)
    return Status::InvalidArgument("cannot write " + tmp +
                                   "; check that its folder exists and is writable");
  auto counts = WriteBackup(*store, out);
  out.close();
  if (!counts.ok() || !out) {
    std::filesystem::remove(tmp);
    return counts.ok() ? Status::Unavailable("cannot write " + tmp + " (disk full?)")
                       : counts.status();
  }
  std::error_code ec;
  std::filesystem::rename(tmp, f.out, ec);
  if (ec) return Status::Unavailable("cannot rename " + tmp + " to " + f.out + ": " + ec.message());
  std::printf("backed up %s to %s: %s\n", ShownStoreUrl(f.store).c_str(), f.out.c_str(),
              counts->ToString().c_str());
  return Status::Ok();
}

// A damaged SQLite file cannot be emptied row by row: with --force it is moved aside (kept, to
// PATH.damaged-TIME) and the backup goes into a new file. An empty (0-byte) file is restored into.
Status SetDamagedFileAside(const RestoreFlags& f) {
  const std::string prefix = "sqlite://";
  if (f.store.rfind(prefix, 0) != 0) return Status::Ok();
  const std::string path = f.store.substr(prefix.size());
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && st.st_size == 0) return Status::Ok();
  Status damaged = CheckSqliteFileAtOpen(path, f.force);
  if (damaged.ok() || f.force || damaged.code() != StatusCode::kFailedPrecondition) return damaged;
  return Status::FailedPrecondition("the store " + path +
                                    " is damaged; add --force to move it aside (it is kept, as " +
                                    path + ".damaged-TIME) and restore the backup into a new file");
}

Status Restore(const RestoreFlags& f) {
  if (f.store.empty() || f.in.empty())
    return Status::InvalidArgument("both --store URL and --in FILE are needed");
  std::ifstream in(f.in);
  if (!in) return Status::InvalidArgument("cannot read " + f.in + "; check the path");
  HANGAR_RETURN_IF_ERROR(SetDamagedFileAside(f));
  HANGAR_ASSIGN_OR_RETURN(auto store, OpenForCommand(f.store, "restore", "restored into"));
  HANGAR_ASSIGN_OR_RETURN(BackupCounts counts, RestoreBackup(in, f.in, *store, f.force));
  std::printf("restored %s into %s: %s\n", f.in.c_str(), ShownStoreUrl(f.store).c_str(),
              counts.ToString().c_str());
  return Status::Ok();
}

void Finish(const char* command, const Status& s, int* rc) {
  if (s.ok()) return;
  std::fprintf(stderr, "hangar %s: %s\n", command, s.message().c_str());
  *rc = 2;
}

}  // namespace

void RegisterBackupCommands(CLI::App& app, int* rc) {
  auto b = std::make_shared<BackupFlags>();
  CLI::App* backup =
      app.add_subcommand("backup", "Write every row of a store to a portable file (JSON lines)");
  backup
      ->add_option("--store", b->store,
                   "sqlite:///path/state.db or postgres://USER@HOST:PORT/DATABASE")
      ->required();
  backup->add_option("--out", b->out, "The backup file to write (mode 0600)")->required();
  backup->callback([b, rc] { Finish("backup", Backup(*b), rc); });

  auto r = std::make_shared<RestoreFlags>();
  CLI::App* restore =
      app.add_subcommand("restore", "Load a backup into a store (empty, unless --force)");
  restore
      ->add_option("--store", r->store,
                   "sqlite:///path/state.db or postgres://USER@HOST:PORT/DATABASE")
      ->required();
  restore->add_option("--in", r->in, "A file written by hangar backup")->required();
  restore->add_flag("--force", r->force,
                    "Erase everything in a store that is not empty, then restore");
  restore->callback([r, rc] { Finish("restore", Restore(*r), rc); });
}

}  // namespace hangar::controller
