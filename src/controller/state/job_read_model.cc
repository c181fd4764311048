#include "controller/state/job_read_model.h"

#include <algorithm>
#include <functional>

#include "api/body.h"

namespace hangar::controller {

api::JobView PublishedJob::View() const {
  api::JobView v;
  const job::JobSpec& s = spec->spec;
  v.id = id;
  v.name = s.name;
  v.queue = s.queue;
  v.account = s.account;
  v.user = s.user;
  v.state = std::string(job::JobStateName(state));
  v.tier = std::string(job::TierName(s.tier));
  v.priority = s.priority;
  v.gpus = static_cast<double>(s.TotalMilliGpu()) / 1000.0;
  v.tasks = s.TotalReplicas();
  v.submitted = submitted;
  v.started = started;
  v.ended = ended;
  v.attempt = attempt;
  v.restarts = restarts;
  v.array_id = array_id;
  v.array_index = array_index;
  v.held = held;
  if (reason) v.reason = *reason;
  if (rule) v.reason_rule = std::string(sched::Reason{.rule = *rule}.RuleName());
  v.interactive = s.interactive;
  if (details) {
    v.message = details->message;
    v.staging_ms = details->staging_ms;
    v.staging_gpu_ms = details->staging_gpu_ms;
    v.progress = details->progress;
    v.task_views = details->tasks;
  }
  return v;
}

std::string JobJsonWithSpec(const PublishedJob& job) {
  nlohmann::json out = api::ToJson(job.View());
  out.erase("spec");
  std::string text = api::SafeDump(out);
  text.pop_back();  // its closing brace
  text += ",\"spec\":";
  text += job.spec && !job.spec->json.empty() ? job.spec->json : std::string("null");
  text += "}";
  return text;
}

bool MatchesFilter(const PublishedJob& j, const JobFilter& f) {
  return controller::MatchesFilter(
      FilterFacts{j.spec->spec, j.array_id, j.state, j.held, j.submitted}, f);
}

const PublishedJob* JobsSnapshot::Find(sched::JobId id) const {
  if (id < base_) return nullptr;
  const sched::JobId c = (id - base_) / kChunk;
  if (c >= chunks_.size() || !chunks_[c]) return nullptr;
  const PublishedJob& j = chunks_[c]->jobs[(id - base_) % kChunk];
  return j.spec ? &j : nullptr;
}

uint64_t JobsSnapshot::UserDigest(const std::string& user) {
  return std::hash<std::string>()(user);
}

void JobsSnapshot::ForEachNewest(sched::JobId below, const Candidates& which,
                                 const std::function<bool(const PublishedJob&)>& fn) const {
  const uint64_t user = which.user ? UserDigest(*which.user) : 0;
  for (size_t c = chunks_.size(); c-- > 0;) {
    if (!chunks_[c]) continue;
    const Chunk& chunk = *chunks_[c];
    const sched::JobId first = base_ + c * kChunk;
    if (below && first >= below) continue;
    for (sched::JobId i = kChunk; i-- > 0;) {
      if (!chunk.jobs[i].spec || (below && first + i >= below)) continue;
      if (which.pending_only && !chunk.pending[i]) continue;
      if (which.user && chunk.user[i] != user) continue;
      if (!fn(chunk.jobs[i])) return;
    }
  }
}

JobPage ListPage(const JobsSnapshot& snapshot, const JobFilter& f, const std::string* own,
                 const std::function<bool(const PublishedJob&)>& may_see) {
  JobPage page;
  size_t scanned_past = 0;
  auto visit = [&](const PublishedJob& v) {
    if (page.jobs.size() >= f.limit && ++scanned_past > JobPage::kCountScan) {
      page.more_at_least = true;
      return false;
    }
    if (!MatchesFilter(v, f) || !may_see(v)) return true;
    if (page.jobs.size() < f.limit) {
      page.jobs.push_back(v.View());
      page.next = v.id;
    } else {
      ++page.more;
    }
    return true;
  };
  if (!f.ids.empty()) {
    std::vector<sched::JobId> ids;
    for (sched::JobId id : f.ids) {
      if (!f.before || id < f.before) ids.push_back(id);
    }
    std::sort(ids.rbegin(), ids.rend());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (sched::JobId id : ids) {
      const PublishedJob* j = snapshot.Find(id);
      if (j && !visit(*j)) break;
    }
  } else {
    JobsSnapshot::Candidates which;
    which.user = !f.user.empty() ? &f.user : own;
    which.pending_only = f.state == "pending" || f.state == "held";
    snapshot.ForEachNewest(f.before, which, visit);
  }
  if (page.more == 0 && !page.more_at_least) page.next = 0;
  return page;
}

namespace {

// `changes` by id, the last change of each id kept (stable: changes of one id keep their order).
void KeepTheLastOfEach(std::vector<PublishedJob>* changes) {
  std::stable_sort(changes->begin(), changes->end(),
                   [](const auto& a, const auto& b) { return a.id < b.id; });
  auto last_of_each = std::unique(changes->rbegin(), changes->rend(),
                                  [](const auto& a, const auto& b) { return a.id == b.id; });
  changes->erase(changes->begin(), last_of_each.base());
}

}  // namespace

JobReadModel::JobReadModel() : built_(std::make_shared<JobsSnapshot>()), published_(built_) {}

void JobReadModel::Put(PublishedJob j) {
  if (j.reason) {
    auto same = std::find_if(recent_reasons_.begin(), recent_reasons_.end(),
                             [&](const auto& r) { return r && *r == *j.reason; });
    if (same != recent_reasons_.end()) {
      j.reason = *same;
    } else {
      recent_reasons_[next_reason_++ % recent_reasons_.size()] = j.reason;
    }
  }
  changes_.push_back(std::move(j));
}

void JobReadModel::Erase(sched::JobId id) {
  PublishedJob gone;
  gone.id = id;
  changes_.push_back(std::move(gone));
}

void JobReadModel::Clear() {
  changes_.clear();
  cleared_ = true;
}

std::shared_ptr<const JobsSnapshot> JobReadModel::Build() {
  if (!changed()) return built_;
  auto next = std::make_shared<JobsSnapshot>(cleared_ ? JobsSnapshot() : *built_);
  cleared_ = false;
  if (changes_.empty()) return built_ = std::move(next);  // cleared, nothing put since
  KeepTheLastOfEach(&changes_);
  constexpr sched::JobId kChunk = JobsSnapshot::kChunk;
  auto& chunks = next->chunks_;
  // Room for the lowest and the highest id changed (ids only grow, so the front rarely moves).
  const sched::JobId lowest = changes_.front().id / kChunk * kChunk;
  if (chunks.empty()) next->base_ = lowest;
  if (lowest < next->base_) {
    chunks.insert(chunks.begin(), (next->base_ - lowest) / kChunk, nullptr);
    next->base_ = lowest;
  }
  const sched::JobId highest = changes_.back().id;
  if (highest >= next->base_ + chunks.size() * kChunk)
    chunks.resize((highest - next->base_) / kChunk + 1);
  // Each chunk a change falls in is copied once, then changed in place before it is shared.
  std::shared_ptr<JobsSnapshot::Chunk> open;
  size_t open_index = 0;
  auto close = [&] {
    if (!open) return;
    chunks[open_index] =
        open->count ? std::shared_ptr<const JobsSnapshot::Chunk>(std::move(open)) : nullptr;
    open.reset();
  };
  for (PublishedJob& view : changes_) {
    const sched::JobId id = view.id;
    const size_t c = (id - next->base_) / kChunk;
    if (!open || c != open_index) {
      close();
      open = chunks[c] ? std::make_shared<JobsSnapshot::Chunk>(*chunks[c])
                       : std::make_shared<JobsSnapshot::Chunk>();
      open_index = c;
    }
    const size_t i = (id - next->base_) % kChunk;
    PublishedJob& slot = open->jobs[i];
    if (slot.spec) --open->count, --next->size_;
    slot = std::move(view);
    open->pending[i] = slot.spec && slot.state == job::JobState::kPending;
    open->user[i] = slot.spec ? JobsSnapshot::UserDigest(slot.user()) : 0;
    if (slot.spec) ++open->count, ++next->size_;
  }
  close();
  changes_.clear();
  // Chunks emptied at either end (purged jobs) are dropped.
  size_t empty_front = 0;
  while (empty_front < chunks.size() && !chunks[empty_front]) ++empty_front;
  chunks.erase(chunks.begin(), chunks.begin() + static_cast<std::ptrdiff_t>(empty_front));
  next->base_ += empty_front * kChunk;
  while (!chunks.empty() && !chunks.back()) chunks.pop_back();
  if (chunks.empty()) next->base_ = 0;
  built_ = std::move(next);
  return built_;
}

void JobReadModel::Publish(std::shared_ptr<const JobsSnapshot> snapshot) {
  MutexLock l(mu_);
  published_ = std::move(snapshot);
}

std::shared_ptr<const JobsSnapshot> JobReadModel::Current() const {
  MutexLock l(mu_);
  return published_;
}

}  // namespace hangar::controller
