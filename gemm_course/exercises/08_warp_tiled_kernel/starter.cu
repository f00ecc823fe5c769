// Level 8 — warp tiling, written by you: block tile → warp tile → thread tile.
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
//
// The launch: a ONE-dimensional grid of tiles_m · tiles_n blocks, tiles_m = ceil(M / BM) and
// tiles_n = ceil(N / BN), each of (BM/WM)·(BN/WN) warps (here BM = BN = 64, BK = 16, WM = 64,
// WN = 32: 2 warps, 64 threads). Each block computes one BM×BN tile of C; which tile follows from
// blockIdx.x, and every tile must be computed by exactly one block. GROUP_M names the course's
// order (groups of GROUP_M tile rows, column by column inside a group); any order that covers each
// tile once is right.
//
//   block tile BM×BN                warp tile WM×WN (one warp)
//   ┌─────────┬─────────┐           the 32 lanes as an 8 (m) × 4 (n) grid; each lane owns
//   │ warp 0  │ warp 1  │ ...       (WM/32)·(WN/16) sub-tiles of 4×4 accumulators, i.e.
//   └─────────┴─────────┘           TM = 4·WM/32 rows by TN = 4·WN/16 columns of the warp tile
//                                   (8 × 8 here). Which rows and columns: yours to choose.
//
// The block walks K in steps of BK through shared memory (a BM×BK piece of A, a BK×BN piece of B).
// For each k of a step, a lane reads its values of A and of B from shared memory, 4 at a time as
// float4 (16-byte aligned addresses), and does its TM·TN multiply-adds. In the course's bank model
// a float4 read is served half a warp (16 lanes) at a time; lanes that read the same float4 share
// it (a broadcast), and the others cost an extra pass whenever two of their words fall in one bank.
// So which lanes own which sub-tiles decides whether the reads conflict.
//
// VEC (the host sets it): true when K and N are multiples of 4 and A, B, C are 16-byte aligned, so a
// float4 of A along k or of B and C along n is entirely inside or outside its matrix; false for any
// other shape. Your kernel may use it for 16-byte global accesses, or load element by element with
// a guard on each. MIN_BLOCKS and BATCHED belong to the course's launcher.
#include "common.cuh"

template <int BM, int BN, int BK, int WM, int WN, bool VEC, int MIN_BLOCKS = 2, int GROUP_M = 8,
          bool BATCHED = false>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
gemm_warp_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)

    // Your kernel: the block's tile from blockIdx.x, the warp's tile in it, the lane's sub-tiles,
    // the shared pieces of A and B, the loop over the steps of K, the float4 reads and the FMAs,
    // and the guarded store of the lane's accumulators.
}
