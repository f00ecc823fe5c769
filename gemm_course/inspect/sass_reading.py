"""Reading a SASS listing the way the cheat sheet (book/sass_cheatsheet.md) does, with no GPU.

`sass.disassemble` gives the text and `sass.instruction_mix` counts every opcode in it. Reading it
well takes three more steps, which these helpers do:

- `main_loop`: the instructions of the loop that holds the arithmetic (most FFMA, HMMA or HGMMA),
  found from its backward branch (`@!P0 BRA `(.L_x_1)` jumps back to the label `.L_x_1:`);
- `mix`: the opcode counts, by default without the instructions predicated `@!PT` ("if not
  true"), which are issued but never do anything (the compiler pads `cp.async` groups with them);
- `chained_ffma`: how many FFMA need the result of the FFMA just before them (a dependency chain,
  which one warp cannot overlap), against independent ones (instruction-level parallelism).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?"
                          r"([A-Z][A-Z0-9_.]*(?:x\d+x\d+[A-Z0-9_.]*)?)\s*([^;]*);")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
ARITHMETIC = ("FFMA", "HMMA", "HGMMA")


@dataclass(frozen=True)
class Instruction:
    address: int
    predicate: str  # "" or e.g. "@P0", "@!P1", "@!PT"
    opcode: str     # with its modifiers, e.g. "LDS.128"
    operands: tuple[str, ...]

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def predicated_off(self) -> bool:
        """Predicated on "not true" (`@!PT`): issued, but it never does anything."""
        return self.predicate == "@!PT"

    def __str__(self) -> str:
        pred = f"{self.predicate} " if self.predicate else ""
        args = f" {', '.join(self.operands)}" if self.operands else ""
        return f"/*{self.address:04x}*/ {pred}{self.opcode}{args} ;"


def _parse(sass: str) -> tuple[list[Instruction], dict[str, int]]:
    """The instructions in order, and each label's position (the index of the instruction after it)."""
    out: list[Instruction] = []
    labels: dict[str, int] = {}
    for line in sass.splitlines():
        label = _LABEL.match(line)
        if label:
            labels[label.group(1)] = len(out)
            continue
        m = _INSTRUCTION.search(line)
        if m:
            operands = tuple(o.strip() for o in m.group(4).split(",") if o.strip())
            out.append(Instruction(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), operands))
    return out, labels


def ptx(level: str, arch: str = "sm_90", **params: Any) -> str:
    """The PTX NVRTC makes from a level's kernel (before ptxas turns it into SASS), for comparison."""
    from cupy.cuda import nvrtc

    from gemm_course.run.compile import compile_options, kernel_source
    from gemm_course.levels import get_level

    lv = get_level(level)
    name = lv.kernel_name(lv.resolve(**params))
    program = nvrtc.createProgram(kernel_source(lv), name.split("<")[0] + ".cu", [], [])
    try:
        nvrtc.addNameExpression(program, name)
        nvrtc.compileProgram(program, [*compile_options(lv), f"-arch=compute_{(lv.build_arch or arch)[3:]}"])
        text = nvrtc.getPTX(program)
    finally:
        nvrtc.destroyProgram(program)
    return text.decode() if isinstance(text, bytes) else text


def instructions(sass: str) -> list[Instruction]:
    """Every instruction of a listing, in program order."""
    return _parse(sass)[0]


def loops(sass: str) -> list[list[Instruction]]:
    """Each loop of the listing: from a label to a branch further down that jumps back to it."""
    code, labels = _parse(sass)
    found = []
    for i, ins in enumerate(code):
        if ins.base == "BRA":
            target = _TARGET.search(" ".join(ins.operands))
            if target and target.group(1) in labels and labels[target.group(1)] <= i:
                found.append(code[labels[target.group(1)]: i + 1])
    return found


def main_loop(sass: str) -> list[Instruction]:
    """The loop with the most arithmetic instructions (FFMA, HMMA, HGMMA): the kernel's main loop."""
    candidates = loops(sass)
    if not candidates:
        raise ValueError("no backward branch in this listing: the kernel has no loop")
    return max(candidates, key=lambda body: (sum(i.base in ARITHMETIC for i in body), len(body)))


def mix(code: Sequence[Instruction], skip_predicated_off: bool = True) -> dict[str, int]:
    """Opcode counts (with modifiers), most frequent first, by default without the `@!PT` ones."""
    counts = Counter(i.opcode for i in code if not (skip_predicated_off and i.predicated_off))
    return dict(counts.most_common())


def _register(operand: str) -> str:
    return operand.lstrip("-|!").split(".")[0].rstrip("|")


def chained_ffma(code: Sequence[Instruction]) -> int:
    """How many FFMA add onto the result of the FFMA right before them (d = a·b + c with c = the
    previous d): each must wait for the one before it, so one warp cannot overlap them."""
    ffma = [i for i in code if i.base == "FFMA" and not i.predicated_off]
    return sum(_register(b.operands[3]) == _register(a.operands[0]) for a, b in zip(ffma, ffma[1:]))


def shared_loads(code: Sequence[Instruction]) -> dict[str, float]:
    """FFMA against shared-memory loads (LDS, LDS.64, LDS.128; not ldmatrix) in a piece of code: how
    many of each, how many 4-byte words they read per lane, the `@!PT` ones left out and counted apart."""
    words = {"LDS": 1, "LDS.64": 2, "LDS.128": 4}
    real = [i for i in code if i.opcode in words and not i.predicated_off]
    ffma = sum(i.base == "FFMA" and not i.predicated_off for i in code)
    loads, floats = len(real), sum(words[i.opcode] for i in real)
    return {"FFMA": ffma, "loads": loads, "floats": floats,
            "predicated_off": sum(i.opcode in words and i.predicated_off for i in code),
            "ffma_per_load": ffma / loads if loads else float("nan"),
            "ffma_per_float": ffma / floats if floats else float("nan")}


def listing(code: Sequence[Instruction]) -> str:
    """The instructions as text, one per line, as nvdisasm prints them (without the encodings)."""
    return "\n".join(str(i) for i in code)


# --- the cheat sheet's table -------------------------------------------------------------------------

@dataclass(frozen=True)
class Mnemonic:
    """One row of the cheat sheet: opcodes exactly as nvdisasm prints them, the kernel they are
    attributed to, and a line (or part of one) of that kernel's source, or of a header it includes."""

    opcodes: tuple[str, ...]
    level: str
    params: Mapping[str, Any]
    source: str


CHEAT_SHEET: tuple[Mnemonic, ...] = (
    Mnemonic(("FFMA",), "02_smem_tiling", {}, "acc += As[ty][k] * Bs[k][tx];"),
    Mnemonic(("FMUL",), "06_fused_epilogue", {"activation": "none", "bias": False}, "v *= alpha;"),
    Mnemonic(("FADD",), "06_fused_epilogue", {"activation": "gelu"}, "return 0.5f * x * (1.0f + tanhf(u));"),
    Mnemonic(("LDG.E.CONSTANT",), "01_naive", {}, "acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];"),
    Mnemonic(("LDG.E.128.CONSTANT",), "07_vectorized", {},
             "? *reinterpret_cast<const float4*>(A + (size_t)gr * K + gk) : zero;"),
    Mnemonic(("STG.E",), "01_naive", {}, "C[(size_t)row * N + col] = acc;"),
    Mnemonic(("STG.E.128",), "07_vectorized", {}, "*reinterpret_cast<float4*>(C + (size_t)r * N + c) ="),
    Mnemonic(("LDS",), "02_smem_tiling", {}, "acc += As[ty][k] * Bs[k][tx];"),
    Mnemonic(("LDS.128",), "05_register_blocking", {}, "for (int i = 0; i < TM; ++i) a[i] = s[cur].As[k][tr * TM + i];"),
    Mnemonic(("STS",), "02_smem_tiling", {}, "Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;"),
    Mnemonic(("LDGSTS.E",), "05_register_blocking", {}, "cp.async.ca.shared.global [%0], [%1], 4, %2;"),
    Mnemonic(("LDGSTS.E.BYPASS.128",), "08_warp_tiling", {}, "cp.async.cg.shared.global [%0], [%1], 16, %2;"),
    Mnemonic(("BAR.SYNC.DEFER_BLOCKING",), "02_smem_tiling", {}, "__syncthreads();"),
    Mnemonic(("LDL", "STL"), "08_warp_tiling", {}, "__launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)"),
    Mnemonic(("LDSM.16.M88.4", "LDSM.16.MT88.4"), "10_mma_pipeline", {}, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
    Mnemonic(("HMMA.16816.F32",), "10_mma_pipeline", {}, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    Mnemonic(("HGMMA.64x256x16.F32.BF16",), "11_hopper_wgmma", {}, "m64n256k16.f32.bf16.bf16"),
    Mnemonic(("UTMALDG.2D",), "11_hopper_wgmma", {},
             "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"),
    Mnemonic(("SYNCS.EXCH.64",), "11_hopper_wgmma", {}, "mbarrier.init.shared::cta.b64"),
    Mnemonic(("SYNCS.ARRIVE.TRANS64",), "11_hopper_wgmma", {}, "mbarrier.arrive.expect_tx.shared::cta.b64"),
    Mnemonic(("SYNCS.PHASECHK.TRANS64.TRYWAIT",), "11_hopper_wgmma", {}, "mbarrier.try_wait.parity.shared::cta.b64"),
    Mnemonic(("IMAD.WIDE", "IADD3", "LEA"), "02_smem_tiling", {},
             "As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;"),
    Mnemonic(("ISETP.GE.AND", "BRA"), "02_smem_tiling", {}, "for (int k0 = 0; k0 < K; k0 += TILE) {"),
    Mnemonic(("S2R",), "02_smem_tiling", {}, "const int tx = threadIdx.x, ty = threadIdx.y;"),
)


def cheat_sheet_rows() -> list[dict[str, Any]]:
    """Each cheat-sheet row with how often its opcodes occur in its kernel: disassembled here, else the
    mix recorded with the H200 results; None where neither is available (no disassembler, no record)."""
    from gemm_course.levels import get_level
    from gemm_course.inspect.sass import kernel_mix

    rows = []
    for row in CHEAT_SHEET:
        lv = get_level(row.level)
        try:
            found, where = kernel_mix(lv, **row.params)
        except KeyError:
            found, where = None, "no disassembler and no recorded mix"
        rows.append({"opcodes": row.opcodes, "kernel": lv.kernel_name(lv.resolve(**row.params)),
                     "counts": None if found is None else tuple(found.get(op, 0) for op in row.opcodes),
                     "where": where, "source": row.source})
    return rows
