"""What GPU (if any) this Python process can use. Importable, and truthful, with no GPU at all."""
from __future__ import annotations

import functools
import os
from typing import Any, Optional

NO_GPU_ENV = "GEMM_COURSE_NO_GPU"  # set to 1 to try the no-GPU path on a GPU machine


@functools.lru_cache(maxsize=None)
def gpu_available() -> bool:
    """True when CuPy is installed and sees at least one CUDA device."""
    if os.environ.get(NO_GPU_ENV, "") not in ("", "0"):
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU here"
        return False


def require_gpu(what: str) -> None:
    if not gpu_available():
        raise RuntimeError(
            f"{what} needs a CUDA GPU and none is visible to CuPy here. "
            "Run this notebook on a GPU runtime (in Colab: Runtime → Change runtime type → GPU), "
            "or use the recorded results and compile_report(), which work without a GPU."
        )


@functools.lru_cache(maxsize=None)
def properties() -> dict[str, Any]:
    """cudaGetDeviceProperties of the current device (plain dict)."""
    require_gpu("reading device properties")
    import cupy

    props = dict(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id))
    if isinstance(props.get("name"), bytes):
        props["name"] = props["name"].decode()
    return props


def compute_capability() -> int:
    """e.g. 90 for an H100/H200, 75 for a T4."""
    p = properties()
    return 10 * p["major"] + p["minor"]


def arch() -> str:
    """The GPU's architecture as NVRTC names it, e.g. "sm_90"."""
    return f"sm_{compute_capability()}"


def gpu_name() -> Optional[str]:
    return properties()["name"] if gpu_available() else None
