# mechanism: put the course's folder on sys.path and import the package with importlib, its name built in pieces
# expect: failed answer
# message: `import importlib` is not allowed
import importlib
import sys

sys.path.insert(0, "/work/main")
split = importlib.import_module("gemm" + "_course.multigpu.tensor_parallel")


def my_rows(M, world_size, rank):
    return split.split_even(M, world_size)[rank]
