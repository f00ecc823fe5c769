# mechanism: build the forbidden code as text and run it with exec, so no import statement appears
# expect: failed answer
# message: `exec` is not allowed
code = "im" + "port os; os._exit(0)"
exec(code)


def overlapped_seconds(compute_s, comm_s):
    return sum(compute_s) + sum(comm_s)
