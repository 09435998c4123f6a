// Births, the other half of placer_torch's op hook (_hook.cpp): torch's CPU allocator,
// with pool memory for the results the plan has outside DRAM.
//
// While a seen op runs, the hook hands this thread the sizes and pools of the op's
// planned results outside DRAM (`begin`, until `end`). An allocation of such a size then
// takes that pool's memory from placer's own pools, through the Rust core
// (crates/py/src/hook.rs: `memory_take`, `memory_give`), and is recorded by address so
// that its deleter gives it back to that pool's reuse list, on whatever thread torch
// frees it. Every other allocation, and every allocation outside a seen op, is torch's
// own allocator's, untouched.

#include "_hook.h"

#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace placer_births {

namespace {

// The results the op running on this thread is planned to have outside DRAM (the
// tracker's, while the op runs), and the pool memory they come from.
struct Births {
  const void* memory = nullptr;
  TakeFn take = nullptr;
  GiveFn give = nullptr;
  const Due* due = nullptr;
  std::vector<const void*>* made = nullptr;  // addresses born during the op
};
thread_local Births t_births;

// Where a block born in pool memory came from, by address: its pool, and how to give it
// back. Any thread may free a tensor, so this is locked.
struct Born {
  const void* memory;
  GiveFn give;
  int pool;
};
// Both are never destroyed: a tensor may be freed after static destructors have run.
std::mutex& born_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<const void*, Born>& born_blocks() {
  static auto* blocks = new std::unordered_map<const void*, Born>;
  return *blocks;
}
c10::DeleterFnPtr g_base_raw_deleter = nullptr;

// Gives a block born in pool memory back to that memory's reuse list; whether `p` was
// such a block.
bool give_back(void* p) {
  Born b{};
  {
    std::lock_guard<std::mutex> lock(born_mutex());
    auto it = born_blocks().find(p);
    if (it == born_blocks().end()) return false;
    b = it->second;
    born_blocks().erase(it);
  }
  b.give(b.memory, p);
  return true;
}

// The deleter of every block born in pool memory (only births carry it).
void free_born(void* p) { give_back(p); }

// The raw deleter for oneDNN's raw_allocate, which may get either kind of block.
void free_any(void* p) {
  if (!give_back(p) && g_base_raw_deleter != nullptr) g_base_raw_deleter(p);
}

// torch's CPU allocator, with births: an allocation of a size the running op is planned
// to make outside DRAM takes that pool's memory; any other is torch's allocator's. Every
// allocation of that size during the op does, not only the first: oneDNN's convolution
// allocates a block of its result's size before the result itself (ResNet-18 here), and
// which of the two the op returns is known only at its end. A pool that cannot give
// the bytes leaves the request to torch's allocator (the result is then counted in
// DRAM, where it is). Installed once, for the process: blocks from either allocator
// outlive any plan, and each carries its own deleter.
class PoolAllocator final : public c10::Allocator {
 public:
  explicit PoolAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) override {
    const Births& b = t_births;
    if (b.due != nullptr && n > 0) {
      for (const auto& [bytes, pool] : *b.due) {
        if (bytes != n) continue;
        void* p = b.take(b.memory, static_cast<uint32_t>(pool), n);
        if (p == nullptr) break;
        {
          std::lock_guard<std::mutex> lock(born_mutex());
          born_blocks()[p] = Born{b.memory, b.give, pool};
        }
        b.made->push_back(p);
        return {p, p, &free_born, c10::Device(c10::DeviceType::CPU)};
      }
    }
    return base_->allocate(n);
  }

  c10::DeleterFnPtr raw_deleter() const override { return g_base_raw_deleter != nullptr ? &free_any : nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* base_;
};

}  // namespace

// Installed once, for the process: storages keep a pointer to their allocator.
void install() {
  static PoolAllocator* installed = [] {
    auto* a = new PoolAllocator(c10::GetCPUAllocator());  // never freed: storages keep it
    g_base_raw_deleter = c10::GetCPUAllocator()->raw_deleter();
    c10::SetCPUAllocator(a, /*priority=*/1);
    return a;
  }();
  (void)installed;
}

void begin(const void* memory, TakeFn take, GiveFn give, const Due* due, std::vector<const void*>* made) {
  t_births = Births{memory, take, give, due, made};
}

void end() { t_births = Births{}; }

// The pool a storage's memory was born in, or -1: torch's own.
int born_pool(const at::Tensor& t) {
  const c10::DataPtr& d = t.storage().data_ptr();
  if (d.get_deleter() != &free_born) return -1;
  std::lock_guard<std::mutex> lock(born_mutex());
  auto it = born_blocks().find(d.get());
  return it == born_blocks().end() ? -1 : it->second.pool;
}

}  // namespace placer_births
