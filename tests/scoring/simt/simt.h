// simt.h: run CUDA C kernels, unchanged, on CPU threads (tokenbook's kernel test harness).
//
//   g++ -std=c++20 -O2 -pthread -include simt.h -x c++ kernel.cu
//
// Environment: SIMT_THREADS (OS threads for blocks), SIMT_STACK_KB (fibre stack, default 128),
// SIMT_SEED (nonzero: random thread order and a lagging warp per block, to expose races),
// SIMT_FTZ (1: flush denormals to zero, as CuPy's -ftz=true build does on the GPU; x86-64 only).
//
// Model. A launch runs the grid's blocks on a pool of OS threads (SIMT_THREADS, default: the
// hardware concurrency). Inside a block every CUDA thread is a fibre (ucontext) with its own stack;
// the fibres of one block all live on one OS thread and are scheduled cooperatively, so
//   * __shared__ (= static thread_local) is one copy per block, as on the GPU;
//   * __syncthreads() is a barrier over all threads of the block;
//   * warp primitives (__shfl_*_sync, __ballot_sync, __any/__all_sync, __syncwarp) are barriers
//     over the lanes named in the mask, which exchange values through a per-warp buffer, with the
//     CUDA semantics for the source lane (out of the width segment: the caller's own value).
// Kernel bugs that are undefined behaviour on a GPU are reported, not silently tolerated: a barrier
// that some thread of the block never reaches (deadlock, e.g. an early return before
// __syncthreads), lanes of one warp passing different masks, a lane calling a warp primitive with
// a mask that excludes itself, or reading from a lane outside the mask. simt::launch then returns
// false and simt::last_error() says what happened (the launch never aborts the process).
//
// Also provided: dim3/uint3, blockIdx/threadIdx/blockDim/gridDim, warpSize, __global__/__device__/
// __host__/__forceinline__/__shared__/__constant__/__launch_bounds__, the bit casts
// (__int_as_float, ...), the fast-math intrinsics mapped to libm (__expf -> expf, ...; libm may
// differ from CUDA's by a few ulp), float/int atomics through std::atomic_ref, and a bf16 type
// with the layout of __nv_bfloat16 (__bfloat162float, __float2bfloat16 with round-to-nearest-even).
#pragma once

#if defined(__APPLE__) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700  // macOS exposes the (deprecated) ucontext routines only with it
#endif
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// `#pragma unroll` is a CUDA hint that host compilers do not know
#pragma GCC diagnostic ignored "-Wunknown-pragmas"

// ---------------------------------------------------------------- qualifiers and built-in types
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __shared__ static thread_local
#define __align__(n) alignas(n)
#define __launch_bounds__(...)

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace simt {
namespace detail {

constexpr int kWarp = 32;

// ---- fibre contexts: a hand-written switch on x86-64 (callee-saved registers, MXCSR and the x87
// control word; no signal-mask syscall, ~50x faster than swapcontext), ucontext elsewhere or with
// -DSIMT_UCONTEXT.
#if defined(__x86_64__) && !defined(SIMT_UCONTEXT)
#define SIMT_FAST_SWITCH 1
extern "C" void simt_ctx_switch(void** save_sp, void* load_sp);
asm(R"(
  .pushsection .text
  .weak simt_ctx_switch
  .type simt_ctx_switch, @function
simt_ctx_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size simt_ctx_switch, .-simt_ctx_switch
  .popsection
)");

struct Context {
  void* sp = nullptr;
};

inline void ctx_switch(Context& from, Context& to) { simt_ctx_switch(&from.sp, to.sp); }

// A fresh context that starts in entry() (which must never return) on the given stack.
inline void ctx_init(Context& c, char* stack, size_t size, Context&, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                            // fake return address: entry sees rsp % 16 == 8
  *--sp = reinterpret_cast<void*>(entry);     // where the first switch "returns" to
  for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
  unsigned int mxcsr;
  unsigned short fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  uint64_t word = mxcsr | (uint64_t)fpucw << 32;
  *--sp = reinterpret_cast<void*>(word);
  c.sp = sp;
}
#else
struct Context {
  ucontext_t uc;
};

inline void ctx_switch(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }

inline void ctx_init(Context& c, char* stack, size_t size, Context& link, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = &link.uc;
  makecontext(&c.uc, entry, 0);
}
#endif

struct Block;

struct Fiber {
  Context ctx;
  uint3 tid;
  unsigned linear = 0, lane = 0, warp = 0;
  bool done = false;
  Block* block = nullptr;
};

struct Warp {
  unsigned existing = 0;  // lanes that exist (the last warp of a block may be partial)
  unsigned arrived = 0;
  unsigned long gen = 0;
  unsigned mask = 0;       // mask of the operation in flight
  unsigned char slot[kWarp][8];
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Context sched;
  unsigned n = 0;
  unsigned bar_arrived = 0;
  unsigned long bar_gen = 0;
  bool progress = false;
  bool failed = false;
  std::string error;
  const std::function<void()>* body = nullptr;
};

inline thread_local Fiber* t_fiber = nullptr;
inline thread_local Block* t_block = nullptr;
inline thread_local uint3 t_block_idx = {0, 0, 0};
inline thread_local dim3 t_block_dim;
inline thread_local dim3 t_grid_dim;

inline std::mutex g_error_mutex;
inline std::string g_error;

inline void record_error(Block* b, const std::string& msg) {
  if (!b->failed) {
    b->failed = true;
    char where[128];
    std::snprintf(where, sizeof where, " [block (%u,%u,%u)]", t_block_idx.x, t_block_idx.y,
                  t_block_idx.z);
    b->error = msg + where;
  }
}

// A kernel error inside a fibre: record it and park the fibre for good (the scheduler stops the
// block as soon as it regains control; parked fibres are abandoned, their stacks reused).
[[noreturn]] inline void fail(const std::string& msg) {
  Fiber* f = t_fiber;
  record_error(f->block, msg);
  for (;;) ctx_switch(f->ctx, f->block->sched);
}

inline void yield() {
  Fiber* f = t_fiber;
  ctx_switch(f->ctx, f->block->sched);
  t_fiber = f;  // the scheduler restores it too; keep the invariant local
}

// Wait until *gen differs from g (a barrier generation advanced by the last arrival).
inline void wait_gen(const unsigned long* gen, unsigned long g) {
  while (*gen == g) yield();
}

inline void syncthreads() {
  Block* b = t_block;
  b->progress = true;
  if (++b->bar_arrived == b->n) {
    b->bar_arrived = 0;
    ++b->bar_gen;
    return;
  }
  wait_gen(&b->bar_gen, b->bar_gen);
}

// Barrier over the lanes of this warp named in mask; checks the mask.
inline void warp_barrier(unsigned mask, const char* op) {
  Fiber* f = t_fiber;
  Block* b = t_block;
  Warp& w = b->warps[f->warp];
  if (!(mask >> f->lane & 1u)) {
    fail(std::string(op) + ": the calling lane is not in the mask");
  }
  if (mask & ~w.existing) {
    fail(std::string(op) + ": the mask names lanes that do not exist in this block");
  }
  if (w.arrived == 0) {
    w.mask = mask;
  } else if (w.mask != mask) {
    fail(std::string(op) + ": lanes of one warp passed different masks");
  }
  b->progress = true;
  if (++w.arrived == (unsigned)std::popcount(mask)) {
    w.arrived = 0;
    ++w.gen;
    return;
  }
  wait_gen(&w.gen, w.gen);
}

// Every lane in mask publishes v, then reads the value of lane src (src < 0 or outside
// [seg_lo, seg_lo + width): its own value).
template <class T>
inline T exchange(unsigned mask, T v, int src, int width, const char* op) {
  static_assert(sizeof(T) <= 8, "warp exchange of a type wider than 8 bytes");
  Fiber* f = t_fiber;
  Warp& w = t_block->warps[f->warp];
  std::memcpy(w.slot[f->lane], &v, sizeof(T));
  warp_barrier(mask, op);
  T r = v;
  const int seg_lo = (int)f->lane / width * width;
  if (src >= seg_lo && src < seg_lo + width) {
    if (mask >> src & 1u) {
      std::memcpy(&r, w.slot[src], sizeof(T));
    } else {
      fail(std::string(op) + ": reads from a lane outside the mask (undefined on a GPU)");
    }
  }
  warp_barrier(mask, op);
  return r;
}

inline void fiber_entry() {
  Fiber* f = t_fiber;
  (*f->block->body)();
  f->done = true;
  f->block->progress = true;
  ctx_switch(f->ctx, f->block->sched);
  __builtin_unreachable();  // a finished fibre is never resumed
}

struct Worker {
  std::vector<char> stacks;
  size_t stack_size = 0;
};

inline size_t stack_size() {
  const char* e = std::getenv("SIMT_STACK_KB");
  const long kb = e ? std::atol(e) : 128;
  return (size_t)std::max(16L, kb) * 1024;
}

// Runs one block on the calling OS thread. Returns false (with b.error) on a kernel error.
inline bool run_block(Worker& wk, const dim3& bdim, const std::function<void()>& body,
                      std::string& error) {
  Block b;
  b.n = bdim.x * bdim.y * bdim.z;
  b.body = &body;
  b.fibers.resize(b.n);
  const unsigned n_warps = (b.n + kWarp - 1) / kWarp;
  b.warps.resize(n_warps);
  for (unsigned w = 0; w < n_warps; ++w) {
    const unsigned lanes = std::min<unsigned>(kWarp, b.n - w * kWarp);
    b.warps[w].existing = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
  }
  const size_t ss = stack_size();
  if (wk.stacks.size() < ss * b.n || wk.stack_size != ss) {
    wk.stacks.assign(ss * b.n, 0);
    wk.stack_size = ss;
  }
  t_block = &b;
  for (unsigned i = 0; i < b.n; ++i) {
    Fiber& f = b.fibers[i];
    f.block = &b;
    f.linear = i;
    f.lane = i % kWarp;
    f.warp = i / kWarp;
    f.tid = {i % bdim.x, i / bdim.x % bdim.y, i / (bdim.x * bdim.y)};
    ctx_init(f.ctx, wk.stacks.data() + ss * i, ss, b.sched, fiber_entry);
  }
  unsigned alive = b.n;
  // SIMT_SEED=<nonzero> turns the scheduler into a race detector:
  //  * every pass resumes the fibres in a fresh random order (races between threads that meet
  //    at the same barriers, e.g. within a warp);
  //  * one randomly chosen warp of each block lags: it is resumed only when no other thread can
  //    move, so the other warps run as far ahead as the barriers allow (races such as a shared
  //    buffer reused by the next loop iteration without a __syncthreads in between).
  // A race-free kernel gives bitwise the same results for every seed.
  const char* seed_env = std::getenv("SIMT_SEED");
  uint64_t rng = seed_env ? std::strtoull(seed_env, nullptr, 10) : 0;
  auto next = [&rng]() {  // xorshift64
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  unsigned lag = ~0u;
  if (rng) {
    rng ^= 0x9E3779B97F4A7C15ull * (1 + t_block_idx.x + 65536ull * (t_block_idx.y + 65536ull * t_block_idx.z));
    if (n_warps > 1) lag = (unsigned)(next() % n_warps);
  }
  std::vector<unsigned> order(b.n);
  for (unsigned i = 0; i < b.n; ++i) order[i] = i;
  auto pass = [&](bool lagging) {  // one round over the (non-)lagging fibres
    if (rng) {
      for (unsigned i = b.n - 1; i > 0; --i) std::swap(order[i], order[next() % (i + 1)]);
    }
    for (unsigned oi = 0; oi < b.n; ++oi) {
      Fiber& f = b.fibers[order[oi]];
      if (f.done || (f.warp == lag) != lagging) continue;
      t_fiber = &f;
      ctx_switch(b.sched, f.ctx);
      t_fiber = nullptr;
      if (b.failed) return;  // fibres left suspended are abandoned (their stacks are reused)
      if (f.done) --alive;
    }
  };
  while (alive > 0) {
    b.progress = false;
    pass(false);
    if (b.failed) break;
    if (!b.progress && lag != ~0u) pass(true);
    if (b.failed) break;
    if (alive > 0 && !b.progress) {
      record_error(&b, "deadlock: a barrier (__syncthreads or a warp primitive) is never reached by all "
           "the threads it waits for (an early return or a divergent branch?)");
      break;
    }
  }
  t_block = nullptr;
  if (b.failed) error = b.error;
  return !b.failed;
}

}  // namespace detail

// Message of the last failed launch ("" after a successful one).
inline std::string last_error() {
  std::lock_guard<std::mutex> lock(detail::g_error_mutex);
  return detail::g_error;
}

// Runs kernel<<<grid, block>>>(args...) to completion. Returns false on a kernel error.
template <class... Params, class... Args>
bool launch(void (*kernel)(Params...), dim3 grid, dim3 block, Args... args) {
  using namespace detail;
  const unsigned long long n_blocks = 1ull * grid.x * grid.y * grid.z;
  const unsigned threads_per_block = block.x * block.y * block.z;
  {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    g_error.clear();
  }
  if (threads_per_block == 0 || threads_per_block > 1024 || n_blocks == 0) {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    g_error = "invalid launch configuration (0 or more than 1024 threads per block, or an empty grid)";
    return false;
  }
  const std::function<void()> body = [&]() { kernel(args...); };
  std::atomic<unsigned long long> next{0};
  std::atomic<bool> failed{false};
  const char* ftz_env = std::getenv("SIMT_FTZ");
  const bool ftz = ftz_env && std::atoi(ftz_env) != 0;
  auto work = [&]() {
    Worker wk;
    t_block_dim = block;
    t_grid_dim = grid;
#if defined(__x86_64__)
    // SIMT_FTZ=1: flush denormals to zero like CuPy's kernels (compiled with -ftz=true); the
    // fibres inherit the worker's MXCSR, and the caller's is restored afterwards
    unsigned int saved_csr = 0;
    if (ftz) {
      asm volatile("stmxcsr %0" : "=m"(saved_csr));
      const unsigned int csr = saved_csr | 0x8040u;  // FTZ | DAZ
      asm volatile("ldmxcsr %0" : : "m"(csr));
    }
    struct RestoreCsr {
      bool on;
      unsigned int csr;
      ~RestoreCsr() {
        if (on) asm volatile("ldmxcsr %0" : : "m"(csr));
      }
    } restore_csr{ftz, saved_csr};
#endif
    for (;;) {
      const unsigned long long i = next.fetch_add(1);
      if (i >= n_blocks || failed.load()) break;
      t_block_idx = {(unsigned)(i % grid.x), (unsigned)(i / grid.x % grid.y),
                     (unsigned)(i / (1ull * grid.x * grid.y))};
      std::string err;
      if (!run_block(wk, block, body, err)) {
        failed = true;
        std::lock_guard<std::mutex> lock(g_error_mutex);
        if (g_error.empty()) g_error = err;
      }
    }
  };
  const char* env = std::getenv("SIMT_THREADS");
  unsigned n_workers = env ? (unsigned)std::max(1, std::atoi(env)) : std::thread::hardware_concurrency();
  n_workers = (unsigned)std::min<unsigned long long>(std::max(1u, n_workers), n_blocks);
  if (n_workers == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < n_workers; ++i) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  return !failed.load();
}

}  // namespace simt

// ---------------------------------------------------------------- indices
#define threadIdx (::simt::detail::t_fiber->tid)
#define blockIdx (::simt::detail::t_block_idx)
#define blockDim (::simt::detail::t_block_dim)
#define gridDim (::simt::detail::t_grid_dim)
#define warpSize 32

// ---------------------------------------------------------------- synchronisation and warps
inline void __syncthreads() { ::simt::detail::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::simt::detail::warp_barrier(mask, "__syncwarp"); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() {}

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  const int lane = (int)::simt::detail::t_fiber->lane;
  const int src = lane / width * width + ((src_lane % width) + width) % width;
  return ::simt::detail::exchange(mask, v, src, width, "__shfl_sync");
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  const int lane = (int)::simt::detail::t_fiber->lane;
  return ::simt::detail::exchange(mask, v, lane ^ lane_mask, width, "__shfl_xor_sync");
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  const int lane = (int)::simt::detail::t_fiber->lane;
  return ::simt::detail::exchange(mask, v, lane + (int)delta, width, "__shfl_down_sync");
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  const int lane = (int)::simt::detail::t_fiber->lane;
  const int src = lane - (int)delta;
  // below the segment start: own value (exchange treats src < seg_lo as out of the segment)
  return ::simt::detail::exchange(mask, v, src, width, "__shfl_up_sync");
}

inline unsigned __ballot_sync(unsigned mask, int pred) {
  using namespace ::simt::detail;
  Fiber* f = t_fiber;
  Warp& w = t_block->warps[f->warp];
  const unsigned char p = pred ? 1 : 0;
  std::memcpy(w.slot[f->lane], &p, 1);
  warp_barrier(mask, "__ballot_sync");
  unsigned r = 0;
  for (int l = 0; l < kWarp; ++l)
    if ((mask >> l & 1u) && w.slot[l][0]) r |= 1u << l;
  warp_barrier(mask, "__ballot_sync");
  return r;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }

// ---------------------------------------------------------------- bit casts and math
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline float __uint_as_float(unsigned int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned int __float_as_uint(float x) { return std::bit_cast<unsigned int>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
template <class T>
inline T __ldg(const T* p) { return *p; }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __clz(unsigned x) { return std::countl_zero(x); }
inline int __ffs(unsigned x) { return x ? std::countr_zero(x) + 1 : 0; }

// ---------------------------------------------------------------- atomics (across blocks: OS threads)
template <class T>
inline T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T>
inline T atomicExch(T* p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T>
inline T atomicCAS(T* p, T expected, T desired) {
  std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
template <class T>
inline T atomicMax(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {}
  return old;
}
template <class T>
inline T atomicMin(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {}
  return old;
}

// ---------------------------------------------------------------- bfloat16 (layout of __nv_bfloat16)
struct alignas(2) __nv_bfloat16 {
  unsigned short __x;
};
inline float __bfloat162float(__nv_bfloat16 h) { return std::bit_cast<float>((unsigned)h.__x << 16); }
inline __nv_bfloat16 __float2bfloat16(float f) {  // round to nearest even, NaN kept quiet
  const unsigned u = std::bit_cast<unsigned>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {(unsigned short)((u >> 16) | 0x40u)};
  return {(unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
