# mechanism: climb from a running generator's frame to the grader's frame (gi_frame.f_back.f_globals) to write a result of its own
# expect: failed answer
# message: is not allowed: it reaches Python's internals
def _climb():
    yield me.gi_frame.f_back


me = _climb()


def my_rows(M, world_size, rank):
    grader = next(me).f_globals
    return 0, M
