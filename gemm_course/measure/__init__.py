"""How a kernel is measured: the timing harness, the autotuner, peak probes, Nsight Compute counters, counter predictions, SM clocks, and the recorded results (data in gemm_course/results/)."""
