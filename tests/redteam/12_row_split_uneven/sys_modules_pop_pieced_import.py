# mechanism: undo the sys.modules["gemm_course"] = None guard, then import the course under a name built in pieces and use its split
# expect: failed answer
# message: `import sys` is not allowed
import sys

sys.modules.pop("gemm" + "_course", None)
course = __import__("gemm" + "_course.multigpu.tensor_parallel", fromlist=["x"])


def my_rows(M, world_size, rank):
    return course.split_even(M, world_size)[rank]
