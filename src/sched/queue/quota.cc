#include "sched/queue/quota.h"

#include <algorithm>
#include <functional>

#include "common/units.h"

namespace hangar::sched::queue {

namespace {

void Fill(const job::ResourceAmounts& a, const std::vector<std::string>& models, int64_t unset,
          std::vector<int64_t>* out, std::string* error) {
  out->assign(kFirstModel + models.size(), unset);
  if (a.milli_cpu) (*out)[kCpu] = *a.milli_cpu;
  if (a.memory_mib) (*out)[kMemory] = *a.memory_mib;
  if (a.gpus_milli) (*out)[kGpu] = *a.gpus_milli;
  for (const auto& [model, milli] : a.gpus_milli_by_model) {
    auto it = std::find(models.begin(), models.end(), model);
    if (it == models.end()) {
      *error = "GPU model '" + model + "' is not in this cluster";
      return;
    }
    (*out)[kFirstModel + (it - models.begin())] = milli;
  }
}

}  // namespace

StatusOr<std::shared_ptr<const QueueTree>> QueueTree::Build(
    const std::vector<job::QueueSpec>& specs, const cluster::Topology& t) {
  auto tree = std::make_shared<QueueTree>();
  tree->models_ = t.models();
  tree->capacity_.assign(kFirstModel + t.models().size(), 0);
  for (const auto& n : t.nodes()) {
    tree->capacity_[kCpu] += n.milli_cpu;
    tree->capacity_[kMemory] += n.memory_mib;
    tree->capacity_[kGpu] += int64_t{n.num_gpus} * cluster::kMilliPerGpu;
    if (n.num_gpus)
      tree->capacity_[kFirstModel + n.model] += int64_t{n.num_gpus} * cluster::kMilliPerGpu;
  }
  std::string error;
  std::function<Status(const job::QueueSpec&, int)> add = [&](const job::QueueSpec& s,
                                                              int parent) -> Status {
    QueueNode q;
    q.name = s.name;
    q.parent = parent;
    q.weight = s.weight;
    Fill(s.quota, tree->models_, 0, &q.nominal, &error);
    // GPUs of a model are GPUs: a guarantee of 8 H100s is a guarantee of 8 GPUs too (a job on them
    // is charged to both), else its queue would count as borrowing while it runs within it.
    int64_t by_model = 0;
    for (size_t d = kFirstModel; d < q.nominal.size(); ++d) by_model += q.nominal[d];
    q.nominal[kGpu] = std::max(q.nominal[kGpu], by_model);
    Fill(s.borrowing_limit, tree->models_, kUnlimited, &q.borrow_limit, &error);
    Fill(s.lending_limit, tree->models_, kUnlimited, &q.lend_limit, &error);
    if (!error.empty()) return Status::InvalidArgument("queue '" + s.name + "': " + error);
    q.declared.assign(tree->capacity_.size(), false);
    std::vector<int64_t> unset;
    Fill(s.quota, tree->models_, -1, &unset, &error);
    for (size_t d = 0; d < unset.size(); ++d) {
      q.declared[d] = unset[d] >= 0 || (parent >= 0 && tree->nodes_[parent].declared[d]);
    }
    const int id = static_cast<int>(tree->nodes_.size());
    tree->nodes_.push_back(std::move(q));
    if (parent >= 0) tree->nodes_[parent].children.push_back(id);
    for (const auto& c : s.children) HANGAR_RETURN_IF_ERROR(add(c, id));
    // A group guarantees at least what its children do.
    if (!s.leaf()) {
      for (size_t d = 0; d < tree->capacity_.size(); ++d) {
        int64_t sum = 0;
        for (int c : tree->nodes_[id].children) sum += tree->nodes_[c].nominal[d];
        tree->nodes_[id].nominal[d] = std::max(tree->nodes_[id].nominal[d], sum);
      }
    }
    return Status::Ok();
  };
  for (const auto& s : specs) HANGAR_RETURN_IF_ERROR(add(s, -1));
  for (size_t d = 0; d < tree->capacity_.size(); ++d) {
    int64_t roots = 0;
    for (const auto& q : tree->nodes_) roots += q.parent < 0 ? q.nominal[d] : 0;
    if (roots > tree->capacity_[d]) {
      return Status::InvalidArgument(
          "the queues guarantee " + tree->DimName(static_cast<int>(d)) + " " +
          std::to_string(roots) + " but the cluster has " + std::to_string(tree->capacity_[d]) +
          "; lower the quotas so every guarantee can be honoured at once");
    }
  }
  return std::shared_ptr<const QueueTree>(std::move(tree));
}

std::string QueueTree::DimName(int d) const {
  if (d == kCpu) return "CPU (milli-cores)";
  if (d == kMemory) return "memory (MiB)";
  if (d == kGpu) return "GPUs (milli)";
  return models_[static_cast<size_t>(d - kFirstModel)] + " GPUs (milli)";
}

int QueueTree::Find(std::string_view name) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int QueueTree::FindLeaf(std::string_view name) const {
  const int i = Find(name);
  return i >= 0 && nodes_[i].leaf() ? i : -1;
}

std::vector<std::string> QueueTree::LeafNames() const {
  std::vector<std::string> out;
  for (const auto& q : nodes_) {
    if (q.leaf()) out.push_back(q.name);
  }
  return out;
}

bool QueueTree::Contains(int a, int b) const {
  for (int x = b; x >= 0; x = nodes_[x].parent) {
    if (x == a) return true;
  }
  return false;
}

std::vector<int64_t> QueueTree::Charge(const GangRequest& req,
                                       const cluster::GangAssignment* placed,
                                       const cluster::Topology& t) const {
  std::vector<int64_t> c(capacity_.size(), 0);
  for (const auto& g : req.groups) {
    c[kCpu] += g.shape.milli_cpu * g.replicas;
    c[kMemory] += g.shape.memory_mib * g.replicas;
  }
  c[kGpu] = req.total_milli_gpu;
  if (placed) {
    for (const auto& g : placed->grants) {
      const auto& gpu = t.gpus()[g.gpu];
      c[kFirstModel + gpu.model] +=
          gpu.mig ? g.milli * cluster::kMilliPerGpu / cluster::kMigSlicesPerGpu : g.milli;
    }
  } else {
    for (const auto& g : req.groups) {
      const cluster::ModelMask m = g.shape.models;
      if (!g.shape.NeedsGpu() || m == 0 || (m & (m - 1)) != 0) continue;  // not exactly one model
      const int model = __builtin_ctzll(m);
      if (kFirstModel + model < static_cast<int>(c.size()))
        c[kFirstModel + model] += g.shape.MilliGpu() * g.replicas;
    }
  }
  return c;
}

QuotaLedger::QuotaLedger(const QueueTree* tree)
    : tree_(tree),
      usage_(tree->nodes().size(), std::vector<int64_t>(tree->dims(), 0)),
      footprint_(tree->nodes().size(), std::vector<int64_t>(tree->dims(), 0)),
      root_footprint_(tree->dims(), 0) {
  // Leaves first, then groups (children always come after their parent in `nodes()`).
  for (size_t i = tree->nodes().size(); i-- > 0;) {
    const QueueNode& q = tree->nodes()[i];
    for (size_t d = 0; d < tree->dims(); ++d) {
      int64_t sum = 0;
      for (int c : q.children) sum += footprint_[c][d];
      footprint_[i][d] = std::max(sum, Floor(static_cast<int>(i), static_cast<int>(d)));
      if (q.parent < 0) root_footprint_[d] += footprint_[i][d];
    }
  }
}

int64_t QuotaLedger::Floor(int node, int d) const {
  const QueueNode& q = tree_->nodes()[node];
  return std::max<int64_t>(0, q.nominal[d] - std::min(q.lend_limit[d], q.nominal[d]));
}

void QuotaLedger::Apply(int leaf, const std::vector<int64_t>& charge, int sign) {
  for (int x = leaf; x >= 0; x = tree_->nodes()[x].parent) {
    for (size_t d = 0; d < charge.size(); ++d) usage_[x][d] += sign * charge[d];
  }
  Refresh(leaf);
}

void QuotaLedger::Refresh(int leaf) {
  const auto& nodes = tree_->nodes();
  for (size_t d = 0; d < tree_->dims(); ++d) {
    const int di = static_cast<int>(d);
    int64_t delta = 0;
    for (int x = leaf; x >= 0; x = nodes[x].parent) {
      int64_t fresh;
      if (nodes[x].leaf()) {
        fresh = std::max(usage_[x][d], Floor(x, di));
      } else {
        int64_t sum = 0;
        for (int c : nodes[x].children) sum += footprint_[c][d];
        fresh = std::max(sum, Floor(x, di));
      }
      delta = fresh - footprint_[x][d];
      footprint_[x][d] = fresh;
      if (nodes[x].parent < 0) root_footprint_[d] += delta;
    }
  }
}

int64_t QuotaLedger::Borrowed(int node, int d) const {
  return std::max<int64_t>(0, usage_[node][d] - tree_->nodes()[node].nominal[d]);
}

int64_t QuotaLedger::Lent(int node, int d) const {
  // Of its unused lendable guarantee, the part the cluster could not hold without it.
  const QueueNode& q = tree_->nodes()[node];
  const int64_t unused =
      std::min(q.lend_limit[d], std::max<int64_t>(0, q.nominal[d] - usage_[node][d]));
  int64_t used = 0;
  for (size_t r = 0; r < tree_->nodes().size(); ++r)
    used += tree_->nodes()[r].parent < 0 ? usage_[r][d] : 0;
  int64_t unused_all = 0;
  for (size_t r = 0; r < tree_->nodes().size(); ++r) {
    if (tree_->nodes()[r].leaf())
      unused_all += std::max<int64_t>(0, tree_->nodes()[r].nominal[d] - usage_[r][d]);
  }
  const int64_t idle = std::max<int64_t>(0, tree_->capacity()[d] - used);
  const int64_t lent_all = std::max<int64_t>(0, unused_all - idle);
  if (unused_all == 0) return 0;
  // Shared out in proportion to each queue's unused guarantee.
  return std::min(unused, lent_all * unused / unused_all);
}

QuotaLedger::Verdict QuotaLedger::Fits(int leaf, const std::vector<int64_t>& charge) const {
  const auto& nodes = tree_->nodes();
  Verdict v;
  for (size_t d = 0; d < charge.size(); ++d) {
    if (charge[d] <= 0) continue;
    const int di = static_cast<int>(d);
    int64_t fresh = 0, old = 0;
    for (int x = leaf; x >= 0; x = nodes[x].parent) {
      if (nodes[x].borrow_limit[d] < kUnlimited &&
          usage_[x][d] + charge[d] > nodes[x].nominal[d] + nodes[x].borrow_limit[d]) {
        v.kind = Kind::kDenied;
        v.dim = di;
        v.limit_node = x;
        return v;
      }
      if (nodes[x].leaf()) {
        fresh = std::max(usage_[x][d] + charge[d], Floor(x, di));
      } else {
        int64_t sum = 0;
        for (int c : nodes[x].children) sum += footprint_[c][d];
        fresh = std::max(sum - old + fresh, Floor(x, di));
      }
      old = footprint_[x][d];
    }
    if (root_footprint_[d] - old + fresh > tree_->capacity()[d]) {
      v.kind = Kind::kDenied;
      v.dim = di;
      v.limit_node = -1;
      return v;
    }
  }
  return v;
}

QuotaLedger::Verdict QuotaLedger::Check(int leaf, const std::vector<int64_t>& charge,
                                        bool guaranteed) const {
  const auto& nodes = tree_->nodes();
  // Within needs a guarantee that covers the job: a declared quota in a dimension it charges,
  // and for a GPU job a quota on GPUs or on the model it charges.
  const auto& declared = nodes[leaf].declared;
  bool any = false, gpu = charge[kGpu] <= 0 || declared[kGpu];
  for (size_t d = 0; d < charge.size(); ++d) {
    any = any || (charge[d] > 0 && declared[d]);
    gpu = gpu || (d >= kFirstModel && charge[d] > 0 && declared[d]);
  }
  bool within = guaranteed && any && gpu;
  for (int x = leaf; within && x >= 0; x = nodes[x].parent) {
    for (size_t d = 0; within && d < charge.size(); ++d) {
      // A dimension nobody declared a quota for guarantees nothing and limits nothing here.
      within = charge[d] <= 0 || !nodes[leaf].declared[d] ||
               usage_[x][d] + charge[d] <= nodes[x].nominal[d];
    }
  }
  if (within) return Verdict{};
  Verdict v = Fits(leaf, charge);
  if (v.kind != Kind::kDenied) {
    v.kind = Kind::kBorrow;
    return v;
  }
  // How much of the refusing dimension the queue could still take, for the message.
  v.need = charge[v.dim];
  int64_t lo = 0, hi = v.need;
  std::vector<int64_t> probe(charge.size(), 0);
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    probe[v.dim] = mid;
    if (Fits(leaf, probe).kind == Kind::kDenied) {
      hi = mid - 1;
    } else {
      lo = mid;
    }
  }
  v.have = lo;
  return v;
}

double QuotaLedger::Share(int node, const std::vector<double>* history, Counting counting,
                          const std::vector<int64_t>* plus) const {
  double dominant = 0;
  for (size_t d = 0; d < tree_->dims(); ++d) {
    if (tree_->capacity()[d] <= 0) continue;
    double used = static_cast<double>(usage_[node][d]);
    if (history && d < history->size()) used = std::max(used, (*history)[d]);
    if (plus && d < plus->size()) used += static_cast<double>((*plus)[d]);
    if (counting == Counting::kBeyondGuarantee)
      used = std::max(0.0, used - static_cast<double>(tree_->nodes()[node].nominal[d]));
    dominant = std::max(dominant, used / static_cast<double>(tree_->capacity()[d]));
  }
  return dominant / std::max(1, tree_->nodes()[node].weight);
}

std::string QueueTree::Amount(int d, int64_t v) const {
  if (v >= kUnlimited) return "unlimited";
  auto decimal = [](int64_t x, int64_t unit) {
    std::string out = std::to_string(x / unit);
    if (x % unit) {
      std::string frac = std::to_string(1000 + (x % unit) * 1000 / unit).substr(1);
      while (!frac.empty() && frac.back() == '0') frac.pop_back();
      out += "." + frac;
    }
    return out;
  };
  if (d == kCpu) return decimal(v, 1000) + " CPU cores";
  if (d == kMemory) return decimal(v, 1024) + " GiB of memory";
  const std::string what =
      d == kGpu ? " GPU" : " " + models_[static_cast<size_t>(d - kFirstModel)] + " GPU";
  return decimal(v, 1000) + what + (v == 1000 ? "" : "s");
}

std::string QuotaLedger::Explain(const Verdict& v, int leaf) const {
  if (v.kind != Kind::kDenied) return "";
  const auto& nodes = tree_->nodes();
  const std::string need = "queue " + nodes[leaf].name + " may start " +
                           tree_->Amount(v.dim, v.have) + " more now and the job needs " +
                           tree_->Amount(v.dim, v.need);
  if (v.limit_node >= 0) {
    const QueueNode& q = nodes[v.limit_node];
    return need + ": queue " + q.name + " holds " +
           tree_->Amount(v.dim, usage_[v.limit_node][v.dim]) + " of its guarantee " +
           tree_->Amount(v.dim, q.nominal[v.dim]) + " + borrowing limit " +
           tree_->Amount(v.dim, q.borrow_limit[v.dim]);
  }
  return need + " (the rest is in use, or guaranteed to queues that do not lend it)";
}

}  // namespace hangar::sched::queue
