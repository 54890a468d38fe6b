"""Multicast, semaphores and core-to-core writes with our own kernels (bundles/mcast): a 2-D grid where A tiles are
multicast along rows and B tiles written by unicast down columns, in the classic calls and in the object API; and
the diagnostics when such a protocol is broken."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.toolchain.emulate import EmulationError

FAST_DEADLOCK = {"TTEMU_DEADLOCK_MS": "300"}


def inputs(rows: int, cols: int, k: int, *, object_api=False, reader_noc=0, swap_for_noc1=True, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, size=(rows * 32, k * 32)).astype(np.float32)   # small integers: bf16 sums are exact
    b = rng.integers(-8, 9, size=(k * 32, cols * 32)).astype(np.float32)
    cfg = np.array([[rows, cols, k, int(object_api), reader_noc, int(swap_for_noc1)]], np.float32)
    return {"a": a, "b": b, "cfg": cfg}


def expected(a: np.ndarray, b: np.ndarray, rows: int, cols: int, k: int) -> np.ndarray:
    out = np.zeros((rows * 32, cols * k * 32), np.float32)
    for y in range(rows):
        for x in range(cols):
            for kk in range(k):
                tile = a[y * 32:(y + 1) * 32, kk * 32:(kk + 1) * 32] + b[kk * 32:(kk + 1) * 32, x * 32:(x + 1) * 32]
                out[y * 32:(y + 1) * 32, (x * k + kk) * 32:(x * k + kk + 1) * 32] = tile
    return out


@pytest.mark.parametrize("object_api", [False, True], ids=["classic", "object-api"])
@pytest.mark.parametrize("reader_noc", [0, 1], ids=["noc0", "noc1"])
def test_row_multicast_and_column_unicast(make_bundle, run, object_api, reader_noc):
    rows, cols, k = 3, 4, 5
    data = inputs(rows, cols, k, object_api=object_api, reader_noc=reader_noc)
    result = run(make_bundle("mcast"), data)
    np.testing.assert_array_equal(result.outputs["out"], expected(data["a"], data["b"], rows, cols, k))
    totals = result.report["totals"]
    # every row sender multicasts each of its K tiles to C-1 cores, plus one VALID flag per tile
    assert totals["noc_multicasts"] == rows * k * 2
    assert totals["noc_multicast_bytes"] == rows * k * (cols - 1) * (2048 + 4)


def test_single_column_grid_needs_no_multicast(make_bundle, run):
    data = inputs(2, 1, 3)
    result = run(make_bundle("mcast"), data)
    np.testing.assert_array_equal(result.outputs["out"], expected(data["a"], data["b"], 2, 1, 3))
    assert result.report["totals"]["noc_multicasts"] == 0


def expect_error(run, bundle, kind, *fragments, data=None) -> EmulationError:
    with pytest.raises(EmulationError) as info:
        run(bundle, data or inputs(2, 3, 2), env=FAST_DEADLOCK)
    err = info.value
    assert err.kind == kind, err.message + "\n" + err.log
    for fragment in fragments:
        assert fragment in err.message, f"{fragment!r} missing from:\n{err.message}"
    return err


def line_of(bundle, file: str, text: str) -> int:
    return next(i for i, line in enumerate((bundle / file).read_text().splitlines(), 1) if text in line)


def test_semaphore_never_incremented_is_a_deadlock_naming_the_wait(make_bundle, run):
    bundle = make_bundle("mcast", replace={"reader.cpp": [("            noc_semaphore_inc(sender_sem_noc, 1);\n", "")]})
    wait_line = line_of(bundle, "reader.cpp", "noc_semaphore_wait(sender_sem, num_dests)")
    expect_error(run, bundle, "deadlock",
                 "core (0,0) reader kernel 'reader.cpp' [RISCV_1]: blocked in noc_semaphore_wait(sem=",
                 f", 2) at reader.cpp:{wait_line}",
                 "semaphore 0 at L1 ", "holds 0; the kernel waits for == 2",
                 "core (1,0) reader kernel 'reader.cpp' [RISCV_1]: blocked in noc_semaphore_wait(")


def test_multicast_to_a_core_without_a_receiver(make_bundle, run):
    bundle = make_bundle("mcast", replace={"reader.cpp": [(
        "get_noc_multicast_addr(mcast_x0, mcast_y0, mcast_x1, mcast_y1, l1),\n                                          tile_bytes, num_dests);",
        "get_noc_multicast_addr(mcast_x0, mcast_y0, mcast_x1 + 1, mcast_y1, l1),\n                                          tile_bytes, num_dests + 1);")]})
    mcast_line = line_of(bundle, "reader.cpp", "noc_async_write_multicast(l1")
    expect_error(run, bundle, "noc-no-receiver", f"core (0,0) reader kernel 'reader.cpp' [RISCV_1] at reader.cpp:{mcast_line}",
                 "noc_async_write_multicast(", "num_dests=3", "core (3,0) runs no kernel of this program",
                 data=inputs(1, 3, 2))


def test_multicast_num_dests_must_match_the_rectangle(make_bundle, run):
    bundle = make_bundle("mcast", replace={"reader.cpp": [("tile_bytes, num_dests);", "tile_bytes, num_dests + 1);")]})
    expect_error(run, bundle, "noc-multicast", "core (0,0) reader kernel",
                 "num_dests is 3 but the rectangle holds 2 destination core(s)", data=inputs(1, 3, 2))


def test_multicast_past_the_receivers_reserved_pages(make_bundle, run):
    bundle = make_bundle("mcast", replace={"reader.cpp": [(
        "noc_async_write_multicast(l1, get_noc_multicast_addr(mcast_x0, mcast_y0, mcast_x1, mcast_y1, l1),",
        "noc_async_write_multicast(l1, get_noc_multicast_addr(mcast_x0, mcast_y0, mcast_x1, mcast_y1, l1 + tile_bytes),")]})
    expect_error(run, bundle, "cb-out-of-range", "noc_async_write_multicast(",
                 "writes pages 1..1 of CB c_0 on core (1,0), but its producer, the reader kernel 'reader.cpp', has "
                 "reserved pages [0, 1)", data=inputs(1, 3, 2))


def test_unicast_write_outside_any_buffer_of_the_receiver(make_bundle, run):
    bundle = make_bundle("mcast", replace={"writer.cpp": [(
        "noc_async_write(l1, get_noc_addr(dx, dy, l1), tile_bytes);",
        "noc_async_write(l1, get_noc_addr(dx, dy, l1 + 0x80000), tile_bytes);")]})
    write_line = line_of(bundle, "writer.cpp", "noc_async_write(l1, get_noc_addr(dx, dy")
    expect_error(run, bundle, "l1-out-of-range", f"core (0,0) writer kernel 'writer.cpp' [RISCV_0] at writer.cpp:{write_line}",
                 "on core (0,1) is not inside any circular buffer, semaphore or L1 buffer there", data=inputs(2, 1, 2))


def test_noc1_multicast_needs_start_and_end_swapped(make_bundle, run):
    expect_error(run, make_bundle("mcast"), "noc-multicast", "on NoC 1", "swap start and end",
                 data=inputs(1, 3, 2, reader_noc=1, swap_for_noc1=False))


def test_missing_write_barrier_before_the_flag(make_bundle, run):
    # the flag travels behind the data only after a barrier; without it the kernel ends with writes unconfirmed
    bundle = make_bundle("mcast", replace={"reader.cpp": [("        noc_async_write_barrier();\n    } else {", "    } else {")]})
    expect_error(run, bundle, "noc-barrier", "reader kernel 'reader.cpp'", "were never confirmed")


def test_loopback_multicast_includes_the_sender(make_bundle, run):
    # the sender multicasts to its whole row, itself included (my_x/my_y give its own NoC coordinates)
    bundle = make_bundle("mcast", replace={"reader.cpp": [(
        "noc_async_write_multicast(l1, get_noc_multicast_addr(mcast_x0, mcast_y0, mcast_x1, mcast_y1, l1),\n"
        "                                          tile_bytes, num_dests);",
        "noc_async_write_multicast_loopback_src(l1, get_noc_multicast_addr(my_x[noc_index], my_y[noc_index], mcast_x1, "
        "mcast_y1, l1), tile_bytes, num_dests + 1);")]})
    data = inputs(2, 4, 3)
    result = run(bundle, data)
    np.testing.assert_array_equal(result.outputs["out"], expected(data["a"], data["b"], 2, 4, 3))
    # the data multicasts now reach 4 cores per row instead of 3
    assert result.report["totals"]["noc_multicast_bytes"] == 2 * 3 * (4 * 2048 + 3 * 4)
