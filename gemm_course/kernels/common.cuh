// Helpers shared by several levels. Included with #include "common.cuh".
#pragma once

// A batch of independent products stored one after another (A: batch × M × K, B: batch × K × N,
// C: batch × M × N) runs as one launch with one grid z index per product; each block first moves
// the three pointers to its own product. With gridDim.z = 1 (a single product) it adds nothing.
#define BATCH_ENTRY(A, B, C, M, N, K)                \
    do {                                             \
        const size_t batch_entry_ = blockIdx.z;      \
        A += batch_entry_ * (size_t)(M) * (K);       \
        B += batch_entry_ * (size_t)(K) * (N);       \
        C += batch_entry_ * (size_t)(M) * (N);       \
    } while (0)

// Asynchronous copy of BYTES (4, or 16 with 16-byte aligned addresses) global -> shared (sm_80+:
// cp.async, which bypasses registers and lets the thread run on while the copy is in flight; the
// 16-byte form also bypasses L1). `valid == false` writes zeros instead: the source size 0 makes the
// hardware zero-fill without reading global memory. Before sm_80 it is an ordinary load and store.
// On the CPU backend it is the runtime's deferred copy (<cuda_pipeline.h>, cuda_cpu_compat.h): the
// data lands only at this thread's copy_async_wait_all(), as with cp.async.
template <int BYTES>
__device__ __forceinline__ void copy_async(float* dst_shared, const float* src_global, bool valid)
{
    static_assert(BYTES == 4 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes; the course uses 4 and 16");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_shared));
    if constexpr (BYTES == 4)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                     :: "r"(dst), "l"(src_global), "r"(valid ? 4 : 0));
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                     :: "r"(dst), "l"(src_global), "r"(valid ? 16 : 0));
#elif defined(GEMM_COURSE_CPU)
    __pipeline_memcpy_async(dst_shared, src_global, BYTES, valid ? 0 : BYTES);
#else
    for (int i = 0; i < BYTES / 4; ++i) dst_shared[i] = valid ? src_global[i] : 0.0f;
#endif
}

// Close the group of copies issued so far.
__device__ __forceinline__ void copy_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#elif defined(GEMM_COURSE_CPU)
    __pipeline_commit();
#endif
}

// Wait until this thread's committed copies have landed (other threads' copies need a barrier).
__device__ __forceinline__ void copy_async_wait_all()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::);
#elif defined(GEMM_COURSE_CPU)
    __pipeline_wait_prior(0);
#endif
}
