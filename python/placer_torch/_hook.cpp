// The per-op half of placer_torch.apply, below torch's dispatcher.
//
// A thread-local RecordFunction callback sees every aten op the training step runs, at
// the level a Python dispatch mode would see it: the outermost op on this thread that
// torch does not decompose above its backends (an op with a CompositeImplicitAutograd
// kernel is split into the ops that are seen). Ops inside a seen op (its helpers, its
// redispatches) are not seen again. Each seen op is matched, in order, against the
// captured graph's kernels, names the storages of its operands, pays what the plan's
// pools charge for them (placer's own Rust code, through the function the package's
// `_core` exports), and sometimes has the DRAM in use counted. Moves and saved-tensor
// hooks stay in Python (apply.py): they run a few times a step, where this runs for
// every op. A Python dispatch mode spent a fifth of a small model's step only entering
// Python once per op; this keeps the whole per-op path in C++.
//
// Results are placed at birth. While a seen op runs, the tracker tells the CPU
// allocator (`PoolAllocator`, torch's `SetCPUAllocator`) which results the plan has
// outside DRAM at that op: their sizes and pools, from the graph's kernel the op is
// about to match. An allocation of such a size then takes that pool's memory (placer's
// own pools, through the Rust core: homes.rs), and every other allocation is torch's
// own allocator's, as before.
//
// The storages the step holds, and the DRAM they take, are the live set's (_live.cpp);
// what the three parts share is declared in _hook.h.

#include "_hook.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

using placer_births::born_pool;
using placer_live::LiveSet;
using placer_live::now_ns;
using placer_live::pool_at;
using placer_live::Span;
using placer_live::storage_key;

namespace py = pybind11;

namespace {

// One operand as the Rust core reads it (crates/py/src/hook.rs, #[repr(C)]).
struct Operand {
  uint32_t tensor;
  uint64_t read;
  uint64_t written;
};
using WaitFn = double (*)(const void*, const Operand*, size_t, size_t, double);
using BusyFn = double (*)(double);

struct Kernel {
  int target;
  int also;  // the other op eager torch runs for it (dropout's mul), or -1
  bool has_shape;
  std::vector<int64_t> shape;
  std::vector<int> inputs, outputs;  // tensor ids, -1 for an operand without a name
  int step;
  bool dropout;  // eager dropout's noise is the graph's mask
};

enum class Seen : uint8_t { Decomposed, Skipped, Yes };

struct OpInfo {
  Seen seen;
  int target;  // -2: no kernel of the graph has this op
  std::string key;
  std::vector<size_t> writes;  // argument positions the op writes in place
};

struct Ctx : at::ObserverContext {
  const OpInfo* op = nullptr;
  bool skip = false;
  int64_t start = 0;
  std::vector<at::Tensor> ins;
  std::vector<const void*> written;
};

class Tracker;
std::atomic<Tracker*> g_active{nullptr};
thread_local int t_depth = 0;

void flatten(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) out.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector())
      if (t.defined()) out.push_back(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) flatten(e, out);
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) flatten(e, out);
  }
}

int64_t nbytes_of(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

// How far ahead of the last match an op may be found: eager runs a few ops the graph
// folds away (an unsqueeze before an expand), never long stretches.
constexpr size_t kLookahead = 12;

class Tracker {
 public:
  Tracker(std::vector<Kernel> kernels, std::vector<Span> spans, std::vector<int> ends,
          std::vector<int> update_step, std::unordered_map<std::string, int> targets,
          std::unordered_map<std::string, std::string> same, int steps, bool emulated,
          uintptr_t wait_fn, uintptr_t busy_fn, py::object placement, py::object on_step,
          std::vector<uint64_t> sizes, std::vector<bool> bornable, py::object homes, uintptr_t take_fn,
          uintptr_t give_fn)
      : kernels_(std::move(kernels)), update_step_(std::move(update_step)), targets_(std::move(targets)),
        same_(std::move(same)), steps_(steps), emulated_(emulated),
        wait_(reinterpret_cast<WaitFn>(wait_fn)), busy_(reinterpret_cast<BusyFn>(busy_fn)),
        placement_(std::move(placement)), on_step_(std::move(on_step)), sizes_(std::move(sizes)),
        bornable_(std::move(bornable)), renamed_(sizes_.size(), -1), homes_(std::move(homes)),
        live_(std::move(spans), std::move(ends), steps) {
    // The Placement object stays alive as long as this tracker holds it.
    placement_ptr_ = reinterpret_cast<const void*>(
        placement_.attr("address")().cast<uintptr_t>());
    // Births need pool memory (the Homes object, held here like the placement) and a
    // pool outside DRAM to place results in.
    if (!homes_.is_none() && std::find(bornable_.begin(), bornable_.end(), true) != bornable_.end()) {
      memory_ = reinterpret_cast<const void*>(homes_.attr("address")().cast<uintptr_t>());
      take_ = reinterpret_cast<placer_births::TakeFn>(take_fn);
      give_ = reinterpret_cast<placer_births::GiveFn>(give_fn);
      placer_births::install();
    }
  }

  ~Tracker() { stop(); }

  // A step starts: the counters reset, and the callback sees this thread's ops.
  void begin(int move_threshold) {
    if (handle_ != 0) throw std::runtime_error("placer_torch: this plan's step is already running");
    Tracker* none = nullptr;
    if (!g_active.compare_exchange_strong(none, this))
      throw std::runtime_error("placer_torch: another plan's step is running (one `with placed:` at a time)");
    live_.clear();
    cursor_ = 0, step_ = 0, matched_ = 0, unmatched_ = 0;
    born_ = 0, born_bytes_ = 0, stray_ = 0;
    wait_total_ = wait_unmatched_ = 0.0;
    step_waits_.assign(static_cast<size_t>(steps_), 0.0);
    threshold_ = move_threshold;
    error_.clear();
    internal_ = false;
    owner_ = std::this_thread::get_id();
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&Tracker::on_start, &Tracker::on_end)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
  }

  // The step is over: the callback is removed; an error an op met is raised now.
  void end() {
    stop();
    if (!error_.empty()) throw std::runtime_error(error_);
  }

  void set_internal(bool internal) { internal_ = internal; }

  // The storage behind `t`, under the plan's name `name` or none (-1): LiveSet::see. An
  // in-place op's result is born as its input, so later steps give the input's storage
  // the result's pool (plan_births).
  void see(const at::Tensor& t, int name, bool result, int home = -1) {
    int replaced = live_.see(t, name, result, home, step_, current_op_);
    if (replaced >= 0 && replaced < static_cast<int>(renamed_.size())) renamed_[replaced] = name;
  }

  py::object names(const at::Tensor& t) const { return live_.names(t); }
  int counted_name(const at::Tensor& t) const { return live_.counted_name(t, step_); }
  void forget(const at::Tensor& t, int name) { live_.forget(t, name); }
  void poll() { live_.poll(step_); }

  py::dict counters() const {
    py::dict d;
    d["matched"] = matched_;
    d["unmatched"] = unmatched_;
    d["wait_ns"] = wait_total_;
    d["wait_unmatched_ns"] = wait_unmatched_;
    d["dram_peak"] = live_.dram_peak();
    d["unplaced_peak"] = live_.unplaced_peak();
    d["polls"] = live_.polls();
    d["born"] = born_;
    d["born_bytes"] = born_bytes_;
    d["stray"] = stray_;
    d["unplaced_by"] = live_.unplaced_by();
    return d;
  }

  const std::unordered_map<std::string, int64_t>& unmatched_ops() const { return unmatched_ops_; }
  // What this step's ops matched to each of the graph's kernels were charged, by the
  // kernel's step: set against the plan's own charge for its operands (planned_waits_ns).
  const std::vector<double>& step_waits() const { return step_waits_; }
  // The plan's tensors seen in torch's memory at a scan of this step where the plan kept
  // them outside DRAM.
  std::vector<int> misplaced() const { return live_.misplaced(); }
  std::vector<int> outlived() const { return live_.outlived(); }
  int step() const { return step_; }

 private:
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    Tracker* t = g_active.load(std::memory_order_acquire);
    if (t == nullptr || t_depth > 0 || std::this_thread::get_id() != t->owner_) return nullptr;
    const OpInfo* op = t->info(fn);
    if (op == nullptr || op->seen == Seen::Decomposed) return nullptr;
    ++t_depth;
    auto ctx = std::make_unique<Ctx>();
    ctx->op = op;
    ctx->skip = op->seen == Seen::Skipped || t->internal_ || !t->error_.empty();
    if (!ctx->skip) {
      // The arguments are boxed only for the start callbacks: kept here for the end.
      c10::ArrayRef<const c10::IValue> args = fn.inputs();
      for (const c10::IValue& a : args) flatten(a, ctx->ins);
      for (size_t i : op->writes)
        if (i < args.size() && args[i].isTensor()) ctx->written.push_back(storage_key(args[i].toTensor()));
    }
    if (!ctx->skip && t->memory_ != nullptr) t->plan_births(*op);
    ctx->start = now_ns();
    return ctx;
  }

  static void on_end(const at::RecordFunction& fn, at::ObserverContext* c) {
    if (c == nullptr) return;
    --t_depth;
    placer_births::end();
    auto* ctx = static_cast<Ctx*>(c);
    Tracker* t = g_active.load(std::memory_order_acquire);
    if (ctx->skip || t == nullptr) return;
    int64_t kernel_ns = now_ns() - ctx->start;
    // An end callback runs in a destructor: nothing may be thrown from it.
    try {
      t->op(fn, *ctx, kernel_ns);
    } catch (const std::exception& e) {
      t->error_ = std::string("placer_torch: while applying the plan to ") + ctx->op->key + ": " + e.what();
    }
  }

  // What a seen op is, learnt once per op.
  const OpInfo* info(const at::RecordFunction& fn) {
    const char* name = fn.name();
    auto it = ops_.find(name);
    if (it != ops_.end()) return &it->second;
    std::optional<c10::OperatorName> op_name = fn.operator_name();
    if (!op_name) return nullptr;  // a named scope, not an op: its name is not kept
    auto handle = c10::Dispatcher::singleton().findSchema(*op_name);
    OpInfo info{Seen::Yes, -2, {}, {}};
    std::string base = op_name->name;
    auto colons = base.find("::");
    std::string ns = colons == std::string::npos ? "" : base.substr(0, colons);
    std::string op = colons == std::string::npos ? base : base.substr(colons + 2);
    std::string overload = op_name->overload_name.empty() ? "default" : op_name->overload_name;
    info.key = ns + "." + op + "." + overload;
    if (handle) {
      if (handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) info.seen = Seen::Decomposed;
      // A view runs no kernel: it aliases an input and writes none.
      bool any_alias = false, any_write = false;
      const auto& arguments = handle->schema().arguments();
      for (size_t i = 0; i < arguments.size(); ++i) {
        const c10::AliasInfo* alias = arguments[i].alias_info();
        if (alias == nullptr) continue;
        any_alias = true;
        if (alias->isWrite()) {
          any_write = true;
          info.writes.push_back(i);
        }
      }
      if (info.seen == Seen::Yes && any_alias && !any_write) info.seen = Seen::Skipped;
    }
    if (ns == "profiler") info.seen = Seen::Skipped;
    // The captured graph's name for it: `same` pairs, and an in-place op's functional
    // form (AOTAutograd functionalises: `relu_` is `relu` there).
    std::string canonical = info.key;
    if (auto s = same_.find(info.key); s != same_.end()) canonical = s->second;
    if (op.size() > 1 && op.back() == '_' && op.front() != '_') canonical = ns + "." + op.substr(0, op.size() - 1) + "." + overload;
    if (auto tg = targets_.find(canonical); tg != targets_.end()) info.target = tg->second;
    return &ops_.emplace(name, std::move(info)).first->second;
  }

  // The results of the graph's kernel this op is about to match (the next of its target,
  // as `match` will find it) that the plan has outside DRAM at that kernel: the CPU
  // allocator places allocations of their sizes in their pools while the op runs.
  void plan_births(const OpInfo& op) {
    due_.clear();
    made_.clear();
    const Kernel* k = next_kernel(op.target, nullptr);
    if (k == nullptr) return;
    for (int id : k->outputs) {
      if (id < 0) continue;
      int pool = birth_pool(id, k->step);
      if (pool > 0 && pool < static_cast<int>(bornable_.size()) && bornable_[pool] && sizes_[id] > 0)
        due_.emplace_back(sizes_[id], pool);
    }
    if (!due_.empty()) placer_births::begin(memory_, take_, give_, &due_, &made_);
  }

  // The pool a result is born in: where the plan has it at its kernel, or, when eager
  // torch wrote an in-place op's result into its storage in an earlier step (relu_ over
  // batch norm's result), where the plan has the last such result when it is made: one
  // storage carries both, and the later one is the one kept (for backward, mostly).
  int birth_pool(int id, int step) const {
    int last = id;
    for (size_t hops = 0; hops < renamed_.size() && renamed_[last] >= 0; ++hops) last = renamed_[last];
    return last == id ? pool_at(live_.span(id), step) : live_.span(last).pools[0];
  }

  // Of the blocks born during the op: a result the plan has in that pool at this step
  // is placed; any other (a scratch buffer of the same size, a result the op's match
  // did not predict) is a stray, counted where it is.
  void count_births(const Kernel* k, const std::vector<at::Tensor>& outs, int step) {
    if (made_.empty()) return;
    size_t landed = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      const void* key = storage_key(outs[i]);
      if (std::find(made_.begin(), made_.end(), key) == made_.end()) continue;
      int name = k != nullptr && i < k->outputs.size() ? k->outputs[i] : -1;
      if (name >= 0 && birth_pool(name, step) == born_pool(outs[i])) {
        ++landed;
        born_bytes_ += static_cast<int64_t>(outs[i].storage().nbytes());
      }
    }
    born_ += static_cast<int64_t>(landed);
    stray_ += static_cast<int64_t>(made_.size() - landed);
    made_.clear();
  }

  void op(const at::RecordFunction& fn, const Ctx& ctx, int64_t kernel_ns) {
    current_op_ = &ctx.op->key;
    struct Done {
      const std::string*& op;
      ~Done() { op = nullptr; }
    } done{current_op_};
    std::vector<at::Tensor> outs;
    for (const c10::IValue& o : fn.outputs()) flatten(o, outs);
    const Kernel* k = match(ctx.op->target, outs);
    int step;
    if (k != nullptr) {
      step = k->step;
    } else {
      ++unmatched_;
      ++unmatched_ops_[ctx.op->key];
      step = -1;
    }
    count_births(k, outs, step);
    auto is_written = [&](const void* key) {
      return std::find(ctx.written.begin(), ctx.written.end(), key) != ctx.written.end();
    };
    if (k != nullptr && k->dropout && ctx.ins.size() == 2 && k->outputs.size() > 1) see(ctx.ins[1], k->outputs[1], false);
    std::vector<Operand> charged;
    for (size_t i = 0; i < ctx.ins.size(); ++i) {
      const at::Tensor& t = ctx.ins[i];
      see(t, k != nullptr && i < k->inputs.size() ? k->inputs[i] : -1, false);
      int name = live_.live_name(t);
      uint64_t n = static_cast<uint64_t>(nbytes_of(t));
      if (name >= 0) charged.push_back(Operand{static_cast<uint32_t>(name), n, is_written(storage_key(t)) ? n : 0});
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      const at::Tensor& t = outs[i];
      see(t, k != nullptr && i < k->outputs.size() ? k->outputs[i] : -1, true);
      int name = live_.live_name(t);
      if (name >= 0 && !is_written(storage_key(t)))
        charged.push_back(Operand{static_cast<uint32_t>(name), 0, static_cast<uint64_t>(nbytes_of(t))});
    }
    if (k == nullptr) {
      // An op outside the graph (the optimizer's, a buffer's): at the step of the update
      // its tensors belong to, else where the graph has got to.
      for (const Operand& o : charged) step = std::max(step, update_step_[o.tensor]);
      if (step < 0) step = step_;
    }
    if (emulated_ && !charged.empty()) {
      double wait = wait_(placement_ptr_, charged.data(), charged.size(),
                          static_cast<size_t>(std::min(step, steps_ - 1)), static_cast<double>(kernel_ns));
      if (wait < 0) throw std::runtime_error("the Rust core refused an operand's tensor id");
      if (wait > 0) {
        double waited = busy_(wait);
        wait_total_ += waited;
        // The profile times the graph's kernels only: these waits are not in a prediction.
        if (k == nullptr) wait_unmatched_ += waited;
        else step_waits_[static_cast<size_t>(k->step)] += wait;
      }
    }
    // The moves due before the next kernel, once this one has paid its wait: a background
    // copy runs beside the kernel the plan has it overlap, a blocking one before the
    // kernel that needs it. At this kernel's own step, every copy overlapped the kernel
    // after its own: at ResNet-50 b32 a 98 MiB eviction the plan hides under a 94 ms max
    // pool ran beside an 8 ms convolution. Not at the next op's start: which kernel an op
    // is, is known only from its results (an optimizer's `add_` is not the graph's next
    // `add`).
    if (k != nullptr) moves_until(k->step + 1);
    if (k != nullptr && live_.poll_due()) poll();
  }

  // The next kernel of the graph, at most kLookahead ahead of the last match, with
  // `target` (or eager torch's other op for it) and, given `outs`, their first result's
  // shape; null when there is none.
  const Kernel* next_kernel(int target, const std::vector<at::Tensor>* outs) const {
    if (target == -2) return nullptr;
    size_t last = std::min(cursor_ + kLookahead, kernels_.size());
    for (size_t i = cursor_; i < last; ++i) {
      const Kernel& k = kernels_[i];
      if (k.target != target && k.also != target) continue;
      if (outs != nullptr && k.has_shape && (outs->empty() || (*outs)[0].sizes() != c10::IntArrayRef(k.shape)))
        continue;
      return &k;
    }
    return nullptr;
  }

  const Kernel* match(int target, const std::vector<at::Tensor>& outs) {
    const Kernel* k = next_kernel(target, &outs);
    if (k == nullptr) return nullptr;
    cursor_ = static_cast<size_t>(k - kernels_.data()) + 1;
    step_ = k->step;
    ++matched_;
    return k;
  }

  // Before kernel `step`: the moves due by then, which Python runs (apply.py
  // `_on_step`, moves.py); it answers the next step at which one is due.
  void moves_until(int step) {
    if (step < threshold_) return;
    // The moves' own copies are apply's, not the step's: unseen, as ops inside an op.
    ++t_depth;
    std::string failed;
    {
      py::gil_scoped_acquire gil;
      try {
        threshold_ = on_step_(step).cast<int>();
      } catch (py::error_already_set& e) {
        failed = std::string("a move failed: ") + e.what();
      }
    }
    --t_depth;
    if (!failed.empty()) throw std::runtime_error(failed);
  }

  void stop() {
    placer_births::end();
    if (handle_ != 0) {
      at::removeCallback(handle_);
      handle_ = 0;
    }
    Tracker* self = this;
    g_active.compare_exchange_strong(self, nullptr);
  }

  std::vector<Kernel> kernels_;
  std::vector<int> update_step_;
  std::unordered_map<std::string, int> targets_;
  std::unordered_map<std::string, std::string> same_;
  int steps_;
  bool emulated_;
  WaitFn wait_;
  BusyFn busy_;
  py::object placement_, on_step_;
  const void* placement_ptr_ = nullptr;
  std::vector<uint64_t> sizes_;  // every tensor's bytes, by id
  std::vector<bool> bornable_;   // by pool: results may be born in its memory
  std::vector<int> renamed_;     // by id: the in-place result eager torch wrote over it, or -1
  py::object homes_;             // the pool memory births come from, or None
  // Births: the pool memory and its entry points (none without births), the running
  // op's planned results outside DRAM, and the blocks born during it.
  const void* memory_ = nullptr;
  placer_births::TakeFn take_ = nullptr;
  placer_births::GiveFn give_ = nullptr;
  placer_births::Due due_;
  std::vector<const void*> made_;

  std::unordered_map<const char*, OpInfo> ops_;
  LiveSet live_;
  std::unordered_map<std::string, int64_t> unmatched_ops_;
  at::CallbackHandle handle_ = 0;
  std::thread::id owner_;
  size_t cursor_ = 0;
  int step_ = 0, threshold_ = 0;
  int64_t matched_ = 0, unmatched_ = 0;
  int64_t born_ = 0, born_bytes_ = 0, stray_ = 0;
  const std::string* current_op_ = nullptr;  // the op being seen
  double wait_total_ = 0.0, wait_unmatched_ = 0.0;
  std::vector<double> step_waits_;  // charged (not waited: busy_ overshoots), by kernel step
  bool internal_ = false;
  std::string error_;
};

// A callback that asks torch for the same inputs and outputs as the tracker's and does
// nothing with them: what torch's observer path alone costs a step (bench/apply_cost.py).
class Floor {
 public:
  ~Floor() { end(); }
  void begin() {
    if (handle_ == 0)
      handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                               .needsInputs(true)
                                               .needsOutputs(true)
                                               .scopes({at::RecordScope::FUNCTION}));
  }
  void end() {
    if (handle_ != 0) at::removeCallback(handle_);
    handle_ = 0;
  }

 private:
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) { return nullptr; }
  static void on_end(const at::RecordFunction&, at::ObserverContext*) {}
  at::CallbackHandle handle_ = 0;
};

Kernel make_kernel(int target, int also, std::optional<std::vector<int64_t>> shape, std::vector<int> inputs,
                   std::vector<int> outputs, int step, bool dropout) {
  Kernel k{target, also, shape.has_value(), shape.value_or(std::vector<int64_t>{}), std::move(inputs),
           std::move(outputs), step, dropout};
  return k;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Kernel>(m, "Kernel").def(py::init(&make_kernel));
  py::class_<Span>(m, "Span").def(py::init([](std::vector<int> froms, std::vector<int> pools) {
    if (froms.size() != pools.size() || pools.empty()) throw std::invalid_argument("a span needs one pool per first step");
    return Span{std::move(froms), std::move(pools)};
  }));
  m.def("born_pool", &born_pool, "The pool whose memory a tensor's storage was born in, or -1: torch's own.");
  py::class_<Floor>(m, "Floor").def(py::init<>()).def("begin", &Floor::begin).def("end", &Floor::end);
  py::class_<Tracker>(m, "Tracker")
      .def(py::init<std::vector<Kernel>, std::vector<Span>, std::vector<int>, std::vector<int>,
                    std::unordered_map<std::string, int>, std::unordered_map<std::string, std::string>, int, bool,
                    uintptr_t, uintptr_t, py::object, py::object, std::vector<uint64_t>, std::vector<bool>,
                    py::object, uintptr_t, uintptr_t>())
      .def("begin", &Tracker::begin)
      .def("end", &Tracker::end)
      .def("set_internal", &Tracker::set_internal)
      .def("see", &Tracker::see, py::arg("t"), py::arg("name"), py::arg("result"), py::arg("home") = -1)
      .def("misplaced", &Tracker::misplaced)
      .def("outlived", &Tracker::outlived)
      .def("names", &Tracker::names)
      .def("counted_name", &Tracker::counted_name)
      .def("forget", &Tracker::forget)
      .def("poll", &Tracker::poll)
      .def("counters", &Tracker::counters)
      .def("unmatched_ops", &Tracker::unmatched_ops)
      .def("step_waits", &Tracker::step_waits)
      .def_property_readonly("step", &Tracker::step);
}
