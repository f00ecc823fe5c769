"""Level 13's FP8: numbers and scales, the GEMM host side, accuracy studies, the report."""
