// What the op hook's three parts share: births (_births.cpp), the live storages
// (_live.cpp) and the tracker that matches ops to the graph's kernels (_hook.cpp).
// One declaration for each definition, so that a signature that drifts fails to build.

#pragma once

#include <torch/extension.h>

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

// Births: torch's CPU allocator with pool memory for the results the running op is
// planned to have outside DRAM.
namespace placer_births {
using TakeFn = void* (*)(const void*, uint32_t, uint64_t);
using GiveFn = void (*)(const void*, void*);
using Due = std::vector<std::pair<uint64_t, int>>;  // (bytes, pool)
void install();
void begin(const void* memory, TakeFn take, GiveFn give, const Due* due, std::vector<const void*>* made);
void end();
// The pool whose memory a tensor's storage was born in, or -1: torch's own.
int born_pool(const at::Tensor& t);
}  // namespace placer_births

namespace placer_live {

int64_t now_ns();
const void* storage_key(const at::Tensor& t);

// Where the plan has one tensor: from step froms[i] on, in pools[i].
struct Span {
  std::vector<int> froms, pools;
};

// The pool a tensor is in at `step`; before its first span, that span's.
int pool_at(const Span& sp, int step);

// One storage torch holds while a step runs.
struct Live {
  c10::weak_intrusive_ptr<c10::StorageImpl> ref;
  int64_t nbytes;
  int name;
  // the pool whose memory it is in (apply.py put it there), or -1: torch's, in DRAM
  int home;
  // the plan's earlier names for this storage (a reshape placer copies and torch views;
  // an in-place op's input): counted while they are read
  std::vector<int> others;
  // the op whose result it was when first seen (its key), or null: first seen as an
  // op's input, or told by apply
  const std::string* origin = nullptr;
};

// The storages a step has seen, under the plan's names for them, and the DRAM they
// take: the step's peak, and what of it the plan does not have in DRAM (not placed).
class LiveSet {
 public:
  LiveSet(std::vector<Span> spans, std::vector<int> ends, int steps);

  // A step starts: nothing seen, nothing counted.
  void clear();

  // The storage behind `t`, registered the first time it is seen (by the name the plan
  // gives it, or as not placed); a name learnt later completes it. `home` is the pool
  // whose memory apply put it in, when it did; `step` is the graph's step now, and
  // `origin` the op whose result it is. Answers the plan's name an in-place result
  // took the storage over from, or -1.
  int see(const at::Tensor& t, int name, bool result, int home, int step, const std::string* origin);

  // (name, earlier names) of the storage behind `t`, or None when it was not seen.
  pybind11::object names(const at::Tensor& t) const;
  // The name whose span decides where the storage behind `t` is counted at `step`, or -1.
  int counted_name(const at::Tensor& t, int step) const;
  // The plan's name of the storage behind `t`, or -1.
  int live_name(const at::Tensor& t) const;
  // The storage behind `t` is no longer the plan's tensor `name`: not placed from now on.
  void forget(const at::Tensor& t, int name);

  // Whether a scan is due: at most every 2 ms, and no sooner than 100 times the last
  // scan took after it, which bounds the scans' share of the step.
  bool poll_due() const { return now_ns() - polled_ns_ >= poll_gap_ns_; }
  // Scans the live storages at `step` for the DRAM in use and what of it is not placed.
  void poll(int step);

  const Span& span(int name) const { return spans_[name]; }
  int64_t dram_peak() const { return dram_peak_; }
  int64_t unplaced_peak() const { return unplaced_peak_; }
  int64_t polls() const { return polls_; }
  // Of the DRAM not placed at its peak: the storages without a name, by origin.
  const std::vector<std::pair<std::string, int64_t>>& unplaced_by() const { return unplaced_by_; }
  // The plan's tensors seen in torch's memory at a scan where the plan kept them
  // outside DRAM.
  std::vector<int> misplaced() const { return {misplaced_.begin(), misplaced_.end()}; }
  // The plan's tensors torch still held in DRAM at a scan after the plan's last use of
  // them (their DRAM is not placed either: the plan has freed it).
  std::vector<int> outlived() const { return {outlived_.begin(), outlived_.end()}; }

 private:
  int end_of(int name) const;
  const Span* span_now(const Live& v, int step, int* decides) const;
  const Span* counted(const Live& v, int step, int* decides) const;
  std::vector<std::pair<std::string, int64_t>> unnamed_by_origin() const;

  std::vector<Span> spans_;
  std::vector<int> ends_;
  int steps_;
  std::unordered_map<const void*, Live> live_;
  std::set<int> misplaced_, outlived_;
  int64_t polls_ = 0, dram_peak_ = 0, unplaced_peak_ = 0;
  std::vector<std::pair<std::string, int64_t>> unplaced_by_;  // at the not-placed peak
  int64_t polled_ns_ = 0, poll_gap_ns_ = 0;
};

}  // namespace placer_live
