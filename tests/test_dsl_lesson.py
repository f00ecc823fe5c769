"""Level 14's page (gemm_course.dsl.lesson, notebooks/14_triton_gluon.ipynb) and exercises, beside tests/test_dsl.py:

* the page's cells run where triton cannot be imported: one line says what to install, the recorded run (or the
  line saying there is none) follows, no traceback; the exercises say "not verified" there;
* once a recorded run is named (lesson.RECORD_FILE), it must be committed, be a Level 14 record and hold what the
  page quotes (until then the test says so and skips);
* the page's chart, its one number and the full table on a synthetic record made here (never committed);
* the support matrix's Level 14 row, the prediction's PTX counting, and the child of the tile-loop exercise.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "14_triton_gluon.ipynb"


def _synthetic_record(path: Path) -> None:
    """A record in the shape `dsl --record` writes, with made-up numbers that only these tests read."""
    rows = []
    for dtype, entries in (("float32", (("cublas", {}, 1.0), ("08_warp_tiling", {}, 0.5),
                                        ("triton_tiled", {"BM": 128, "BN": 128, "BK": 16, "num_stages": 3}, 0.25))),
                           ("bfloat16", (("cublas", {}, 1.0), ("10_mma_pipeline", {}, 0.4),
                                         ("triton_tiled", {"BM": 128, "BN": 128, "BK": 32, "num_stages": 4}, 0.6),
                                         ("gluon", {"BM": 128, "BN": 256, "BK": 64, "stages": 3, "c_type": "input"},
                                          0.8)))):
        for kernel, setting, ratio in entries:
            tflops = 100.0 * ratio
            rows.append({"dtype": dtype, "M": 8192, "N": 8192, "K": 8192, "kernel": kernel, "setting": setting,
                         "c_type": dtype if kernel == "cublas" or setting.get("c_type") == "input" else "float32",
                         "median_ms": 11.0 / tflops, "tflops": tflops, "ratio_to_cublas": ratio,
                         "sm_clock_mhz": 1000.0})
    rows.append({"dtype": "bfloat16", "M": 8192, "N": 8192, "K": 8192, "kernel": "triton_hopper",
                 "setting": {"BM": 128}, "c_type": "float32", "skipped": "needs a Hopper GPU (sm_90)"})
    checks = [{"kernel": "triton_tiled", "setting": {}, "dtype": "float32", "M": 1, "N": 1, "K": 1, "passed": True},
              {"kernel": "gluon", "setting": {}, "dtype": "bfloat16", "M": 1, "N": 8, "K": 8, "passed": True}]
    path.write_text(json.dumps({"schema": 1, "provenance": {"gpu": "synthetic GPU", "date": "2000-01-02T00:00:00"},
                                "records": [], "dsl_records": rows, "dsl_checks": checks}), encoding="utf-8")


def _lesson_cells() -> list[str]:
    """The page's code cells as the book runs them: every cell but those tagged skip-execution."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"
            and "skip-execution" not in c["metadata"].get("tags", [])]


# --- without triton -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("with_record", [False, True], ids=["no record", "a record"])
def test_the_page_runs_without_triton(tmp_path, with_record):
    """Every cell the book runs, in a Python where triton cannot be imported: one line says what to install, the
    recorded run (or the line saying there is none) follows, and nothing raises."""
    results = tmp_path / "results"
    results.mkdir()
    record = None
    if with_record:
        record = "synthetic_14_dsl.json"
        _synthetic_record(results / record)
    script = textwrap.dedent(f"""
        import sys
        sys.modules["triton"] = None  # as if it were not installed
        import gemm_course.measure.results as results
        results.RESULTS_DIR = __import__("pathlib").Path({str(results)!r})
        from gemm_course.dsl import lesson
        lesson.RECORD_FILE = {record!r}
        cells = {_lesson_cells()!r}
        namespace = {{}}
        for cell in cells:
            if cell.startswith("from gemm_course.dsl import lesson"):
                cell = cell.replace("from gemm_course.dsl import lesson", "lesson = sys.modules['gemm_course.dsl.lesson']")
            exec(compile(cell, "cell", "exec"), namespace)
        assert "triton" not in [m for m in sys.modules if sys.modules[m] is not None], "triton imported"
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "GEMM_COURSE_LANG": "en", "HOME": str(tmp_path),
                               "GEMM_COURSE_PROGRESS": str(tmp_path / "progress.json")})
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "Traceback" not in out + done.stderr
    assert "needs triton, which is not installed here: pip install triton==3.6.0" in out
    if with_record:
        assert "The recorded run (synthetic_14_dsl.json, synthetic GPU, 2000-01-02) checked gluon, triton_tiled" in out
        assert "The tiled Triton kernel: 60.0 TFLOPS, 60% of cuBLAS; Level 10" in out
    else:
        assert out.count("No recorded GPU run of this level ships with the course yet") >= 3  # run, chart, table


def test_the_exercises_say_not_verified_without_triton():
    script = textwrap.dedent("""
        import sys
        sys.modules["triton"] = None
        from gemm_course import exercises as ex
        for e in ("14_triton_tile_loop", "14_predict_triton_config"):
            v = ex.grade(e, ex.get_exercise(e).solution, seed=1)
            print(v.status, [s.name for s in v.steps if s.passed is None])
            print(v.text("en").splitlines()[1])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "not_verified ['triton', 'dot']" and "needs triton, which is not installed here" in lines[1]
    assert lines[2].startswith("not_verified ['threads_per_block'") and "predictions read" in lines[3]


# --- the recorded run -----------------------------------------------------------------------------------------

def test_the_named_record_is_committed_and_holds_what_the_page_quotes():
    """Set lesson.RECORD_FILE when the record is committed; from then on this fails if the file is missing."""
    from gemm_course.dsl import lesson
    from gemm_course.dsl.record import read_checks, read_record

    if lesson.RECORD_FILE is None:
        pytest.skip("no Level 14 record yet: set gemm_course.dsl.lesson.RECORD_FILE when it is committed")
    path = lesson.record_path()
    assert path is not None and path.is_file(), f"gemm_course/results/{lesson.RECORD_FILE} is named but not there"
    rows = read_record(path)
    assert read_checks(path) and all(c["passed"] for c in read_checks(path))
    M, N, K = lesson.HEADLINE_SHAPE
    timed = {r["kernel"] for r in rows if (r["M"], r["N"], r["K"]) == (M, N, K) and r["dtype"] == "bfloat16"
             and r["status"] == "timed"}
    assert {"triton_tiled", "10_mma_pipeline"} <= timed, timed


def test_chart_number_and_table_from_a_record(tmp_path, capture_shown):
    from gemm_course.bilingual.text import Bilingual
    from gemm_course.dsl import lesson

    path = tmp_path / "synthetic_14_dsl.json"
    _synthetic_record(path)
    figures = []
    capture_shown(figures.append)
    said = []
    import gemm_course.dsl.lesson as module

    original = module.say
    module.say = lambda en, zh: said.append((en, zh))
    try:
        rows = lesson.record_chart(path)
    finally:
        module.say = original
    assert len(figures) == 1 and [r["kernel"] for r in rows] == ["10_mma_pipeline", "triton_tiled", "gluon"]
    bars = figures[0].data[0]
    assert list(bars.y) == [40.0, 60.0, 80.0] and list(figures[0].data[1].y) == pytest.approx([100.0] * 3)
    (en, zh), = said
    assert en == ("The tiled Triton kernel: 60.0 TFLOPS, 60% of cuBLAS; Level 10, written by hand in CUDA C: 40.0 "
                  "TFLOPS, 40% of cuBLAS.") and "60.0 TFLOPS" in zh and "第 10 级" in zh
    table = lesson.record_table(path)
    text = table.text()
    assert "Triton 128×128×16/3" in text and "25.0%" in text and "needs a Hopper GPU" in text
    assert isinstance(table.caption, Bilingual) and "2 run, 0 failed" in table.caption.en


def test_the_counters_table_from_a_counters_file(tmp_path):
    """dsl.counters' file shown as the Deeper section's table: each target's label and its metrics in the page's units;
    a missing metric is a dash; no file, one line."""
    from gemm_course.bilingual.text import Bilingual
    from gemm_course.dsl import counters, lesson

    rows = [{"kernel": k, "setting": s, "dtype": "bfloat16", "M": 8192, "N": 8192, "K": 8192, "kernels": ["k"],
             "metrics": {"duration_ns": 1.5e6, "sm_clock_hz": 1.6e9, "instructions": 12.34e6, "tensor_pipe_pct": 80.25,
                         "global_store_requests": 131072.0, "l2_read_sectors": None}} for k, s in counters.TARGETS]
    path = tmp_path / "synthetic_14_dsl_counters.json"
    path.write_text(json.dumps({"schema": 1, "provenance": {"gpu": "synthetic GPU", "date": "2000-01-02T00:00:00"},
                                counters.COUNTERS_KEY: rows}), encoding="utf-8")
    table = lesson.counters_table(path)
    text = table.text()
    assert len(table.rows) == len(counters.TARGETS) and "Triton TMA 128×256×64/3, bf16 C" in text and "cuBLAS" in text
    assert table.rows[0][1:6] == ["1500", "1600", "12.3", "80.2%", "—"] and table.rows[0][6] == "131"
    assert isinstance(table.caption, Bilingual) and "synthetic GPU" in table.caption.en and "8192×8192×8192" in table.caption.zh
    assert lesson.counters_table(tmp_path / "missing.json") is None


def test_line_maps_and_sources_need_no_triton():
    from gemm_course.dsl import lesson

    for name in ("tiled", "hopper", "gluon"):
        fold = lesson.kernel(name)
        assert "def " in fold.text() and fold.summary.en.startswith("Source: ")
        assert len(lesson.line_map(name).rows) >= 5


# --- the support matrix and the prediction's measures -------------------------------------------------------

def test_level_14_in_the_support_matrix():
    from gemm_course import support

    assert support.all_levels()[-1] == "14_triton_gluon"
    assert support.support(14, "sm_90").status == "live"
    for arch in ("sm_80", "sm_89", "sm_100", "sm_120"):
        s = support.support("14_triton_gluon", arch)
        assert s.status == "fallback" and "tiled Triton kernel runs" in s.en and "分块 Triton 内核" in s.zh
    assert "bf16 needs sm_80" in support.support("dsl", "sm_75").en


def test_the_prediction_reads_the_ptx():
    from gemm_course.exercises.triton_answers import cuda_level, stored_values_per_thread

    ptx = ("@%p1 st.global.v4.b32 [%rd1], {%r1, %r2, %r3, %r4};\n st.global.v2.f32 [%rd2], {%f1, %f2};\n"
           " st.global.b32 [%rd3], %r5;\n ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd4];")
    assert stored_values_per_thread(ptx) == 7
    assert cuda_level({"wgmma.mma_async": 4, "mma.sync": 0}) == 11 and cuda_level({"mma.sync": 8}) == 10
    assert cuda_level({"fma.rn.f32": 100}) == 8


# --- the tile loop's child ----------------------------------------------------------------------------------

def test_the_tile_loops_child_imports_only_triton():
    """Past the screen (called here directly), the answer runs in a child whose builtins import only triton and
    open no file: the course cannot be imported, nor a file of it read through a module triton imported."""
    pytest.importorskip("triton", reason="Level 14's exercises need triton: pip install -e .[triton]")
    import numpy as np

    from gemm_course.dsl.checking import guarded_problem
    from gemm_course.exercises import get_exercise, triton_answers
    from gemm_course.exercises.grade import Attempt

    source = textwrap.dedent(f"""
        import triton
        import triton.knobs as knobs
        outcome = []
        for attempt in (lambda: __import__("gemm" + "_course"), lambda: open({str(REPO / 'README.md')!r})):
            try:
                attempt()
                outcome.append("REACHED")
            except Exception as error:
                outcome.append(type(error).__name__)
        raise RuntimeError(" ".join(outcome))
    """)
    p = guarded_problem(1, 1, 1, "float32", "float32", 1, np)
    attempt = Attempt(get_exercise("14_triton_tile_loop"), source, "probe.py", 1)
    answer = triton_answers._in_child(attempt, [{"M": 1, "N": 1, "K": 1, "setting": dict(triton_answers.SETTINGS[0]),
                                                 "guard": p.guard}], [b.tobytes() for b in p.buffers])
    assert answer["load_error"] == "RuntimeError: ImportError NameError", answer
