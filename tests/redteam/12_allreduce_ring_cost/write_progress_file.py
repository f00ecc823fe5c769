# mechanism: write a "solved" row into the learner's progress file from inside the answer
# expect: failed answer
# message: is not allowed: an answer may import only math
import json
import os

path = os.environ.get("GEMM_COURSE_PROGRESS", os.path.expanduser("~/.local/state/gemm_course/progress.json"))
with open(path, "w") as f:
    json.dump({"12_allreduce_ring_cost": {"best": "solved", "last": "solved", "attempts": 1}}, f)


def ring_all_reduce_seconds(n_bytes, P, alpha, beta):
    return 0.0
