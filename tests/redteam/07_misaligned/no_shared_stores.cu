// mechanism: drops the shared tiles altogether, so there is no shared-memory store whose wavefronts could be measured (no conflict, no misalignment)
// expect: failed wavefronts
// message: found no shared-memory store
// Level 7 — vectorized loads and stores: Level 5's kernel moving 16 bytes per instruction.
//
// A float4 load or store moves four floats with one instruction (LDG.E.128, LDS.128, STG.E.128),
// so the same data needs a quarter of the memory instructions:
//   global A: four consecutive k of one row        global B: four consecutive n of one row
//   shared As[k][m..m+3]: a thread's TM values     shared Bs[k][n..n+3]: a thread's TN values
//   C: four consecutive columns per store
//
// Tiles are double-buffered as in Level 5, but staged through registers: the next k-tile's float4
// loads are issued before the math on the current one and stored to the other buffer after it
// (a transposed A tile cannot be copied by 16-byte cp.async, and 2 float4 per thread fit in the
// register budget).
//
// Precondition for this kernel (checked on the host before launch): K and N are multiples of 4 and
// A, B, C start at 16-byte aligned addresses. Then every float4 lies entirely inside or entirely
// outside its matrix, and every vector access is aligned. When a problem breaks it, the launcher
// takes Level 5's scalar kernel instead (included below): correct for any shape, just slower.
#include "05_register_blocking.cu"

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    // No shared memory at all: each thread computes its TM×TN block of C from global memory.
    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);
    const int row0 = blockIdx.y * BM + tr * TM, col0 = blockIdx.x * BN + tc * TN;
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) {
            if (row0 + i >= M || col0 + j >= N) continue;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[(size_t)(row0 + i) * K + k] * B[(size_t)k * N + col0 + j];
            C[(size_t)(row0 + i) * N + col0 + j] = acc;
        }
}
