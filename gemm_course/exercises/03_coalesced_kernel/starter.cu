// Level 3 — coalescing and bank conflicts: a tiled kernel whose every access is as cheap as it can
// be, written by you.
// 第 3 级：合并访问与存储体冲突，由你来写一个分块内核，让它的每次访问都尽可能便宜。
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
// 输入：A 为 M×K，B 为 K×N，C 为 M×N，行主序 float；M、N、K 可以是从 1 起的任意大小。
//
// The launch: blocks of TILE × TILE threads (32 × 32 here), ceil(N / TILE) blocks along x and
// ceil(M / TILE) along y. Block (blockIdx.y, blockIdx.x) owns the TILE×TILE tile of C that starts
// at row blockIdx.y·TILE, column blockIdx.x·TILE; thread (threadIdx.y, threadIdx.x) owns one of
// its elements. A warp is the 32 threads of one threadIdx.y.
// 启动配置：每个线程块 TILE × TILE 个线程（这里是 32 × 32），沿 x 有 ceil(N / TILE) 个线程块，沿 y
// 有 ceil(M / TILE) 个。线程块 (blockIdx.y, blockIdx.x) 负责 C 中从第 blockIdx.y·TILE 行、
// 第 blockIdx.x·TILE 列开始的 TILE×TILE 分块；线程 (threadIdx.y, threadIdx.x) 负责其中一个元素。
// 一个线程束就是 threadIdx.y 相同的 32 个线程。
//
// As in Level 2 the block walks K in TILE-wide steps through shared memory, each thread copying
// one element of the A piece and one of the B piece per step. Here the A piece is kept
// TRANSPOSED, k-major, as Levels 5-8 keep it (they read a thread's values of A along m):
// element (m, k) of the piece lives at As[k * A_STRIDE + m], or at a position of row k that you
// choose. Shared memory has 32 banks of 4 bytes; word w sits in bank w % 32.
// 与第 2 级一样，线程块借助共享内存沿 K 以 TILE 宽的步长推进，每一步中每个线程拷贝 A 分块和 B
// 分块各一个元素。不同的是，这里的 A 分块按转置（k 主序）存放，与第 5–8 级的做法一致（它们沿 m
// 读取一个线程要用的 A 值）：分块中的元素 (m, k) 存放在 As[k * A_STRIDE + m]，
// 或存放在第 k 行中由你选定的位置。共享内存有 32 个 4 字节宽的存储体；字 w 位于存储体 w % 32。
//
// The template's switches (LOAD_ORDER, A_LAYOUT, B_LAYOUT) select variants of the course's own
// kernel; your kernel may ignore them.
// 模板的开关（LOAD_ORDER、A_LAYOUT、B_LAYOUT）用来选择课程自带内核的各个变体；
// 你的内核可以不理会它们。

template <int TILE, int LOAD_ORDER, int A_LAYOUT, int B_LAYOUT = 0>
__global__ void __launch_bounds__(TILE * TILE)
gemm_coalescing_banks(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    constexpr int A_STRIDE = TILE;  // words per row of the transposed A piece: yours to choose
                                    // 转置后的 A 分块每行的字数：由你选定
    __shared__ float As[TILE * A_STRIDE];  // element (m, k) of the A piece: As[k * A_STRIDE + m]
                                           // A 分块的元素 (m, k)：As[k * A_STRIDE + m]
    __shared__ float Bs[TILE][TILE];       // Bs[k][n]

    // Your kernel: which element of each piece this thread copies from global memory and where
    // it goes in shared memory, the loop over the steps of K with its barriers, the inner
    // product from shared memory, and the store.
    // 你的内核：本线程从全局内存拷贝每个分块的哪个元素、放到共享内存的什么位置，沿 K
    // 逐步推进的循环及其屏障，用共享内存计算内积，以及写回。
}
