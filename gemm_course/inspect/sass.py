"""Disassembly evidence: which machine instructions a kernel really uses.

`disassemble` compiles a level's kernel with NVRTC (the same compile path as compile_report) and
disassembles the CUBIN with nvdisasm (from the nvidia-cuda-nvdisasm wheel in requirements.txt, or
a CUDA toolkit on the PATH); no GPU is needed.
`instruction_mix` counts the opcodes, e.g. how many shared-memory loads are 16 bytes wide
(LDS.128) and how many fused multiply-adds (FFMA) the inner loop holds. The H200 result files
also record the mix of each showcased kernel as compiled there.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from gemm_course.run.compile import compile_options, kernel_source, nvrtc_compile
from gemm_course.levels import Level, get_level

# An opcode with its modifiers; wgmma's carry a lowercase shape (HGMMA.64x256x16.F32.BF16).
_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*(?:x\d+x\d+[A-Z0-9_.]*)?)")


def find_disassembler() -> Optional[str]:
    """nvdisasm or cuobjdump: on the PATH (a CUDA toolkit), else from the nvidia-cuda-nvdisasm wheel."""
    for tool in ("nvdisasm", "cuobjdump"):
        path = shutil.which(tool)
        if path:
            return path
    try:
        import nvidia
    except ImportError:
        return None
    for root in map(Path, getattr(nvidia, "__path__", [])):
        for candidate in sorted(root.glob("cu*/bin/nvdisasm")):
            return str(candidate)
    return None


def disassembler_name() -> str:
    """Which disassembler find_disassembler() picked, said without its path (a folder of this machine, often
    inside a virtual environment): "nvdisasm (nvidia-cuda-nvdisasm wheel)", "cuobjdump (CUDA toolkit)", "none"."""
    path = find_disassembler()
    if path is None:
        return "none"
    tool = Path(path).name
    return f"{tool} (CUDA toolkit)" if shutil.which(tool) == path else f"{tool} (nvidia-cuda-nvdisasm wheel)"


def disassemble(level: str | int | Level, arch: str = "sm_90", source: Optional[str] = None,
                **params: Any) -> str:
    """SASS of a level's kernel for an architecture (needs cuobjdump or nvdisasm, no GPU)."""
    lv = get_level(level)
    resolved = lv.resolve(**params)
    arch = lv.build_arch or arch
    tool = find_disassembler()
    if tool is None:
        raise RuntimeError("no disassembler found: pip install nvidia-cuda-nvdisasm (or put a CUDA "
                           "toolkit's nvdisasm on the PATH); the recorded results also hold instruction counts")
    cubin, _, _ = nvrtc_compile(source if source is not None else kernel_source(lv),
                                lv.kernel_name(resolved), arch, compile_options(lv))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        args = [tool, "-sass", str(path)] if tool.endswith("cuobjdump") else [tool, str(path)]
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def instruction_mix(sass: str) -> dict[str, int]:
    """Count SASS opcodes (with their width/type modifiers), most frequent first."""
    counts = Counter(m.group(1) for m in map(_SASS_LINE.search, sass.splitlines()) if m)
    return dict(counts.most_common())


def memory_summary(mix: dict[str, int]) -> dict[str, int]:
    """Group a mix into what the levels discuss: FFMA, shared/global/local accesses by width
    (LDL/STL are register spills), barriers, tensor-core instructions, and Hopper's TMA copies
    (UTMALDG), mbarrier operations (SYNCS) and register reallocation (USETMAXREG)."""
    out: Counter[str] = Counter()
    for op, n in mix.items():
        base = op.split(".")[0]
        if base in ("LDS", "LDG", "STS", "STG", "LDGSTS", "LDL", "STL"):
            width = next((w for w in ("128", "64") if f".{w}" in op), "32")
            out[f"{base}.{width}"] += n
        elif base in ("FFMA", "BAR", "HMMA", "HGMMA", "LDSM", "UTMALDG", "SYNCS", "USETMAXREG"):
            out[base] += n
    return dict(sorted(out.items()))


def kernel_mix(level: str | int | Level, arch: str = "sm_90", **params: Any) -> tuple[dict[str, int], str]:
    """A kernel's full instruction mix and where it came from: disassembled here when a
    disassembler is installed, else the mix recorded with the H200 results (KeyError if neither)."""
    from gemm_course.measure import results

    lv = get_level(level)
    p = lv.resolve(**params)
    arch = lv.build_arch or arch  # the label says what disassemble() builds
    if find_disassembler():
        return instruction_mix(disassemble(lv, arch=arch, **p)), f"disassembled here for {arch}"
    for rec in results.sass_records():
        if rec["level"] == lv.id and rec["params"] == p:
            return rec["mix"], f"recorded for {rec['arch']}"
    raise KeyError(f"no disassembler here and no recorded instruction mix for {lv.id} {p}")
