# mechanism: read the course's own model (collectives.py) by its path and copy the formula out of it
# expect: failed answer
# message: `open` is not allowed
source = open("/work/main/gemm_course/multigpu/collectives.py").read()


def ring_all_reduce_seconds(n_bytes, P, alpha, beta):
    return 0.0 if "ring" in source else 1.0
