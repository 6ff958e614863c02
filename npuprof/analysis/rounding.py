"""Python's ``round(x, n)`` on whole arrays, with exactly Python's results."""

from __future__ import annotations

import numpy as np


def rounded(values: np.ndarray, ndigits: int) -> list[float]:
    """``[round(v, ndigits) for v in values]``, computed as numpy does (scale, round half to even, divide
    back), which agrees with Python unless the scaled value lands within rounding error of a half: those
    few (and huge or non-finite values) are rounded by Python itself."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return []
    scale = 10.0**ndigits
    scaled = values * scale
    whole = np.rint(scaled)
    out = (whole / scale).tolist()
    # the division gives the double nearest to whole * 10**-ndigits, as Python's round does; only the
    # choice of ``whole`` can differ, when the scaled value is not far enough from a half
    size = np.abs(scaled)
    with np.errstate(invalid="ignore"):  # inf - inf: not safe, as wanted
        distance = np.abs(size - np.trunc(size) - 0.5)
    safe = (distance > 4 * np.spacing(size)) & (size < 2.0**52)
    for i in np.flatnonzero(~safe).tolist():
        out[i] = round(float(values[i]), ndigits)
    return out
