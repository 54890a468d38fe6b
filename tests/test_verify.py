"""compare_outputs: tolerances per dtype and reduction depth, exact first-mismatch reporting, NaN/inf, shapes."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest

from compiler.verify import UNIT_ROUNDOFF, compare_outputs, tolerance_for

BF16 = ml_dtypes.bfloat16


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_identical_outputs_pass(rng):
    c = rng.standard_normal((64, 64)).astype(np.float32)
    report = compare_outputs({"C": c}, {"C": c.copy()}, dtypes={"C": "float32"})
    assert report.ok
    assert report.outputs[0].max_abs_err == 0.0 and report.outputs[0].first_bad_index is None


def test_one_element_corruption_is_caught_with_exact_index(rng):
    c = rng.standard_normal((128, 96)).astype(np.float32)
    bad = c.copy()
    bad[77, 5] += 0.5
    report = compare_outputs({"C": c}, {"C": bad}, dtypes={"C": "float32"}, reduction_depth={"C": 128})
    assert not report.ok
    check = report.outputs[0]
    assert check.first_bad_index == (77, 5)
    assert check.mismatches == 1
    assert check.expected_value == float(c[77, 5]) and check.got_value == float(bad[77, 5])
    assert check.max_abs_err == pytest.approx(0.5, rel=1e-6)
    text = report.render()
    assert "FAIL" in text and "C[77, 5]" in text and "1 of 12288" in text
    d = report.to_dict()
    json.dumps(d)  # serialisable as-is
    assert d["ok"] is False and d["outputs"][0]["first_bad_index"] == [77, 5]


def test_first_bad_index_is_row_major_first(rng):
    c = np.zeros((4, 5, 6), np.float32)
    got = c.copy()
    got[3, 0, 0] = 1.0
    got[1, 4, 2] = 1.0
    check = compare_outputs({"X": c}, {"X": got}, dtypes={"X": "float32"}).outputs[0]
    assert check.first_bad_index == (1, 4, 2) and check.mismatches == 2


def test_bf16_rounding_differences_pass_but_real_errors_fail(rng):
    exact = rng.standard_normal((32, 32)).astype(np.float32)
    device = exact.astype(BF16)  # one bf16 rounding: within 1 ulp
    ref = (exact * (1 + 2.0**-9)).astype(BF16)  # a slightly different pre-rounding value
    assert compare_outputs({"O": ref}, {"O": device}, dtypes={"O": "bfloat16"}).ok
    wrong = device.astype(np.float32)
    wrong[3, 4] *= 1.1  # a 10% error is not rounding
    report = compare_outputs({"O": ref}, {"O": wrong.astype(BF16)}, dtypes={"O": "bfloat16"})
    assert not report.ok and report.outputs[0].first_bad_index == (3, 4)


def test_tolerance_scales_with_dtype_and_reduction_depth():
    r32, _ = tolerance_for("float32")
    r16, _ = tolerance_for("float16", intermediate_dtype="float16")
    rb, _ = tolerance_for("bfloat16")
    assert r32 < r16 < rb
    assert rb == pytest.approx(2 * 2.0**-8 + 2 * 2.0**-8)
    shallow, _ = tolerance_for("float32", 16)
    deep, _ = tolerance_for("float32", 1024)
    assert deep > shallow
    assert deep == pytest.approx(2 * UNIT_ROUNDOFF["float32"] + 2 * math.sqrt(1024) * UNIT_ROUNDOFF["float32"])
    # fp16 outputs default to bf16 intermediates (the device's dest format without fp32 accumulation)
    assert tolerance_for("float16")[0] > tolerance_for("float16", intermediate_dtype="float32")[0]
    with pytest.raises(ValueError):
        tolerance_for("int8")


def test_fp32_gemm_accumulated_in_different_order_passes(rng):
    k = 512
    a = rng.standard_normal((64, k)).astype(np.float32)
    b = rng.standard_normal((k, 64)).astype(np.float32)
    ref = a @ b
    blocked = np.zeros((64, 64), np.float32)
    for kb in range(0, k, 32):  # tile-by-tile accumulation, as the device does it
        blocked += a[:, kb:kb + 32] @ b[kb:kb + 32, :]
    assert not np.array_equal(ref, blocked)
    assert compare_outputs({"C": ref}, {"C": blocked}, dtypes={"C": "float32"}, reduction_depth={"C": k}).ok


def test_bf16_accumulation_needs_depth_and_intermediate_dtype(rng):
    k = 256
    a = rng.standard_normal((32, k)).astype(BF16).astype(np.float32)
    b = rng.standard_normal((k, 32)).astype(BF16).astype(np.float32)
    ref = a @ b
    acc = np.zeros((32, 32), np.float32)
    for kb in range(0, k, 32):  # the device rounds its dest register to bf16 after each tile step
        acc = (acc + a[:, kb:kb + 32] @ b[:, :][kb:kb + 32]).astype(BF16).astype(np.float32)
    # judged as an fp32 output with fp32 accumulation it fails; with bf16 intermediates and K it passes
    assert not compare_outputs({"C": ref}, {"C": acc}, dtypes={"C": "float32"}, reduction_depth={"C": k}).ok
    assert compare_outputs({"C": ref}, {"C": acc}, dtypes={"C": "float32"}, reduction_depth={"C": k},
                           intermediate_dtypes={"C": "bfloat16"}).ok


def test_nan_and_inf_handling():
    exp = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], np.float32)
    assert compare_outputs({"v": exp}, {"v": exp.copy()}, dtypes={"v": "float32"}).ok
    for i, value in [(0, np.nan), (1, 1.0), (2, -np.inf), (3, 65504.0), (4, np.inf)]:
        got = exp.copy()
        got[i] = value
        check = compare_outputs({"v": exp}, {"v": got}, dtypes={"v": "float32"}).outputs[0]
        assert not check.ok and check.first_bad_index == (i,), (i, value)
    json.dumps(compare_outputs({"v": exp}, {"v": np.zeros(5, np.float32)}, dtypes={"v": "float32"}).to_dict())


def test_shape_mismatch_and_missing_output_fail():
    exp = {"C": np.zeros((32, 32), np.float32), "D": np.zeros((4,), np.float32)}
    report = compare_outputs(exp, {"C": np.zeros((32, 31), np.float32)}, dtypes={"C": "float32", "D": "float32"})
    assert not report.ok
    by_name = {o.name: o for o in report.outputs}
    assert "shape mismatch" in by_name["C"].message and "missing" in by_name["D"].message
    text = report.render()
    assert "shape mismatch" in text and "missing" in text


def test_render_lists_every_output():
    ok = np.ones((8, 8), np.float32)
    report = compare_outputs({"A": ok, "B": ok.astype(BF16)}, {"A": ok, "B": ok.astype(BF16)},
                             dtypes={"A": "float32", "B": "bfloat16"})
    lines = report.render().splitlines()
    assert lines[0].split()[:3] == ["output", "shape", "dtype"]
    assert any(l.startswith("A ") and "8x8" in l and "float32" in l and l.endswith("ok") for l in lines)
    assert any(l.startswith("B ") and "bfloat16" in l for l in lines)
    assert lines[-1] == "PASS"


def test_empty_comparison_is_not_ok():
    assert not compare_outputs({}, {}, dtypes={}).ok
