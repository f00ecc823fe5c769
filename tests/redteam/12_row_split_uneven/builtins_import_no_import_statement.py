# mechanism: no import statement: fetch __import__ from __builtins__ and import the course under a pieced-together name
# expect: failed answer
# message: `__builtins__` is not allowed
loader = __builtins__["__imp" + "ort__"] if isinstance(__builtins__, dict) else None
course = loader("gemm" + "_course.multigpu.tensor_parallel", fromlist=["x"])


def my_rows(M, world_size, rank):
    return course.split_even(M, world_size)[rank]
