"""One form for byte counts in every message: powers of 1024, one decimal past bytes (as ``ls -h``)."""

import pytest

from npuprof.byte_sizes import human_bytes


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (3 * 1024**2 + 1024**2 // 10, "3.1 MiB"),
        (1023 * 1024**3, "1023.0 GiB"),
        (5 * 1024**4, "5.0 TiB"),
        (2048 * 1024**4, "2048.0 TiB"),
    ],
)
def test_byte_counts_in_words(n: int, text: str) -> None:
    assert human_bytes(n) == text
