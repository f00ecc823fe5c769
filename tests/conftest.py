"""Test-session settings: graded attempts made by the tests (and by the notebooks nbval runs, whose kernels
inherit this environment) go to a throwaway progress file, not to the reader's own."""
import os
import signal
import tempfile

os.environ.setdefault("GEMM_COURSE_PROGRESS", os.path.join(tempfile.mkdtemp(prefix="gemm_course_tests_"), "progress.json"))

# The tests expect the package's own default language (both in Python, English on the command line): a Chinese
# locale of the machine running them would pick Chinese everywhere (gemm_course.bilingual.language), in the
# notebooks' kernels too. Tests of the language choice set GEMM_COURSE_LANG and the locale themselves.
for _name in ("LC_ALL", "LC_MESSAGES", "LANG"):
    if os.environ.get(_name, "").lower().startswith("zh"):
        os.environ[_name] = "C.UTF-8"

# A shell starts a background job (`pytest &`, nohup, some CI runners) with SIGINT ignored, and Python then
# keeps ignoring it: the Ctrl-C tests' own SIGINT would never arrive and a spinning kernel would run forever.
# Python's own handler back (it raises KeyboardInterrupt), in every xdist worker too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


import pytest  # noqa: E402


def show_into(monkeypatch, fn) -> None:
    """Every figure a display call shows goes to fn instead. Each display module took plots.show by name, so it
    is replaced in each of them."""
    import importlib
    import pkgutil

    import gemm_course.display as display
    from gemm_course.display import plots

    original = plots.show  # before plots' own name is replaced below
    for info in pkgutil.iter_modules(display.__path__):
        module = importlib.import_module(f"gemm_course.display.{info.name}")
        if getattr(module, "show", None) is original:
            monkeypatch.setattr(module, "show", fn)


@pytest.fixture
def capture_shown(monkeypatch):
    """capture_shown(fn): show_into for one test."""
    return lambda fn: show_into(monkeypatch, fn)
