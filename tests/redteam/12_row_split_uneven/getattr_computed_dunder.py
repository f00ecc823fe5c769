# mechanism: reach the function's globals and builtins through getattr with a name computed at run time
# expect: failed answer
# message: getattr() with a name computed at run time is not allowed
def my_rows(M, world_size, rank):
    base, extra = divmod(M, world_size)
    first = rank * base + min(rank, extra)
    return first, first + base + (1 if rank < extra else 0)


name = "__glob" + "als__"
leaked = getattr(my_rows, name)
