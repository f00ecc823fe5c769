"""How a kernel is built and run: one compile path (NVRTC), launches, the CPU backend, input types, the Hopper host side (TMA tensor maps, clusters), the correctness check."""
