"""Test-session settings: graded attempts made by the tests (and by the notebooks nbval runs, whose kernels
inherit this environment) go to a throwaway progress file, not to the reader's own."""
import os
import signal
import tempfile

os.environ.setdefault("GEMM_COURSE_PROGRESS", os.path.join(tempfile.mkdtemp(prefix="gemm_course_tests_"), "progress.json"))

# A shell starts a background job (`pytest &`, nohup, some CI runners) with SIGINT ignored, and Python then
# keeps ignoring it: the Ctrl-C tests' own SIGINT would never arrive and a spinning kernel would run forever.
# Python's own handler back (it raises KeyboardInterrupt), in every xdist worker too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
