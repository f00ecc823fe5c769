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


ARCH_ENV = "GEMM_COURSE_ARCH"  # e.g. GEMM_COURSE_ARCH=sm_120: the reports and decisions of another card
_pretended: Optional[str] = None  # set by pretend_arch(); None: the environment variable, else the real GPU


def _cc_of(arch_name: str) -> int:
    """75 from "sm_75", 90 from "sm_90a", 120 from "sm_120"."""
    return int(arch_name[3:].rstrip("af"))


def pretend_arch(arch_name: Optional[str] = None) -> Optional[str]:
    """See the course as a reader with another card would: ``gc.pretend_arch("sm_120")``.

    The compile reports (their default architecture), the choice between a live run and the recorded one,
    the fallbacks and the notes that say why then follow that architecture; kernels that do run are still
    built for the real GPU. ``gc.pretend_arch("")`` goes back to the real GPU (or, without one, to sm_90,
    the recorded H200's). Without a call, the environment variable GEMM_COURSE_ARCH=sm_120 does the same.
    Returns the architecture pretended now, or None.
    """
    global _pretended
    if arch_name is not None:
        if str(arch_name).strip() == "":
            _pretended = None
        else:
            _pretended = _known_arch(arch_name)
    return pretended_arch()


def _known_arch(arch_name: Any) -> str:
    """"sm_120" from "sm_120", "120" or 120, if the course has a table for it; a one-line error otherwise."""
    from gemm_course.models import ARCHS

    text = str(arch_name).strip().lower().removeprefix("sm_").rstrip("af")
    if not (text.isascii() and text.isdigit()) or f"sm_{text}" not in ARCHS:
        known = ", ".join(ARCHS)
        raise ValueError(f"cannot pretend to be {arch_name!r} ({ARCH_ENV}, pretend_arch): name an architecture the "
                         f"course has a table for ({known}), e.g. sm_120 / 无法假装成 {arch_name!r}（{ARCH_ENV}、"
                         f"pretend_arch）：请给出课程有参数表的架构（{known}），例如 sm_120")
    return f"sm_{text}"


def pretended_arch() -> Optional[str]:
    """The architecture pretend_arch() or GEMM_COURSE_ARCH names, or None (the real GPU's counts)."""
    if _pretended is not None:
        return _pretended
    env = os.environ.get(ARCH_ENV, "").strip()
    return _known_arch(env) if env else None


def real_compute_capability() -> int:
    """The real GPU's compute capability, whatever is pretended (what kernels are built for and run on)."""
    p = properties()
    return 10 * p["major"] + p["minor"]


def compute_capability() -> int:
    """e.g. 90 for an H100/H200, 75 for a T4; the pretended architecture's (pretend_arch) where one is set."""
    pretended = pretended_arch()
    return _cc_of(pretended) if pretended else real_compute_capability()


def arch() -> str:
    """The GPU's architecture as NVRTC names it, e.g. "sm_90"; the pretended one (pretend_arch) where one is set."""
    return f"sm_{compute_capability()}"


def real_arch() -> str:
    """The real GPU's architecture, e.g. "sm_90", whatever is pretended."""
    return f"sm_{real_compute_capability()}"


def gpu_name() -> Optional[str]:
    return properties()["name"] if gpu_available() else None
