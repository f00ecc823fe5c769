"""The child process that runs a learner's compiled kernel for the grader (see native.py).

It first gives up writing files (child_prelude.restrict_filesystem), then answers framed requests on its
standard input over the result pipe:

    {"op": "load", "path", "kernel", "source_name", "race_check"}   -> {"id", "parameters"}
    {"op": "launch", "id", "grid", "block", "dynamic_shared_bytes", "args", "names", "timeout_s",
     "profile", "profile_blocks", "block_order_seed"} + the arrays
                                                 -> {"outputs": [argument index, ...], "log": {...} | null}
                                                    + the written arrays (and the access records)
    any failure                                  -> {"error": {"type", "en", "zh", "text", "attrs"}}

Run as `python -I -m gemm_course.exercises.native_child` (or -c with the course's folder put on sys.path).
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from gemm_course.exercises.child_prelude import read_message, restrict_filesystem, result_stream, write_message
from gemm_course.levels import Launch
from gemm_course.run import cpu_backend as cb


def _plain(value: Any) -> Any:
    """An exception attribute as JSON can carry it."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _error(err: BaseException) -> dict:
    attrs = {k: _plain(v) for k, v in vars(err).items() if k not in ("en", "zh")}
    return {"error": {"type": type(err).__name__, "en": getattr(err, "en", str(err)), "zh": getattr(err, "zh", ""),
                      "text": str(err), "attrs": attrs}}


def _arguments(specs: list, blobs: list[bytes]) -> list[Any]:
    args: list[Any] = []
    for spec in specs:
        if "array" in spec:
            args.append(np.frombuffer(blobs[spec["array"]], dtype=spec["dtype"]).reshape(spec["shape"]).copy())
        elif spec.get("none"):
            args.append(None)
        else:
            args.append(spec["scalar"])
    return args


def _launch(kernel: cb.CpuKernel, request: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
    args = _arguments(request["args"], blobs)
    launch = Launch(tuple(request["grid"]), tuple(request["block"]), int(request["dynamic_shared_bytes"]))
    blocks = [tuple(b) for b in request["profile_blocks"]] if request.get("profile_blocks") else None
    log = kernel.launch(launch, args, names=request["names"], timeout_s=request["timeout_s"],
                        profile=bool(request["profile"]), profile_blocks=blocks,
                        block_order_seed=int(request.get("block_order_seed", 0)))
    outputs = [i for i, (ctype, arg) in enumerate(zip(kernel.parameters, args))
               if isinstance(arg, np.ndarray) and not ctype.startswith("const ")]
    answer: dict[str, Any] = {"outputs": outputs, "log": None}
    out_blobs = [args[i].tobytes() for i in outputs]
    if log is not None:
        records = log.records.copy()
        pcs, which = np.unique(records["pc"], return_inverse=True)
        # library offsets: the parent has no library
        records["pc"] = np.array([kernel.code_offset(int(pc)) for pc in pcs], dtype=np.uint64)[which.ravel()]
        answer["log"] = {"arrays": {k: list(v) for k, v in log.arrays.items()}, "truncated": log.truncated,
                         "blocks": [list(b) for b in log.blocks], "intervals": list(log.intervals),
                         "shapes": {k: list(v) for k, v in log.shapes.items()}}
        out_blobs.append(records.tobytes())
    return answer, out_blobs


def main() -> None:
    results = result_stream()
    restrict_filesystem()  # from here on no file can be written by this process, whatever it runs
    kernels: dict[int, cb.CpuKernel] = {}
    read = sys.stdin.buffer.read
    while True:
        try:
            request, blobs = read_message(read)
        except EOFError:
            return
        try:
            if request["op"] == "load":
                kernel = cb.CpuKernel(cb.Path(request["path"]), request["kernel"], request["source_name"],
                                      bool(request["race_check"]))
                kernels[len(kernels)] = kernel
                answer, out = {"id": len(kernels) - 1, "parameters": list(kernel.parameters)}, []
            else:
                answer, out = _launch(kernels[int(request["id"])], request, blobs)
        except (cb.CpuBackendError, TypeError, ValueError, OverflowError, MemoryError, KeyError) as err:
            answer, out = _error(err), []
        write_message(results, answer, out)


if __name__ == "__main__":
    main()
