"""Block floating point (Bfp8_b, Bfp4_b) on the emulator against an independent NumPy implementation of the format.

The format (tt-metal's host packer, tt_metal/impl/data_format/blockfloat_common.cpp, and the unpacker that reads it):
a 32x32 tile is four 16x16 faces; each 16-datum row of a face shares the largest 8-bit exponent of its datums; a datum
keeps its sign and 7 (Bfp8_b) or 3 (Bfp4_b) bits of its 24-bit significand (hidden one included) shifted right by its
exponent's distance to the shared one, rounded to nearest, ties to even, saturating at the largest mantissa. Bytes:
the 64 shared exponents, then the datums in face order (a byte each; Bfp4_b two per byte, the first in the low nibble).
So a Bfp8_b tile is 1088 bytes, a Bfp4_b tile 576 -- the CB pages and the DRAM pages these tests move."""
from __future__ import annotations

import numpy as np
import pytest

from .conftest import eltwise_cfg

MANTISSA_BITS = {"bfp8": 7, "bfp4": 3}
TILE_BYTES = {"bfp8": 64 + 1024, "bfp4": 64 + 512}
CODES = {"bfp8": 6, "bfp4": 7}


def face_order(matrix: np.ndarray) -> np.ndarray:
    """(32*R, 32*C) row-major -> (R*C, 1024): each tile's faces TL, TR, BL, BR, each face row-major."""
    r, c = matrix.shape[0] // 32, matrix.shape[1] // 32
    tiles = matrix.reshape(r, 32, c, 32).transpose(0, 2, 1, 3).reshape(r * c, 32, 32)
    return tiles.reshape(-1, 2, 16, 2, 16).transpose(0, 1, 3, 2, 4).reshape(-1, 1024)


def encode(faceorder: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """float32 tiles (N, 1024), face order -> packed tiles (N, tile bytes) as uint8."""
    u = faceorder.astype(np.float32).view(np.uint32).astype(np.uint64).reshape(-1, 64, 16)
    exponent = (u >> 23) & 0xFF
    shared = exponent.max(axis=2, keepdims=True)
    significand = (u & 0x7FFFFF) | 0x800000
    gap = shared - exponent
    shifted = np.where(gap >= 32, 0, significand >> np.minimum(gap, 31))
    drop = 24 - mantissa_bits
    rest, half = shifted & ((1 << drop) - 1), 1 << (drop - 1)
    q = shifted >> drop
    q = q + ((rest > half) | ((rest == half) & (q & 1 == 1)))
    q = np.minimum(q, (1 << mantissa_bits) - 1)
    q = np.where((u & 0x7FFFFFFF) == 0, 0, q)
    sign = np.where(q != 0, u >> 31, 0)
    datums = ((sign << mantissa_bits) | q).astype(np.uint8).reshape(-1, 1024)
    if mantissa_bits == 3:
        datums = (datums[:, 0::2] | (datums[:, 1::2] << 4)).astype(np.uint8)
    return np.concatenate([shared.reshape(-1, 64).astype(np.uint8), datums], axis=1)


def decode(packed: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """packed tiles (N, tile bytes) uint8 -> float32 (N, 1024), face order; exact."""
    shared = packed[:, :64].astype(np.int32)
    body = packed[:, 64:]
    if mantissa_bits == 3:
        body = np.stack([body & 0xF, body >> 4], axis=2).reshape(-1, 1024)
    datums = body.astype(np.int64)
    q = datums & ((1 << mantissa_bits) - 1)
    scale = np.repeat(shared, 16, axis=1) - 127 - (mantissa_bits - 1)
    value = np.ldexp(q.astype(np.float64), scale)
    return np.where(datums >> mantissa_bits, -value, value).astype(np.float32)


def as_words(packed: np.ndarray) -> np.ndarray:
    """Packed bytes as the float32 bit patterns the host program moves (4 bytes per word, little endian)."""
    return np.ascontiguousarray(packed).view(np.uint32).view(np.float32)


def test_the_numpy_format_is_the_documented_one():
    # one face row of 16: the shared exponent is the largest (4.0 -> 129); 1.0 keeps its top bits shifted by 2
    row = np.zeros((1, 1024), np.float32)
    row[0, :4] = [4.0, 1.0, -3.0, 2.0 ** -30]
    packed = encode(row, 7)
    assert packed.shape == (1, 1088) and packed[0, 0] == 129
    # 4.0 -> 0b1000000; 1.0 -> 0b0010000; -3.0 -> sign | 0b0110000; 2^-30 shifts out entirely: +0
    assert list(packed[0, 64:68]) == [0x40, 0x10, 0x80 | 0x30, 0x00]
    np.testing.assert_array_equal(decode(packed, 7)[0, :4], [4.0, 1.0, -3.0, 0.0])
    # ties go to even: with shared exponent 1.0's, 1 + 2^-7 (half an ulp of 7 bits) rounds down, 1 + 3*2^-7 up
    tie = np.zeros((1, 1024), np.float32)
    tie[0, :3] = [1.0, 1 + 2.0 ** -7, 1 + 3 * 2.0 ** -7]
    np.testing.assert_array_equal(decode(encode(tie, 7), 7)[0, :3], [1.0, 1.0, 1 + 2 * 2.0 ** -6])
    # a mantissa rounding past the top saturates (no exponent bump): 1.99 -> 1 + 63/64 in 7 bits
    assert decode(encode(np.full((1, 1024), 1.999, np.float32), 7), 7)[0, 0] == 1 + 63 / 64
    # Bfp4_b: two datums per byte, the first in the low nibble
    packed4 = encode(row, 3)
    assert packed4.shape == (1, 576) and packed4[0, 64] == (0x4 | (0x1 << 4))


def _values(rng, tiles: int) -> np.ndarray:
    """Rows whose magnitudes spread over many binades (datums shifted far from their shared exponent), with zeros,
    negative zeros, exact ties for 7 and 3 mantissa bits and values that saturate."""
    x = rng.standard_normal((tiles * 32, 32)).astype(np.float32) * np.exp2(rng.integers(-20, 20, (tiles * 32, 1)))
    x[:, 3] *= np.exp2(rng.integers(-12, 0, tiles * 32)).astype(np.float32)
    x[0, :8] = [0.0, -0.0, 1.0, 1 + 2.0 ** -7, 1 + 2.0 ** -3, 1.999, -1.999, 2.0 ** -40]
    return x


@pytest.mark.parametrize("fmt", ["bfp8", "bfp4"])
@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_the_packer_writes_block_formats_as_numpy_encodes_them(make_bundle, run, fmt, arch):
    rng = np.random.default_rng(21)
    x = _values(rng, 4)
    cfg = eltwise_cfg("fp32", "fp32", fp32_dest=True, unpack_fp32=True, cores=2)
    cfg[0, 1] = CODES[fmt]
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_BODY copy_tile(cb_x, 0, 0);\n"
                                                            "#define OP_INIT copy_tile_init(cb_x);"})
    res = run(bundle, {"x": x, "y": x, "cfg": cfg}, arch=arch)
    got = res.outputs["z"].view(np.uint32).view(np.uint8).reshape(-1, TILE_BYTES[fmt])
    want = encode(face_order(x), MANTISSA_BITS[fmt])
    np.testing.assert_array_equal(got, want)
    # the real page sizes: 4 tiles of 1088 / 576 bytes written to DRAM
    written = [b["bytes_written"] for b in res.report["buffers"] if b["bytes_written"]]
    assert written == [4 * TILE_BYTES[fmt]]


@pytest.mark.parametrize("fmt", ["bfp8", "bfp4"])
@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_the_unpacker_reads_block_formats_exactly(make_bundle, run, fmt, arch):
    rng = np.random.default_rng(22)
    packed = encode(face_order(_values(rng, 3)), MANTISSA_BITS[fmt])
    cfg = eltwise_cfg("fp32", "fp32", fp32_dest=True, cores=3)
    cfg[0, 0] = CODES[fmt]
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_BODY copy_tile(cb_x, 0, 0);\n"
                                                            "#define OP_INIT copy_tile_init(cb_x);"})
    res = run(bundle, {"x": as_words(packed), "y": as_words(packed), "cfg": cfg}, arch=arch)
    # each datum is sign x mantissa x 2^(shared - 127 - (bits - 1)): exactly representable, unchanged through DST
    np.testing.assert_array_equal(res.outputs["z"], decode(packed, MANTISSA_BITS[fmt]))
    assert [b["bytes_read"] for b in res.report["buffers"][:1]] == [3 * TILE_BYTES[fmt]]
