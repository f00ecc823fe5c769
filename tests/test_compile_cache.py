"""NVRTC's results are kept on disk: the book's pages and the tests (separate processes) compile a kernel once."""
from gemm_course.run import compile as comp


def test_a_kernel_compiles_once_across_processes_and_a_changed_source_compiles_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    real = comp._nvrtc_compile
    monkeypatch.setattr(comp, "_nvrtc_compile", lambda *a: calls.append(a) or real(*a))
    source = comp.kernel_source("01_naive")
    name, arch = "gemm_naive_cols<32, 8>", "sm_90"
    first = comp.nvrtc_compile(source, name, arch)
    again = comp.nvrtc_compile(source, name, arch)  # what another process finds on disk
    assert len(calls) == 1 and again == first and first[0][:4] == b"\x7fELF"
    assert list(comp.nvrtc_cache_dir().glob("*.cubin")) and comp.nvrtc_cache_dir().is_relative_to(tmp_path)
    comp.nvrtc_compile(source + "\n// changed\n", name, arch)
    comp.nvrtc_compile(source, name, "sm_80")
    assert len(calls) == 3


def test_an_unwritable_cache_only_costs_the_compile(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    cubin, mangled, log = comp.nvrtc_compile(comp.kernel_source("01_naive"), "gemm_naive_cols<32, 8>", "sm_90")
    assert cubin and "gemm_naive_cols" in mangled
