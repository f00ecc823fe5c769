"""Recorded measurements shipped with the package, for readers without a GPU (and for the prose)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from gemm_course.levels import FP8_LEVEL_ID

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"  # the data stays in gemm_course/results/
FP8_LEVEL = FP8_LEVEL_ID  # Level 13 runs outside the registry (see levels.is_fp8_level)


def recorded_files() -> list[Path]:
    return sorted(RESULTS_DIR.glob("*.json"))


def load(path: str | Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("schema") != 1 or "provenance" not in data:
        raise ValueError(f"{path} is not a gemm_course result file (schema 1 with provenance)")
    return data


def _file_rows(path: Path, level: Optional[str], gpu: Optional[str], dtype: Optional[str]) -> list[dict[str, Any]]:
    data = load(path)
    prov = data["provenance"]
    if gpu and prov["gpu"] != gpu:
        return []
    records = [r for r in data.get("records", []) if dtype in (None, r["dtype"])]
    wanted_sizes = {(r["M"], r["N"], r["K"]) for r in records if level in (None, r["level"])}
    return [{**r, "params": _complete(r["level"], r["params"]), "gpu": prov["gpu"], "date": prov["date"][:10],
             "file": path.name, "provenance": prov}
            for r in records if level is None or r["level"] == level or (
                r["level"] == "cublas" and (r["M"], r["N"], r["K"]) in wanted_sizes)]


# Parsed rows per (file, its size and modification time, level, GPU, input type): the prose tests and the pages
# look records up hundreds of times, and parsing every file each time cost most of their run. A changed file
# has a new key; callers get fresh row and params dicts, so the cache cannot be changed through them.
_ROWS: dict[tuple, list[dict[str, Any]]] = {}


def recorded(level: Optional[str] = None, gpu: Optional[str] = None,
             files: Optional[list[Path]] = None, dtype: Optional[str] = None) -> list[dict[str, Any]]:
    """All recorded records (optionally one level's, one GPU's, one input type's), each with its
    file's provenance.

    A level's records come with the cuBLAS records measured in the same run at the same sizes.
    """
    rows = []
    for path in files or recorded_files():
        stat = Path(path).stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns, level, gpu, dtype)
        if key not in _ROWS:
            _ROWS[key] = _file_rows(Path(path), level, gpu, dtype)
        rows += [{**r, "params": dict(r["params"])} for r in _ROWS[key]]
    return rows


SWEEP_ONLY_FLAG = "--sweep-only"  # record --sweep-only, fp8 --record --sweep-only: a run that timed the search space alone


def sweep_records(level: str, size: int | tuple[int, int, int], dtype: Optional[str] = None) -> list[dict[str, Any]]:
    """A level's records at one shape (n for n³, or (M, N, K)) from the runs that swept its settings: what the
    tuning page and the autotuner compare. Where a run timed the search space alone (--sweep-only), only
    the newest such run counts (a level swept again, after a new setting, supersedes its earlier sweep),
    so that one sweep's settings are compared within one run; otherwise the records of `record` without
    --showcase-only. dtype: one input type only."""
    shape = (size, size, size) if isinstance(size, int) else tuple(size)
    rows = [r for r in recorded(level, dtype=dtype) if r["level"] == level and (r["M"], r["N"], r["K"]) == shape
            and "--showcase-only" not in r["provenance"]["command"]]
    dedicated = [r for r in rows if SWEEP_ONLY_FLAG in r["provenance"]["command"].split()]
    if dedicated:
        newest = max(r["provenance"]["date"] for r in dedicated)
        return [r for r in dedicated if r["provenance"]["date"] == newest]
    return [r for r in rows if r["level"] != FP8_LEVEL]


def _complete(level: str, params: dict[str, Any]) -> dict[str, Any]:
    """A record's setting with every parameter of the level: one added after the record was made
    (e.g. Level 10's copy) takes its default, which is what the kernel of that time did."""
    from gemm_course.levels import get_level

    if level in ("cublas", FP8_LEVEL):  # FP8's records name every option they use (fp8_gemm.setting_params)
        return params
    lv = get_level(level)
    return {**{p.name: p.default for p in lv.params}, **params}


def peaks(probe: Optional[str] = None) -> list[dict[str, Any]]:
    """Recorded instruction-ceiling probes (python -m gemm_course peak), each with its provenance."""
    return [{**r, "gpu": data["provenance"]["gpu"], "provenance": data["provenance"]}
            for data in map(load, recorded_files()) for r in data.get("peaks", [])
            if probe in (None, r["probe"])]


def sass_records() -> list[dict[str, Any]]:
    """Recorded instruction mixes (saved by `record` beside the timings), each setting completed with
    the level's defaults like the timing records, so a lookup by a resolved setting finds it."""
    return [{**s, "params": _complete(s["level"], s["params"])}
            for data in map(load, recorded_files()) for s in data.get("sass", [])]


def level_10_parts() -> list[dict[str, Any]]:
    """Recorded timings of Level 10 taken apart (whole kernel, copies only, math only)."""
    return [{**r, "gpu": data["provenance"]["gpu"], "provenance": data["provenance"]}
            for data in map(load, recorded_files()) for r in data.get("level_10_parts", [])]


def find(level: str, M: int, N: Optional[int] = None, K: Optional[int] = None,
         gpu: Optional[str] = None, dtype: Optional[str] = None, file: Optional[str] = None,
         **params: Any) -> dict[str, Any]:
    """The one recorded record of a level at a size with exactly these params (KeyError if none).

    dtype: the input type; by default the level's first (its recorded showcase), e.g. float16 for
    Level 10, bfloat16 for Level 11; for "cublas", float32 (the baseline of Levels 1-8).
    file: the name of one result file (e.g. "h200_experiments.json"), to compare only numbers
    measured in the same run; by default the first file (by name) that has the setting.
    """
    from gemm_course.levels import get_level

    N = M if N is None else N
    K = M if K is None else K
    dtype = dtype or ("float32" if level == "cublas" else get_level(level).dtypes[0])
    files = [RESULTS_DIR / file] if file else None
    for r in recorded(level, gpu, files=files, dtype=dtype):
        if r["level"] == level and (r["M"], r["N"], r["K"]) == (M, N, K) and \
                all(r["params"].get(k) == v for k, v in params.items()):
            return r
    raise KeyError(f"no recorded result for {level} {params} at {M}×{N}×{K} in {dtype}")


def provenance_line(record: dict[str, Any]) -> str:
    """One line that says where a recorded number came from."""
    p = record["provenance"]
    return (f"{p['gpu']} (sm_{p['compute_capability'].replace('.', '')}), driver {p['driver']}, "
            f"CUDA {p['cuda_runtime']}, CuPy {p['cupy']}, {p['date'][:10]}; `{command_line(p)}`")


def command_line(provenance: dict[str, Any]) -> str:
    """The recorded command, with the output path (a folder on the machine that ran it) shown as
    FILE: rerun it with a file name of your own."""
    import re

    return re.sub(r"--out\s+\S+", "--out FILE", provenance.get("command", ""))


# What a ratio is against, by the name summary rows carry in "baseline".
BASELINE_NAMES = {
    "cublas": "cuBLAS in the same input type (cupy.matmul; bf16 through cublasGemmEx)",
    "cublaslt_fast": "cuBLASLt per-tensor FP8, fast accumulation (torch._scaled_mm, use_fast_accum=True)",
    "cublaslt_promoted": "cuBLASLt per-tensor FP8, promoted (torch._scaled_mm, use_fast_accum=False)",
    "cublaslt_blockwise": "cuBLASLt block-scaled FP8, 1×128 A / 128×128 B (torch.nn.functional.scaled_mm)",
    "deepgemm": "DeepGEMM FP8, 1×128 A / 128×128 B (fp8_gemm_nt; `fp8 --record --peer deepgemm`, peer_records)",
}


def baseline_of(record: dict[str, Any]) -> str:
    """The name of the baseline a record's ratio is against: the record's own "baseline" where it names one
    (Level 13), the per-tensor mode named in an older FP8 record's description, else cuBLAS."""
    name = record.get("baseline")
    if name in BASELINE_NAMES:
        return name
    if name and "use_fast_accum=True" in name:
        return "cublaslt_fast"
    if name and "use_fast_accum=False" in name:
        return "cublaslt_promoted"
    return "cublas"


def peer_records(level: Optional[str] = None) -> list[dict[str, Any]]:
    """The records of the runs that timed Level 13 beside a peer library (`fp8 --record --peer deepgemm`), kept
    under "peer_records" apart from "records" (so the ladder and level pages do not read them), each with its
    file's GPU, date and provenance; level: only that level's (with the libraries' records at its shapes)."""
    rows = []
    for path in recorded_files():
        data = load(path)
        prov = data["provenance"]
        recs = data.get("peer_records", [])
        shapes = {(r["M"], r["N"], r["K"]) for r in recs if level in (None, r["level"])}
        rows += [{**r, "params": dict(r["params"]), "gpu": prov["gpu"], "date": prov["date"][:10], "file": path.name,
                  "provenance": prov} for r in recs
                 if level in (None, r["level"]) or (r["level"] == "cublas" and (r["M"], r["N"], r["K"]) in shapes)]
    return rows


def _peer_pairs(level: Optional[str]) -> list[dict[str, Any]]:
    """Each Level 13 record of a peer run as a record against each library timed at its shape in that run, in the
    fields record_fp8's records carry (baseline, baseline_ms, its clock, ratio_to_baseline, ratio_to_cublas)."""
    if level not in (None, FP8_LEVEL):
        return []
    rows = peer_records(FP8_LEVEL)
    out = []
    for r in rows:
        if r["level"] != FP8_LEVEL:
            continue
        for b in rows:
            if b["level"] == "cublas" and b["file"] == r["file"] and (b["M"], b["N"], b["K"]) == (r["M"], r["N"], r["K"]):
                ratio = b["median_ms"] / r["median_ms"]
                out.append({**r, "baseline": b["baseline"], "baseline_ms": b["median_ms"],
                            "baseline_sm_clock_mhz": b.get("sm_clock_mhz"), "ratio_to_baseline": ratio,
                            "cublas_paired_ms": b["median_ms"], "cublas_paired_sm_clock_mhz": b.get("sm_clock_mhz"),
                            "ratio_to_cublas": ratio})
    return out


def summary(level: Optional[str] = None, baseline: Optional[str] = None) -> list[dict[str, Any]]:
    """The recorded ladder: level, params, dtype, size, TFLOPS, the baseline (its name, TFLOPS and the
    ratio to it, measured in the same run), the SM clocks of kernel and baseline where recorded, GPU, date.

    ratio_to_baseline is the baseline's time over the kernel's, ratio_in_cycles the same in clock cycles
    where both clocks were measured on the SMs (None where only NVML's reading exists); cublas_tflops and
    ratio_to_cublas are the same numbers under their older names (for Level 13 the baseline is cuBLASLt).
    baseline: only the rows against that baseline (a name in BASELINE_NAMES); then the peer runs' rows count too
    (`fp8 --record --peer deepgemm`: Level 13 against DeepGEMM, and against block-scaled cuBLASLt, in one run)."""
    if baseline is not None and baseline not in BASELINE_NAMES:
        raise ValueError(f"--baseline {baseline!r}: the baselines are {', '.join(BASELINE_NAMES)} · "
                         f"--baseline {baseline!r}：可选基准为 {', '.join(BASELINE_NAMES)}")
    rows = []
    for r in recorded(level) + (_peer_pairs(level) if baseline is not None else []):
        if baseline is not None and baseline_of(r) != baseline:
            continue
        if r["level"] == "cublas" or r.get("ratio_to_cublas") is None:
            continue
        ratio = r.get("ratio_to_baseline", r["ratio_to_cublas"])
        rows.append({"level": r["level"], "params": r["params"], "dtype": r["dtype"],
                     "M": r["M"], "N": r["N"], "K": r["K"], "ms": r["median_ms"],
                     "tflops": r["tflops"], "baseline": baseline_of(r), "baseline_tflops": r["tflops"] / ratio,
                     "ratio_to_baseline": ratio, "cublas_tflops": r["tflops"] / ratio, "ratio_to_cublas": ratio,
                     "sm_clock_mhz": r.get("sm_clock_mhz"),
                     "baseline_sm_clock_mhz": r.get("baseline_sm_clock_mhz", r.get("cublas_paired_sm_clock_mhz")),
                     "clock_source": "sm" if "clock64" in r["provenance"].get("method", "") else
                                     ("nvml" if r.get("sm_clock_mhz") is not None else None),
                     "ratio_in_cycles": in_cycles(r),
                     "gpu": r["gpu"], "date": r["date"]})
    return rows


# The seed guide's performance table (RTX 3080, 1024×1024×1024, as the guide states it): a claim,
# not a measurement of ours. The ladder page sets our H200 measurements beside it.
SEED_CLAIMS: dict[str, float] = {
    "01_naive": 0.10, "02_smem_tiling": 0.20, "03_coalescing_banks": 0.30, "04_double_buffering": 0.40,
    "05_register_blocking": 0.70, "06_fused_epilogue": 0.81, "07_vectorized": 0.89,
}
SEED_CLAIMS_SOURCE = "seed guide, table 'measured performance (RTX 3080, 1024×1024×1024)'"


CLOCKS_DIR = RESULTS_DIR / "clocks"  # re-recordings that measured each kernel's own SM clock (bench.KernelClock)


def clock_range(level: str, dtype: str, n: int = 4096) -> dict[str, float]:
    """The SM clocks measured on the SMs (not NVML) for a level's showcase at n³ in h200_top_rungs_<dtype>.json:
    the kernels' lowest and highest, those of the cuBLAS runs paired with them (MHz), and NVML's lowest reading
    beside them."""
    name = f"h200_top_rungs_{dtype}.json"
    data = load(RESULTS_DIR / name)
    if "clock64" not in data["provenance"].get("method", ""):
        raise KeyError(f"{name} was recorded without the kernel clock: re-record it (record_h200_clocks.sh 10)")
    rows = [r for r in data["records"] if r["level"] == level and (r["M"], r["N"], r["K"]) == (n, n, n)]
    if not rows:
        raise KeyError(f"no record of {level} in {dtype} at {n}³ in {name}")
    kernel = [r["sm_clock_mhz"] for r in rows]
    paired = [r["cublas_paired_sm_clock_mhz"] for r in rows]
    return {"kernel_min": min(kernel), "kernel_max": max(kernel), "cublas_min": min(paired), "cublas_max": max(paired),
            "nvml_min": min(r["nvml_sm_clock_mhz"] for r in rows), "file": name}


def in_cycles(record: dict[str, Any]) -> Optional[float]:
    """A record's ratio to its paired baseline counted in clock cycles instead of time: the baseline's
    cycles (time × its measured clock) over the kernel's. Where the two ran at different clocks this is
    the work per cycle compared; None where the record has no measured clock for both sides."""
    kernel = record.get("sm_clock_mhz")
    paired = record.get("baseline_sm_clock_mhz", record.get("cublas_paired_sm_clock_mhz"))
    ratio = record.get("ratio_to_baseline", record.get("ratio_to_cublas"))
    # only clocks measured on the SMs: the method says clock64, or (a record read without its provenance) NVML
    # is there as the side reading that only the clock64 method keeps apart
    measured = ("clock64" in record["provenance"].get("method", "") if "provenance" in record
                else "nvml_sm_clock_mhz" in record)
    if not kernel or not paired or ratio is None or not measured:
        return None  # NVML's reading is not the clock a kernel runs at: no cycles from it
    return ratio * paired / kernel


def clocked(level: str, n: int, dtype: str, **params: Any) -> dict[str, Any]:
    """One showcase setting in h200_top_rungs_<dtype>.json (timed with the kernel's own SM clock):
    the record, with "ratio_in_cycles" (in_cycles) added. params as for find; missing ones take the level's
    defaults."""
    from gemm_course.levels import get_level

    r = dict(find(level, n, dtype=dtype, file=f"h200_top_rungs_{dtype}.json",
                  **get_level(level).resolve(**params)))
    r["ratio_in_cycles"] = in_cycles(r)
    return r
