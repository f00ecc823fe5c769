"""Level 14: the same GEMM in Triton and Gluon, read against the CUDA C of Levels 2–11.

    tensors.py      what Triton's launcher and interpreter need from an array (data_ptr, dtype, ...), given by
                    thin adapters over CuPy and NumPy arrays, and a Triton driver that asks CuPy, not PyTorch,
                    which device and stream to launch on (torch is not a dependency of this course)
    triton_gemm.py  the tiled Triton GEMM (any M, N, K; fp32 with IEEE products, or bf16) and the Hopper one
                    (TMA tensor descriptors, a persistent loop over tiles)
    gluon_gemm.py   a Gluon GEMM for Hopper: explicit layouts, TMA, mbarriers, wgmma, a ring of stages and warp
                    specialization, the Level 11 kernel written in Python
    line_maps.py    what each kernel line stands for in the course's CUDA C (levels, constructs, in English and
                    Chinese), and the kernels' source text: no triton needed, so a page built without it shows them
    interpreter.py  the CPU path: the tiled kernel run by Triton's interpreter on NumPy arrays, in a child process
                    (the interpreter is chosen when triton.language is imported, so it cannot share a process
                    with compiled kernels)
    checking.py     one correctness check for CPU and GPU: random inputs, C poisoned with NaN, the float64 product,
                    the course's tolerance, NaN guards around A, B and C that catch unmasked reads and stray stores
    compile.py      every GPU kernel compiled for a GPU target without a GPU (sm_80, sm_90): what the compiler
                    made (PTX, shared memory), the check that the Python is valid Triton before any GPU run
    record.py       `python -m gemm_course dsl --record`: check every kernel and setting on odd shapes, then time
                    them beside cuBLAS and the course's own CUDA levels, in one run; read a record back into rows
    lesson.py       what notebooks/14_triton_gluon.ipynb shows, one call per cell (the walk-through, the run, the
                    recorded run as a chart and a table, the compile reports), each one line where triton, a GPU or
                    the record (RECORD_FILE) is missing

Nothing here imports triton at the package's import: `import gemm_course` works with neither triton nor a GPU.
The modules that need triton import it themselves, and `tensors.require_triton()` says, in one line, what to
install when it is missing.
"""
