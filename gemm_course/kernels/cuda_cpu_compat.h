// cuda_cpu_compat.h — compile a level's CUDA C source as C++ and run its kernel on the CPU.
//
// gemm_course.run.cpu_backend builds one shared library per (source, kernel, flags) from
//
//     #include "cuda_cpu_compat.h"
//     <the level's .cu file, unchanged>
//     GC_CPU_ENTRY(gemm_naive_cols<32, 8>)      // the registry's kernel name expression
//
// and calls gc_launch() through ctypes. This header provides the CUDA C surface the SIMT levels
// use (part 1), and a small runtime that executes a grid (part 2):
//
//   * Blocks run one after another, in CUDA's order (x fastest, then y, then z).
//   * Inside a block, every CUDA thread is a fiber (its own stack; started with makecontext,
//     switched with _setjmp/_longjmp, no system call per switch), and one OS thread switches
//     between them. THE SCHEDULE, which the tests rely on: the block's threads run one at a
//     time in order of linear thread index (x fastest), each until it reaches its next
//     __syncthreads() or returns; when every thread waits at the barrier, the next round starts
//     with thread 0 again. So between two barriers thread t sees every shared-memory
//     write of threads < t and none of threads > t — a missing barrier reads stale data every
//     time, not once in a while.
//   * __shared__ variables are static storage (one copy, reused block after block), filled with
//     0xFF bytes (NaN for floats) when each block starts, as is dynamic shared memory: a read of
//     shared memory that no thread of the block wrote gives NaN.
//   * Barrier misuse is reported, never waited on: some threads returned while others wait, or
//     threads wait at different __syncthreads() calls. A thread that runs for timeout_s seconds
//     without reaching a barrier or returning (an endless loop, a spin-wait on another thread) is
//     stopped by a watchdog. A crash inside the kernel (out-of-bounds access into a guard page,
//     misaligned float4 — with the backend's -fsanitize=alignment —, stack overflow, integer
//     division by zero, __trap()) is caught as well, with the faulting instruction's address (from
//     the signal's context), which Python turns into a source line. Each of these ends the launch
//     with an error code that Python turns into an exception.
//   * cp.async (common.cuh's copy_async, <cuda_pipeline.h>) is deferred: a thread's copies land
//     when that thread waits for them, never at a barrier, never by themselves.
//   * The race-check build (-fsanitize=thread, hooks below) also checks every global access against
//     the array arguments (a load or store in the unmapped space around an array is reported before
//     it happens, with the array and the element), and every shared access against the copies in
//     flight (a word whose cp.async is not yet waited for may not be touched by anyone).
//
// Not emulated: warp-level primitives (__shfl*_sync, __syncwarp, __ballot_sync, ...), inline
// PTX (asm), Tensor Cores (wmma/mma), cooperative groups, libcu++ (cuda::pipeline). Using one
// of the listed intrinsics stops the compile with a message saying so.
#pragma once

#undef _FORTIFY_SOURCE  // its longjmp check rejects jumps between fiber stacks (Ubuntu enables it)
#if defined(__APPLE__) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 600  // ucontext on macOS
#endif

#include <cmath>
#include <cstdarg>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include <dlfcn.h>
#ifdef __linux__
#include <link.h>  // dl_iterate_phdr: this library's read-only segments
#endif
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define GEMM_COURSE_CPU 1  // kernels may test it to pick a PTX-free code path; __CUDA_ARCH__ is unset

// =================================================================================================
// Part 1 — the CUDA C surface
// =================================================================================================

#define __global__ __attribute__((noinline))  // never inlined into the runtime's uninstrumented caller
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __shared__ static  // see "shared memory" in part 2
// __restrict__ is understood by g++ and clang++ as it is; `#pragma unroll` is ignored.

struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The built-in variables. Only one CUDA thread runs at any moment, so one copy suffices: the
// scheduler sets them before it switches to a thread. One struct, so that the race-check build can let
// the kernel read exactly these bytes of the runtime's memory and nothing else.
namespace gc_cpu {
struct Builtins { uint3 thread, block; dim3 block_dim, grid_dim; };
inline Builtins builtins;
}  // namespace gc_cpu
#define threadIdx (::gc_cpu::builtins.thread)
#define blockIdx (::gc_cpu::builtins.block)
#define blockDim (::gc_cpu::builtins.block_dim)
#define gridDim (::gc_cpu::builtins.grid_dim)
constexpr int warpSize = 32;

// Vector types with CUDA's sizes and alignments (a misaligned float4 access faults, as on a GPU).
struct __align__(8) float2 { float x, y; };
struct float3 { float x, y, z; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(8) int2 { int x, y; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(8) uint2 { unsigned int x, y; };
struct __align__(16) uint4 { unsigned int x, y, z, w; };
struct __align__(16) double2 { double x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }
inline double2 make_double2(double x, double y) { return {x, y}; }

// min/max as CUDA's global overloads: any two arithmetic types, compared in their common type.
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) { using T = std::common_type_t<A, B>; return T(b) < T(a) ? T(b) : T(a); }
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) { using T = std::common_type_t<A, B>; return T(a) < T(b) ? T(b) : T(a); }

// Loads and stores with cache hints are plain loads and stores.
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

// Single-precision intrinsics (fmaf, sqrtf, fminf, ... come from <cmath>).
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __expf(float a) { return std::exp(a); }
inline float __logf(float a) { return std::log(a); }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
inline float __saturatef(float a) { return a < 0.0f ? 0.0f : (a > 1.0f ? 1.0f : a); }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline unsigned int __float_as_uint(float f) { unsigned int i; std::memcpy(&i, &f, 4); return i; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned int i) { float f; std::memcpy(&f, &i, 4); return f; }

// Atomics: only one CUDA thread runs at a time, so read-modify-write is atomic as it is. Each tells the
// race detectors first (gc_cpu::atomic_access): atomics of different threads or blocks on one word do not
// race with each other, but they do with plain loads and stores of that word.
namespace gc_cpu { void atomic_access(void* p, size_t bytes, uintptr_t pc); }
#define GC_CPU_ATOMIC(name, update)                                                                 \
    template <class T> __attribute__((noinline, no_sanitize_thread)) T name(T* p, T v) {             \
        ::gc_cpu::atomic_access(p, sizeof(T), (uintptr_t)__builtin_return_address(0));              \
        T old = *p; *p = (update); return old;                                                      \
    }
GC_CPU_ATOMIC(atomicAdd, old + v)
GC_CPU_ATOMIC(atomicSub, old - v)
GC_CPU_ATOMIC(atomicExch, v)
GC_CPU_ATOMIC(atomicMax, old < v ? v : old)
GC_CPU_ATOMIC(atomicMin, v < old ? v : old)
#undef GC_CPU_ATOMIC
template <class T> __attribute__((noinline, no_sanitize_thread)) T atomicCAS(T* p, T cmp, T v) {
    ::gc_cpu::atomic_access(p, sizeof(T), (uintptr_t)__builtin_return_address(0));
    T old = *p; if (old == cmp) *p = v; return old;
}

inline void __threadfence() {}
namespace gc_cpu { [[noreturn]] void trap(); }
inline void __trap() { gc_cpu::trap(); }  // the runtime notes where it was called, then traps (SIGILL)
inline void __threadfence_block() {}

// What the CPU backend cannot run stops the compile with a readable reason.
#define GC_CPU_UNSUPPORTED(name, why)                                                              \
    template <class... T> inline int name(T...) {                                                  \
        static_assert(sizeof...(T) < 0, #name " is not supported by the CPU backend: " why);       \
        return 0;                                                                                  \
    }
GC_CPU_UNSUPPORTED(__syncwarp, "threads run one at a time, not in warps")
GC_CPU_UNSUPPORTED(__shfl_sync, "warp shuffles are not emulated")
GC_CPU_UNSUPPORTED(__shfl_up_sync, "warp shuffles are not emulated")
GC_CPU_UNSUPPORTED(__shfl_down_sync, "warp shuffles are not emulated")
GC_CPU_UNSUPPORTED(__shfl_xor_sync, "warp shuffles are not emulated")
GC_CPU_UNSUPPORTED(__ballot_sync, "warp votes are not emulated")
GC_CPU_UNSUPPORTED(__any_sync, "warp votes are not emulated")
GC_CPU_UNSUPPORTED(__all_sync, "warp votes are not emulated")
GC_CPU_UNSUPPORTED(__activemask, "warp votes are not emulated")
GC_CPU_UNSUPPORTED(__syncthreads_count, "only the plain __syncthreads() is emulated")
GC_CPU_UNSUPPORTED(__syncthreads_and, "only the plain __syncthreads() is emulated")
GC_CPU_UNSUPPORTED(__syncthreads_or, "only the plain __syncthreads() is emulated")
#undef GC_CPU_UNSUPPORTED

namespace gc_cpu {
void syncthreads(int line);
void pipeline_memcpy_async(void* dst, const void* src, size_t bytes, size_t zfill);
void pipeline_commit();
void pipeline_wait_prior(size_t n);
void* dynamic_shared_memory();
}  // namespace gc_cpu

// printf: into a buffer of a GPU's default size (1 MiB), printed when the launch ends, as a GPU prints
// at the next synchronisation; what does not fit is dropped, as on a GPU.
namespace gc_cpu { int device_printf(const char* format, ...) __attribute__((format(__printf__, 1, 2))); }
#define printf ::gc_cpu::device_printf

// The barrier: a real one among the block's threads (the macro records the line for errors).
#define __syncthreads() ::gc_cpu::syncthreads(__LINE__)

// <cuda_pipeline.h> (and common.cuh's copy_async, which uses it on the CPU): each thread's copies
// are queued and performed only when that thread waits for them (__pipeline_wait_prior), as a
// GPU's cp.async completes only at cp.async.wait_group: data copied asynchronously is not there
// before the wait, and a __syncthreads() does not complete another thread's copies. Copies a
// thread never waited for before returning never land (on a GPU they land at an unknown time).
// The race-check build reports any access to a word whose copy is issued but not yet waited for.
// Always inlined, so that the return address the runtime records lies in the caller's code.
__attribute__((always_inline)) inline void __pipeline_memcpy_async(void* __restrict__ dst_shared,
                                                                   const void* __restrict__ src_global,
                                                                   size_t size_and_align, size_t zfill = 0) {
    gc_cpu::pipeline_memcpy_async(dst_shared, src_global, size_and_align, zfill);
}
inline void __pipeline_commit() { gc_cpu::pipeline_commit(); }
inline void __pipeline_wait_prior(size_t n) { gc_cpu::pipeline_wait_prior(n); }

// `extern __shared__ T name[];` is rewritten by cpu_backend.py into this (same line).
#define GC_CPU_DYNAMIC_SHARED(T, name) T* const name = static_cast<T*>(::gc_cpu::dynamic_shared_memory())

// =================================================================================================
// Part 2 — the runtime: fibers, barrier, watchdog, fault capture, launch
// =================================================================================================

#define GC_CPU_EXPORT extern "C" __attribute__((visibility("default")))
// The runtime's own code is not instrumented (no_sanitize_thread): its accesses are not the kernel's, and
// the race-check build refuses any access of the kernel's outside its arrays, shared memory and own stack.
// (GCC does not inline an instrumented function into one of these, so the kernel keeps its hooks.)
#define GC_RUNTIME __attribute__((no_sanitize_thread))

namespace gc_cpu {
#ifndef GC_CPU_KERNEL_ONLY
// SPLIT BUILD. The runtime (everything down to "calling a kernel" below, the exported helpers and the race
// detector's hooks) is compiled ONCE per compiler and flags into an object of its own, which every kernel's
// library links (cpu_backend._runtime_object); a kernel's translation unit defines GC_CPU_KERNEL_ONLY and
// sees only the declarations it calls. The library is the same code either way: both objects are linked
// into it, and the inline variables they share (builtins, rt, race) are one object each after linking.

// An array argument in its guarded buffer: data at [address, address + bytes), inside a reservation
// that reaches `guard` bytes before and after it (none of it mapped except the data's pages).
struct ArrayInfo {
    unsigned long long address, bytes, guard;
    int itemsize;   // bytes per element: the granule of the blocks' ownership of a writable array
    int writable;   // 0: a const pointer (the kernel may not store into it)
};

// Shared with cpu_backend.py through ctypes (keep the two layouts identical).
struct LaunchConfig {
    int grid[3];
    int block[3];
    long long dynamic_shared_bytes;
    double timeout_s;  // <= 0: no watchdog
    char* stacks;      // from gc_stack_pool(): one pool per process, used by one launch at a time
    void* profile;     // AccessRecord[profile_capacity]: the profiled blocks' accesses (race-check builds), or null
    long long profile_capacity;
    const ArrayInfo* arrays;  // the array arguments: race-check builds check every global access against them
    int array_count;
    int profile_block_count;   // blocks to profile (profile_blocks: x, y, z each); 0 with a profile: block (0,0,0)
    const int* profile_blocks;
    long long* profile_intervals;  // out: the barrier intervals each profiled block went through
    unsigned long long block_order_seed;  // 0: CUDA's order (x fastest); else the blocks in an order drawn from it
};

// One memory access of a thread in a profiled block (for the access profile: Python groups them
// into warp-wide accesses and counts sectors and bank wavefronts with the course's models).
struct AccessRecord {
    unsigned interval;         // barrier interval within the block (0, 1, ...)
    unsigned block;            // index into the profiled blocks
    unsigned short thread;     // linear thread index
    unsigned char size;        // bytes
    unsigned char flags;       // 1: write, 2: shared memory (address is then a byte offset into it), 4: cp.async
    unsigned reserved;
    unsigned long long pc;     // return address of the hook (Python makes it a library offset)
    unsigned long long address;
};

enum ErrorCode : int {
    OK = 0,
    BARRIER_PARTIAL = 1,    // some threads returned, the others wait at a barrier
    BARRIER_DIVERGENT = 2,  // threads wait at different __syncthreads() calls
    TIMEOUT = 3,            // a thread ran timeout_s without reaching a barrier or returning
    FAULT = 4,              // a signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL) inside the kernel
    STACK_OVERFLOW = 5,     // a thread overflowed its stack
    BAD_CONFIG = 6,
    RACE = 7,               // two threads touched one shared word between two barriers, one writing
    INTERRUPTED = 8,        // stopped from outside (Ctrl-C in Python: gc_request_stop)
    OUT_OF_BOUNDS = 9,      // (race-check builds) a global access outside every array, next to one of them
    ASYNC_COPY = 10,        // (race-check builds) an access to a shared word whose cp.async was not waited for
    WILD_ACCESS = 11,       // (race-check builds) an access outside the arrays, shared memory and the thread's stack
    BLOCK_CONFLICT = 12,    // (race-check builds) two blocks touched one element of an array, one of them writing
    INPUT_WRITE = 13,       // (race-check builds) a store into an array passed as a const pointer
};

struct ErrorInfo {
    int code;
    int signal;
    unsigned long long address;  // faulting address for FAULT
    int block[3];
    int thread[3];
    int line;
    char message[1024];
    // RACE: the other thread, and where each access is in the library (offsets for addr2line)
    int other_thread[3];
    unsigned long long code_offset[2];  // [0]: this thread's access, [1]: the other thread's
    unsigned long long shared_offset;   // byte offset of the word in shared memory
    int race_kind;                      // 0: write after write, 1: read after write, 2: write after read
    // The numbers of the other reports, from which Python writes the message in both languages:
    // BARRIER_PARTIAL: other_thread = the first thread that returned, count = threads at the barrier;
    // BARRIER_DIVERGENT: other_thread = the first waiting thread, other_line = its barrier's line
    // (thread and line: the first thread waiting elsewhere); STACK_OVERFLOW: count = stack bytes.
    int other_line;
    long long count;
    // OUT_OF_BOUNDS: the array (index into cfg->arrays), the byte offset from its start, the access;
    // also ASYNC_COPY (write, size; other_thread: the copy's issuer, code_offset[1]: where it was
    // issued, count: 1 if the issuer had returned). FAULT, OUT_OF_BOUNDS, ASYNC_COPY, TIMEOUT:
    // code_offset[0] = where the thread was (for a fault: the faulting instruction itself).
    int array;
    int write;
    long long byte_offset;
    int access_size;
    // RACE: the line of the __syncthreads() each thread last passed (0: none since the kernel began),
    // and where those barriers are (code offsets); [0]: this thread, [1]: the other one.
    int entry_line[2];
    unsigned long long entry_offset[2];
    // BLOCK_CONFLICT: the other block (other_thread holds its x, y, z) and race_kind as for RACE;
    // WILD_ACCESS: address = the address touched (write, access_size as above).
};

constexpr int kMaxThreads = 1024;
constexpr size_t kStackBytes = 256 * 1024;   // per CUDA thread (local arrays live here)
constexpr int kMaxPendingCopies = 1 << 16;    // queued cp.async per thread (beyond: the oldest lands early)
constexpr size_t kArrayGuardBytes = (size_t)32 << 20;  // reserved, unmapped, before and after every array

enum FiberState : int { FRESH, RUNNING, AT_BARRIER, DONE };  // FRESH: not yet run in this block

struct PendingCopy { void* dst; const void* src; size_t bytes, zfill; long long batch; uintptr_t pc; };

struct Fiber {
    jmp_buf resume;      // where it continues: after its barrier, or at the top of its loop
    bool started;        // its loop runs (so `resume` is valid)
    int state;
    int line;  // of the __syncthreads() it waits at
    uintptr_t barrier_pc;  // and where that call is
    int entry_line;        // the barrier it passed last in this block (0: none yet), for race reports
    uintptr_t entry_pc;
    uint3 index;
    int pending_count, pending_capacity;
    long long next_batch;  // batches committed so far
    PendingCopy* pending;  // grows on demand (kept from launch to launch)
};

// The state of the launch in progress (one at a time per library: gc_launch holds a mutex).
struct Runtime {
    Fiber fibers[kMaxThreads];
    char* stacks = nullptr;  // kMaxThreads × (guard page + kStackBytes)
    int threads = 0;
    int current = -1;
    jmp_buf scheduler;
    ucontext_t starter;      // to start a fiber's loop on its stack
    void (*body)(void*) = nullptr;
    void* closure = nullptr;
    char* dynamic_shared = nullptr;
    size_t dynamic_shared_capacity = 0, dynamic_shared_bytes = 0;
    volatile long long progress = 0;  // bumped at every switch; the watchdog watches it
    unsigned interval = 0;            // barrier intervals so far (the race detector's clock)
    int stop_requested = 0;           // set by gc_request_stop (Ctrl-C); the watchdog acts on it
    // fault capture
    sigjmp_buf escape;
    volatile sig_atomic_t armed = 0;
    volatile sig_atomic_t escape_code = OK;
    volatile int fault_signal = 0;
    volatile uintptr_t fault_address = 0;
    volatile uintptr_t fault_pc = 0;  // the instruction that faulted (or where the watchdog found the thread)
    volatile uintptr_t trap_pc = 0;   // the return address of the __trap() call that stopped the kernel
    pthread_t runner;
    unsigned block_serial = 0;        // blocks run so far (a cp.async's "pending" mark belongs to one block)
    const ArrayInfo* arrays = nullptr;
    int array_count = 0;
    uintptr_t arrays_lo = 0, arrays_hi = 0;  // the span of all the arrays' reservations
    // OUT_OF_BOUNDS / ASYNC_COPY found by a hook (filled into ErrorInfo by run_grid)
    int bad_array = -1, bad_write = 0, bad_size = 0, bad_issuer = -1, bad_issuer_done = 0;
    long long bad_offset = 0;
    uintptr_t bad_pc = 0, bad_issue_pc = 0, bad_shared_offset = 0;
    // WILD_ACCESS / BLOCK_CONFLICT / INPUT_WRITE found by a hook
    uintptr_t bad_address = 0;
    unsigned bad_other_block = 0;     // BLOCK_CONFLICT: the other block's linear index + 1 (kAtomicOwner: atomics)
    int bad_conflict_kind = 0;        // as RaceState::kind
    // Which block owns each element of each writable array (race-check builds): the linear index + 1 of the
    // block that wrote it (kAtomicOwner: only atomics so far) and of the first block that read it.
    static constexpr int kMaxArrays = 32;
    unsigned* block_writer[kMaxArrays] = {};
    unsigned* block_reader[kMaxArrays] = {};
    unsigned long long block_linear = 0;  // the block running, as x + gx·(y + gy·z)
    // This library's read-only memory (its code and constants): the kernel may read it.
    uintptr_t readonly_lo[8] = {}, readonly_hi[8] = {};
    int readonly_count = 0;
    // printf
    char* printf_buffer = nullptr;
    size_t printf_used = 0, printf_dropped = 0;
};
constexpr unsigned kAtomicOwner = 0xFFFFFFFFu;
constexpr size_t kPrintfBytes = 1 << 20;
inline Runtime rt;
inline pthread_mutex_t launch_mutex = PTHREAD_MUTEX_INITIALIZER;

inline const size_t kPageBytes = (size_t)sysconf(_SC_PAGESIZE);  // asked once, when the library loads
GC_RUNTIME inline size_t page_size() { return kPageBytes; }  // every access to a local variable needs it
GC_RUNTIME inline size_t stack_slot() { return page_size() + kStackBytes; }

// The fibers' stacks: reserved address space with a PROT_NONE guard page below each stack; only
// the pages a thread touches get memory. Every guard page is a separate mapping and a process may
// hold only so many (vm.max_map_count), so Python allocates one pool per process, with
// gc_stack_pool() of the first kernel it loads, and passes it to every launch.

// ---- shared memory ------------------------------------------------------------------------------
// `__shared__` is `static`: one copy per kernel instantiation, shared by all fibers. On Linux the
// backend links with a script that gathers function-local statics (.bss._ZZ*) into the section
// gc_shared and defines these two symbols, so each block starts with NaN-filled shared memory.
#ifdef GC_CPU_POISON_SHARED
extern "C" char gc_shared_begin[] __attribute__((visibility("hidden")));
extern "C" char gc_shared_end[] __attribute__((visibility("hidden")));
#endif

GC_RUNTIME inline void poison_shared_memory() {
#ifdef GC_CPU_POISON_SHARED
    std::memset(gc_shared_begin, 0xFF, (size_t)(gc_shared_end - gc_shared_begin));
#endif
    if (rt.dynamic_shared_bytes) std::memset(rt.dynamic_shared, 0xFF, rt.dynamic_shared_bytes);
}

GC_RUNTIME void* dynamic_shared_memory() { return rt.dynamic_shared; }


// ---- shared-memory race detector ----------------------------------------------------------------
// Compiled with -fsanitize=thread (and GC_CPU_RACE_CHECK), the compiler calls __tsan_readN /
// __tsan_writeN before every load and store of the kernel; these hooks (not ThreadSanitizer's
// runtime, which is never linked) keep, for each 4-byte word of shared memory, who wrote it and who
// read it in the current barrier interval. A write by one thread and a read or write of the same
// word by another thread with no __syncthreads() between them is a race: on a GPU its result
// depends on timing. The first one found is reported with both threads and both source lines.
struct ShadowWord {
    unsigned interval;        // the interval the entry below belongs to (stale otherwise)
    int writer, reader;       // linear thread index, -1 none; reader: the first other reader
    uintptr_t writer_pc, reader_pc;
    // A cp.async into this word issued by async_thread (at async_pc) and not yet waited for; valid
    // only while async_block == rt.block_serial (so it outlives barrier intervals, not the block).
    int async_thread;
    unsigned async_block;
    uintptr_t async_pc;
    int atomic_thread;        // the first thread that updated it with an atomic in this interval, -1 none
    uintptr_t atomic_pc;
};

struct RaceState {
    AccessRecord* profile = nullptr;   // where the profiled blocks' accesses go (null: not profiled)
    long long profile_capacity = 0, profile_count = 0;
    unsigned first_interval = 0;       // rt.interval when the profiled block running started
    unsigned profiled_block = 0;       // its index among the profiled blocks
    bool profiling = false;            // the block running is profiled
    ShadowWord* words = nullptr;
    size_t capacity = 0;
    bool found = false;
    int thread[2];            // [0] the access that completed the race, [1] the earlier one
    uintptr_t pc[2];
    int entry_line[2];        // the barrier each of the two had passed last
    uintptr_t entry_pc[2];
    uintptr_t offset;
    int kind;
};
inline RaceState race;

GC_RUNTIME inline bool race_found() { return race.found; }

// Leave the kernel from a hook, as on_signal does for a fault: run_grid reports rt.bad_*.
[[noreturn]] GC_RUNTIME void escape_with(int code);

#ifdef GC_CPU_RACE_CHECK
GC_RUNTIME inline size_t static_shared_bytes() {
#ifdef GC_CPU_POISON_SHARED
    return (size_t)(gc_shared_end - gc_shared_begin);
#else
    return 0;
#endif
}

// The shadow word for a shared-memory address, or nullptr when the address is not shared memory.
GC_RUNTIME inline ShadowWord* shadow_of(uintptr_t a, uintptr_t* offset) {
    size_t index;
    const size_t fixed = static_shared_bytes();
#ifdef GC_CPU_POISON_SHARED
    const uintptr_t s0 = (uintptr_t)gc_shared_begin;
    if (a >= s0 && a < s0 + fixed) {
        index = (a - s0) / 4;
        *offset = a - s0;
    } else
#endif
    if (rt.dynamic_shared_bytes && a >= (uintptr_t)rt.dynamic_shared && a < (uintptr_t)rt.dynamic_shared + rt.dynamic_shared_bytes) {
        index = (fixed + 3) / 4 + (a - (uintptr_t)rt.dynamic_shared) / 4;
        *offset = (fixed + 3) / 4 * 4 + (a - (uintptr_t)rt.dynamic_shared);
    } else {
        return nullptr;
    }
    const size_t need = (fixed + 3) / 4 + (rt.dynamic_shared_bytes + 3) / 4;
    if (need > race.capacity) {
        std::free(race.words);
        race.words = static_cast<ShadowWord*>(std::calloc(need, sizeof(ShadowWord)));
        race.capacity = race.words ? need : 0;
        if (!race.words) return nullptr;
    }
    return &race.words[index];
}

GC_RUNTIME inline void note_race(int earlier, uintptr_t earlier_pc, uintptr_t pc,
                                                         uintptr_t offset, int kind) {
    if (race.found) return;
    race.found = true;
    race.thread[0] = rt.current;
    race.thread[1] = earlier;
    race.pc[0] = pc;
    race.pc[1] = earlier_pc;
    for (int i = 0; i < 2; ++i) {
        race.entry_line[i] = rt.fibers[race.thread[i]].entry_line;
        race.entry_pc[i] = rt.fibers[race.thread[i]].entry_pc;
    }
    race.offset = offset;
    race.kind = kind;
}

GC_RUNTIME inline bool in_an_array(uintptr_t a) {
    for (int i = 0; i < rt.array_count; ++i)
        if (a - (uintptr_t)rt.arrays[i].address < rt.arrays[i].bytes) return true;
    return false;
}

GC_RUNTIME inline void record_access(int t, const void* p, size_t size, int flags, uintptr_t pc) {
    uintptr_t offset = 0;
    const bool shared = shadow_of((uintptr_t)p, &offset) != nullptr;
    // Only shared memory and the arrays: whoever reads the profile (warp_access) counts nothing else, and a
    // thread's own stack (local variables a register tile may keep there) could be most of the accesses, and
    // fill the buffer before the later profiled blocks were recorded.
    if (!shared && !in_an_array((uintptr_t)p)) return;
    if (race.profile_count < race.profile_capacity)
        race.profile[race.profile_count++] = AccessRecord{rt.interval - race.first_interval, race.profiled_block,
                                                          (unsigned short)t, (unsigned char)(size > 255 ? 255 : size),
                                                          (unsigned char)(flags | (shared ? 2 : 0)), 0, pc,
                                                          shared ? (unsigned long long)offset : (unsigned long long)(uintptr_t)p};
}

[[noreturn]] GC_RUNTIME inline void fail_access(int code, int array, long long offset, bool write, size_t size,
                                             uintptr_t pc) {
    rt.bad_array = array;
    rt.bad_offset = offset;
    rt.bad_write = write;
    rt.bad_size = (int)size;
    rt.bad_pc = pc;
    escape_with(code);
}

// Two blocks may not share an element of a writable array when one of them writes it: blocks run in no
// order a kernel can rely on, so the result would depend on the order (a thread writing into another
// block's part of C, a block reading what another wrote). Atomics of several blocks on one element are
// fine among themselves, not mixed with plain loads and stores.
GC_RUNTIME inline void track_blocks(int i, uintptr_t offset, size_t size, bool write, bool atomic, uintptr_t pc) {
    const ArrayInfo& r = rt.arrays[i];
    const size_t granule = r.itemsize > 0 ? (size_t)r.itemsize : 1;
    const unsigned me = (unsigned)(rt.block_linear + 1);
    for (uintptr_t g = offset / granule; g <= (offset + size - 1) / granule; ++g) {
        unsigned& writer = rt.block_writer[i][g];
        unsigned& reader = rt.block_reader[i][g];
        unsigned other = 0;
        int kind = 0;
        if (atomic) {
            if (writer && writer != kAtomicOwner && writer != me) { other = writer; kind = 0; }
            else if (reader && reader != me) { other = reader; kind = 2; }
            else writer = kAtomicOwner;
        } else if (writer == kAtomicOwner || (writer && writer != me)) {
            other = writer;
            kind = write ? 0 : 1;
        } else if (write && reader && reader != me) {
            other = reader;
            kind = 2;
        } else if (write) {
            writer = me;
        } else if (!reader) {
            reader = me;
        }
        if (other) {
            rt.bad_other_block = other;
            rt.bad_conflict_kind = kind;
            fail_access(BLOCK_CONFLICT, i, (long long)(g * granule), write || atomic, size, pc);
        }
    }
}

// A global access (any access that is not to shared memory): inside an array; or to the thread's own
// stack (its local arrays), a read of the built-in variables or of this library's constants. Anything
// else is refused before it happens: next to an array as out of bounds (with the array and element),
// elsewhere as a wild access, for the kernel may touch only what a GPU would let it touch, and nothing
// of the process it runs in.
GC_RUNTIME inline void check_global(uintptr_t a, size_t size, bool write, uintptr_t pc, bool atomic = false) {
    if (rt.current >= 0) {  // first: a kernel's local variables are most of these accesses
        const uintptr_t lo = (uintptr_t)rt.stacks + (uintptr_t)rt.current * stack_slot() + page_size();
        if (a >= lo && a + size <= lo + kStackBytes) return;
    }
    for (int i = 0; i < rt.array_count; ++i) {
        const ArrayInfo& r = rt.arrays[i];
        const uintptr_t off = a - (uintptr_t)r.address;
        if (off < r.bytes && off + size <= r.bytes) {
            if ((write || atomic) && !r.writable) fail_access(INPUT_WRITE, i, (long long)off, true, size, pc);
            if (i < Runtime::kMaxArrays && rt.block_writer[i]) track_blocks(i, off, size, write, atomic, pc);
            return;
        }
    }
    for (int i = 0; i < rt.array_count; ++i) {
        const ArrayInfo& r = rt.arrays[i];
        if (a + size <= r.address - r.guard || a >= r.address + r.bytes + r.guard) continue;  // not near it
        fail_access(OUT_OF_BOUNDS, i, (long long)(a - r.address), write, size, pc);
    }
    if (!write) {
        const uintptr_t b = (uintptr_t)&builtins;
        if (a >= b && a + size <= b + sizeof builtins) return;
        for (int i = 0; i < rt.readonly_count; ++i)
            if (a >= rt.readonly_lo[i] && a + size <= rt.readonly_hi[i]) return;
    }
    rt.bad_address = a;
    fail_access(WILD_ACCESS, -1, 0, write, size, pc);
}

// The word is the target of a cp.async that its issuer has not waited for yet: any access is an error.
GC_RUNTIME inline void check_not_in_flight(const ShadowWord* w, uintptr_t offset, size_t size,
                                                                    bool write, uintptr_t pc) {
    if (w->async_thread < 0 || w->async_block != rt.block_serial) return;
    rt.bad_issuer = w->async_thread;
    rt.bad_issuer_done = rt.fibers[w->async_thread].state == DONE;
    rt.bad_issue_pc = w->async_pc;
    rt.bad_shared_offset = offset;
    rt.bad_write = write;
    rt.bad_size = (int)size;
    rt.bad_pc = pc;
    escape_with(ASYNC_COPY);
}

// The race detector's bookkeeping for one word accessed by thread t.
GC_RUNTIME inline __attribute__((always_inline)) bool track_word(ShadowWord* w, uintptr_t offset, int t, bool write,
                                                           uintptr_t pc) {
    if (w->interval != rt.interval) {  // a new interval: forget the accessors, keep a copy in flight
        w->interval = rt.interval;
        w->writer = w->reader = w->atomic_thread = -1;
        w->writer_pc = w->reader_pc = w->atomic_pc = 0;
    }
    if (w->atomic_thread >= 0 && w->atomic_thread != t) {  // a plain access after another thread's atomic
        note_race(w->atomic_thread, w->atomic_pc, pc, offset, write ? 0 : 1);
        return false;
    }
    if (write) {
        if (w->writer >= 0 && w->writer != t) { note_race(w->writer, w->writer_pc, pc, offset, 0); return false; }
        if (w->reader >= 0 && w->reader != t) { note_race(w->reader, w->reader_pc, pc, offset, 2); return false; }
        w->writer = t;
        w->writer_pc = pc;
    } else {
        if (w->writer >= 0 && w->writer != t) { note_race(w->writer, w->writer_pc, pc, offset, 1); return false; }
        if (w->reader < 0) { w->reader = t; w->reader_pc = pc; }
    }
    return true;
}

GC_RUNTIME inline bool is_runner_fiber() {
    // Only the thread that runs the fibers: the watchdog thread (and Python's) pass through these hooks
    // too, and must neither be counted as a CUDA thread nor write the profile concurrently. Only the runner
    // ever runs on a fiber's stack, so the stack this hook runs on says which thread it is: one subtraction
    // and one comparison on every access, where asking pthread_self was a sixth of the hook's work.
    const uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    return rt.current >= 0 && rt.armed && here - (uintptr_t)rt.stacks < (uintptr_t)kMaxThreads * stack_slot();
}

// Every load and store of a race-check build arrives here (the kernel's accesses to global memory and to
// its own stack too). shared_access takes the common case inline: a plain access of 4, 8 or 16 bytes to
// whole words of the kernel's static shared memory, no profile being recorded, no race found yet, no copy
// in flight into those words. Anything else takes the full path, shared_access_checked, which does the
// same bookkeeping for that case: the fast path changes how long a check takes, not what it finds.
GC_RUNTIME __attribute__((noinline)) void shared_access_checked(const void* p, size_t size, bool write, uintptr_t pc,
                                                               bool atomic);

GC_RUNTIME inline void shared_access(const void* p, size_t size, bool write, uintptr_t pc, bool atomic = false) {
    // The running thread's own stack (the local arrays of a register tile can be most of the accesses): the full
    // path would find it neither shared memory nor an array, record nothing and let it pass (check_global's
    // first test), so it passes here, without the call.
    if (rt.current >= 0) {
        const uintptr_t lo = (uintptr_t)rt.stacks + (uintptr_t)rt.current * stack_slot() + page_size();
        if ((uintptr_t)p >= lo && (uintptr_t)p + size <= lo + kStackBytes) return;
    }
#ifdef GC_CPU_POISON_SHARED
    // The access's offset in the shadow's numbering (shadow_of's): static shared memory first, then dynamic.
    uintptr_t offset = (uintptr_t)p - (uintptr_t)gc_shared_begin;
    if (offset + size > static_shared_bytes()) {
        const uintptr_t dynamic = (uintptr_t)p - (uintptr_t)rt.dynamic_shared;
        offset = dynamic + size <= rt.dynamic_shared_bytes ? (static_shared_bytes() + 3) / 4 * 4 + dynamic : 1;
    }
    if (!atomic && (size == 4 || size == 8 || size == 16) && (offset & 3) == 0
        && offset / 4 + size / 4 <= race.capacity && !race.profiling && !race.found && is_runner_fiber()) {
        ShadowWord* const w = &race.words[offset / 4];
        bool in_flight = false;
        for (size_t i = 0; i < size / 4; ++i)
            in_flight |= w[i].async_thread >= 0 && w[i].async_block == rt.block_serial;
        if (!in_flight) {
            for (size_t i = 0; i < size / 4; ++i)
                if (!track_word(&w[i], offset + 4 * i, rt.current, write, pc)) return;
            return;
        }
    }
#endif
    shared_access_checked(p, size, write, pc, atomic);
}

GC_RUNTIME __attribute__((noinline)) void shared_access_checked(const void* p, size_t size, bool write, uintptr_t pc,
                                                               bool atomic) {
    if (!is_runner_fiber()) return;
    const int t = rt.current;
    if (race.profiling) record_access(t, p, size, (write || atomic) ? 1 : 0, pc);
    const uintptr_t first = (uintptr_t)p & ~(uintptr_t)3, end = (uintptr_t)p + size;
    uintptr_t offset;
    ShadowWord* w = shadow_of(first, &offset);
    if (!w) return check_global((uintptr_t)p, size, write, pc, atomic);
    for (uintptr_t a = first; a < end; a += 4) {
        if (a != first && !(w = shadow_of(a, &offset))) return;  // the first word's shadow is found above
        check_not_in_flight(w, offset, size, write || atomic, pc);
        if (race.found) continue;
        if (!atomic) {
            if (!track_word(w, offset, t, write, pc)) return;
            continue;
        }
        if (w->interval != rt.interval) {  // an atomic among atomics does not race; with a plain access it does
            w->interval = rt.interval;
            w->writer = w->reader = w->atomic_thread = -1;
            w->writer_pc = w->reader_pc = w->atomic_pc = 0;
        }
        if (w->writer >= 0 && w->writer != t) { note_race(w->writer, w->writer_pc, pc, offset, 0); return; }
        if (w->reader >= 0 && w->reader != t) { note_race(w->reader, w->reader_pc, pc, offset, 2); return; }
        if (w->atomic_thread < 0) { w->atomic_thread = t; w->atomic_pc = pc; }
    }
}
#endif

// An atomic read-modify-write (atomicAdd, ...): checked and recorded as such (race-check builds).
GC_RUNTIME __attribute__((noinline)) void atomic_access(void* p, size_t bytes, uintptr_t pc) {
#ifdef GC_CPU_RACE_CHECK
    shared_access(p, bytes, true, pc, true);
#else
    (void)p; (void)bytes; (void)pc;
#endif
}

// printf from a kernel (see part 1): kept, up to kPrintfBytes per launch.
GC_RUNTIME int device_printf(const char* format, ...) {
    char line[4096];
    va_list args;
    va_start(args, format);
    const int n = std::vsnprintf(line, sizeof line, format, args);
    va_end(args);
    if (n <= 0) return n;
    const size_t length = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (!rt.printf_buffer) rt.printf_buffer = static_cast<char*>(std::malloc(kPrintfBytes));
    if (rt.printf_buffer && rt.printf_used + length <= kPrintfBytes) {
        std::memcpy(rt.printf_buffer + rt.printf_used, line, length);
        rt.printf_used += length;
    } else {
        rt.printf_dropped += length;
    }
    return n;
}

GC_RUNTIME inline void flush_printf() {
    if (rt.printf_used) std::fwrite(rt.printf_buffer, 1, rt.printf_used, stdout);
    if (rt.printf_dropped)
        std::fprintf(stdout, "[%zu bytes of printf output dropped: a launch keeps at most %zu, as a GPU's buffer does]\n",
                     rt.printf_dropped, kPrintfBytes);
    std::fflush(stdout);
    rt.printf_used = rt.printf_dropped = 0;
}

#ifdef __linux__
// This library's read-only segments (code, constants), which the kernel may read.
GC_RUNTIME inline int note_segment(dl_phdr_info* info, size_t, void* mine) {
    if (info->dlpi_addr != (ElfW(Addr))mine) return 0;
    for (int i = 0; i < info->dlpi_phnum && rt.readonly_count < 8; ++i) {
        const ElfW(Phdr)& h = info->dlpi_phdr[i];
        if (h.p_type != PT_LOAD || (h.p_flags & PF_W)) continue;
        rt.readonly_lo[rt.readonly_count] = info->dlpi_addr + h.p_vaddr;
        rt.readonly_hi[rt.readonly_count++] = info->dlpi_addr + h.p_vaddr + h.p_memsz;
    }
    return 1;
}
#endif

// ---- fibers and the barrier ---------------------------------------------------------------------

GC_RUNTIME inline Fiber& self() { return rt.fibers[rt.current]; }


// A copy lands: the bytes move, and (race-check builds) its words stop being in flight and count as
// written by the issuing thread now, at the copy's line — so a thread that reads them after the
// issuer's wait but with no barrier in between is a race, as on a GPU.
GC_RUNTIME inline void perform(const PendingCopy& c) {
    std::memcpy(c.dst, c.src, c.bytes - c.zfill);
    std::memset(static_cast<char*>(c.dst) + (c.bytes - c.zfill), 0, c.zfill);
#ifdef GC_CPU_RACE_CHECK
    const uintptr_t first = (uintptr_t)c.dst & ~(uintptr_t)3;
    for (uintptr_t a = first; a < (uintptr_t)c.dst + c.bytes; a += 4) {
        uintptr_t offset;
        ShadowWord* w = shadow_of(a, &offset);
        if (!w) break;
        if (w->async_block == rt.block_serial && w->async_thread == rt.current) w->async_thread = -1;
        if (!race.found) track_word(w, offset, rt.current, true, c.pc);
    }
#endif
}

// Perform, in issue order, the queued copies of batches < `before`.
GC_RUNTIME inline void complete_copies(long long before) {
    Fiber& f = self();
    int kept = 0;
    for (int i = 0; i < f.pending_count; ++i) {
        if (f.pending[i].batch >= 0 && f.pending[i].batch < before) perform(f.pending[i]);
        else f.pending[kept++] = f.pending[i];
    }
    f.pending_count = kept;
}

// Not inlined: its return address is the issuing call in the kernel (for the error messages).
GC_RUNTIME __attribute__((noinline)) void pipeline_memcpy_async(void* dst, const void* src, size_t bytes, size_t zfill) {
    const uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    Fiber& f = self();
    if (zfill > bytes) zfill = bytes;
#ifdef GC_CPU_RACE_CHECK
    // What a GPU does at the issue: read the source (zfill bytes are not read) and claim the target.
    if (is_runner_fiber()) {
        if (race.profiling) {
            if (bytes > zfill) record_access(rt.current, src, bytes - zfill, 4, pc);
            record_access(rt.current, dst, bytes, 4 | 1, pc);
        }
        if (bytes > zfill) check_global((uintptr_t)src, bytes - zfill, false, pc);
        const uintptr_t first = (uintptr_t)dst & ~(uintptr_t)3;
        uintptr_t offset;
        if (!shadow_of(first, &offset)) check_global((uintptr_t)dst, bytes, true, pc);
        for (uintptr_t a = first; a < (uintptr_t)dst + bytes; a += 4) {
            ShadowWord* w = shadow_of(a, &offset);
            if (!w) break;
            check_not_in_flight(w, offset, bytes, true, pc);
            if (!race.found) track_word(w, offset, rt.current, true, pc);
            w->async_thread = rt.current;
            w->async_block = rt.block_serial;
            w->async_pc = pc;
        }
    }
#endif
    if (f.pending_count == f.pending_capacity) {
        const int grown = f.pending_capacity ? 2 * f.pending_capacity : 64;
        PendingCopy* more = grown <= kMaxPendingCopies
            ? static_cast<PendingCopy*>(std::realloc(f.pending, sizeof(PendingCopy) * (size_t)grown)) : nullptr;
        if (more) {
            f.pending = more;
            f.pending_capacity = grown;
        } else {  // queue full: the oldest copy lands now
            perform(f.pending[0]);
            std::memmove(f.pending, f.pending + 1, sizeof(PendingCopy) * (size_t)(f.pending_count - 1));
            --f.pending_count;
        }
    }
    f.pending[f.pending_count++] = PendingCopy{dst, src, bytes, zfill, -1, pc};  // -1: not committed
}

GC_RUNTIME void pipeline_commit() {
    Fiber& f = self();
    for (int i = 0; i < f.pending_count; ++i)
        if (f.pending[i].batch < 0) f.pending[i].batch = f.next_batch;
    ++f.next_batch;
}

// cp.async.wait_group n / __pipeline_wait_prior(n): all but the newest n committed batches land.
GC_RUNTIME void pipeline_wait_prior(size_t n) { complete_copies(self().next_batch - (long long)n); }

// Switching: the side that stops saves its place with _setjmp and jumps to the other's place.
// Unlike swapcontext, _setjmp/_longjmp make no system call (they leave the signal mask alone).
GC_RUNTIME inline void yield_to_scheduler(Fiber& f) {
    if (_setjmp(f.resume) == 0) _longjmp(rt.scheduler, 1);
}

// Not inlined: its return address says where the barrier is (race reports name the loop it closes).
GC_RUNTIME __attribute__((noinline)) void syncthreads(int line) {
    Fiber& f = self();
    f.state = AT_BARRIER;
    f.line = line;
    f.barrier_pc = (uintptr_t)__builtin_return_address(0);
    yield_to_scheduler(f);  // resumes here when every thread of the block has arrived
}

// A fiber runs a loop: one CUDA thread per block, then it parks until the next block. Copies the
// thread never waited for are dropped: nothing orders them before any other thread's access.
GC_RUNTIME inline void fiber_main() {
    for (;;) {
        rt.body(rt.closure);
        Fiber& f = self();
        f.pending_count = 0;
        f.state = DONE;
        yield_to_scheduler(f);
    }
}

// Run thread t until its next barrier or its end. Not inlined: the _setjmp must have its own frame.
GC_RUNTIME __attribute__((noinline)) inline void switch_to(int t) {
    Fiber& f = rt.fibers[t];
    if (_setjmp(rt.scheduler) != 0) return;  // the fiber yielded
    if (!f.started) {
        f.started = true;
        getcontext(&rt.starter);
        rt.starter.uc_stack.ss_sp = rt.stacks + (size_t)t * stack_slot() + page_size();
        rt.starter.uc_stack.ss_size = kStackBytes;
        rt.starter.uc_link = nullptr;  // fiber_main never returns
        makecontext(&rt.starter, fiber_main, 0);
        setcontext(&rt.starter);
    }
    _longjmp(f.resume, 1);
}

GC_RUNTIME inline bool reserve(size_t dynamic_shared_bytes) {
    for (int t = 0; t < kMaxThreads; ++t) rt.fibers[t].started = false;  // another kernel used the stacks
    if (dynamic_shared_bytes > rt.dynamic_shared_capacity) {
        std::free(rt.dynamic_shared);
        rt.dynamic_shared = static_cast<char*>(std::aligned_alloc(128, (dynamic_shared_bytes + 127) / 128 * 128));
        rt.dynamic_shared_capacity = rt.dynamic_shared ? dynamic_shared_bytes : 0;
        if (!rt.dynamic_shared) return false;
    }
    rt.dynamic_shared_bytes = dynamic_shared_bytes;
    return true;
}

GC_RUNTIME inline void set_where(ErrorInfo* err, int t) {
    err->block[0] = (int)blockIdx.x; err->block[1] = (int)blockIdx.y; err->block[2] = (int)blockIdx.z;
    const uint3 i = t >= 0 ? rt.fibers[t].index : uint3{0, 0, 0};
    err->thread[0] = (int)i.x; err->thread[1] = (int)i.y; err->thread[2] = (int)i.z;
}

// Run one block to completion. Returns OK or a barrier error (filled into err).
GC_RUNTIME inline int run_block(ErrorInfo* err) {
    const int T = rt.threads;
    poison_shared_memory();
    ++rt.interval;  // a new block: nothing of the last one races with this one
    ++rt.block_serial;  // nor is any of its copies in flight in this one
    for (int t = 0; t < T; ++t) {
        rt.fibers[t].state = FRESH;
        rt.fibers[t].entry_line = 0;
        rt.fibers[t].entry_pc = 0;
    }
    for (;;) {
        // One round: every live thread runs until its next barrier or its end, in index order.
        for (int t = 0; t < T; ++t) {
            Fiber& f = rt.fibers[t];
            if (f.state == DONE) continue;
            if (f.state == FRESH) {
                f.pending_count = 0;
                f.next_batch = 0;
            }
            f.state = RUNNING;
            threadIdx = f.index;
            rt.current = t;
            switch_to(t);
            __atomic_add_fetch(&rt.progress, 1, __ATOMIC_RELAXED);
        }
        rt.current = -1;
        int waiting = 0, first_done = -1, first_waiting = -1, other_line = -1, other_thread = -1;
        for (int t = 0; t < T; ++t) {
            const Fiber& f = rt.fibers[t];
            if (f.state == DONE) {
                if (first_done < 0) first_done = t;
            } else {
                ++waiting;
                if (first_waiting < 0) first_waiting = t;
                else if (f.line != rt.fibers[first_waiting].line && other_thread < 0) { other_thread = t; other_line = f.line; }
            }
        }
        if (waiting == 0) return OK;
        const Fiber& w = rt.fibers[first_waiting];
        const uint3 b = blockIdx;
        if (first_done >= 0) {
            const uint3 d = rt.fibers[first_done].index;
            set_where(err, first_waiting);
            err->line = w.line;
            err->other_thread[0] = (int)d.x; err->other_thread[1] = (int)d.y; err->other_thread[2] = (int)d.z;
            err->count = waiting;
            std::snprintf(err->message, sizeof err->message,
                          "__syncthreads() reached by %d of %d threads of block (%u,%u,%u): a barrier inside a "
                          "branch that not all threads take? The barrier is at line %d; %d thread(s) had already "
                          "returned from the kernel, the first of them thread (%u,%u,%u). On a GPU this hangs "
                          "or silently skips the synchronisation. Move the barrier out of the branch (e.g. no "
                          "early `return` for out-of-range threads in a kernel with __syncthreads()).",
                          waiting, T, b.x, b.y, b.z, w.line, T - waiting, d.x, d.y, d.z);
            return BARRIER_PARTIAL;
        }
        if (other_thread >= 0) {
            const uint3 a = w.index, o = rt.fibers[other_thread].index;
            set_where(err, other_thread);
            err->line = other_line;
            err->other_thread[0] = (int)a.x; err->other_thread[1] = (int)a.y; err->other_thread[2] = (int)a.z;
            err->other_line = w.line;
            std::snprintf(err->message, sizeof err->message,
                          "threads of block (%u,%u,%u) wait at different __syncthreads(): thread (%u,%u,%u) at "
                          "line %d, thread (%u,%u,%u) at line %d. All threads of a block must reach the same "
                          "barrier; a __syncthreads() inside a branch or loop that threads take differently?",
                          b.x, b.y, b.z, a.x, a.y, a.z, w.line, o.x, o.y, o.z, other_line);
            return BARRIER_DIVERGENT;
        }
        for (int t = 0; t < T; ++t) {  // all arrived: release them
            Fiber& f = rt.fibers[t];
            f.state = RUNNING;
            f.entry_line = f.line;
            f.entry_pc = f.barrier_pc;
        }
        ++rt.interval;  // accesses before the barrier are ordered before those after it
        if (race_found()) return RACE;  // stop at the first barrier after a race (reported by gc_launch)
    }
}

// ---- watchdog and fault capture -----------------------------------------------------------------

#ifdef SIGRTMAX
GC_RUNTIME inline int watchdog_signal() { return SIGRTMAX - 1; }
#else
GC_RUNTIME inline int watchdog_signal() { return SIGUSR2; }
#endif

struct Watchdog {
    pthread_t thread;
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
    bool stop = false;
    double timeout_s = 0;
};

GC_RUNTIME inline double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

GC_RUNTIME inline void* watchdog_main(void* arg) {
    Watchdog* w = static_cast<Watchdog*>(arg);
    pthread_mutex_lock(&w->mutex);
    long long last = __atomic_load_n(&rt.progress, __ATOMIC_RELAXED);
    double last_change = now_s();
    while (!w->stop) {
        timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 20 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec += 1; until.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&w->wake, &w->mutex, &until);
        const long long p = __atomic_load_n(&rt.progress, __ATOMIC_RELAXED);
        if (__atomic_load_n(&rt.stop_requested, __ATOMIC_SEQ_CST)) {
            rt.escape_code = INTERRUPTED;
            pthread_kill(rt.runner, watchdog_signal());
            break;
        }
        if (p != last) {
            last = p;
            last_change = now_s();
        } else if (!w->stop && w->timeout_s > 0 && now_s() - last_change > w->timeout_s) {
            rt.escape_code = TIMEOUT;
            pthread_kill(rt.runner, watchdog_signal());
            break;
        }
    }
    pthread_mutex_unlock(&w->mutex);
    return nullptr;
}

constexpr int kCaught[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
inline struct sigaction previous_actions[4], previous_watchdog_action;

// The interrupted instruction, from the signal's machine context (0 where this platform is not known).
GC_RUNTIME inline uintptr_t signal_pc(void* context) {
    const ucontext_t* uc = static_cast<const ucontext_t*>(context);
    if (!uc) return 0;
#if defined(__linux__) && defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__linux__) && defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#elif defined(__APPLE__) && defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext->__ss.__rip;
#elif defined(__APPLE__) && defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext->__ss.__pc;
#else
    return 0;
#endif
}

GC_RUNTIME inline void on_signal(int sig, siginfo_t* info, void* context) {
    if (!rt.armed || !pthread_equal(pthread_self(), rt.runner)) {
        if (sig == watchdog_signal()) return;  // late watchdog signal: nothing to stop any more
        for (int i = 0; i < 4; ++i)  // not ours: hand it to whoever handled it before us
            if (kCaught[i] == sig) sigaction(sig, &previous_actions[i], nullptr);
        return;
    }
    rt.armed = 0;
    rt.fault_pc = signal_pc(context);
    if (sig != watchdog_signal()) {
        rt.escape_code = FAULT;
        rt.fault_signal = sig;
        rt.fault_address = (uintptr_t)info->si_addr;
    }
    siglongjmp(rt.escape, 1);  // abandon the block's fibers; gc_launch reports
}

// __trap(): not inlined, so that its return address says which call it was (the compiler may merge
// the trap instructions of a function into one, which would name another line).
[[noreturn]] GC_RUNTIME __attribute__((noinline)) void trap() {
    rt.trap_pc = (uintptr_t)__builtin_return_address(0);
    __builtin_trap();
}

[[noreturn]] GC_RUNTIME void escape_with(int code) {
    rt.armed = 0;
    rt.escape_code = code;
    rt.fault_pc = 0;
    siglongjmp(rt.escape, 1);
}

// The offset of a code address in this library (0 if it is elsewhere, e.g. in the C library).
GC_RUNTIME inline unsigned long long library_offset(uintptr_t pc) {
    Dl_info mine, info;
    if (!pc || !dladdr((void*)&signal_pc, &mine) || !dladdr((void*)pc, &info) || info.dli_fbase != mine.dli_fbase)
        return 0;
    return pc - (uintptr_t)info.dli_fbase;
}

// The handler must not run on an overflowed fiber stack. (No function-local statics anywhere in
// this header: the linker script would gather them with the __shared__ variables.)
alignas(64) inline char alternate_stack[1 << 16];

GC_RUNTIME inline void install_handlers(stack_t* previous_stack) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; ++i) sigaction(kCaught[i], &sa, &previous_actions[i]);
    sigaction(watchdog_signal(), &sa, &previous_watchdog_action);
    stack_t ss;
    ss.ss_sp = alternate_stack;
    ss.ss_size = sizeof alternate_stack;
    ss.ss_flags = 0;
    sigaltstack(&ss, previous_stack);
}

GC_RUNTIME inline void restore_handlers(const stack_t* previous_stack) {
    for (int i = 0; i < 4; ++i) sigaction(kCaught[i], &previous_actions[i], nullptr);
    sigaction(watchdog_signal(), &previous_watchdog_action, nullptr);
    sigaltstack(previous_stack, nullptr);
}

// Fill err for the race found: threads, source offsets (Python turns them into lines).
GC_RUNTIME inline void report_race(ErrorInfo* err) {
    err->code = RACE;
    err->race_kind = race.kind;
    err->shared_offset = race.offset;
    const uint3 a = rt.fibers[race.thread[0]].index, b = rt.fibers[race.thread[1]].index;
    err->block[0] = (int)blockIdx.x; err->block[1] = (int)blockIdx.y; err->block[2] = (int)blockIdx.z;
    err->thread[0] = (int)a.x; err->thread[1] = (int)a.y; err->thread[2] = (int)a.z;
    err->other_thread[0] = (int)b.x; err->other_thread[1] = (int)b.y; err->other_thread[2] = (int)b.z;
    for (int i = 0; i < 2; ++i) {  // return addresses: the call is the byte before
        err->code_offset[i] = race.pc[i] ? library_offset(race.pc[i] - 1) : 0;
        err->entry_line[i] = race.entry_line[i];
        err->entry_offset[i] = race.entry_pc[i] ? library_offset(race.entry_pc[i] - 1) : 0;
    }
    std::snprintf(err->message, sizeof err->message, "shared-memory race");
}

// ---- the launch ---------------------------------------------------------------------------------

GC_RUNTIME int run_grid(const LaunchConfig* cfg, void (*body)(void*), void* closure, ErrorInfo* err) {
    std::memset(err, 0, sizeof *err);
    for (int i = 0; i < 3; ++i)
        if (cfg->grid[i] < 1 || cfg->block[i] < 1) {
            std::snprintf(err->message, sizeof err->message, "grid and block sizes must be >= 1");
            return err->code = BAD_CONFIG;
        }
    const long long threads = (long long)cfg->block[0] * cfg->block[1] * cfg->block[2];
    if (threads > kMaxThreads) {
        std::snprintf(err->message, sizeof err->message, "%lld threads per block exceeds CUDA's limit of 1024", threads);
        return err->code = BAD_CONFIG;
    }
    pthread_mutex_lock(&launch_mutex);
    if (!cfg->stacks || !reserve((size_t)cfg->dynamic_shared_bytes)) {
        pthread_mutex_unlock(&launch_mutex);
        std::snprintf(err->message, sizeof err->message, "no stack pool, or out of memory for %lld bytes of "
                      "dynamic shared memory", cfg->dynamic_shared_bytes);
        return err->code = BAD_CONFIG;
    }
    rt.stacks = cfg->stacks;
    rt.threads = (int)threads;
    rt.body = body;
    rt.closure = closure;
    rt.runner = pthread_self();
    rt.escape_code = OK;
    race.found = false;
    race.profile = static_cast<AccessRecord*>(cfg->profile);
    race.profile_capacity = cfg->profile ? cfg->profile_capacity : 0;
    race.profile_count = 0;
    rt.arrays = cfg->arrays;
    rt.array_count = cfg->arrays ? cfg->array_count : 0;
    rt.arrays_lo = UINTPTR_MAX;
    rt.arrays_hi = 0;
    for (int i = 0; i < rt.array_count; ++i) {
        const uintptr_t lo = rt.arrays[i].address - rt.arrays[i].guard;
        const uintptr_t hi = rt.arrays[i].address + rt.arrays[i].bytes + rt.arrays[i].guard;
        if (lo < rt.arrays_lo) rt.arrays_lo = lo;
        if (hi > rt.arrays_hi) rt.arrays_hi = hi;
    }
    rt.fault_pc = 0;
    rt.trap_pc = 0;
    rt.bad_address = 0;
    rt.bad_other_block = 0;
#ifdef GC_CPU_RACE_CHECK
#ifdef __linux__
    if (!rt.readonly_count) {
        Dl_info mine;
        if (dladdr((void*)&signal_pc, &mine)) dl_iterate_phdr(note_segment, mine.dli_fbase);
    }
#endif
    for (int i = 0; i < rt.array_count && i < Runtime::kMaxArrays; ++i)
        if (rt.arrays[i].writable) {
            const size_t granules = rt.arrays[i].bytes / (size_t)(rt.arrays[i].itemsize > 0 ? rt.arrays[i].itemsize : 1) + 1;
            rt.block_writer[i] = static_cast<unsigned*>(std::calloc(granules, sizeof(unsigned)));
            rt.block_reader[i] = static_cast<unsigned*>(std::calloc(granules, sizeof(unsigned)));
        }
#endif
    // The blocks' order: CUDA's, or one drawn from the seed (a GPU runs blocks in no order a kernel may rely on).
    const unsigned long long total_blocks = (unsigned long long)cfg->grid[0] * cfg->grid[1] * cfg->grid[2];
    unsigned long long* order = nullptr;
    if (cfg->block_order_seed) {
        order = static_cast<unsigned long long*>(std::malloc(sizeof(unsigned long long) * total_blocks));
        if (order) {
            unsigned long long state = cfg->block_order_seed;
            for (unsigned long long n = 0; n < total_blocks; ++n) order[n] = n;
            for (unsigned long long n = total_blocks; n > 1; --n) {  // Fisher-Yates with splitmix64
                unsigned long long z = (state += 0x9E3779B97F4A7C15ull);
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
                z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
                z ^= z >> 31;
                std::swap(order[n - 1], order[z % n]);
            }
        }
    }
    const int first_block[3] = {0, 0, 0};
    const int* profiled = cfg->profile_block_count > 0 ? cfg->profile_blocks : first_block;
    const int profiled_count = !cfg->profile ? 0 : cfg->profile_block_count > 0 ? cfg->profile_block_count : 1;
    blockDim = dim3(cfg->block[0], cfg->block[1], cfg->block[2]);
    gridDim = dim3(cfg->grid[0], cfg->grid[1], cfg->grid[2]);
    for (int t = 0; t < rt.threads; ++t)
        rt.fibers[t].index = uint3{(unsigned)(t % cfg->block[0]), (unsigned)(t / cfg->block[0] % cfg->block[1]),
                                   (unsigned)(t / (cfg->block[0] * cfg->block[1]))};

    stack_t previous_stack;
    install_handlers(&previous_stack);
    Watchdog watchdog;
    watchdog.timeout_s = cfg->timeout_s;
    rt.stop_requested = 0;
    // The watchdog always runs: it stops a thread that runs past timeout_s (if > 0) and a launch
    // that Python asks to stop (Ctrl-C).
    const bool watched = pthread_create(&watchdog.thread, nullptr, watchdog_main, &watchdog) == 0;

    int code = OK;
    if (sigsetjmp(rt.escape, 1) == 0) {
        rt.armed = 1;
        for (unsigned long long n = 0; n < total_blocks && code == OK; ++n) {
                    const unsigned long long linear = order ? order[n] : n;
                    const unsigned x = (unsigned)(linear % gridDim.x), y = (unsigned)(linear / gridDim.x % gridDim.y),
                                   z = (unsigned)(linear / ((unsigned long long)gridDim.x * gridDim.y));
                    rt.block_linear = linear;
                    blockIdx = uint3{x, y, z};
                    race.profiling = false;
                    for (int i = 0; i < profiled_count && !race.profiling; ++i)
                        if (profiled[3 * i] == (int)x && profiled[3 * i + 1] == (int)y && profiled[3 * i + 2] == (int)z) {
                            race.profiling = true;
                            race.profiled_block = (unsigned)i;
                        }
                    race.first_interval = rt.interval + 1;  // run_block starts the block's first interval
                    code = run_block(err);
                    if (race.profiling && cfg->profile_intervals)
                        cfg->profile_intervals[race.profiled_block] = (long long)(rt.interval - race.first_interval + 1);
                    if (code == OK && race_found()) code = RACE;
                    if (code != OK) break;
        }
        rt.armed = 0;
    } else {  // came back from on_signal: a fault or the watchdog
        code = rt.escape_code;
        const int t = rt.current;
        set_where(err, t);
        const uintptr_t a = rt.fault_address;
        const uintptr_t stacks = (uintptr_t)rt.stacks;
        if (code == FAULT && a >= stacks && a < stacks + (uintptr_t)kMaxThreads * stack_slot() &&
            (a - stacks) % stack_slot() < page_size())
            code = STACK_OVERFLOW;
        err->signal = rt.fault_signal;
        err->address = a;
        err->code_offset[0] = library_offset(rt.fault_pc);
        if (code == FAULT && rt.trap_pc) {  // a __trap(): its call, not the trap instruction
            err->code_offset[0] = library_offset(rt.trap_pc - 1);
            err->count = 1;
        }
        if (code == OUT_OF_BOUNDS || code == ASYNC_COPY || code == WILD_ACCESS || code == BLOCK_CONFLICT ||
            code == INPUT_WRITE) {
            err->code_offset[0] = rt.bad_pc ? library_offset(rt.bad_pc - 1) : 0;
            err->array = rt.bad_array;
            err->byte_offset = rt.bad_offset;
            err->write = rt.bad_write;
            err->access_size = rt.bad_size;
        }
        if (code == WILD_ACCESS) err->address = rt.bad_address;
        if (code == BLOCK_CONFLICT) {
            const unsigned long long other = rt.bad_other_block - 1ull;
            err->count = rt.bad_other_block == kAtomicOwner;  // 1: the other side was atomics
            err->other_thread[0] = (int)(other % gridDim.x);
            err->other_thread[1] = (int)(other / gridDim.x % gridDim.y);
            err->other_thread[2] = (int)(other / ((unsigned long long)gridDim.x * gridDim.y));
            err->race_kind = rt.bad_conflict_kind;
        }
        if (code == ASYNC_COPY) {
            const uint3 o = rt.fibers[rt.bad_issuer].index;
            err->other_thread[0] = (int)o.x; err->other_thread[1] = (int)o.y; err->other_thread[2] = (int)o.z;
            err->code_offset[1] = rt.bad_issue_pc ? library_offset(rt.bad_issue_pc - 1) : 0;
            err->shared_offset = rt.bad_shared_offset;
            err->count = rt.bad_issuer_done;
        }
        const uint3 b = blockIdx, i = t >= 0 ? rt.fibers[t].index : uint3{0, 0, 0};
        if (code == TIMEOUT)
            std::snprintf(err->message, sizeof err->message,
                          "thread (%u,%u,%u) of block (%u,%u,%u) ran for %.3g s without reaching a "
                          "__syncthreads() or returning: an endless loop, or a wait for another thread's write "
                          "(the CPU backend runs a block's threads one at a time, each until its next barrier, "
                          "so a spin-wait on another thread never ends)",
                          i.x, i.y, i.z, b.x, b.y, b.z, cfg->timeout_s);
        else if (code == OUT_OF_BOUNDS)
            std::snprintf(err->message, sizeof err->message, "thread (%u,%u,%u) of block (%u,%u,%u) %s %d bytes at "
                          "byte offset %lld of argument array %d, out of bounds", i.x, i.y, i.z, b.x, b.y, b.z,
                          rt.bad_write ? "wrote" : "read", rt.bad_size, rt.bad_offset, rt.bad_array);
        else if (code == ASYNC_COPY)
            std::snprintf(err->message, sizeof err->message, "thread (%u,%u,%u) of block (%u,%u,%u) %s byte %llu of "
                          "shared memory while a cp.async into it was not yet waited for", i.x, i.y, i.z, b.x, b.y,
                          b.z, rt.bad_write ? "wrote" : "read", (unsigned long long)rt.bad_shared_offset);
        else if (code == WILD_ACCESS || code == BLOCK_CONFLICT || code == INPUT_WRITE)
            std::snprintf(err->message, sizeof err->message, "thread (%u,%u,%u) of block (%u,%u,%u) %s %d bytes "
                          "it may not touch (code %d)", i.x, i.y, i.z, b.x, b.y, b.z, rt.bad_write ? "wrote" : "read",
                          rt.bad_size, code);
        else if (code == INTERRUPTED)
            std::snprintf(err->message, sizeof err->message, "stopped (interrupted) in block (%u,%u,%u)", b.x, b.y, b.z);
        else if (code == STACK_OVERFLOW) {
            err->count = (long long)kStackBytes;
            std::snprintf(err->message, sizeof err->message,
                          "thread (%u,%u,%u) of block (%u,%u,%u) overflowed its %zu KiB stack: very large local "
                          "arrays, or deep recursion",
                          i.x, i.y, i.z, b.x, b.y, b.z, kStackBytes / 1024);
        } else
            std::snprintf(err->message, sizeof err->message, "thread (%u,%u,%u) of block (%u,%u,%u) got signal %d at "
                          "address 0x%llx", i.x, i.y, i.z, b.x, b.y, b.z, (int)rt.fault_signal,
                          (unsigned long long)a);
    }
    if (code == RACE) report_race(err);
    race.profiling = false;
    rt.current = -1;
    std::free(order);
    for (int i = 0; i < Runtime::kMaxArrays; ++i) {
        std::free(rt.block_writer[i]);
        std::free(rt.block_reader[i]);
        rt.block_writer[i] = rt.block_reader[i] = nullptr;
    }
    flush_printf();
    if (watched) {
        pthread_mutex_lock(&watchdog.mutex);
        watchdog.stop = true;
        pthread_cond_signal(&watchdog.wake);
        pthread_mutex_unlock(&watchdog.mutex);
        pthread_join(watchdog.thread, nullptr);
    }
    restore_handlers(&previous_stack);
    pthread_mutex_unlock(&launch_mutex);
    return err->code = code;
}

#else  // a kernel's own translation unit: the runtime is declared here, defined in its object
struct LaunchConfig;
struct ErrorInfo;
#endif  // GC_CPU_KERNEL_ONLY
int run_grid(const LaunchConfig* cfg, void (*body)(void*), void* closure, ErrorInfo* err);

// ---- calling a kernel with arguments from Python ------------------------------------------------
// Python passes void* args[i] pointing at a value of the i-th parameter's type; the parameter
// types come from the kernel's own signature, so extra scalars or pointers need no changes here.

template <class F> struct Kernel;
template <class... P> struct Kernel<void (*)(P...)> {
    void (*fn)(P...);
    void** args;
    template <size_t... I> GC_RUNTIME void call(std::index_sequence<I...>) {
        fn(*static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
    }
    GC_RUNTIME static void run(void* self) { static_cast<Kernel*>(self)->call(std::index_sequence_for<P...>{}); }
};

template <class T> inline const char* scalar_name() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, float>) return "float";
    else if constexpr (std::is_same_v<U, double>) return "double";
    else if constexpr (std::is_same_v<U, int>) return "int";
    else if constexpr (std::is_same_v<U, unsigned int>) return "unsigned int";
    else if constexpr (std::is_same_v<U, long long> || (std::is_same_v<U, long> && sizeof(long) == 8)) return "long long";
    else if constexpr (std::is_same_v<U, unsigned long long> || (std::is_same_v<U, unsigned long> && sizeof(long) == 8)) return "unsigned long long";
    else if constexpr (std::is_same_v<U, short>) return "short";
    else if constexpr (std::is_same_v<U, signed char> || std::is_same_v<U, char>) return "char";
    else if constexpr (std::is_same_v<U, unsigned char>) return "unsigned char";
    else if constexpr (std::is_same_v<U, bool>) return "bool";
    else if constexpr (std::is_same_v<U, void>) return "void";
    else return "?";
}

template <class P> inline void append_type(char* out, size_t size) {
    const size_t used = std::strlen(out);
    if constexpr (std::is_pointer_v<P>) {
        using E = std::remove_pointer_t<P>;
        std::snprintf(out + used, size - used, "%s%s%s*", used ? "," : "", std::is_const_v<E> ? "const " : "",
                      scalar_name<E>());
    } else {
        std::snprintf(out + used, size - used, "%s%s", used ? "," : "", scalar_name<P>());
    }
}

inline char signature_text[512];

template <class... P> inline const char* signature(void (*)(P...)) {
    signature_text[0] = 0;
    (append_type<std::remove_cv_t<std::remove_reference_t<P>>>(signature_text, sizeof signature_text), ...);
    return signature_text;
}

}  // namespace gc_cpu


#ifndef GC_CPU_KERNEL_ONLY  // the exported helpers below are the runtime's
// Guarded buffers for the kernel's arrays: the data's pages inside a reservation of unmapped
// (PROT_NONE) address space kArrayGuardBytes long on each side, so an index out of range faults at
// once however far it goes (up to 32 MiB) or lands in the tail padding, which Python fills and checks;
// a race-check build reports the access before it happens.
#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif
GC_CPU_EXPORT void* gc_guarded_alloc(size_t bytes) {
    const size_t page = gc_cpu::page_size(), data = (bytes + page - 1) / page * page;
    const size_t guard = gc_cpu::kArrayGuardBytes;
    char* base = static_cast<char*>(mmap(nullptr, data + 2 * guard, PROT_NONE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (base == MAP_FAILED) return nullptr;
    if (mprotect(base + guard, data, PROT_READ | PROT_WRITE) != 0) {
        munmap(base, data + 2 * guard);
        return nullptr;
    }
    return base + guard;
}

GC_CPU_EXPORT void gc_guarded_free(void* p, size_t bytes) {
    const size_t page = gc_cpu::page_size(), data = (bytes + page - 1) / page * page;
    munmap(static_cast<char*>(p) - gc_cpu::kArrayGuardBytes, data + 2 * gc_cpu::kArrayGuardBytes);
}

GC_CPU_EXPORT size_t gc_array_guard_bytes() { return gc_cpu::kArrayGuardBytes; }

GC_CPU_EXPORT size_t gc_page_size() { return gc_cpu::page_size(); }

// Stop the launch in progress at once (Python calls it from another thread on Ctrl-C): the same
// escape as the watchdog's, with its own code.
GC_CPU_EXPORT void gc_request_stop() {
    __atomic_store_n(&gc_cpu::rt.stop_requested, 1, __ATOMIC_SEQ_CST);  // the watchdog stops the launch
}

GC_CPU_EXPORT long long gc_profile_count() { return gc_cpu::race.profile_count; }  // records of the last launch

GC_CPU_EXPORT unsigned long long gc_code_offset(unsigned long long pc) {  // a return address → library offset
    Dl_info info;
    return pc && dladdr((void*)(uintptr_t)(pc - 1), &info) ? pc - 1 - (uintptr_t)info.dli_fbase : 0;
}

GC_CPU_EXPORT size_t gc_stack_slot() { return gc_cpu::stack_slot(); }  // pools are per layout

GC_CPU_EXPORT void* gc_stack_pool() {
    using namespace gc_cpu;
    char* stacks = static_cast<char*>(mmap(nullptr, (size_t)kMaxThreads * stack_slot(), PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (stacks == MAP_FAILED) return nullptr;
    for (int t = 0; t < kMaxThreads; ++t) mprotect(stacks + (size_t)t * stack_slot(), page_size(), PROT_NONE);
    return stacks;
}

#endif  // GC_CPU_KERNEL_ONLY

// The entry points of one kernel instantiation: gc_signature() and gc_launch().
#define GC_CPU_ENTRY(...)                                                                          \
    GC_CPU_EXPORT const char* gc_signature() { return ::gc_cpu::signature(&__VA_ARGS__); }         \
    GC_CPU_EXPORT int gc_launch(const ::gc_cpu::LaunchConfig* cfg, void** args, ::gc_cpu::ErrorInfo* err) { \
        ::gc_cpu::Kernel<decltype(&__VA_ARGS__)> kernel{&__VA_ARGS__, args};                       \
        return ::gc_cpu::run_grid(cfg, &decltype(kernel)::run, &kernel, err);                      \
    }


#ifndef GC_CPU_KERNEL_ONLY  // the hooks are the runtime's: defined in its object only
// The instrumentation's entry points (see "shared-memory race detector"): every load and store of a
// library built with -fsanitize=thread calls one of these; only shared-memory words are tracked.
#ifdef GC_CPU_RACE_CHECK
#define GC_NS extern "C" __attribute__((visibility("hidden"), no_sanitize_thread))
#define GC_RACE_HOOKS(N)                                                                                   \
    GC_NS void __tsan_read##N(void* p) { gc_cpu::shared_access(p, N, false, (uintptr_t)__builtin_return_address(0)); } \
    GC_NS void __tsan_write##N(void* p) { gc_cpu::shared_access(p, N, true, (uintptr_t)__builtin_return_address(0)); } \
    GC_NS void __tsan_unaligned_read##N(void* p) { gc_cpu::shared_access(p, N, false, (uintptr_t)__builtin_return_address(0)); } \
    GC_NS void __tsan_unaligned_write##N(void* p) { gc_cpu::shared_access(p, N, true, (uintptr_t)__builtin_return_address(0)); }
GC_RACE_HOOKS(1) GC_RACE_HOOKS(2) GC_RACE_HOOKS(4) GC_RACE_HOOKS(8) GC_RACE_HOOKS(16)
GC_NS void __tsan_read_range(void* p, unsigned long n) { gc_cpu::shared_access(p, n, false, (uintptr_t)__builtin_return_address(0)); }
GC_NS void __tsan_write_range(void* p, unsigned long n) { gc_cpu::shared_access(p, n, true, (uintptr_t)__builtin_return_address(0)); }
GC_NS void __tsan_init() {}
GC_NS void __tsan_func_entry(void*) {}
GC_NS void __tsan_func_exit() {}
GC_NS void __tsan_ignore_thread_begin() {}
GC_NS void __tsan_ignore_thread_end() {}
GC_NS void __tsan_vptr_update(void**, void*) {}
GC_NS void __tsan_vptr_read(void**) {}
// Atomic operations of the runtime (the watchdog's progress counter): done, not tracked.
GC_NS long long __tsan_atomic64_load(const volatile long long* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }
GC_NS void __tsan_atomic64_store(volatile long long* a, long long v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }
GC_NS long long __tsan_atomic64_fetch_add(volatile long long* a, long long v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
GC_NS int __tsan_atomic32_load(const volatile int* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }
GC_NS void __tsan_atomic32_store(volatile int* a, int v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }
GC_NS int __tsan_atomic32_fetch_add(volatile int* a, int v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
GC_NS void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
GC_NS void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#undef GC_RACE_HOOKS
#undef GC_NS
#endif
#endif  // GC_CPU_KERNEL_ONLY
