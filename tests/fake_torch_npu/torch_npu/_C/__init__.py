"""Stand-in for the compiled ``torch_npu._C`` extension (tests only)."""
