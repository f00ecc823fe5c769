"""The CPU path of Level 14: the tiled Triton kernel run by Triton's interpreter on NumPy arrays, no GPU, no torch.

Triton chooses between compiling and interpreting when ``triton.language`` is imported: with TRITON_INTERPRET=1
every ``@triton.jit`` function, Triton's own library functions included (tl.zeros, tl.cdiv), becomes a Python
function that runs each program of the grid in turn, with NumPy doing the arithmetic. A process therefore either
compiles or interprets, never both. This module keeps the two apart: :func:`run_tiled` and :func:`check_tiled`
start a child Python with TRITON_INTERPRET=1 (``python -m gemm_course.dsl.interpreter``), hand it the matrices
(pickled through a pipe) and read C or the check rows back; the calling process (a notebook, a test, a GPU run)
never imports the interpreter. In a process that already interprets, they run in place.

The kernels get the arrays through tensors.NumpyTensor, whose "copies to the host and back" are the arrays
themselves. Two limits of Triton 3.6's interpreter shape what runs here:

* bfloat16: the interpreter keeps bf16 as its uint16 bit patterns and multiplies those in tl.dot (Triton's
  debugging guide: the interpreter does not support operations on bfloat16); :func:`run_tiled` refuses bf16 in
  one line, and the bf16 kernels are checked on a GPU (``python -m gemm_course dsl --record``).
* NumPy 2.4 made ``int()`` of a one-element array an error, and the interpreter's scalars are one-element
  arrays, so ``range(0, K, BK)`` over a kernel argument fails (triton-lang/triton#9171, fixed after 3.6).
  :func:`_index_scalars_by_item` restores it in the child: a scalar's ``__index__`` reads its one element.

Small shapes only: the interpreter runs every program of the grid one after the other in Python, about a tenth
of a second per program and k-tile on a small tile.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

INTERPRET_ENV = "TRITON_INTERPRET"
SMALL_TILES = {"BM": 16, "BN": 16, "BK": 16, "group_m": 2, "num_warps": 4, "num_stages": 1}
CHECK_SHAPES = ((1, 1, 1), (33, 17, 65), (70, 40, 100))  # a lone element, partial tiles in M, N, K, two groups
MAX_ELEMENT_PRODUCTS = 2_000_000  # M·N·K beyond which the interpreter takes minutes: refused at once
CHILD_TIMEOUT_S = 300


def _refuse(en: str, zh: str) -> ValueError:
    return ValueError(f"{en} / {zh}")


def _require_small(M: int, N: int, K: int) -> None:
    if M * N * K > MAX_ELEMENT_PRODUCTS:
        raise _refuse(f"{M}×{N}×{K} is too large for Triton's interpreter (it runs every program in Python): keep "
                      f"M·N·K ≤ {MAX_ELEMENT_PRODUCTS:,}, or run on a GPU",
                      f"{M}×{N}×{K} 对 Triton 的解释器太大（它用 Python 逐个运行每个程序）：请使 M·N·K ≤ "
                      f"{MAX_ELEMENT_PRODUCTS:,}，或在 GPU 上运行")


def _require_float32(A: Any, B: Any) -> None:
    from gemm_course.dsl.tensors import element_type

    for X in (A, B):
        if element_type(X) != "float32":
            raise _refuse(f"Triton's interpreter runs the tiled kernel in float32 only (it multiplies bfloat16's bit "
                          f"patterns as integers in tl.dot), not {element_type(X)}: the bf16 kernels are checked on a "
                          "GPU (python -m gemm_course dsl --record --check-only)",
                          f"Triton 的解释器只能以 float32 运行分块内核（在 tl.dot 中它把 bfloat16 的位模式当作整数相乘），"
                          f"不能用 {element_type(X)}：bf16 内核在 GPU 上检查（python -m gemm_course dsl --record "
                          "--check-only）")


def _index_scalars_by_item() -> None:
    """Triton 3.6's interpreter turns a scalar argument into ``int(array_of_one)``, which NumPy 2.4 refuses
    (triton-lang/triton#9171). Wrap the interpreter's patching of tl.tensor so that ``__index__`` reads the one
    element instead; applied only where NumPy refuses, in the interpreting process only."""
    try:
        int(np.array([1]))
        return  # this NumPy still converts one-element arrays: nothing to mend
    except TypeError:
        pass
    from triton.runtime import interpreter

    if getattr(interpreter._patch_lang_tensor, "_gemm_course_index", False):
        return
    patch_tensor = interpreter._patch_lang_tensor

    def patch_tensor_reading_one_element(tensor: Any, scope: Any) -> None:
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patch_tensor_reading_one_element._gemm_course_index = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patch_tensor_reading_one_element


def interpreting_here() -> bool:
    """Whether this process interprets Triton kernels (TRITON_INTERPRET=1, before triton.language was imported)."""
    if "triton.language" in sys.modules:
        from gemm_course.dsl.triton_gemm import interpreting

        return interpreting()
    return os.environ.get(INTERPRET_ENV, "0") not in ("", "0")


# --- in the interpreting process --------------------------------------------------------------------------------

def _run_here(A: np.ndarray, B: np.ndarray, setting: Mapping[str, Any]) -> np.ndarray:
    _index_scalars_by_item()
    from gemm_course.dsl.triton_gemm import tiled_gemm

    return tiled_gemm(A, B, **setting)


def _check_here(shapes: Sequence[tuple[int, int, int]], settings: Sequence[Mapping[str, Any]],
                seed: int) -> list[dict[str, Any]]:
    """Each setting at each shape, checked as checking.verdict checks (random inputs, C poisoned with NaN, the
    float64 product, the course's fp32 bound, NaN guards around A, B and C)."""
    import time

    from gemm_course.dsl.checking import guarded_problem, verdict

    _index_scalars_by_item()
    from gemm_course.dsl.triton_gemm import resolve_tiled, tiled_gemm

    rows = []
    for i, setting in enumerate(settings):
        for j, (M, N, K) in enumerate(shapes):
            problem = guarded_problem(M, N, K, "float32", "float32", seed=seed + 100 * i + j, xp=np)
            began = time.perf_counter()
            tiled_gemm(problem.A, problem.B, out=problem.C, **setting)
            rows.append({"kernel": "triton_tiled", "dtype": "float32", "setting": resolve_tiled(**setting), "M": M,
                         "N": N, "K": K, **verdict(problem), "seconds": time.perf_counter() - began})
    return rows


# --- from any process ----------------------------------------------------------------------------------------

def _in_child(request: dict[str, Any]) -> Any:
    """Run a request in a child Python that interprets Triton; its answer, or RuntimeError with its last line."""
    env = dict(os.environ, **{INTERPRET_ENV: "1"})
    package_root = str(Path(__file__).resolve().parents[2])  # the child imports this same gemm_course
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (package_root, env.get("PYTHONPATH"))))
    done = subprocess.run([sys.executable, "-m", "gemm_course.dsl.interpreter"], input=pickle.dumps(request),
                          capture_output=True, env=env, timeout=CHILD_TIMEOUT_S)
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["(no output)"]
        raise RuntimeError(f"Triton's interpreter failed: {lines[-1]} / Triton 解释器运行失败：{lines[-1]}")
    return pickle.loads(done.stdout)


def run_tiled(A: np.ndarray, B: np.ndarray, **setting: Any) -> np.ndarray:
    """C = A · B (float32 NumPy arrays) by the tiled Triton kernel in Triton's interpreter, on the CPU.
    setting: as triton_gemm.tiled_gemm (BM, BN, BK, group_m; num_warps and num_stages change nothing here).
    Small shapes only (MAX_ELEMENT_PRODUCTS); the default setting is SMALL_TILES."""
    if not (isinstance(A, np.ndarray) and isinstance(B, np.ndarray)):
        raise _refuse("run_tiled takes NumPy arrays (on a GPU: triton_gemm.tiled_gemm with CuPy arrays)",
                      "run_tiled 接受 NumPy 数组（在 GPU 上请对 CuPy 数组使用 triton_gemm.tiled_gemm）")
    _require_float32(A, B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise _refuse(f"run_tiled: A must be M×K and B K×N (got {A.shape} and {B.shape})",
                      f"run_tiled：A 须为 M×K，B 须为 K×N（当前为 {A.shape} 与 {B.shape}）")
    _require_small(A.shape[0], B.shape[1], A.shape[1])
    setting = {**SMALL_TILES, **setting}
    from gemm_course.dsl.tensors import require_triton

    require_triton("Level 14's CPU path")
    A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
    if interpreting_here():
        return _run_here(A, B, setting)
    return _in_child({"do": "run", "A": A, "B": B, "setting": setting})


def check_tiled(shapes: Sequence[tuple[int, int, int]] = CHECK_SHAPES,
                settings: Sequence[Mapping[str, Any]] = (SMALL_TILES,), seed: int = 1) -> list[dict[str, Any]]:
    """Check the tiled kernel in Triton's interpreter (float32) at each shape and setting, all in one child
    process: one row per check (relative error against float64, the bound, elements left NaN, seconds, passed)."""
    from gemm_course.dsl.tensors import require_triton

    require_triton("Level 14's CPU path")
    for M, N, K in shapes:
        _require_small(M, N, K)
    settings = [{**SMALL_TILES, **s} for s in settings]
    if interpreting_here():
        return _check_here(shapes, settings, seed)
    return _in_child({"do": "check", "shapes": list(shapes), "settings": settings, "seed": seed})


def _child_main() -> None:
    """The child's side of _in_child: a pickled request on stdin, the pickled answer on stdout."""
    if not interpreting_here():
        raise SystemExit("gemm_course.dsl.interpreter runs with TRITON_INTERPRET=1 (it is started by run_tiled)")
    request = pickle.loads(sys.stdin.buffer.read())
    if request["do"] == "run":
        answer: Any = _run_here(request["A"], request["B"], request["setting"])
    else:
        answer = _check_here(request["shapes"], request["settings"], request["seed"])
    sys.stdout.buffer.write(pickle.dumps(answer))


if __name__ == "__main__":
    _child_main()
