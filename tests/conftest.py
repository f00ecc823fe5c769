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

# One BLAS thread per process. The tests run one process per core (xdist) and each computes float64 references with
# NumPy's matrix product; OpenBLAS's own threads then wait for work by spinning, on cores the other workers need
# (perf over two gradings: 6.7% of all samples in its blas_thread_server). Set here, before any worker or notebook
# kernel starts, so that each inherits it; a value the runner sets itself is kept.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

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


# --- one execution, two uses: the notebooks nbval runs become the book's pages ---------------------------
#
# With GEMM_COURSE_EXECUTED_NOTEBOOKS=DIR, every notebook whose cells all pass under nbval is written to DIR
# with its outputs, as soon as its last cell is done; .ci/run builds the book from those (execution off) instead
# of executing every notebook a second time. The notebooks then run as the book build runs them: each with an
# empty progress file of its own and every output in both languages (book/_ext/bilingual.py does the same), and
# the cells the book does not execute (skip-execution, which nbval skips by its nbval-skip tag) left without output.

class _ExecutedNotebooks:
    def __init__(self, folder: str) -> None:
        from pathlib import Path

        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.failed: set = set()
        self.saved_env: dict = {}
        self.count: dict = {}

    @staticmethod
    def _notebook(item):
        return item.parent if hasattr(item, "cell") and hasattr(item.parent, "nb") else None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        nb = self._notebook(item)
        if nb is not None and nb.nodeid not in self.saved_env:  # before its kernel starts (the parent's setup)
            self.saved_env[nb.nodeid] = {k: os.environ.get(k) for k in ("GEMM_COURSE_PROGRESS", "GEMM_COURSE_LANG")}
            os.environ["GEMM_COURSE_PROGRESS"] = os.path.join(tempfile.mkdtemp(prefix="gemm_course_nb_"), "progress.json")
            os.environ["GEMM_COURSE_LANG"] = "both"
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        nb = self._notebook(item)
        if nb is None:
            return
        report = outcome.get_result()
        if report.failed:
            self.failed.add(nb.nodeid)
        if call.when == "call" and report.passed and getattr(item, "test_outputs", None) is not None:
            n = self.count[nb.nodeid] = self.count.get(nb.nodeid, 0) + 1
            item.cell.outputs = list(item.test_outputs)
            item.cell.execution_count = n
            for output in item.cell.outputs:
                if output.get("output_type") == "execute_result":
                    output["execution_count"] = n

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        yield
        nb = self._notebook(item)
        if nb is None or (nextitem is not None and nextitem.parent is nb):
            return  # not the notebook's last cell
        for k, v in self.saved_env.pop(nb.nodeid, {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if nb.nodeid not in self.failed:
            import nbformat

            target = self.folder / os.path.basename(str(nb.fspath))
            partial = target.with_suffix(".partial")
            nbformat.write(nb.nb, str(partial))
            os.replace(partial, target)  # whole or absent: the book build waits for it


def pytest_configure(config) -> None:
    folder = os.environ.get("GEMM_COURSE_EXECUTED_NOTEBOOKS")
    if folder and not config.pluginmanager.has_plugin("gemm_course_executed_notebooks"):
        config.pluginmanager.register(_ExecutedNotebooks(folder), "gemm_course_executed_notebooks")


@pytest.fixture(autouse=True)
def _language_choice_restored():
    """Each test starts from the language choice the session started with: a test (or a command line run in this
    process with --en / --zh) that chooses one must not change what a later test on the same worker prints."""
    from gemm_course.bilingual import language as bilingual

    before = bilingual._choice
    yield
    bilingual._choice = before
