"""Level 12: split schemes, the collectives model, tensor parallelism, the report."""
