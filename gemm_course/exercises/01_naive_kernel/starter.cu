// Level 1 — the naive kernel, written by you: one thread computes one element of C = A · B.
// 第 1 级：朴素内核，由你来写：一个线程计算 C = A · B 的一个元素。
//
// Inputs: A is M×K, B is K×N, C is M×N, all row-major floats (element (i, j) of an R×S matrix X is
// X[i * S + j]). M, N and K are any sizes from 1 up.
// 输入：A 为 M×K，B 为 K×N，C 为 M×N，都是行主序的 float（R×S 矩阵 X 的元素 (i, j) 是 X[i * S +
// j]）。M、N、K 可以是从 1 起的任意大小。
//
// The launch (fixed by the course, not by this file): blocks of BLOCK_X × BLOCK_Y threads (32 × 8
// here), ceil(N / BLOCK_X) blocks along x and ceil(M / BLOCK_Y) along y. So a block owns a
// BLOCK_Y × BLOCK_X piece of C and each thread owns one element of it; blocks on the right and
// bottom edges hang over C when N or M is not a multiple of the block size.
// 启动配置（由课程决定，不在本文件里）：每个线程块 BLOCK_X × BLOCK_Y 个线程（这里是 32 × 8），沿 x
// 有 ceil(N / BLOCK_X) 个线程块，沿 y 有 ceil(M / BLOCK_Y) 个。因此一个线程块负责 C 中 BLOCK_Y ×
// BLOCK_X 的一块，每个线程负责其中一个元素；N 或 M 不是线程块大小的整数倍时，
// 右边缘和下边缘的线程块会超出 C。
//
// A warp is 32 threads with consecutive threadIdx.x (and the same threadIdx.y). Which element each
// of them takes decides how many 32-byte sectors one warp-wide load or store of B and C touches.
// 一个线程束是 threadIdx.x 连续（threadIdx.y 相同）的 32 个线程。它们各取哪个元素，决定了对 B 和 C
// 的一次线程束级加载或存储要触及多少个 32 字节扇区。

template <int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive_cols(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    // Your kernel: which element of C this thread owns, what it does if that element is outside C,
    // the sum over k, and the store.
    // 你的内核：这个线程负责 C 的哪个元素，该元素落在 C 之外时怎么办，对 k 求和，以及写回。
}
