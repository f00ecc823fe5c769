// wgmma.mma_async wrappers (sm_90a): D(64×N, fp32) = A(64×k) · B(k×N) [+ D], and the helpers every
// wgmma kernel needs (Level 11, and the FP8 kernels).
//
// Inline PTX names every accumulator register as its own operand, so each accumulator width is
// spelled out once, as a macro over the instruction's shape and types and its trailing immediates:
// n = 128 holds 64 floats per thread, n = 256 holds 128 (bf16/fp16 with k = 16, FP8 with k = 32).
// A and B are both read from shared memory through 64-bit matrix descriptors. In Level 11 A is K-major
// (a row of A is contiguous along k) and B is MN-major (a row of B is contiguous along n, so
// "imm-trans-b" = 1), which is how row-major A (M×K) and B (K×N) land in shared memory; FP8 wgmma
// takes K-major operands only. scale_d = 0 overwrites D (the first k-step of a tile), 1 accumulates.
#pragma once

// A shared-memory operand as wgmma reads it: start address, the "leading" and "stride" byte offsets
// (their meaning depends on the operand's major-ness; see the kernels), and the 128-byte swizzle.
__device__ __forceinline__ unsigned long long smem_descriptor(unsigned address, unsigned leading_bytes,
                                                              unsigned stride_bytes)
{
    return static_cast<unsigned long long>((address & 0x3FFFF) >> 4)
         | static_cast<unsigned long long>((leading_bytes & 0x3FFFF) >> 4) << 16
         | static_cast<unsigned long long>((stride_bytes & 0x3FFFF) >> 4) << 32
         | 1ull << 62;  // 128-byte swizzle
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(PENDING) : "memory"); }

// wgmma writes the accumulators behind the compiler's back: pin them around waits.
template <int REGS>
__device__ __forceinline__ void pin(float (&d)[REGS])
{
#pragma unroll
    for (int i = 0; i < REGS; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

// n = 64: 32 accumulators per thread (the FP8 kernel for few rows of A uses it).
#define GEMM_DEFINE_WGMMA_N64(NAME, SHAPE_TYPES, IMMEDIATES)                                                    \
__device__ __forceinline__ void NAME(float (&d)[32], unsigned long long desc_a,                                 \
                                     unsigned long long desc_b, int scale_d)                                    \
{                                                                                                               \
    asm volatile(                                                                                               \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                            \
        "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {"                                                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                     \
        "%32, %33, p, " IMMEDIATES ";\n}\n"                                                                      \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),       \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])\
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                              \
}

#define GEMM_DEFINE_WGMMA_N128(NAME, SHAPE_TYPES, IMMEDIATES)                                                   \
__device__ __forceinline__ void NAME(float (&d)[64], unsigned long long desc_a,                                 \
                                     unsigned long long desc_b, int scale_d)                                    \
{                                                                                                               \
    asm volatile(                                                                                               \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                            \
        "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {"                                                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                      \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                      \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                     \
        "%64, %65, p, " IMMEDIATES ";\n}\n"                                                                      \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),       \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])\
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                              \
}

#define GEMM_DEFINE_WGMMA_N256(NAME, SHAPE_TYPES, IMMEDIATES)                                                   \
__device__ __forceinline__ void NAME(float (&d)[128], unsigned long long desc_a,                                \
                                     unsigned long long desc_b, int scale_d)                                    \
{                                                                                                               \
    asm volatile(                                                                                               \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                           \
        "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {"                                                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                      \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                      \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                      \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                      \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                      \
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "          \
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "     \
        "%128, %129, p, " IMMEDIATES ";\n}\n"                                                                    \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),       \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),\
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),\
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),\
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),\
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),\
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),\
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),\
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),\
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])\
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                              \
}

// bf16 and fp16: k = 16; the immediates are scale-a, scale-b (1: no negation), A not transposed (0), and
// "imm-trans-b" = 1 (B is MN-major).
GEMM_DEFINE_WGMMA_N128(wgmma_m64n128k16_bf16, "m64n128k16.f32.bf16.bf16", "1, 1, 0, 1")
GEMM_DEFINE_WGMMA_N128(wgmma_m64n128k16_f16, "m64n128k16.f32.f16.f16", "1, 1, 0, 1")
GEMM_DEFINE_WGMMA_N256(wgmma_m64n256k16_bf16, "m64n256k16.f32.bf16.bf16", "1, 1, 0, 1")
GEMM_DEFINE_WGMMA_N256(wgmma_m64n256k16_f16, "m64n256k16.f32.f16.f16", "1, 1, 0, 1")

// One name for the kernels: the shape from the accumulator count, the input type from BF16.
template <bool BF16, int REGS>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[REGS], unsigned long long desc_a,
                                             unsigned long long desc_b, int scale_d)
{
    static_assert(REGS == 64 || REGS == 128, "wgmma wrappers exist for n = 128 and n = 256");
    if constexpr (REGS == 64) {
        if constexpr (BF16) wgmma_m64n128k16_bf16(d, desc_a, desc_b, scale_d);
        else wgmma_m64n128k16_f16(d, desc_a, desc_b, scale_d);
    } else {
        if constexpr (BF16) wgmma_m64n256k16_bf16(d, desc_a, desc_b, scale_d);
        else wgmma_m64n256k16_f16(d, desc_a, desc_b, scale_d);
    }
}

// --- FP8 (e4m3) wrappers, for the FP8 kernels (13_fp8_blockscaled.cu) ------------------------------------
//
// D(64×N, fp32) = A(64×32) · B(32×N) [+ D], A and B e4m3 (one byte each). One instruction now covers
// k = 32: 32 bytes of a row, as k = 16 did for two-byte types. FP8 wgmma reads both operands
// K-major only (the PTX form has no transpose immediates: "d, a-desc, b-desc, scale-d, imm-scale-a,
// imm-scale-b"), so B must be stored N×K, each row of B contiguous along k, like each row of A.

// FP8 (e4m3): k = 32 per instruction, and both operands K-major, so no transpose immediates.
GEMM_DEFINE_WGMMA_N64(wgmma_m64n64k32_e4m3, "m64n64k32.f32.e4m3.e4m3", "1, 1")
GEMM_DEFINE_WGMMA_N128(wgmma_m64n128k32_e4m3, "m64n128k32.f32.e4m3.e4m3", "1, 1")
GEMM_DEFINE_WGMMA_N256(wgmma_m64n256k32_e4m3, "m64n256k32.f32.e4m3.e4m3", "1, 1")

// Narrow tiles for few rows of A (Level 13's kernel (c) with BN = 64, 32 or 16: each consumer
// computes BN/2 columns): n = 32, 16 and 8, with 16, 8 and 4 accumulators per thread. OPERANDS: the
// accumulators' places %0…; SCALE_D, DESCS: the places of scale-d and of the two descriptors after them.
#define GEMM_DEFINE_WGMMA_E4M3_NARROW(N, REGS, OPERANDS, SCALE_D, DESCS, ...)                              \
__device__ __forceinline__ void wgmma_m64n##N##k32_e4m3(float (&d)[REGS], unsigned long long desc_a,      \
                                                      unsigned long long desc_b, int scale_d)            \
{                                                                                                       \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE_D ", 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 {" OPERANDS "}, " DESCS ", p, 1, 1;\n}\n" \
                 : __VA_ARGS__ : "l"(desc_a), "l"(desc_b), "r"(scale_d));                               \
}
GEMM_DEFINE_WGMMA_E4M3_NARROW(32, 16, "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15", "%18", "%16, %17",
                              "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]))
GEMM_DEFINE_WGMMA_E4M3_NARROW(16, 8, "%0, %1, %2, %3, %4, %5, %6, %7", "%10", "%8, %9",
                              "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]))
GEMM_DEFINE_WGMMA_E4M3_NARROW(8, 4, "%0, %1, %2, %3", "%6", "%4, %5",
                              "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]))

// One name for the FP8 kernels: the shape (n = 8 … 256) from the accumulator count.
template <int REGS>
__device__ __forceinline__ void wgmma_m64k32_e4m3(float (&d)[REGS], unsigned long long desc_a,
                                                  unsigned long long desc_b, int scale_d)
{
    static_assert(REGS == 4 || REGS == 8 || REGS == 16 || REGS == 32 || REGS == 64 || REGS == 128,
                  "FP8 wgmma wrappers exist for n = 8, 16, 32, 64, 128 and 256");
    if constexpr (REGS == 4) wgmma_m64n8k32_e4m3(d, desc_a, desc_b, scale_d);
    else if constexpr (REGS == 8) wgmma_m64n16k32_e4m3(d, desc_a, desc_b, scale_d);
    else if constexpr (REGS == 16) wgmma_m64n32k32_e4m3(d, desc_a, desc_b, scale_d);
    else if constexpr (REGS == 32) wgmma_m64n64k32_e4m3(d, desc_a, desc_b, scale_d);
    else if constexpr (REGS == 64) wgmma_m64n128k32_e4m3(d, desc_a, desc_b, scale_d);
    else wgmma_m64n256k32_e4m3(d, desc_a, desc_b, scale_d);
}
