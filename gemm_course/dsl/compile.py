"""Level 14's kernels compiled for a GPU target where there is no GPU: sm_80 (A100) and sm_90 (H100, H200).

Triton compiles Python to PTX and, with the ptxas its wheel ships, to a cubin, for any target it is told; only
loading and launching need a GPU. :func:`compile_kernel` asks Triton to compile exactly what a launch would: the
launch wrapper of each kernel builds its arguments (gemm_course.dsl.triton_gemm.tiled_launch, hopper_launch,
gluon_gemm.gluon_launch) from shape-only matrices (tensors.ShapeOnlyTensor: an element type and a shape, pointer 0),
and the kernel's own ``warmup`` binds and compiles them under a driver that names the target and launches nothing.
The binding, the specialization (which integers are 16-divisible, which pointers aligned), the TMA descriptor types
and the options (num_warps, num_stages) are then the ones a GPU run gets, so an API misuse, a layout Gluon rejects
or a ring that does not fit in shared memory shows here, before any GPU time is spent.

The report (:class:`KernelReport`): the shared memory the kernel asks for, its registers and spills (ptxas -v on
the PTX, parsed by the course's own compile.parse_ptxas_log), and counts of the PTX instructions each level is
about (wgmma, mma.sync, TMA copies, cp.async, mbarrier waits, fp32 FMAs).
"""
from __future__ import annotations

import contextlib
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from gemm_course.dsl.tensors import ShapeOnlyTensor, require_triton

SHARED_LIMIT_SM90 = 227 * 1024  # dynamic shared memory one block may use on sm_90 (232448 bytes)
SHARED_LIMIT_SM80 = 163 * 1024  # and on sm_80 (A100)
ARCHS = {"sm_80": 80, "sm_90": 90}
KERNEL_NAMES = ("tiled", "hopper", "gluon")
COMPILE_SHAPE = (4096, 4096, 4096)  # any shape works; a multiple of 16 specializes like the record's shapes

# PTX instructions by the idea they stand for in the course (a regular expression over the PTX text each).
PTX_INSTRUCTIONS = {
    "wgmma.mma_async": r"\bwgmma\.mma_async\b",       # Level 11: warpgroup MMA
    "mma.sync": r"\bmma\.sync\b",                     # Level 10: warp-level MMA
    "cp.async.bulk.tensor": r"\bcp\.async\.bulk\.tensor\b",  # Levels 10 (copy='tma') and 11: TMA copies
    "cp.async": r"\bcp\.async\.c[ag]\b",              # Levels 4 and 10: per-thread async copies
    "mbarrier.try_wait": r"\bmbarrier\.try_wait\b",   # Level 11: waits on the ring's barriers
    "fma.rn.f32": r"\bfma\.rn\.f32\b",                # Levels 1–8: fp32 FMAs (IEEE, no TF32)
    "tf32": r"\.tf32\b",                              # TF32 Tensor Core inputs: absent with input_precision="ieee"
    "setmaxnreg": r"\bsetmaxnreg\b",                  # Level 11: registers moved between warpgroups
}


@dataclass(frozen=True)
class KernelReport:
    """What the compiler made of one kernel and setting for one target."""

    kernel: str
    arch: str
    dtype: str
    setting: dict
    name: str
    num_warps: int
    shared_bytes: int
    registers: Optional[int]
    spill_bytes: Optional[int]
    instructions: dict[str, int] = field(default_factory=dict)
    ptx: str = field(default="", repr=False)

    @property
    def shared_limit(self) -> int:
        return SHARED_LIMIT_SM90 if self.arch == "sm_90" else SHARED_LIMIT_SM80

    @property
    def fits(self) -> bool:
        """Whether a block's shared memory fits the target (a launch fails otherwise)."""
        return self.shared_bytes <= self.shared_limit

    def row(self) -> dict[str, Any]:
        """The report as a plain dict (no PTX), as the record keeps it."""
        return {"kernel": self.kernel, "arch": self.arch, "dtype": self.dtype, "setting": dict(self.setting),
                "name": self.name, "num_warps": self.num_warps, "shared_bytes": self.shared_bytes,
                "registers": self.registers, "spill_bytes": self.spill_bytes, "instructions": dict(self.instructions),
                "fits": self.fits}


class _CompileOnlyDriver:
    """A Triton driver that names a target and launches nothing: what ``warmup`` needs to bind and compile.
    The "device" it reports is the compute capability, so Triton's per-device cache of compiled kernels keeps each
    target's apart."""

    def __init__(self, capability: int) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", capability, 32)

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return self.target.arch

    def get_current_stream(self, device: Optional[int] = None) -> int:
        return 0


@contextlib.contextmanager
def _target(capability: int) -> Iterator[None]:
    """Triton's active driver is the compile-only one inside the `with`, the previous one (or none) after it."""
    from triton.runtime import driver

    previous = driver._active  # not driver.active: without a GPU and PyTorch that would try to start one
    driver.set_active(_CompileOnlyDriver(capability))
    try:
        yield
    finally:
        driver._active = previous


def _launch_of(kernel: str, dtype: str, setting: Mapping[str, Any],
               shape: tuple[int, int, int]) -> tuple[Any, tuple, dict]:
    """(jit function, arguments, options) for one kernel and setting at a shape, with shape-only matrices."""
    M, N, K = shape
    A, B = ShapeOnlyTensor((M, K), dtype), ShapeOnlyTensor((K, N), dtype)
    if kernel == "tiled":
        from gemm_course.dsl import triton_gemm as tg

        resolved = tg.resolve_tiled(**setting)
        _, args, options = tg.tiled_launch(A, B, ShapeOnlyTensor((M, N), "float32"), resolved)
        return tg.tiled_gemm_kernel, args, options
    if kernel == "hopper":
        from gemm_course.dsl import triton_gemm as tg

        resolved = tg.resolve_hopper(**setting)
        _, args, options = tg.hopper_launch(A, B, _c_of(M, N, dtype, resolved), resolved, sms=132)
        return tg.hopper_gemm_kernel, args, options
    if kernel == "gluon":
        from gemm_course.dsl import gluon_gemm as gg

        resolved = gg.resolve_gluon(**setting)
        _, args, options = gg.gluon_launch(A, B, _c_of(M, N, dtype, resolved), resolved, sms=132)
        return gg.gluon_gemm_kernel, args, options
    raise ValueError(f"no kernel {kernel!r}; the kernels: {', '.join(KERNEL_NAMES)} / 没有内核 {kernel!r}；已有的内核："
                     f"{'、'.join(KERNEL_NAMES)}")


def _c_of(M: int, N: int, dtype: str, resolved: Mapping[str, Any]) -> ShapeOnlyTensor:
    """C as a resolved setting writes it: the inputs' type for c_type="input", else float32."""
    return ShapeOnlyTensor((M, N), dtype if resolved["c_type"] == "input" else "float32")


def compile_kernel(kernel: str, arch: str = "sm_90", dtype: str = "bfloat16",
                   setting: Optional[Mapping[str, Any]] = None,
                   shape: tuple[int, int, int] = COMPILE_SHAPE, registers: bool = True) -> KernelReport:
    """Compile a Level 14 kernel ("tiled", "hopper", "gluon") for arch ("sm_80", "sm_90") without a GPU.

    Raises what Triton raises for a kernel it cannot compile (its CompilationError names the line). registers:
    also run ptxas -v on the PTX for registers and spills (a few tenths of a second more)."""
    require_triton("compiling Level 14's kernels")
    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r}: choose one of {', '.join(ARCHS)} / arch {arch!r} 不可用：可选 {'、'.join(ARCHS)}")
    setting = dict(setting or {})
    fn, args, options = _launch_of(kernel, dtype, setting, shape)
    with _target(ARCHS[arch]):
        compiled = fn.warmup(*args, grid=(1,), **options)
    ptx = compiled.asm["ptx"]
    counts = {name: len(re.findall(pattern, ptx)) for name, pattern in PTX_INSTRUCTIONS.items()}
    regs, spills = _ptxas_usage(ptx, ARCHS[arch]) if registers else (None, None)
    return KernelReport(kernel, arch, dtype, setting, compiled.metadata.name, compiled.metadata.num_warps,
                        int(compiled.metadata.shared), regs, spills, counts, ptx)


def _ptxas_usage(ptx: str, capability: int) -> tuple[Optional[int], Optional[int]]:
    """Registers per thread and spill bytes (stores + loads) from the wheel's own ptxas -v."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    from gemm_course.run.compile import parse_ptxas_log

    with tempfile.TemporaryDirectory(prefix="gemm_course_dsl_") as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run([get_ptxas(capability).path, "-v", f"--gpu-name={sm_arch_from_capability(capability)}",
                               str(source), "-o", str(Path(folder) / "kernel.cubin")],
                              capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return None, None
    usage = parse_ptxas_log(done.stderr + done.stdout)
    return usage["registers"], usage["spill_store_bytes"] + usage["spill_load_bytes"]
