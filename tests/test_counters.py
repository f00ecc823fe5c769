"""The counter layer: the recorded Nsight Compute file, its reader, the ncu CSV parser and the command
line. No GPU needed: recording is tested on the GPU machine by running it (see results/README.md)."""
import json
import subprocess
import sys

import pytest

from gemm_course.measure import counters, predictions, results
from gemm_course.levels import get_level, levels

RECORDED = results.RESULTS_DIR / "h200_counters.json"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gemm_course", *args], capture_output=True, text=True, timeout=300)


def test_every_showcase_and_experiment_setting_has_counters_with_provenance():
    data = results.load(RECORDED)
    prov = data["provenance"]
    for key in ("gpu", "ncu", "metrics", "clock_control", "command", "method", "date"):
        assert prov.get(key), key
    assert prov["clock_control"] == "none" and "--clock-control none" in prov["method"]
    for lv in levels():
        for s in (*lv.showcase, *lv.experiments):
            row = counters.find(lv.id, **s)
            assert row["M"] == row["N"] == row["K"] == counters.COUNTER_SIZE
            assert row["metrics"]["duration_ns"] > 0 and row["metrics"]["instructions"] > 0
    for dtype in ("float32", "float16", "bfloat16"):
        assert counters.find("cublas", dtype=dtype)["metrics"]["duration_ns"] > 0
    for part in counters.LEVEL_10_PARTS:
        assert counters.find("10_mma_pipeline", part=part, stages=4, BN=256)


def test_find_takes_the_newest_record_of_a_setting(monkeypatch):
    # The rule, on made-up rows: the latest provenance date wins, whatever the file order; ties keep file order.
    def row(name, date, value):
        return {"level": "cublas", "dtype": "float32", "params": {}, "file": name, "metrics": {"x": value},
                "provenance": {"date": date}}
    rows = [row("a.json", "2026-11-30T20:14:26+00:00", 1), row("b.json", "2026-12-02T16:33:20+00:00", 2),
            row("c.json", "2026-12-01T10:00:00+00:00", 3), row("d.json", "2026-12-02T16:33:20+00:00", 4)]
    monkeypatch.setattr(counters, "recorded", lambda level=None: rows)
    assert counters.find("cublas", dtype="float32")["file"] == "b.json"
    assert [r["file"] for r in counters.current(rows + [{**rows[0], "dtype": "float16"}])] == ["b.json", "a.json"]
    monkeypatch.undo()
    # The shipped files: Level 8, re-recorded after its last edit, and the same run's cuBLAS fp32 come from the
    # newest file; Levels 9-11 (every setting, Level 10's parts too) and cuBLAS fp16/bf16 from the file recorded
    # after their kernels' last edits; every other level's rows are held by one file only, so the rule leaves them.
    newest = "h200_counters_08_warp_tiling.json"
    tensor_core = "h200_counters_09_11.json"
    lv = get_level("08_warp_tiling")
    for s in (*lv.showcase, *lv.experiments):
        assert counters.find(lv.id, **s)["file"] == newest, s
    assert counters.find("cublas", dtype="float32")["file"] == newest
    for level in ("09_wmma", "10_mma_pipeline", "11_hopper_wgmma"):
        rows = [r for r in counters.table_rows(level) if r["level"] == level]
        # Level 11's step 7 came after: its two settings have a file of their own (counters --missing-only)
        later = [r for r in rows if r["params"].get("step") == 7]
        assert {r["file"] for r in later} == ({"h200_counters_11_stream_k.json"} if later else set()), level
        assert len(later) == (2 if level == "11_hopper_wgmma" else 0), level
        assert {r["file"] for r in rows if r not in later} == {tensor_core}, level
    assert {counters.find("cublas", dtype=d)["file"] for d in ("float16", "bfloat16")} == {tensor_core}
    seen: dict = {}
    for r in counters.recorded():
        key = (r["level"], json.dumps(r["params"], sort_keys=True), r.get("part"), r["dtype"])
        seen.setdefault(key, set()).add(r["file"])
    twice = {k for k, files in seen.items() if len(files) > 1}
    shown = [(r["level"], json.dumps(r["params"], sort_keys=True), r["part"], r["dtype"]) for r in counters.table_rows()]
    assert len(shown) == len(set(shown)) == len(seen)  # the command line's table: each setting once, its newest record
    assert {r["file"] for r in counters.table_rows("08_warp_tiling") if r["dtype"] == "float32"} == {newest}
    assert twice and all(k[0] in ("08_warp_tiling", "09_wmma", "10_mma_pipeline", "11_hopper_wgmma") or k[0] == "cublas"
                         for k in twice)


def test_recorded_metric_names_are_the_documented_ones():
    chosen = results.load(RECORDED)["provenance"]["metrics"]
    for key, name in chosen.items():
        assert name in counters.METRIC_BY_KEY[key].names


def test_counters_agree_with_what_the_kernels_must_do():
    """Sanity that cannot hold for garbage: exact counts the source code fixes."""
    n = counters.COUNTER_SIZE
    naive = counters.find("01_naive", mapping="cols")["metrics"]
    # one load of A and one of B per multiply-add and per warp: 2·n³/32 load instructions
    assert naive["global_load_requests"] == 2 * n**3 // 32
    # every thread writes its one element of C once: n²/32 store instructions of 4 sectors each
    assert naive["global_store_requests"] == n * n // 32
    assert counters.derived(naive)["sectors_per_store_request"] == 4
    coalesced = counters.derived(counters.find("03_coalescing_banks")["metrics"])
    strided = counters.derived(counters.find("03_coalescing_banks", load="strided")["metrics"])
    assert coalesced["sectors_per_load_request"] == 4 and strided["sectors_per_load_request"] == 32


def test_derived_and_top_stalls():
    m = {"global_load_sectors": 64.0, "global_load_requests": 4.0, "shared_load_wavefronts": 3.0,
         "shared_load_instructions": 0.0, "sm_clock_hz": 1.98e9, "l2_read_sectors": 2.0,
         "stall_barrier": 2.0, "stall_selected": 9.0, "stall_wait": 1.0, "stall_mio_throttle": 5.0}
    d = counters.derived(m)
    assert d["sectors_per_load_request"] == 16 and d["wavefronts_per_shared_load"] is None
    assert d["sm_clock_mhz"] == pytest.approx(1980) and d["l2_read_bytes"] == 64
    assert counters.top_stalls(m, 2) == [("mio_throttle", 5.0), ("barrier", 2.0)]


NCU_CSV = '''==PROF== Connected to process 123
some program output
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
"","","","","","","","","","","","nsecond","sector"
"0","123","python3","h","void gemm_smem_tiled<32>(const float *, const float *, float *, int, int, int)","1","7","(32, 32, 1)","(128, 128, 1)","0","9.0","1,234,567","536870912"
"1","123","python3","h","k2","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","10","n/a"
'''


def test_parse_ncu_csv_skips_program_output_and_units():
    rows = counters.parse_ncu_csv(NCU_CSV)
    assert [r["kernel"].split("(")[0] for r in rows] == ["void gemm_smem_tiled<32>", "k2"]
    assert rows[0]["values"]["gpu__time_duration.sum"] == 1234567
    assert rows[1]["values"]["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] is None
    assert counters.parse_ncu_csv("no csv here") == []


def test_choose_metrics_takes_the_first_offered_name():
    tensor = counters.METRIC_BY_KEY["tensor_pipe_pct"]
    offered = {tensor.names[1].split(".")[0], "smsp__inst_executed"}
    chosen = counters.choose_metrics(offered)
    assert chosen == {"tensor_pipe_pct": tensor.names[1], "instructions": "smsp__inst_executed.sum"}


def test_targets_cover_each_level_then_cublas_per_input_type():
    groups = counters.default_targets()
    assert [g[0].level for g in groups[:len(levels())]] == [lv.id for lv in levels()]
    assert [(g[0].level, g[0].dtype) for g in groups[len(levels()):]] == [
        ("cublas", "float32"), ("cublas", "float16"), ("cublas", "bfloat16")]
    assert len(groups[2]) == len(get_level(3).showcase) + len(get_level(3).experiments)


def test_predictions_beside_counters():
    rows = predictions.compare("02_smem_tiling")
    by_key = {r["key"]: r for r in rows}
    assert by_key["dram_read_bytes"]["predicted"] == 4 * 2 * 4096 * 4096
    assert by_key["dram_read_bytes"]["measured"] >= by_key["dram_read_bytes"]["predicted"]
    for r in rows:
        assert r["why_en"] and r["why_zh"]


def test_command_line_table_json_and_errors():
    table = _cli("counters", "--level", "3")
    assert table.returncode == 0 and "load=strided" in table.stdout and "recorded on NVIDIA H200" in table.stdout
    rows = json.loads(_cli("counters", "--json").stdout)
    assert {"level", "params", "metrics", "provenance"} <= set(rows[0])
    assert {r["level"] for r in rows} == {lv.id for lv in levels()} | {"cublas"}
    for args in (("counters", "--level", "bogus"), ("counters", "--record")):
        bad = _cli(*args)
        assert bad.returncode != 0 and "Traceback" not in bad.stderr and bad.stderr.strip()


def test_promotion_counters_assign_each_library_call_its_own_kernels() -> None:
    """A plan over two shapes has a cuBLASLt target per shape: each takes the kernels up to the next course
    kernel (a library call may launch helpers), and a profile that lost a course kernel is refused."""
    from gemm_course.measure import ncu_probes

    targets = [{"kind": "fp8"}, {"kind": "cublaslt_blockwise"}, {"kind": "fp8"}, {"kind": "fp8"},
               {"kind": "cublaslt_blockwise"}]
    names = ["void fp8_gemm_blockwise<7, 1, 0>(x)", "nvjet_a", "helper", "void fp8_gemm_blockwise_m64<9>(x)",
             "void fp8_gemm_blockwise_m64<9, 1>(x)", "nvjet_b"]
    rows = [{"kernel": n} for n in names]
    got = [[r["kernel"] for r in group] for group in ncu_probes._assign(targets, rows)]
    assert got == [names[:1], names[1:3], names[3:4], names[4:5], names[5:]]
    with pytest.raises(RuntimeError, match="do not match"):
        ncu_probes._assign(targets, rows[:3] + rows[4:])
