# mechanism: print a result line in the old child's JSON form, then leave with os._exit(0) before the grader's own line
# expect: failed answer
# message: is not allowed: an answer may import only math
import json
import os

print(json.dumps({"results": [0.001] * 33}))
os._exit(0)


def overlapped_seconds(compute_s, comm_s):
    return sum(compute_s) + sum(comm_s)
