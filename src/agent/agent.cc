#include "agent/agent.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/container/step_container.h"
#include "agent/fabric/ib_counters.h"
#include "agent/fence/fence_dir.h"
#include "agent/gpu/mig_profiles.h"
#include "agent/runner/process_spawn.h"
#include "agent/task_journal.h"
#include "common/version.h"

namespace hangar::agent {

namespace fs = std::filesystem;

namespace {

std::string KernelVersion() {
  utsname u{};
  return uname(&u) == 0 ? u.release : "";
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace

Agent::Agent(AgentOptions options, std::unique_ptr<GpuBackend> backend, Clock* clock)
    : options_(std::move(options)),
      backend_(std::move(backend)),
      clock_(clock),
      runner_(RunnerOptions{"", options_.use_cgroups, options_.state_dir}) {
  sessions_ = std::make_unique<SessionHost>([this](pb::SessionOutput o) {
    pb::AgentMessage m;
    *m.mutable_session_output() = std::move(o);
    Write(m);
  });
  maintenance_ = std::make_unique<MaintenanceCommands>(
      options_.node, options_.state_dir + "/maintenance", options_.allow_maintenance_commands,
      [this](const pb::MaintenanceResult& r) {
        pb::AgentMessage m;
        *m.mutable_maintenance_result() = r;
        Write(m);  // none while disconnected: the controller asks again, and is answered then
      });
}

Agent::~Agent() {
  preflights_.StopAll();  // their threads launch tasks and write to the stream
  maintenance_.reset();   // its commands' answers stop before the stream goes
  socket_.reset();        // stops its thread before anything it uses goes
  drainer_.reset();       // likewise (after the drain in progress)
  validation_.Join();
}

std::string Agent::TaskDir(const std::string& task_id) const {
  return options_.state_dir + "/tasks/" + task_id;
}

// A task id names a folder under the state dir: the controller makes them JOB.ATTEMPT.INDEX, and
// anything that could leave that folder ("..", a slash) is refused, whoever sent it.
bool Agent::SafeTaskId(const std::string& task_id) {
  if (task_id.empty() || task_id.size() > 128 || task_id.front() == '.') return false;
  return std::all_of(task_id.begin(), task_id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
           c == '-' || c == '_';
  });
}

void Agent::InitMig() {
  std::map<std::string, std::vector<MigSlot>> claims;
  {
    MutexLock l(tasks_.mu());
    for (const auto& [id, rec] : tasks_.records()) {
      if (!rec.ended && !rec.mig.empty()) claims[id] = rec.mig;
    }
  }
  mig_.Init(options_.mig_layout, facts_.mutable_gpus(), std::move(claims));
}

Status Agent::Init() {
  std::error_code ec;
  fs::create_directories(options_.state_dir + "/tasks", ec);
  if (ec)
    return Status::Unavailable("cannot create the state directory " + options_.state_dir + ": " +
                               ec.message());
  HANGAR_RETURN_IF_ERROR(
      facts_.Discover(backend_.get(), {options_.ib_root, options_.pci_root, options_.ibnetdiscover},
                      runner_.CgroupStatus()));
  if (const std::string nics = facts_.NicsForGpus(options_.pci_root); !nics.empty())
    spdlog::info("agent {}: NICs for GPUs: {}", options_.node, nics);
  for (const auto& note : facts_.discovered().notes())
    spdlog::info("agent {}: topology: {}", options_.node, note);
  fence_ = std::make_unique<fence::NodeFence>(options_.state_dir, options_.hangar_binary);
  HANGAR_RETURN_IF_ERROR(fence_->Open());
  auto journal = std::make_unique<TaskJournal>(options_.state_dir);
  std::map<std::string, TaskRecord> loaded = LoadTaskRecords(*journal);
  const fence::FenceDir kept(options_.state_dir);
  for (auto& [id, r] : loaded) {
    if (!r.ended) {
      if (r.pid > 0 &&
          runner_.Adopt(r.task_id, r.pid, /*signal_proxy=*/!r.container.empty()).ok()) {
        for (uint32_t g : r.gpus) backend_->SetBusy(g, TaskDir(r.task_id) + "/gpu_util");
        spdlog::info("agent: adopted task {} (pid {}) from an earlier run", r.task_id, r.pid);
      } else {
        r.ended = true;
        r.ended_at = clock_->Now();
        // The fence keeper outlives the agent and keeps how its tasks ended (fence_keeper.h).
        if (auto status = kept.KeptExit(r.task_id, static_cast<pid_t>(r.pid))) {
          r.exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
          r.signal = WIFSIGNALED(*status) ? WTERMSIG(*status) : 0;
          r.message =
              "ended while the agent was down; its exit status kept by the node's fence "
              "keeper";
        } else {
          r.exit_code = -1;
          r.message = "ended while the agent was down; its exit status is unknown";
        }
        NoteFenced(&r);
        kept.ForgetKeptExit(r.task_id);
      }
    }
  }
  runner_.ForgetUnguarded();
  link_.LoadStoreId();
  {
    MutexLock l(tasks_.mu());
    tasks_.Open(std::move(journal), std::move(loaded));
  }
  InitMps();
  InitMig();
  InitContainers();
  HANGAR_RETURN_IF_ERROR(InitData());
  if (!options_.scratch_dir.empty()) {
    drainer_ = std::make_unique<CheckpointDrainer>(
        [this](const CheckpointDrainer::Request& q, const StatusOr<DrainResult>& r) {
          OnDrained(q, r);
        },
        options_.drain_lock_timeout);
    ResumeDrains();
  }
  if (options_.forget_store && !link_.store_id().empty()) ForgetStore();
  StartSocket();
  StartStepSocket();
  return Status::Ok();
}

void Agent::StartSocket() {
  const std::string path = AgentSocketPath(options_.state_dir);
  auto s = AgentSocket::Listen(
      path, [this](const CheckpointReport& c) { return OnCheckpointReport(c); },
      [this](const CheckpointReport& c, const CheckpointReply& r) { AfterCheckpointReply(c, r); },
      [this](const ProgressReport& p) { return OnProgressReport(p); });
  if (!s.ok()) {
    // Tasks still run; `hangar checkpoint-done` in them says it cannot reach the agent.
    spdlog::error("agent {}: tasks cannot report checkpoints: {}", options_.node,
                  s.status().message());
    return;
  }
  socket_ = std::move(*s);
  spdlog::info("agent {}: tasks reach the agent at {}", options_.node, socket_->path());
}

StatusOr<CheckpointReply> Agent::OnCheckpointReport(const CheckpointReport& c) {
  pb::AgentMessage m;
  pb::CheckpointDone* done = m.mutable_checkpoint_done();
  TaskRecord record;
  {
    MutexLock l(tasks_.mu());
    const TaskRecord* it = tasks_.Find(c.task_id);
    if (!it || it->ended || !runner_.IsRunning(c.task_id)) {
      return Status::NotFound("task '" + c.task_id + "' does not run on node " + options_.node);
    }
    // The socket is open to every local user: a task's reports come from its own uid (or root).
    const int64_t owner = it->uid >= 0 ? it->uid : static_cast<int64_t>(geteuid());
    if (c.peer_uid >= 0 && c.peer_uid != 0 && c.peer_uid != owner) {
      spdlog::warn(
          "agent {}: refused a checkpoint report for task {} from uid {} (the task runs as uid {})",
          options_.node, c.task_id, c.peer_uid, owner);
      return Status::PermissionDenied(
          "task '" + c.task_id + "' runs as uid " + std::to_string(owner) + "; uid " +
          std::to_string(c.peer_uid) + " may not report its checkpoints");
    }
    done->set_job_id(it->job_id);
    record = *it;
  }
  done->set_task_id(c.task_id);
  done->set_time_ms(clock_->Now());
  done->set_path(c.path);
  done->set_step(c.step);
  CheckpointReply reply;
  reply.released = runner_.InCheckpointPhase(c.task_id);
  if (!record.checkpoint_local.empty() && drainer_) {
    // Node-local scratch: the task goes on (or is released) now; the controller hears of the
    // checkpoint once it is durable in the shared store.
    QueueDrain(record, c.path, c.step);
    spdlog::info("agent {}: task {} wrote a checkpoint{}{}{}; draining {} to {} in the background",
                 options_.node, c.task_id, c.path.empty() ? "" : " at " + c.path,
                 c.step ? " (step " + std::to_string(c.step) + ")" : "",
                 reply.released ? "; releasing it from its stop's grace" : "",
                 record.checkpoint_local, record.checkpoint_store);
    return reply;
  }
  const bool sent = link_.WriteOrHold(*done);
  spdlog::info("agent {}: task {} wrote a checkpoint{}{}{}{}", options_.node, c.task_id,
               c.path.empty() ? "" : " at " + c.path,
               c.step ? " (step " + std::to_string(c.step) + ")" : "",
               reply.released ? "; releasing it from its stop's grace" : "",
               sent ? "" : "; the controller will hear of it when connected");
  return reply;
}

void Agent::AfterCheckpointReply(const CheckpointReport& c, const CheckpointReply& reply) {
  if (!reply.released) return;
  auto released = runner_.CheckpointDone(c.task_id);
  if (!released.ok()) {
    spdlog::info("agent {}: task {}: {}", options_.node, c.task_id, released.status().message());
  }
}

void Agent::ForgetStore() {
  const auto running = runner_.Running();
  size_t recorded = 0;
  {
    // Not alone even in Init: ResumeDrains has started the drainer, whose OnDrained changes
    // the records (SaveAll drops old ones) under the table's lock.
    MutexLock l(tasks_.mu());
    recorded = tasks_.records().size();
  }
  spdlog::warn(
      "agent {}: --forget-store: forgetting store {} and its {} task record(s){}", options_.node,
      link_.store_id(), recorded,
      running.empty() ? "" : "; stopping its " + std::to_string(running.size()) + " task(s)");
  for (const auto& [id, pid] : running) (void)runner_.Stop(id, options_.stop_tasks_grace);
  const Time deadline = clock_->Now() + options_.stop_tasks_grace + kSecond;
  while (!runner_.Running().empty() && clock_->Now() < deadline) {
    for (const TaskExit& e : runner_.Reap()) (void)RecordExit(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const TaskExit& e : runner_.Reap()) (void)RecordExit(e);
  {
    MutexLock l(tasks_.mu());
    tasks_.Clear();
  }
  link_.ForgetStore();
}

pb::Register Agent::RegisterMessage() {
  pb::Register reg;
  reg.set_store_id(link_.store_id());
  reg.set_lease_clock_ms(fence::LeaseClockMs());
  pb::Inventory* inv = reg.mutable_inventory();
  inv->set_node(options_.node);
  inv->set_address(options_.address);
  facts_.Describe(inv);  // the GPUs as found, the driver, the ports
  for (pb::GpuInfo& g : *inv->mutable_gpus()) {
    if (g.mig()) {
      for (const auto& mi : mig_.LayoutOf(g.index())) *g.add_mig_layout() = mi;
    }
  }
  inv->set_milli_cpu(options_.milli_cpu);
  inv->set_memory_mib(options_.memory_mib);
  inv->set_kernel_version(KernelVersion());
  inv->set_boot_id(BootId());
  inv->set_agent_version("hangar " + std::string(Version()));
  for (auto& f : AgentFeatureNames(kEveryAgentFeature)) inv->add_features(std::move(f));
  inv->set_gpu_backend(backend_->name());
  *reg.mutable_discovered_topology() = facts_.discovered();
  reg.set_token(options_.token);
  MutexLock l(tasks_.mu());
  for (const auto& [id, r] : tasks_.records()) {
    // A task whose end waits for its job's drain is still running, as far as the controller knows.
    if (r.ended && !tasks_.Draining(r.job_id)) continue;
    pb::TaskRef* t = reg.add_running();
    t->set_task_id(r.task_id);
    t->set_job_id(r.job_id);
    t->set_attempt(r.attempt);
    t->set_task_index(r.index);
    t->set_pid(r.pid);
  }
  return reg;
}

bool Agent::Write(const pb::AgentMessage& m) { return link_.Write(m); }

void Agent::SendStatus(const TaskRecord& r) {
  pb::AgentMessage m;
  pb::TaskStatus* s = m.mutable_task_status();
  s->set_task_id(r.task_id);
  s->set_job_id(r.job_id);
  s->set_attempt(r.attempt);
  s->set_task_index(r.index);
  s->set_state(r.failed_to_start ? pb::TaskStatus::FAILED_TO_START
               : r.ended         ? pb::TaskStatus::EXITED
                                 : pb::TaskStatus::RUNNING);
  s->set_exit_code(r.exit_code);
  s->set_signal(r.signal);
  s->set_stopped(r.stopped);
  s->set_agent_exiting(r.agent_exiting);
  s->set_message(r.message);
  if (r.preflight) *s->mutable_preflight() = *r.preflight;
  Write(m);
}

void Agent::Run(const std::atomic<bool>* stop) {
  std::thread reaper([this, stop] { ReaperLoop(stop); });
  std::thread heartbeat([this, stop] { HeartbeatLoop(stop); });
  std::thread stager([this, stop] { StageLoop(stop); });
  std::thread mig([this, stop] {
    mig_.Loop(stop, [this](const pb::MigReshaped& done) {
      pb::AgentMessage m;
      *m.mutable_mig_reshaped() = done;
      Write(m);
    });
  });
  Duration backoff = 100;
  while (!*stop) {
    const Time started = clock_->Now();
    Session(stop);
    if (*stop) break;
    if (clock_->Now() - started > 5 * kSecond) backoff = 100;  // it was a healthy session
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff));
    // With several controllers, the next one is tried soon: one of them leads.
    const bool several = options_.controller.find(',') != std::string::npos;
    backoff = std::min<Duration>(backoff * 2, several ? 300 : 2 * kSecond);
  }
  link_.Cancel();
  reaper.join();
  heartbeat.join();
  stage_queue_.WakeAll();
  stager.join();
  mig.join();
  if (options_.stop_tasks_on_exit) StopTasksOnExit();
  if (mps_) mps_->StopUnused();  // those of tasks that outlive the agent stay, for them
  backend_->CancelValidation();
  validation_.Join();
}

// A channel to one controller: mutual TLS when configured; with several controllers, keepalive
// pings, so that one that stopped answering (SIGSTOP, a cut link) is left within ~2 s for the
// next of the list.
std::shared_ptr<grpc::Channel> Agent::ChannelTo(const std::string& controller) const {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options_.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = options_.tls_ca_pem;
    o.pem_private_key = options_.tls_key_pem;
    o.pem_cert_chain = options_.tls_cert_pem;
    creds = grpc::SslCredentials(o);
  }
  grpc::ChannelArguments args;
  if (options_.controller.find(',') != std::string::npos) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 1000);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  return grpc::CreateCustomChannel(controller, creds, args);
}

// Just registered: tell the controller again what it may have missed while we were apart.
// Checkpoints first: one the controller hears of after its task's end belongs to an old attempt.
void Agent::RetellAfterRegistering(const std::map<std::string, pb::CheckpointDone>& unsent) {
  std::vector<TaskRecord> ended;
  {
    MutexLock l(tasks_.mu());
    // Not those whose job's checkpoint is still draining: they go out when it is durable.
    for (const auto& [id, r] : tasks_.records())
      if (r.ended && !tasks_.Draining(r.job_id)) ended.push_back(r);
  }
  for (const auto& [id, c] : unsent) {
    pb::AgentMessage m;
    *m.mutable_checkpoint_done() = c;
    Write(m);
  }
  for (const auto& r : ended) SendStatus(r);
  SendImages();
}

void Agent::Session(const std::atomic<bool>* stop) {
  const std::string controller = link_.NextController();
  auto stub = pb::AgentChannel::NewStub(ChannelTo(controller));
  grpc::ClientContext ctx;
  // With `--auth tokens` the controller admits only this node's own node token.
  if (!options_.token.empty()) ctx.AddMetadata("authorization", "Bearer " + options_.token);
  auto stream = stub->Connect(&ctx);
  pb::AgentMessage reg;
  *reg.mutable_register_() = RegisterMessage();
  if (!stream->Write(reg)) {
    stream->Finish();
    return;
  }
  RetellAfterRegistering(link_.Attach(stream.get(), &ctx));
  pb::ControllerMessage in;
  while (!*stop && stream->Read(&in)) {
    if (!link_.Accept(in, controller)) break;
    Handle(in);
  }
  link_.Detach();
  sessions_->CloseSessions();  // their far ends went with the stream
  if (steps_) steps_->ControllerGone();
  // The controller ended the stream (a refusal says why in its status) or we are stopping (then
  // the call is cancelled, which Finish would wait for otherwise).
  if (*stop) ctx.TryCancel();
  grpc::Status st = stream->Finish();
  if (!st.ok() && !*stop && st.error_code() != grpc::StatusCode::CANCELLED) {
    spdlog::warn("agent {}: controller at {}: {}", options_.node, controller, st.error_message());
  }
}

void Agent::Handle(const pb::ControllerMessage& m) {
  switch (m.body_case()) {
    case pb::ControllerMessage::kRegistered:
      if (m.registered().heartbeat_interval_ms() > 0)
        link_.set_heartbeat_ms(m.registered().heartbeat_interval_ms());
      if (fence_) fence_->Grant(m.registered().lease_clock_ms(), m.registered().lease_ms());
      data_.SetToken(m.registered().data_token());
      for (const auto& id : m.registered().stop_tasks()) {
        pb::Stop s;
        s.set_task_id(id);
        s.set_grace_ms(10 * kSecond);
        HandleStop(s);
      }
      break;
    case pb::ControllerMessage::kLaunch:
      HandleLaunch(m.launch());
      break;
    case pb::ControllerMessage::kStop:
      HandleStop(m.stop());
      break;
    case pb::ControllerMessage::kSignal:
      (void)runner_.Signal(m.signal().task_id(), m.signal().signal());
      break;
    case pb::ControllerMessage::kLogRequest:
      HandleLog(m.log_request());
      break;
    case pb::ControllerMessage::kSessionOpen:
      HandleSessionOpen(m.session_open());
      break;
    case pb::ControllerMessage::kSessionInput:
      sessions_->Input(m.session_input());
      break;
    case pb::ControllerMessage::kTerminalNotice:
      sessions_->Notice(m.terminal_notice().task_id(), m.terminal_notice().text());
      break;
    case pb::ControllerMessage::kStepOutput:
      if (steps_) steps_->Deliver(m.step_output());
      break;
    case pb::ControllerMessage::kValidate:
      HandleValidate(m.validate());
      break;
    case pb::ControllerMessage::kStage:
      HandleStage(m.stage());
      break;
    case pb::ControllerMessage::kMigReshape:
      mig_.Enqueue(m.mig_reshape());
      break;
    case pb::ControllerMessage::kMaintenanceCommand:
      maintenance_->Handle(m.maintenance_command());
      break;
    case pb::ControllerMessage::kLease:
      if (fence_) fence_->Grant(m.lease().lease_clock_ms(), m.lease().lease_ms());
      break;
    default:
      break;
  }
}

void Agent::HandleStop(const pb::Stop& s) {
  if (preflights_.Stop(s.task_id())) {
    spdlog::info("agent {}: task {} stopped during its gang preflight", options_.node, s.task_id());
    return;
  }
  Status st;
  if (s.checkpoint_signal() != 0) {
    const Duration kill_grace = s.kill_grace_ms() > 0 ? s.kill_grace_ms() : 10 * kSecond;
    st = runner_.StopWithCheckpoint(s.task_id(), s.checkpoint_signal(), s.grace_ms(), kill_grace);
    if (st.ok()) {
      spdlog::info(
          "agent {}: task {}: signal {} to checkpoint, then SIGTERM on its report or in {} ms",
          options_.node, s.task_id(), s.checkpoint_signal(), s.grace_ms());
      return;
    }
    if (st.code() == StatusCode::kInvalidArgument) {
      spdlog::warn("agent {}: task {}: {}; stopping it without a checkpoint", options_.node,
                   s.task_id(), st.message());
      st = runner_.Stop(s.task_id(), kill_grace);
    }
  } else {
    st = runner_.Stop(s.task_id(), s.grace_ms());
  }
  if (st.ok()) return;
  // Not running here: if we know how it ended, say so again.
  std::optional<TaskRecord> known;
  {
    MutexLock l(tasks_.mu());
    const TaskRecord* it = tasks_.Find(s.task_id());
    if (it && it->ended) known = *it;
    if (!it) {
      // Never launched here (its gang was still staging its image): it has ended, stopped, and a
      // late Launch of it finds this record and starts nothing.
      TaskRecord r;
      r.task_id = s.task_id();
      uint64_t job = 0;
      uint32_t attempt = 0, index = 0;
      if (std::sscanf(r.task_id.c_str(), "%lu.%u.%u", &job, &attempt, &index) == 3) {
        r.job_id = job, r.attempt = attempt, r.index = index;
      }
      r.ended = r.stopped = true;
      r.message = "stopped before it started on node " + options_.node;
      r.ended_at = clock_->Now();
      tasks_.Put(r);
      known = r;
    }
  }
  if (known && !HoldStatus(known->task_id)) SendStatus(*known);
}

void Agent::HandleLog(const pb::LogRequest& r) {
  pb::AgentMessage m;
  pb::LogChunk* c = m.mutable_log_chunk();
  c->set_request_id(r.request_id());
  c->set_offset(r.offset());
  if (!SafeTaskId(r.task_id())) {
    c->set_error("no task has the id '" + r.task_id() + "' (task ids are JOB.ATTEMPT.INDEX)");
    Write(m);
    return;
  }
  const std::string path = TaskDir(r.task_id()) + (r.stderr() ? "/stderr.log" : "/stdout.log");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    c->set_error("no logs for task " + r.task_id() + " on node " + options_.node);
  } else {
    in.seekg(static_cast<std::streamoff>(r.offset()));
    std::string buf(std::min<uint32_t>(r.max_bytes() ? r.max_bytes() : 65536, 1 << 20), '\0');
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
    c->set_data(buf);
    c->set_task_ended(!runner_.IsRunning(r.task_id()));
  }
  Write(m);
}

void Agent::HandleValidate(const pb::Validate& v) {
  if (!validation_.Start([this, reason = v.reason()] { RunValidation(reason); })) {
    spdlog::info("agent {}: validation already running; its result will answer this request too",
                 options_.node);
  }
}

void Agent::RunValidation(const std::string& reason) {
  spdlog::info("agent {}: validating GPUs ({})", options_.node,
               reason.empty() ? "asked by the controller" : reason);
  auto result = backend_->Validate();
  pb::AgentMessage m;
  pb::ValidationResult* v = m.mutable_validation();
  if (result.ok() && nlohmann::json::parse(*result, nullptr, false).is_object()) {
    v->set_ok(true);
    v->set_json(*result);
  } else {
    const std::string why = result.ok()
                                ? "validation printed no JSON object: " + result->substr(0, 200)
                                : result.status().message();
    spdlog::warn("agent {}: validation failed: {}", options_.node, why);
    v->set_ok(false);
    v->set_json(nlohmann::json{{"error", why}}.dump());
  }
  Write(m);
}

void Agent::InjectFaultsIfAsked(Time now) {
  const std::string path = options_.state_dir + "/inject-faults.yaml";
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  Status s = backend_->InjectFaultFile(path, now);
  if (s.ok()) {
    spdlog::info("agent {}: injected the faults in {}", options_.node, path);
  } else {
    spdlog::error("agent {}: {}", options_.node, s.message());
  }
  fs::rename(path, path + (s.ok() ? ".applied" : ".rejected"), ec);
}

std::optional<TaskRecord> Agent::RecordExit(const TaskExit& e) {
  TaskRecord r;
  {
    MutexLock l(tasks_.mu());
    TaskRecord* it = tasks_.Find(e.task_id);
    if (!it) {
      tasks_.KeepEarlyExit(e);  // its launch is still recording it: it takes it from here
      return std::nullopt;
    }
    it->ended = true;
    it->exit_code = e.exit_code;
    it->signal = e.signal;
    it->stopped = e.stopped;
    it->ended_at = clock_->Now();
    NoteFenced(it);
    r = *it;
  }
  if (!r.container.empty()) ReleaseContainer(&r);  // gone before its GPUs are free
  if (r.step_containers)
    ReleaseStepContainers(containers_.podman(), options_.node, options_.state_dir, r.task_id);
  {
    MutexLock l(tasks_.mu());
    TaskRecord& kept = tasks_.records()[r.task_id];
    r.drain_pending = kept.drain_pending;  // a drain may have ended meanwhile
    kept = r;
    tasks_.Save(r.task_id);
  }
  for (uint32_t g : r.gpus) backend_->SetIdle(g);
  ReleaseMps(r);
  mig_.Release(r.task_id);
  spdlog::info("agent {}: task {} ended (exit {}, signal {}{})", options_.node, r.task_id,
               r.exit_code, r.signal, r.stopped ? ", stopped" : "");
  return r;
}

// A task the fence keeper stopped did not fail: it was stopped because this node lost its lease,
// and the controller runs its job again (as for an agent that exited with its tasks).
void Agent::NoteFenced(TaskRecord* r) {
  if (!fence_) return;
  auto why = fence_->FencedBecause(r->task_id);
  if (!why) return;
  r->agent_exiting = true;
  r->message = *why;
  fence_->ForgetFenced(r->task_id);
}

void Agent::ReaperLoop(const std::atomic<bool>* stop) {
  while (!*stop) {
    for (const TaskExit& e : runner_.Reap()) {
      if (auto r = RecordExit(e)) AfterExit(*r);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Agent::AfterExit(const TaskRecord& r) {
  sessions_->TaskEnded(r.task_id, r.exit_code, r.signal);
  if (!HoldStatus(r.task_id)) SendStatus(r);
  // What it used may go now, if the budget needs room (and the cache may be within it again).
  if (!r.artifacts.empty() && data_.ready()) {
    for (const auto& gone : data_.objects().Evict(ArtifactsInUse())) {
      spdlog::info("agent {}: evicted artifact {} (cache budget)", options_.node, gone);
    }
    SendImages();
  }
}

void Agent::StopTasksOnExit() {
  const auto running = runner_.Running();
  if (running.empty()) return;
  spdlog::info("agent {}: stopping its {} task(s) before it exits", options_.node, running.size());
  for (const auto& [id, pid] : running) (void)runner_.Stop(id, options_.stop_tasks_grace);
  // Not reported as `stopped`: that means the controller asked for it (and then the job is not
  // failed for it), while these tasks did not finish their work.
  auto record = [this](TaskExit e) {
    e.stopped = false;
    if (!RecordExit(e)) return;
    MutexLock l(tasks_.mu());
    tasks_.records()[e.task_id].message = "stopped when its agent exited (--stop-tasks-on-exit)";
    tasks_.records()[e.task_id].agent_exiting = true;
    tasks_.Save(e.task_id);
  };
  // Reap() sends the SIGKILLs once the grace has passed; a little longer for them to land.
  const Time deadline = clock_->Now() + options_.stop_tasks_grace + kSecond;
  while (!runner_.Running().empty() && clock_->Now() < deadline) {
    for (const TaskExit& e : runner_.Reap()) record(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const TaskExit& e : runner_.Reap()) record(e);
  for (const auto& [id, pid] : runner_.Running()) {
    spdlog::warn("agent {}: task {} (pid {}) did not end after SIGKILL", options_.node, id, pid);
  }
}

void Agent::HeartbeatLoop(const std::atomic<bool>* stop) {
  while (!*stop) {
    const Time now = clock_->Now();
    pb::AgentMessage m;
    pb::Heartbeat* hb = m.mutable_heartbeat();
    hb->set_seq(link_.NextHeartbeatSeq());
    hb->set_time_ms(now);
    hb->set_lease_clock_ms(fence::LeaseClockMs());
    InjectFaultsIfAsked(now);
    CheckMpsLimits();
    auto sample = backend_->Sample(now);
    if (sample.ok()) {
      for (auto& g : *sample) *hb->add_gpus() = std::move(g);
    }
    for (const SessionHost::Activity& t : sessions_->TerminalActivity()) {
      pb::TerminalActivity* a = hb->add_terminals();
      a->set_task_id(t.task_id);
      a->set_input_idle_ms(t.input_idle_ms);
      a->set_attached(t.attached);
    }
    auto ports = ReadIbPorts(options_.ib_root);
    if (ports.ok()) {
      for (auto& p : *ports) *hb->add_ib_ports() = std::move(p);
    }
    Write(m);
    for (auto& e : backend_->PollEvents(now)) {
      pb::AgentMessage ev;
      *ev.mutable_gpu_event() = std::move(e);
      Write(ev);
    }
    const Time until = now + link_.heartbeat_ms();
    for (Time t = clock_->Now(); !*stop && t < until; t = clock_->Now()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<Duration>(until - t, 100)));
    }
  }
  // Session() may be blocked reading a silent stream: wake it so Run() can return.
  link_.Cancel();
}

}  // namespace hangar::agent
