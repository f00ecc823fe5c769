// Level 2 — shared-memory tiling, written by you.
// 第 2 级：共享内存分块，由你来写。
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
// 输入：A 为 M×K，B 为 K×N，C 为 M×N，行主序 float；M、N、K 可以是从 1 起的任意大小。
//
// The launch: blocks of TILE × TILE threads (16 × 16 here), ceil(N / TILE) blocks along x and
// ceil(M / TILE) along y. Block (blockIdx.y, blockIdx.x) owns the TILE×TILE tile of C that starts
// at row blockIdx.y·TILE, column blockIdx.x·TILE; thread (threadIdx.y, threadIdx.x) owns one
// element of that tile. Tiles on the bottom and right edges hang over C.
// 启动配置：每个线程块 TILE × TILE 个线程（这里是 16 × 16），沿 x 有 ceil(N / TILE) 个线程块，沿 y
// 有 ceil(M / TILE) 个。线程块 (blockIdx.y, blockIdx.x) 负责 C 中从第 blockIdx.y·TILE 行、
// 第 blockIdx.x·TILE 列开始的 TILE×TILE 分块；线程 (threadIdx.y, threadIdx.x)
// 负责该分块中的一个元素。下边缘和右边缘的分块会超出 C。
//
// The point of the level: the block walks K one TILE-wide step at a time, copying a TILE×TILE
// piece of A and one of B into shared memory, and every value it copies is then used by TILE
// threads. Each thread copies one element of each piece per step.
// 本级的要点：线程块沿 K 每次走一个 TILE 宽的步长，把 A 的一个 TILE×TILE 分块和 B
// 的一个分块拷贝到共享内存，拷贝进来的每个值随后被 TILE 个线程使用。每一步中，
// 每个线程拷贝每个分块的一个元素。

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
gemm_smem_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    __shared__ float As[TILE][TILE];  // As[m][k]: the piece of A for the current step
                                      // As[m][k]：当前这一步的 A 分块
    __shared__ float Bs[TILE][TILE];  // Bs[k][n]: the piece of B for the current step
                                      // Bs[k][n]：当前这一步的 B 分块

    // Your kernel: the element this thread owns, the loop over the steps of K (copy, wait,
    // multiply from shared memory, wait), and the store.
    // 你的内核：这个线程负责的元素，沿 K 逐步推进的循环（拷贝、等待、用共享内存做乘法、等待），
    // 以及写回。
}
