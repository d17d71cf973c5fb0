"""Problems past 2^31 elements: indices and sizes are 64-bit all the way down."""

from __future__ import annotations

import mmap

import numpy as np

import xfuse


def test_more_than_2_to_the_31_elements() -> None:
    # A broadcast makes a 4 GiB f16 result from two small inputs: 2^31 + 196,608 elements.
    kernel = xfuse.compile("input f16 x[a, 1]; input f16 y[1, b]; out = x + y;", ["out"])
    rows, columns = 1 << 16, (1 << 15) + 3
    x = (np.arange(rows) % 1000).astype(np.float16).reshape(rows, 1)
    y = (np.arange(columns) % 7).astype(np.float16).reshape(1, columns)
    # The output's pages faulted in by one system call: one fault per page took ~25 s here.
    populate = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    with mmap.mmap(-1, rows * columns * 2, flags=populate) as memory:
        out = np.frombuffer(memory, np.float16).reshape(rows, columns)
        assert kernel(x=x, y=y, out=out) is out
        assert out.size > 2**31
        for row in (0, rows // 2, rows - 1):  # rows past the 2^31st element included
            np.testing.assert_array_equal(out[row], x[row] + y[0])
        np.testing.assert_array_equal(out[:, -1], x[:, 0] + y[0, -1])
        del out  # the buffer's last view, before the mapping closes
