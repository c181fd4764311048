// The node agent: registers this node's GPUs with the controller over one gRPC stream, runs the
// tasks it is told to (each a real process, see runner/), reports heartbeats with telemetry and
// task status, and serves task logs. Tasks outlive the agent and the controller: the agent
// records them in its state directory, adopts them after a restart, and reconciles with the
// controller on every (re)connect.
//
// Hardware: heartbeats carry a telemetry sample of every GPU and every InfiniBand/RoCE port;
// GPU events (Xid, ECC) go out as they come; a Validate request runs the backend's validation
// on a thread of its own and answers with a ValidationResult. For tests, a fault script dropped
// at <state_dir>/inject-faults.yaml is handed to the GPU backend (times counted from when the
// agent finds it) and renamed to inject-faults.yaml.applied (or .rejected, with the reason
// logged): write it elsewhere and rename it into place, so it is never read half-written.
//
// Checkpoints: the agent listens on a Unix socket (AgentSocketPath(state_dir)) and gives every
// task HANGAR_AGENT_SOCKET, HANGAR_TASK_ID, HANGAR_BIN (this binary) and PATH with this binary's
// directory appended, so that a task can run `hangar checkpoint-done`. The agent forwards each
// report to the controller as a CheckpointDone (held until it is connected again, if it is not)
// and, if the task is in the checkpoint phase of a stop (Stop.checkpoint_signal), releases it:
// SIGTERM at once rather than at the end of the grace.
//
// With a scratch dir (agent_checkpoints.cc and checkpoint_drain.h) a task checkpoints to
// node-local scratch; the agent restores the store's newest checkpoint there before the task
// starts, answers `hangar checkpoint-done` at once, drains to the shared store in the background
// and forwards the CheckpointDone only once the checkpoint is durable there. Until every drain of
// a job is over, the ends of its tasks on this node are not reported to the controller, so the
// job cannot be requeued elsewhere before its checkpoint is in the store.
#pragma once

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/checkpoint_drain.h"
#include "agent/checkpoint_socket.h"
#include "agent/container_runtime.h"
#include "agent/controller_link.h"
#include "agent/data/data_plane.h"
#include "agent/fence/node_fence.h"
#include "agent/gpu/gpu_backend.h"
#include "agent/gpu/mig_layout.h"
#include "agent/gpu/mps.h"
#include "agent/maintenance_commands.h"
#include "agent/mig_instances.h"
#include "agent/node_facts.h"
#include "agent/preflight_threads.h"
#include "agent/runner/task_runner.h"
#include "agent/session_host.h"
#include "agent/step_socket.h"
#include "agent/task_table.h"
#include "common/mutex.h"
#include "common/sole_thread.h"
#include "common/time.h"
#include "common/work_queue.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::agent {

// The node's artifact cache and data port (docs/data.md).
struct DataOptions {
  std::string cache_dir;  // empty: <state dir>/cache (give it the node's local scratch disk)
  int64_t cache_budget_bytes = 0;  // 0: no budget
  // HOST:PORT on the data network where peers read this node's cache; empty: serves no peers.
  std::string address;
};

struct AgentOptions {
  std::string controller;  // host:port of the controller's agent channel
  std::string node;
  std::string address;    // where this node's tasks are reachable (MASTER_ADDR)
  std::string state_dir;  // task records, logs and working directories
  int64_t milli_cpu = 0;
  int64_t memory_mib = 0;
  bool use_cgroups = true;
  std::string token;
  // Mutual TLS to the controller (PEM text); all empty: plaintext (--insecure).
  std::string tls_ca_pem, tls_cert_pem, tls_key_pem;
  std::string ib_root = "/sys/class/infiniband";  // RDMA ports; a missing directory: none
  std::string pci_root = "/sys/bus/pci/devices";  // for GPU-to-NIC affinity
  // The hangar binary, for tasks (HANGAR_BIN, and its directory on their PATH); empty: none.
  std::string hangar_binary;
  // When Run() returns, stop every task (SIGTERM to its process group, SIGKILL after
  // stop_tasks_grace). Off by default: a restarted agent adopts its tasks. `hangar dev` sets it,
  // so that stopping the local cluster leaves nothing running.
  bool stop_tasks_on_exit = false;
  // At Init: stop the tasks of the controller store this agent last served and forget them (and
  // the store), so that it may serve a controller on another store.
  bool forget_store = false;
  Duration stop_tasks_grace = 2 * kSecond;
  ContainerOptions containers;
  DataOptions data;
  // Node-local scratch (NVMe) for checkpoints: tasks get HANGAR_CHECKPOINT_DIR under
  // <scratch_dir>/checkpoints and the agent drains them to the controller's path (the shared store,
  // HANGAR_CHECKPOINT_STORE). Empty: tasks write to the shared store themselves.
  std::string scratch_dir;
  Duration drain_lock_timeout = 60 * kSecond;
  // Fractional tasks under CUDA MPS (agent_mps.cc, docs/sharing.md); disabled: none.
  MpsOptions mps;
  // MIG GPU instances to create at start on a MIG GPU that has none (--mig-layout).
  StaticMigLayout mig_layout;
  // Run the operator's commands of `hangar maintain` (--allow-maintenance-commands); off: they are
  // refused (maintenance_commands.h).
  bool allow_maintenance_commands = false;
  // An `ibnetdiscover` dump in which the agent finds its HCAs' switches (topology_discovery.h).
  std::string ibnetdiscover;
};

class Agent {
 public:
  // Whether a task id can name a folder of the state dir (JOB.ATTEMPT.INDEX; never "..", never a
  // slash).
  static bool SafeTaskId(const std::string& task_id);
  Agent(AgentOptions options, std::unique_ptr<GpuBackend> backend, Clock* clock);
  ~Agent();
  // Discovers GPUs, loads task records and adopts tasks still running.
  Status Init();
  // Connects, and reconnects with backoff, until *stop; then, with stop_tasks_on_exit, stops
  // every task and waits for them (at most stop_tasks_grace and a little).
  void Run(const std::atomic<bool>* stop);
  const std::string& cgroup_status() const { return facts_.cgroup_status(); }
  // Where tasks reach this agent (HANGAR_AGENT_SOCKET); empty when it could not listen.
  std::string socket_path() const { return socket_ ? socket_->path() : ""; }

 private:
  void Session(const std::atomic<bool>* stop);
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& controller) const;  // Session's parts
  void RetellAfterRegistering(const std::map<std::string, pb::CheckpointDone>& unsent);
  void Handle(const pb::ControllerMessage& m);
  void HandleLaunch(const pb::Launch& l);  // agent_launch.cc, as are the next three
  // A launch's steps, in order, until one fails: who it runs as, its checkpoint folder (on scratch
  // with a scratch dir), its MIG instances, its artifacts, its container, its workdir and folder,
  // its terminal or stdin pipe, and MPS last (only the spawn itself may fail after it).
  Status PrepareLaunch(const pb::Launch& l, const std::string& dir, TaskLaunch* launch,
                       TaskRecord* r);
  // After the spawn: the record of a started task (its GPUs busy), or of one that failed to start
  // (what it held released).
  void AfterSpawn(const StatusOr<pid_t>& pid, const TaskLaunch& launch, const std::string& dir,
                  TaskRecord* r);
  // The launch's record kept and reported, and its end too when the reaper saw it first.
  void RecordLaunch(const TaskRecord& r);
  // A launch with a gang preflight (agent_preflight.cc): `hangar preflight` runs first, on its own
  // thread (preflights_); the task starts after it passed, and fails to start, with the report,
  // when it did not. A Stop for a task still in its preflight ends it; the task never starts.
  void RunPreflight(const pb::Launch& l, const std::atomic<bool>& cancel);
  void AfterPreflight(const pb::Launch& l, const pb::PreflightReport& report, bool stopped);
  // The launch's argv, environment (Hangar's additions too), folders and limits.
  TaskLaunch BaseLaunch(const pb::Launch& l, const std::string& dir) const;
  void HandleStop(const pb::Stop& s);
  void HandleLog(const pb::LogRequest& r);
  // Interactive sessions (session_open.cc): an exec beside a task, or an attach to its terminal.
  void HandleSessionOpen(const pb::SessionOpen& o);
  // An exec session's program for a step in a container (srun --container-image).
  StatusOr<SpawnRequest> StepContainerSpawn(const pb::SessionOpen& o, const TaskRecord& task);
  // An interactive launch (Launch.tty): the task's terminal, its follower in launch->terminal_fd.
  Status PrepareTerminal(const pb::Launch& l, const std::string& dir, TaskLaunch* launch);
  // An interactive launch without a terminal (Launch.stdin_pipe): the read end of the task's stdin
  // pipe in launch->stdin_fd.
  Status PrepareStdinPipe(const pb::Launch& l, TaskLaunch* launch);
  // After the launch: the agent's copy of the follower goes; a failed start ends the terminal.
  void AfterTerminalLaunch(const TaskLaunch& launch, bool started);
  void HandleValidate(const pb::Validate& v);
  // `hangar checkpoint-done` from a task, through the socket.
  StatusOr<CheckpointReply> OnCheckpointReport(const CheckpointReport& c);
  void AfterCheckpointReply(const CheckpointReport& c, const CheckpointReply& reply);
  // `hangar progress` from a task (agent_progress.cc): forwarded, at most one a second per task.
  Status OnProgressReport(const ProgressReport& p);
  void StartSocket();
  // srun inside a job's task (agent_steps.cc): the step socket, and who may use it.
  void StartStepSocket();
  Status CheckStepCaller(const std::string& task_id, int64_t peer_uid);
  void RunValidation(const std::string& reason);
  void InjectFaultsIfAsked(Time now);
  bool Write(const pb::AgentMessage& m);
  void SendStatus(const TaskRecord& r);
  pb::Register RegisterMessage();
  void ReaperLoop(const std::atomic<bool>* stop);
  // Records how a task ended (and frees its GPUs); the record, or nullopt for a task not recorded
  // yet (its exit waits in the table's early exits for its launch).
  std::optional<TaskRecord> RecordExit(const TaskExit& e);
  // After RecordExit: the end to the controller (unless a checkpoint drain holds it), and what
  // the task's artifacts may free.
  void AfterExit(const TaskRecord& r);
  // Marks a task the node's fence keeper stopped as such. It touches only *r (and fence_): the
  // caller holds tasks_.mu() when r is in the table (RecordExit), or owns the record (Init, before
  // the table has it).
  void NoteFenced(TaskRecord* r);
  void StopTasksOnExit();
  // Creates the job's HANGAR_CHECKPOINT_DIR (if the launch has one) before the task starts,
  // owned by the task's user.
  Status PrepareCheckpointDir(const pb::Launch& l,
                              const std::optional<TaskCredentials>& run_as) const;
  // With a scratch dir (agent_checkpoints.cc): the job's node-local checkpoint folder, holding the
  // store's newest checkpoint, becomes the task's HANGAR_CHECKPOINT_DIR.
  Status PrepareScratchCheckpoint(const pb::Launch& l, const std::optional<TaskCredentials>& run_as,
                                  TaskLaunch* launch, TaskRecord* r);
  // A report of a task with a scratch folder: drained in the background, forwarded when durable.
  void QueueDrain(const TaskRecord& r, const std::string& path, uint64_t step);
  void OnDrained(const CheckpointDrainer::Request& q, const StatusOr<DrainResult>& result);
  // Whether the end of task `r` waits for a drain of its job (then it is sent when that is over).
  bool HoldStatus(const std::string& task_id) HANGAR_EXCLUDES(tasks_.mu());
  void ResumeDrains() HANGAR_EXCLUDES(tasks_.mu());  // Init: drains a restart interrupted
  // Who a launch runs as: nullopt for the agent's own user (no run_as: `--auth none`); refused
  // for an account the node lacks, and for root unless the launch allows it.
  StatusOr<std::optional<TaskCredentials>> RunAsOf(const pb::Launch& l) const;
  void HeartbeatLoop(const std::atomic<bool>* stop);
  // Containers (agent_containers.cc).
  void InitContainers();
  // Removes containers of this node that no running task record owns (after a crash).
  void SweepContainers();
  // Turns `launch` into a foreground `podman run` of the launch's container.
  Status ToContainer(const pb::Launch& l, const std::string& dir, TaskLaunch* launch,
                     TaskRecord* r) const;
  // After a container task's podman process ended: the container is gone before its GPUs are
  // free; the message says what podman's exit codes mean.
  void ReleaseContainer(TaskRecord* r);
  // MIG (mig_instances.h): the static layout at start, with the instances the tasks kept from
  // before a restart hold.
  void InitMig();
  void HandleStage(const pb::Stage& s);
  void StageLoop(const std::atomic<bool>* stop);
  void StageImage(const pb::Stage& s, const std::string& image, const std::atomic<bool>* stop);
  void SendImages();
  // Artifacts (agent_data.cc).
  Status InitData();
  void StageArtifact(const pb::Stage& s, const pb::ArtifactStage& a, const std::atomic<bool>* stop);
  std::set<std::string> ArtifactsInUse();
  // Checks that the launch's artifacts are here and shows them to the task: for a process,
  // links under $HANGAR_ARTIFACTS (<task dir>/artifacts); a container gets them mounted read-only.
  Status PrepareArtifacts(const pb::Launch& l, const std::string& dir, TaskLaunch* launch,
                          TaskRecord* r) const;
  std::set<std::string> ImagesInUse();
  // MPS (agent_mps.cc): a fractional launch becomes a client of its GPU's control daemon, started
  // for it if need be; the daemon quits with its last task. Whole-GPU and MIG launches: nothing.
  Status PrepareMps(const pb::Launch& l, TaskLaunch* launch, TaskRecord* r);
  void ReleaseMps(const TaskRecord& r);
  void InitMps();  // Init: the daemons of adopted tasks held again, the others stopped
  // Fake GPUs: a task that reports more GPU memory than its limit is ended, as the allocation
  // fails on a GPU.
  void CheckMpsLimits() HANGAR_EXCLUDES(tasks_.mu());
  // --forget-store at Init: stops the tasks of the store this agent served and forgets them.
  void ForgetStore();
  std::string TaskDir(const std::string& task_id) const;

  AgentOptions options_;
  std::unique_ptr<GpuBackend> backend_;
  Clock* clock_;
  TaskRunner runner_;
  NodeFacts facts_;  // what Init found of the node: GPUs, ports, topology, cgroups

  PreflightThreads preflights_;  // the gang preflights in flight, and those that passed

  SoleThread validation_;  // RunValidation's

  // The task records and their journal (opened by Init), early exits and checkpoint drains.
  TaskTable tasks_{clock_};
  // The node's fence (docs/operations.md, "The node lease"): the lease the controller grants and
  // the keeper that stops the tasks when it runs out, even with this agent gone. Made by Init.
  std::unique_ptr<fence::NodeFence> fence_;

  // The stream to the controller, the reports held while it is down, epochs and the store.
  ControllerLink link_{options_.node, options_.state_dir, options_.controller};

  ContainerRuntime containers_;  // podman and the image cache, or why containers do not run here
  WorkQueue<pb::Stage> stage_queue_;             // HandleStage's, for StageLoop
  data::DataPlane data_{clock_, options_.node};  // the artifact cache, its stager and data port

  std::unique_ptr<MpsDaemons> mps_;                          // null: MPS off
  MigInstances mig_{backend_.get(), clock_, options_.node};  // layouts, reshapes, claims

  // Last: their threads call into the members above, so they must go first.
  std::unique_ptr<SessionHost> sessions_;  // made by the constructor
  std::unique_ptr<CheckpointDrainer> drainer_;
  std::unique_ptr<AgentSocket> socket_;
  std::unique_ptr<StepSocket> steps_;
  std::unique_ptr<MaintenanceCommands> maintenance_;  // made by the constructor
};

}  // namespace hangar::agent
