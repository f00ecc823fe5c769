// Level 4 — double buffering, written by you: the next piece of A and B travels while the block
// computes on the current one, with one barrier per step of K.
// 第 4 级：双缓冲，由你来写。线程块在当前分块上计算时，A 和 B 的下一个分块已经在传输途中，沿 K
// 每一步只需一次屏障。
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
// 输入：A 为 M×K，B 为 K×N，C 为 M×N，行主序 float；M、N、K 可以是从 1 起的任意大小。
//
// The launch, as in Level 2: blocks of TILE × TILE threads (16 × 16 here), ceil(N / TILE) blocks
// along x and ceil(M / TILE) along y. Block (blockIdx.y, blockIdx.x) owns the TILE×TILE tile of C
// that starts at row blockIdx.y·TILE, column blockIdx.x·TILE; thread (threadIdx.y, threadIdx.x)
// owns one of its elements and copies one element of each TILE×TILE piece of A and B per step.
// 启动配置与第 2 级相同：每个线程块 TILE × TILE 个线程（这里是 16 × 16），沿 x 有 ceil(N / TILE)
// 个线程块，沿 y 有 ceil(M / TILE) 个。线程块 (blockIdx.y, blockIdx.x) 负责 C
// 中从第 blockIdx.y·TILE 行、第 blockIdx.x·TILE 列开始的 TILE×TILE 分块；线程 (threadIdx.y,
// threadIdx.x) 负责其中一个元素，并在每一步中拷贝 A 和 B 的 TILE×TILE 分块各一个元素。
//
// What changes from Level 2: two shared buffers per operand. While the block multiplies the piece
// of step t in one buffer, each thread's loads of step t+1 from global memory are already in
// flight (parked in registers), and they go into the other buffer after the multiply.
// 与第 2 级相比的变化：每个操作数有两个共享内存缓冲区。线程块在一个缓冲区中计算第 t 步的分块时，
// 每个线程对第 t+1 步的全局内存加载已经发出（结果暂存在寄存器中），乘法做完后再写入另一个缓冲区。
//
// COPY selects how the course's own kernel moves the next piece (0: through registers, 1: with
// cp.async, common.cuh); the exercise runs COPY = 0, and your kernel may ignore the switch.
// COPY 选择课程自带内核拷贝下一个分块的方式（0：经过寄存器，1：用 cp.async，见 common.cuh）；
// 本练习按 COPY = 0 运行，你的内核可以不理会这个开关。
#include "common.cuh"

template <int TILE, int COPY>
__global__ void __launch_bounds__(TILE * TILE)
gemm_double_buffered(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K)
{
    // Your kernel: the two buffers of each operand in shared memory, the first piece before the
    // loop, then per step: the barrier, the loads of the next piece into registers, the multiply
    // on the current buffer, the stores into the other buffer; last, the guarded store of C.
    // 你的内核：每个操作数在共享内存中的两个缓冲区，循环开始前的第一个分块，然后每一步依次是：
    // 屏障，把下一个分块加载到寄存器，在当前缓冲区上做乘法，写入另一个缓冲区；最后是带边界判断的 C
    // 写回。
}
