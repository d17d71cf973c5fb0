"""Problems past 2^31 elements: indices and sizes are 64-bit all the way down."""

from __future__ import annotations

import numpy as np

import xfuse


def test_more_than_2_to_the_31_elements() -> None:
    # A broadcast makes a 4 GiB f16 result from two small inputs: 2^31 + 196,608 elements.
    kernel = xfuse.compile("input f16 x[a, 1]; input f16 y[1, b]; out = x + y;", ["out"])
    rows, columns = 1 << 16, (1 << 15) + 3
    x = (np.arange(rows) % 1000).astype(np.float16).reshape(rows, 1)
    y = (np.arange(columns) % 7).astype(np.float16).reshape(1, columns)
    out = kernel(x=x, y=y)
    assert out.shape == (rows, columns) and out.size > 2**31
    for row in (0, rows // 2, rows - 1):  # rows past the 2^31st element included
        np.testing.assert_array_equal(out[row], x[row] + y[0])
    np.testing.assert_array_equal(out[:, -1], x[:, 0] + y[0, -1])
