// The op hook's live storages (_hook.h): every storage a step's ops read or write,
// under the plan's names for it, and the DRAM they take. A storage torch holds that the
// plan does not have in DRAM at that point is not placed: counted in DRAM, and named in
// apply's report.

#include "_hook.h"

#include <algorithm>
#include <chrono>

namespace placer_live {

namespace {
constexpr int64_t kPollNs = 2'000'000;
constexpr int64_t kPollShare = 100;
}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const void* storage_key(const at::Tensor& t) {
  return t.storage().data_ptr().get();
}

int pool_at(const Span& sp, int step) {
  if (sp.pools.size() == 1) return sp.pools[0];
  auto at = std::upper_bound(sp.froms.begin(), sp.froms.end(), step) - sp.froms.begin();
  return sp.pools[std::max<ptrdiff_t>(0, at - 1)];
}

LiveSet::LiveSet(std::vector<Span> spans, std::vector<int> ends, int steps)
    : spans_(std::move(spans)), ends_(std::move(ends)), steps_(steps), poll_gap_ns_(kPollNs) {}

void LiveSet::clear() {
  live_.clear();
  misplaced_.clear();
  outlived_.clear();
  polls_ = 0, dram_peak_ = 0, unplaced_peak_ = 0;
  unplaced_by_.clear();
  polled_ns_ = 0, poll_gap_ns_ = kPollNs;
}

int LiveSet::see(const at::Tensor& t, int name, bool result, int home, int step, const std::string* origin) {
  const void* key = storage_key(t);
  auto it = live_.find(key);
  if (it == live_.end() || it->second.ref.expired()) {
    if (home < 0) home = placer_births::born_pool(t);
    live_.insert_or_assign(key, Live{t.storage().getWeakStorageImpl(), static_cast<int64_t>(t.storage().nbytes()),
                                     name, home, {}, result ? origin : nullptr});
    return -1;
  }
  Live& v = it->second;
  if (home >= 0) v.home = home;
  if (name < 0 || name == v.name) return -1;
  auto has = [&](int n) { return std::find(v.others.begin(), v.others.end(), n) != v.others.end(); };
  int replaced = -1;
  if (v.name < 0) {
    v.name = name;
  } else if (result || end_of(v.name) < step) {
    // A result written into a storage already seen (an in-place op), or a storage read
    // under a later name once its own has no reader left (torch views what placer
    // copies, a reshape): the plan's new tensor from now on.
    if (!has(v.name)) v.others.push_back(v.name);
    if (result) replaced = v.name;
    v.name = name;
  } else if (!has(name)) {
    v.others.push_back(name);
  }
  return replaced;
}

pybind11::object LiveSet::names(const at::Tensor& t) const {
  auto it = live_.find(storage_key(t));
  if (it == live_.end() || it->second.ref.expired()) return pybind11::none();
  return pybind11::make_tuple(it->second.name, it->second.others);
}

int LiveSet::counted_name(const at::Tensor& t, int step) const {
  auto it = live_.find(storage_key(t));
  if (it == live_.end()) return -1;
  int decides = -1;
  span_now(it->second, step, &decides);
  return decides;
}

int LiveSet::live_name(const at::Tensor& t) const {
  auto it = live_.find(storage_key(t));
  return it == live_.end() ? -1 : it->second.name;
}

void LiveSet::forget(const at::Tensor& t, int name) {
  static const std::string kMovedCopy = "torch's copy of a moved activation";
  auto it = live_.find(storage_key(t));
  if (it != live_.end() && it->second.name == name) {
    it->second.name = -1;
    it->second.others.clear();
    it->second.origin = &kMovedCopy;
  }
}

// The DRAM in use now: every live storage but those in another pool's memory. Of it,
// what the plan does not have in DRAM at this step is not placed: torch's storages the
// plan has no name for, the plan's tensors that it keeps elsewhere now but that stayed
// in torch's memory, and those torch still holds after the plan's last use of them
// (the names of both are kept for the report).
void LiveSet::poll(int step) {
  int64_t start = now_ns();
  int64_t dram = 0, unplaced = 0;
  for (auto it = live_.begin(); it != live_.end();) {
    const Live& v = it->second;
    if (v.ref.expired()) {
      it = live_.erase(it);
      continue;
    }
    ++it;
    if (v.home > 0) continue;  // pool 0 is DRAM
    dram += v.nbytes;
    int decides = -1;
    const Span* sp = span_now(v, step, &decides);
    bool in_dram = sp != nullptr && pool_at(*sp, step) == 0;
    if (in_dram && end_of(decides) >= step) continue;
    unplaced += v.nbytes;
    if (decides >= 0) (in_dram ? outlived_ : misplaced_).insert(decides);
  }
  dram_peak_ = std::max(dram_peak_, dram);
  if (unplaced > unplaced_peak_) unplaced_by_ = unnamed_by_origin();
  unplaced_peak_ = std::max(unplaced_peak_, unplaced);
  ++polls_;
  polled_ns_ = now_ns();
  poll_gap_ns_ = std::max(kPollNs, kPollShare * (polled_ns_ - start));
}

// The five largest origins, for the report.
std::vector<std::pair<std::string, int64_t>> LiveSet::unnamed_by_origin() const {
  std::unordered_map<std::string, int64_t> by;
  for (const auto& [key, v] : live_) {
    if (v.home > 0 || v.name >= 0 || v.ref.expired()) continue;
    by[v.origin != nullptr ? *v.origin : "an input"] += v.nbytes;
  }
  std::vector<std::pair<std::string, int64_t>> top(by.begin(), by.end());
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (top.size() > 5) top.resize(5);
  return top;
}

int LiveSet::end_of(int name) const {
  return name >= 0 && name < static_cast<int>(ends_.size()) ? ends_[name] : steps_;
}

// The span that decides where a storage is now, and its name: its own name's, unless
// it has several of the plan's names and one of them is still held (`counted`).
const Span* LiveSet::span_now(const Live& v, int step, int* decides) const {
  *decides = v.name;
  const Span* sp = v.name >= 0 ? &spans_[v.name] : nullptr;
  if (v.others.empty()) return sp;
  int held_name = -1;
  if (const Span* held = counted(v, step, &held_name)) sp = held, *decides = held_name;
  return sp;
}

// The span that decides where a storage of several of the plan's names is at `step`:
// a name still held then in DRAM, else any name still held, else none.
const Span* LiveSet::counted(const Live& v, int step, int* decides) const {
  const Span* held = nullptr;
  int held_name = -1;
  auto consider = [&](int name) -> bool {
    if (name < 0 || end_of(name) < step) return false;
    const Span& sp = spans_[name];
    if (pool_at(sp, step) == 0) {
      held = &sp, held_name = name;
      return true;
    }
    if (held == nullptr) held = &sp, held_name = name;
    return false;
  };
  bool done = consider(v.name);
  for (size_t i = 0; !done && i < v.others.size(); ++i) done = consider(v.others[i]);
  if (decides != nullptr) *decides = held_name;
  return held;
}

}  // namespace placer_live
