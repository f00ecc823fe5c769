# mechanism: a right answer that also prints a fake failing JSON line: printed text is never read, so it is still solved
# expect: solved
import math

print('{"results": [], "load_error": "fake"}')


def my_rows(M, world_size, rank):
    base, extra = divmod(M, world_size)
    first = rank * base + min(rank, extra)
    return first, first + base + (1 if rank < extra else 0) + 0 * math.floor(0.5)
