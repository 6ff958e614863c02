"""Helpers for tests/test_npu_backend.py: a driver that runs NpuBackend against the torch_npu stand-in."""
