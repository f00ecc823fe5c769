"""The course on the machines learners have, tried as a new user would: a read-only home, a cache that grows with
every graded edit, an output array that is also an input, a seed or alpha of the wrong kind. Each gets one line
in the reader's language that says what to change, or the right behaviour; never a traceback. No GPU needed."""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gemm_course as gc
from gemm_course.run import disk_cache

ROOT = Path(__file__).resolve().parents[1]


def _read_only_home(tmp_path: Path) -> Path:
    """A home folder nothing can be written under: read-only, or (as root, who writes anywhere) below a file."""
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    if os.access(home, os.W_OK):  # root
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("")
        home = blocker / "home"
    return home


def _env_with_home(home: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "GEMM_COURSE_CPU_CACHE", "CUPY_CACHE_DIR",
                        "GEMM_COURSE_PROGRESS")}
    return {**env, "HOME": str(home), **extra}


def _no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-1500:]


def test_a_read_only_home_grades_and_reports_with_a_one_line_notice(tmp_path):
    home = _read_only_home(tmp_path)
    answer = tmp_path / "my_kernel.cu"
    answer.write_text(gc.exercises.get_exercise("01_edge_guard").solution)
    done = subprocess.run([sys.executable, "-m", "gemm_course", "grade", "01_edge_guard", str(answer)],
                          capture_output=True, text=True, cwd=ROOT, env=_env_with_home(home, GEMM_COURSE_LANG="en"),
                          timeout=600)
    _no_traceback(done)
    assert done.returncode in (0, 3), done.stdout[-800:] + done.stderr[-800:]
    notices = [line for line in done.stderr.splitlines() if "XDG_CACHE_HOME" in line]
    assert len(notices) == 1 and "CUPY_CACHE_DIR" in notices[0], done.stderr
    assert not any("\u4e00" <= ch <= "\u9fff" for ch in notices[0])  # English asked for: English only

    report = subprocess.run([sys.executable, "-c", "import gemm_course as gc; "
                             "print(gc.compile_report('01_naive', arch='sm_75').registers)"],
                            capture_output=True, text=True, cwd=ROOT, env=_env_with_home(home), timeout=600)
    _no_traceback(report)
    assert report.returncode == 0, report.stderr[-800:]


def test_a_cache_that_cannot_be_written_anywhere_is_one_line_naming_the_variable(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(disk_cache, "_fallback_root", lambda: blocker / "fallback")
    with pytest.raises(RuntimeError, match="XDG_CACHE_HOME") as err:
        disk_cache.writable_folder(blocker / "cache" / "cpu", "XDG_CACHE_HOME", "cpu-test")
    assert "\n" not in str(err.value)


def test_cupy_gets_a_writable_kernel_cache_under_a_read_only_home(tmp_path, monkeypatch):
    home = _read_only_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CUPY_CACHE_DIR", raising=False)
    monkeypatch.setattr(disk_cache, "_fallback_root", lambda: tmp_path / "fallback")
    monkeypatch.setattr(disk_cache, "_notified", False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)  # as before `import gemm_course`: CuPy not loaded yet
    disk_cache.prepare_cupy_cache()
    folder = Path(os.environ["CUPY_CACHE_DIR"])
    assert folder.is_relative_to(tmp_path / "fallback") and os.access(folder, os.W_OK)


def _aged(path: Path, size: int, age_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    when = time.time() - age_s
    os.utime(path, (when, when))
    return path


def test_the_cache_keeps_the_most_recently_used_within_its_cap(tmp_path, monkeypatch):
    cache = tmp_path / "cpu"
    old = [_aged(cache / f"old{i}.so", 100_000, 86_400 - i * 60) for i in range(10)]  # old0 the least recent
    fresh = _aged(cache / "fresh.so", 100_000, 5)  # in use by another process, perhaps: kept
    pch = [cache / "pch" / f"key{i}" for i in range(4)]
    for i, folder in enumerate(pch):
        _aged(folder / "cuda_cpu_compat.h.gch", 1000, 7200 - i * 600)
        os.utime(folder, (time.time() - 7200 + i * 600,) * 2)  # key3 the newest
    runtimes = [_aged(cache / "runtime" / f"key{i}.o", 1000, 7200 - i * 600) for i in range(3)]  # key2 the newest
    removed = disk_cache.prune(cache, limit=500_000)
    assert set(pch[:2]) <= set(removed) and all(p.exists() for p in pch[2:])  # the two newest headers stay
    assert runtimes[0] in removed and all(p.exists() for p in runtimes[1:])  # and the two newest runtimes
    kept = [p for p in old if p.exists()]
    assert fresh.exists() and kept == old[-len(kept):] and 3 <= len(kept) <= 4  # least recently used went first
    assert disk_cache.prune(cache, limit=0) == []  # once per process


def test_a_used_file_counts_as_recent(tmp_path):
    cache = tmp_path / "nvrtc"
    first = _aged(cache / "a.cubin", 300_000, 7200)
    second = _aged(cache / "b.cubin", 300_000, 3600)
    disk_cache.touch(first)  # found in the cache just now
    disk_cache.prune(cache, limit=400_000)
    assert first.exists() and not second.exists()


def test_the_cache_limit_is_an_environment_variable_checked_in_one_line(monkeypatch):
    monkeypatch.setenv(disk_cache.LIMIT_ENV, "64")
    assert disk_cache.limit_bytes() == 64 * 2**20
    monkeypatch.setenv(disk_cache.LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match=f"{disk_cache.LIMIT_ENV}=") as err:
        disk_cache.limit_bytes()
    assert "\n" not in str(err.value)


def test_a_new_kernel_prunes_the_cpu_backends_cache(tmp_path, monkeypatch):
    from gemm_course.run import cpu_backend

    cache = tmp_path / "cpu"
    stale = [_aged(cache / f"stale{i}.so", 400_000, 86_400 - i * 60) for i in range(5)]
    monkeypatch.setenv(cpu_backend.CACHE_ENV, str(cache))
    monkeypatch.setenv(disk_cache.LIMIT_ENV, "1")
    source = gc.kernel_source("01_naive") + f"\n// {time.time_ns()}\n"  # a new kernel: compiled, not found
    cpu_backend.compile_kernel(source, "gemm_naive_cols<32, 8>", race_check=False)
    _pruned_to_the_cap(cache, stale, 2**20)
    assert len(list(cache.glob("*.so"))) > sum(p.exists() for p in stale)  # the new kernel stays


def _pruned_to_the_cap(cache: Path, stale: list, limit: int) -> None:
    """The oldest went first, until the cache fits its cap (or only what was just used is left)."""
    left = [p for p in stale if p.exists()]
    assert left == stale[len(stale) - len(left):] and len(left) < len(stale)
    total = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    assert total <= limit or not left, (total, left)


def test_nvrtcs_cache_is_pruned_too(tmp_path, monkeypatch):
    from gemm_course.run import compile as comp

    pytest.importorskip("cupy")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = tmp_path / "gemm_course" / "nvrtc"
    stale = [_aged(cache / f"stale{i}.cubin", 400_000, 86_400 - i * 60) for i in range(5)]
    monkeypatch.setenv(disk_cache.LIMIT_ENV, "1")
    comp.nvrtc_compile(comp.kernel_source("01_naive") + f"\n// {time.time_ns()}\n", "gemm_naive_cols<32, 8>", "sm_90")
    _pruned_to_the_cap(cache, stale, 2**20)
    assert len(list(cache.glob("*.cubin"))) > sum(p.exists() for p in stale)  # the new kernel stays


def _one_line_error(call, *words: str) -> str:
    with pytest.raises(ValueError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text and all(w in text for w in words), text
    return text


def test_out_that_is_an_input_is_refused_in_one_line():
    A = np.ones((16, 16), np.float32)
    B = np.ones((16, 16), np.float32)
    _one_line_error(lambda: gc.gemm(A, B, out=A, backend="cpu"), "out", "A")
    _one_line_error(lambda: gc.gemm(A, B, out=B, backend="cpu"), "out", "B")
    buffer = np.ones((24, 16), np.float32)  # out overlaps half of A: a view into the same rows
    _one_line_error(lambda: gc.gemm(buffer[:16], B, out=buffer[8:], backend="cpu"), "out", "A")
    C = np.empty((16, 16), np.float32)
    assert np.allclose(gc.gemm(A, B, out=C, backend="cpu"), A @ B)  # a separate out, remembered ...
    _one_line_error(lambda: gc.gemm(A, B, out=A, backend="cpu"), "out", "A")  # ... and out=A still refused


def test_a_seed_or_alpha_of_the_wrong_kind_is_named():
    for seed in ("abc", -1, 2.5, True):
        _one_line_error(lambda: gc.check("01_naive", 16, 16, 16, seed=seed, backend="cpu"), "seed")
        _one_line_error(lambda: gc.random_operands(4, 4, 4, seed=seed), "seed")
    A, B = gc.random_operands(16, 16, 16, seed=1, xp=np)
    for name, value in (("alpha", "two"), ("beta", None), ("alpha", float("nan"))):
        _one_line_error(lambda: gc.gemm(A, B, level="06_fused_epilogue", backend="cpu", **{name: value}), name)
    from gemm_course.bilingual.language import chosen

    with chosen("zh"):
        text = _one_line_error(lambda: gc.random_operands(4, 4, 4, seed="abc"), "seed")
    assert "must" not in text and "整数" in text  # the reader chose Chinese: one language


def test_a_mistyped_exercise_id_gets_a_suggestion_everywhere():
    _one_line_error(lambda: gc.exercises.get_exercise("02_missing_barier"), "02_missing_barrier")
    _one_line_error(lambda: gc.exercises.grade("02_missing_barier", ""), "02_missing_barrier")
    from gemm_course.display import notebook

    _one_line_error(lambda: notebook.exercise("02_missing_barier"), "02_missing_barrier")


def test_the_how_to_run_page_states_the_cache_limit_the_code_uses():
    text = (ROOT / "book" / "how_to_run.md").read_text(encoding="utf-8")
    for sentence in ("once the cache passes {} MB", "缓存超过 {} MB 后"):
        assert sentence.format(disk_cache.DEFAULT_LIMIT_MB) in text, sentence
    assert text.count(disk_cache.LIMIT_ENV) == 2
