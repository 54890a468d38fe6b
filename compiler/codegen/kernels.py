"""Kernel C++ from the split IR: a visitor over For / Bind / IfThenElse / tt.* intrinsic calls.

Nothing here prints raw TIR: every call is spelled by ops.py, every expression by `CppExpr`, and anything
else in the IR is a compiler bug reported as such.
"""
from __future__ import annotations

import math
import string

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from ..ir import stmts_of
from ..version import COMPILER_VERSION
from .. import attrs
from ..layout import view_of

_BINOPS = {tirx.Add: ("+", 4), tirx.Sub: ("-", 4), tirx.Mul: ("*", 5), tirx.FloorDiv: ("/", 5),
           tirx.FloorMod: ("%", 5), tirx.LT: ("<", 2), tirx.LE: ("<=", 2), tirx.GT: (">", 2), tirx.GE: (">=", 2),
           tirx.EQ: ("==", 2), tirx.NE: ("!=", 2), tirx.And: ("&&", 1), tirx.Or: ("||", 0)}

_COMPARISONS = (tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ, tirx.NE)

INDENT = "    "
# page formats stored as four 16x16 faces one after another (not the block floats, whose exponents come first)
FACE_ORDERED_FORMATS = ("Float32", "Float16_b", "Float16")


def _may_be_negative(e) -> bool:
    """An index expression with a subtraction or a negative constant: its uint32_t value may have wrapped."""
    found = []
    tvm_ffi.structural_walk(e, [(tirx.Sub, found.append),
                                (tirx.IntImm, lambda c: found.append(c) if int(c.value) < 0 else None)], order="pre")
    return bool(found)


def _holds_run_time_value(e) -> bool:
    """An index expression with an element read while the kernel runs, or a value handed to compute (signed)."""
    found = []
    tvm_ffi.structural_walk(e, [(tvm.ir.expr.TensorLoad, found.append)], order="pre")
    if found:
        return True
    calls = []
    tvm_ffi.structural_walk(e, [(tvm.ir.Call, calls.append)], order="pre")
    return any((ops.intrinsic_of(c) or (None,))[0] is not None and ops.intrinsic_of(c)[0].name == "read_value"
               for c in calls)


class _Splice(string.Formatter):
    """`{n}` splices an argument; `{n:p}` parenthesises it when it is a compound expression (arithmetic context)."""

    def format_field(self, value, format_spec):
        if format_spec == "p":
            return value if value.replace("_", "").isalnum() else f"({value})"
        return super().format_field(value, format_spec)


_SPLICE = _Splice()


def _float_literal(value: float) -> str:
    """A float as C++: infinities and NaN through the compiler builtins (no <cmath> in kernel headers)."""
    if math.isinf(value):
        return "-__builtin_inff()" if value < 0 else "__builtin_inff()"
    if math.isnan(value):
        return "__builtin_nanf(\"\")"
    return f"{value!r}f"


def _has_clamp(e) -> bool:
    found = []
    tvm_ffi.structural_walk(e, ((tirx.Min, tirx.Max), found.append), order="pre")
    return bool(found)


MCAST_SEND = """// The block just read is multicast to the cores that share it (ttnn's 2-D matmul protocol): wait until every
// receiver has reserved its pages (each raised `ready` by one), write the block to the same L1 address on each,
// then set their `valid` flag. A rectangle that holds the sender (loopback) writes to the sender too.
inline void mcast_send_block(uint32_t l1, uint32_t bytes, uint32_t ready_sem, uint32_t valid_sem, uint32_t x0,
                             uint32_t y0, uint32_t x1, uint32_t y1, uint32_t receivers, uint32_t loopback) {{
    if (receivers == 0) return;
    volatile tt_l1_ptr uint32_t* ready = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(ready_sem);
    noc_semaphore_wait(ready, receivers);
    noc_semaphore_set(ready, 0);
    const uint64_t data = get_noc_multicast_addr(x0, y0, x1, y1, l1);
    const uint64_t flag = get_noc_multicast_addr(x0, y0, x1, y1, valid_sem);
    if (loopback) {{
        noc_async_write_multicast_loopback_src(l1, data, bytes, receivers + 1);
{flush}        noc_semaphore_set_multicast_loopback_src(valid_sem, flag, receivers + 1);
    }} else {{
        noc_async_write_multicast(l1, data, bytes, receivers);
{flush}        noc_semaphore_set_multicast(valid_sem, flag, receivers);
    }}
}}"""

MCAST_SEND_PARTS = """// The block multicast in parts as its reads land (TTSplitKernels' chunk_multicast): wait once until every
// receiver has reserved its pages, write each part to the same L1 address on each, then set their `valid` flag.
inline void mcast_wait_receivers(uint32_t ready_sem, uint32_t receivers) {{
    if (receivers == 0) return;
    volatile tt_l1_ptr uint32_t* ready = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(ready_sem);
    noc_semaphore_wait(ready, receivers);
    noc_semaphore_set(ready, 0);
}}
inline void mcast_send_pages(uint32_t l1, uint32_t bytes, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                             uint32_t receivers, uint32_t loopback) {{
    if (receivers == 0) return;
    const uint64_t data = get_noc_multicast_addr(x0, y0, x1, y1, l1);
    if (loopback) {{
        noc_async_write_multicast_loopback_src(l1, data, bytes, receivers + 1);
    }} else {{
        noc_async_write_multicast(l1, data, bytes, receivers);
    }}
}}
inline void mcast_send_flag(uint32_t valid_sem, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                            uint32_t receivers, uint32_t loopback) {{
    if (receivers == 0) return;
    const uint64_t flag = get_noc_multicast_addr(x0, y0, x1, y1, valid_sem);
{flush}    if (loopback) {{
        noc_semaphore_set_multicast_loopback_src(valid_sem, flag, receivers + 1);
    }} else {{
        noc_semaphore_set_multicast(valid_sem, flag, receivers);
    }}
}}"""

MCAST_RECEIVE = """// A shared block arrives by multicast: clear the flag, tell the sender this core's pages are reserved, wait.
inline void mcast_receive_block(uint32_t ready_sem, uint32_t valid_sem, uint32_t sender_x, uint32_t sender_y) {
    volatile tt_l1_ptr uint32_t* valid = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(valid_sem);
    noc_semaphore_set(valid, 0);
    noc_semaphore_inc(get_noc_addr(sender_x, sender_y, ready_sem), 1);
    noc_semaphore_wait(valid, 1);
}"""


MCAST_RECEIVE_READY = """// The first half of mcast_receive_block: clear the flag, tell the sender this core's pages are reserved.
inline void mcast_receive_ready(uint32_t ready_sem, uint32_t valid_sem, uint32_t sender_x, uint32_t sender_y) {
    noc_semaphore_set(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(valid_sem), 0);
    noc_semaphore_inc(get_noc_addr(sender_x, sender_y, ready_sem), 1);
}"""

MCAST_RECEIVE_WAIT = """// The second half: wait until the sender has written the pages and set the flag.
inline void mcast_receive_wait(uint32_t valid_sem) {
    noc_semaphore_wait(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(valid_sem), 1);
}"""


SWAP_SEND = """// A page to the same address on one other core that is receiving one from this core at the same time
// (TTExchangePartials' swap): wait until it has reserved its page, write the page, then set its flag (an inline
// write: this core's own flag is cleared, as it is receiving too).
inline void swap_send_page(uint32_t l1, uint32_t bytes, uint32_t ready_sem, uint32_t valid_sem, uint32_t x, uint32_t y) {
    volatile tt_l1_ptr uint32_t* ready = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(ready_sem);
    noc_semaphore_wait(ready, 1);
    noc_semaphore_set(ready, 0);
    noc_async_write(l1, get_noc_addr(x, y, l1), bytes);
    noc_async_writes_flushed();  // the page leaves before the flag
    noc_inline_dw_write(get_noc_addr(x, y, valid_sem), 1);
}"""


COPY_LOCAL_PAGE = """// A page of this core's L1 copied to another address of it (a partial row reduction put where its multicast
// sends it from: TTExchangePartials).
inline void copy_local_page(uint32_t dst, uint32_t src, uint32_t bytes) {
    noc_async_read(get_noc_addr(src), dst, bytes);
    noc_async_read_barrier();
}"""


READ_SCALAR = """// An element of an integer tensor (offsets, lengths: float32 tiles, exact below 2^24) read while the kernel runs:
// the tile that holds it into L1, then the element from its 16x16 face.
template <typename Accessor>
inline int32_t read_scalar(const Accessor& tensor, uint32_t l1, uint32_t tile_cols, uint32_t row, uint32_t col) {
    noc_async_read_page(row / 32 * tile_cols + col / 32, tensor, l1);
    noc_async_read_barrier();
    const uint32_t r = row % 32, c = col % 32;
    const volatile tt_l1_ptr float* tile = reinterpret_cast<volatile tt_l1_ptr float*>(l1);
    return static_cast<int32_t>(tile[(r / 16 * 2 + c / 16) * 256 + r % 16 * 16 + c % 16]);
}"""


READ_ROWS = """// Rows [row, row + 32) of a tiled matrix (`rows` rows; its first tile row is page row `base`) in tile column
// `col`, built into the page at `dst`: the (at most two) pages that hold them are read into `scratch`, then each
// row's two 16-element halves are copied to their places in the faces. Rows outside [0, rows) are zeros
// (TileLang's bounds-checked copy).
template <typename Accessor>
inline void read_rows(const Accessor& tensor, uint32_t dst, uint32_t scratch, int32_t row, int32_t rows,
                      uint32_t base, uint32_t tile_cols, uint32_t col, uint32_t elem_bytes) {
    const uint32_t tile_bytes = 1024 * elem_bytes, half_words = 16 * elem_bytes / 4;
    const int32_t first = row < 0 ? -((31 - row) / 32) : row / 32;   // the tile row that holds `row`
    for (int32_t k = 0; k < 2; ++k) {
        const int32_t t = first + k;
        if (t >= 0 && t * 32 < rows) {
            noc_async_read_page((base + t) * tile_cols + col, tensor, scratch + k * tile_bytes);
        }
    }
    noc_async_read_barrier();
    for (int32_t r = 0; r < 32; ++r) {
        const int32_t from_row = row + r;
        const bool inside = from_row >= 0 && from_row < rows;
        const int32_t k = inside ? from_row / 32 - first : 0, fr = inside ? from_row % 32 : 0;
        for (int32_t h = 0; h < 2; ++h) {
            volatile tt_l1_ptr uint32_t* to = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(
                dst + ((r / 16 * 2 + h) * 256 + r % 16 * 16) * elem_bytes);
            volatile tt_l1_ptr uint32_t* from = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(
                scratch + k * tile_bytes + ((fr / 16 * 2 + h) * 256 + fr % 16 * 16) * elem_bytes);
            for (uint32_t w = 0; w < half_words; ++w) {
                to[w] = inside ? from[w] : 0u;
            }
        }
    }
}"""


READ_WINDOW = """// The 32x32 window whose first element is (row, col) of a tiled matrix (`rows` x `cols` elements; its first tile
// row is page row `base`), built into the page at `dst`: a column start between tile boundaries (`LSE[h, seq_start +
// t * 64:...]`, a variable-length batch's tokens along the columns). Each of the (at most four) pages the window
// overlaps is read into `scratch` in turn and its part copied element by element into the faces; elements outside
// the matrix are zeros (TileLang's bounds-checked copy).
template <typename Accessor>
inline void read_window(const Accessor& tensor, uint32_t dst, uint32_t scratch, int32_t row, int32_t col,
                        int32_t rows, int32_t cols, uint32_t base, uint32_t tile_cols, uint32_t elem_bytes) {
    volatile tt_l1_ptr uint32_t* page = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(dst);
    for (uint32_t w = 0; w < 256 * elem_bytes; ++w) {
        page[w] = 0u;
    }
    const int32_t first_row = row < 0 ? -((31 - row) / 32) : row / 32, first_col = col < 0 ? -((31 - col) / 32) : col / 32;
    for (int32_t a = 0; a < 2; ++a) {
        for (int32_t b = 0; b < 2; ++b) {
            const int32_t tr = first_row + a, tc = first_col + b;
            if (tr < 0 || tr * 32 >= rows || tc < 0 || tc * 32 >= cols) {
                continue;
            }
            noc_async_read_page((base + static_cast<uint32_t>(tr)) * tile_cols + static_cast<uint32_t>(tc), tensor,
                                scratch);
            noc_async_read_barrier();
            for (int32_t r = 0; r < 32; ++r) {
                const int32_t mr = row + r;
                if (mr < tr * 32 || mr >= tr * 32 + 32 || mr >= rows) {
                    continue;
                }
                for (int32_t c = 0; c < 32; ++c) {
                    const int32_t mc = col + c;
                    if (mc < tc * 32 || mc >= tc * 32 + 32 || mc >= cols) {
                        continue;
                    }
                    const uint32_t sr = static_cast<uint32_t>(mr - tr * 32), sc = static_cast<uint32_t>(mc - tc * 32);
                    const uint32_t from = ((sr / 16 * 2 + sc / 16) * 256 + sr % 16 * 16 + sc % 16) * elem_bytes;
                    const uint32_t to = ((static_cast<uint32_t>(r) / 16 * 2 + static_cast<uint32_t>(c) / 16) * 256 +
                                         static_cast<uint32_t>(r) % 16 * 16 + static_cast<uint32_t>(c) % 16) * elem_bytes;
                    if (elem_bytes == 4) {
                        *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(dst + to) =
                            *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(scratch + from);
                    } else {
                        *reinterpret_cast<volatile tt_l1_ptr uint16_t*>(dst + to) =
                            *reinterpret_cast<volatile tt_l1_ptr uint16_t*>(scratch + from);
                    }
                }
            }
        }
    }
}"""


WRITE_ROWS = """// Rows [begin, end) of the page at `src` (rows of a block of a tiled matrix: `rows` rows, its first tile row is
// page row `base`, tile column `col`) to rows row + begin .. of the matrix, row by row: each row's two 16-element
// halves into their places in the faces of the DRAM tile that holds it. Rows outside [0, rows) are not written
// (TileLang's bounds-checked store); the rest of each tile keeps what other writes put there (the next
// sequence's rows, another core's). A half-row is 32 or 64 bytes at a multiple of 32 bytes in both tiles: NoC
// writes to DRAM need 16-byte alignment (NOC_DRAM_WRITE_ALIGNMENT_BYTES on Wormhole and Blackhole). Columns
// [col_off, col_off + ncols) of one tile column only (0, 32: whole rows): each row is shifted in place in L1 first,
// then only the columns' bytes are written, their source and destination agreeing mod 16.
template <typename Accessor>
inline void write_rows(const Accessor& tensor, uint32_t src, int32_t row, int32_t begin, int32_t end, int32_t rows,
                       uint32_t base, uint32_t tile_cols, uint32_t col, uint32_t elem_bytes, uint32_t col_off,
                       uint32_t ncols) {
    for (int32_t r = begin < 0 ? 0 : begin; r < end && r < 32; ++r) {
        const int32_t to_row = row + r;
        if (to_row < 0 || to_row >= rows) {
            continue;
        }
        const uint32_t page = (base + static_cast<uint32_t>(to_row) / 32) * tile_cols + col;
        const uint32_t tr = static_cast<uint32_t>(to_row) % 32;
        if (col_off > 0) {
            // the row's columns [0, ncols) move to [col_off, col_off + ncols) in place (last first), so each
            // element sits at its destination's address mod 16
            for (uint32_t c = col_off + ncols; c-- > col_off;) {
                const uint32_t f = c - col_off;
                const uint32_t to = ((r / 16 * 2 + c / 16) * 256 + r % 16 * 16 + c % 16) * elem_bytes;
                const uint32_t from = ((r / 16 * 2 + f / 16) * 256 + r % 16 * 16 + f % 16) * elem_bytes;
                if (elem_bytes == 4) {
                    *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(src + to) =
                        *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(src + from);
                } else {
                    *reinterpret_cast<volatile tt_l1_ptr uint16_t*>(src + to) =
                        *reinterpret_cast<volatile tt_l1_ptr uint16_t*>(src + from);
                }
            }
        }
        for (uint32_t h = 0; h < 2; ++h) {
            const uint32_t lo = col_off > h * 16 ? col_off : h * 16;
            const uint32_t hi = col_off + ncols < h * 16 + 16 ? col_off + ncols : h * 16 + 16;
            if (lo >= hi) {
                continue;
            }
            const uint32_t from = src + ((r / 16 * 2 + h) * 256 + r % 16 * 16 + lo % 16) * elem_bytes;
            const uint32_t offset = ((tr / 16 * 2 + h) * 256 + tr % 16 * 16 + lo % 16) * elem_bytes;
            noc_async_write(from, get_noc_addr(page, tensor, offset), (hi - lo) * elem_bytes);
        }
    }
}"""


PAGES_TO_BYTES = """// `pages` float pages at `addr` (`page_bytes` each: 1024 bfloat16 or float32 values) -> int8 (`is_signed`) or
// uint8 values, in place: page p's 1024 bytes at its start (byte i is written after value i is read). Truncation
// toward zero; values beyond the type's range (inf included) saturate to its ends, NaN becomes 0.
inline void pages_to_bytes(uint32_t addr, uint32_t pages, uint32_t page_bytes, uint32_t is_signed) {
    const int32_t low = is_signed ? -128 : 0, high = is_signed ? 127 : 255;
    for (uint32_t p = 0; p < pages; ++p) {
        const uint32_t page = addr + p * page_bytes;
        volatile tt_l1_ptr uint8_t* out = reinterpret_cast<volatile tt_l1_ptr uint8_t*>(page);
        for (uint32_t i = 0; i < 1024; ++i) {
            uint32_t bits;
            if (page_bytes == 4096) {
                bits = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(page)[i];
            } else {
                bits = static_cast<uint32_t>(reinterpret_cast<volatile tt_l1_ptr uint16_t*>(page)[i]) << 16;
            }
            const int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xffu) - 127;
            int32_t value = 0;
            if (exponent == 128 && (bits & 0x7fffffu) != 0) {
                value = 0;                                          // NaN
            } else if (exponent >= 8) {
                value = (bits >> 31) != 0 ? low : high;             // |x| >= 256, inf
            } else if (exponent >= 0) {
                const int32_t magnitude = static_cast<int32_t>(((bits & 0x7fffffu) | 0x800000u) >> (23 - exponent));
                value = (bits >> 31) != 0 ? -magnitude : magnitude;
            }
            value = value < low ? low : value > high ? high : value;
            out[i] = static_cast<uint8_t>(value);
        }
    }
}"""


FP32_TO_INT32 = """// `words` float32 values at `addr` -> int32 in place, as the SFPU's typecast_tile<Float32, Int32> converts
// (ckernel_sfpu_typecast.h calculate_typecast_fp32_to_int32): truncation toward zero, |x| < 1 -> 0, magnitudes of
// 2^31 and more (inf, NaN) saturate to INT32_MIN for a negative sign, else INT32_MAX. Integer operations only.
inline void fp32_pages_to_int32(uint32_t addr, uint32_t words) {
    volatile tt_l1_ptr uint32_t* word = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(addr);
    for (uint32_t n = 0; n < words; ++n) {
        const uint32_t bits = word[n];
        const int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xffu) - 127;
        uint32_t magnitude = 0;
        if (exponent >= 31) {
            magnitude = 0x80000000u;
        } else if (exponent >= 0) {
            const uint32_t mantissa = (bits & 0x7fffffu) | 0x800000u;
            magnitude = exponent >= 23 ? mantissa << (exponent - 23) : mantissa >> (23 - exponent);
        }
        const bool negative = (bits >> 31) != 0;
        uint32_t value = negative ? 0u - magnitude : magnitude;
        if (!negative && magnitude == 0x80000000u) {
            value = 0x7fffffffu;
        }
        word[n] = value;
    }
}"""


class CodegenError(RuntimeError):
    """The IR holds something codegen cannot print: a compiler bug, never a user error."""


class KernelPrinter:
    def __init__(self, func: tirx.PrimFunc, dram_write_noc: int | None = None, read_nocs: dict | None = None):
        self.func = func
        self.dram_write_noc = dram_write_noc     # the writer's DRAM writes on this NoC, not its own (noc_choice.py)
        self.read_nocs = read_nocs or {}         # CB -> the NoC its multicast senders read on, not the kernel's
        self.role = attrs.KERNEL_ROLE.get(func)
        self.runtime_args = [a["name"] for a in attrs.RUNTIME_ARGS.get(func)]
        self.cbs = {c["index"]: c for c in attrs.CB_CONFIG.get(func)}
        self.layouts = attrs.LAYOUT_DESC.get(func)
        self.names: dict[int, str] = {}
        self.taken: dict[str, object] = {}
        self.used_ops: set[str] = set()
        self.used_cbs: set[int] = set()
        self.scalars: dict[str, str] = {}          # this statement's element reads: call -> its variable
        self.scalars_declared: list[str] = []

    # ---- expressions -----------------------------------------------------------------------------------
    def var(self, v) -> str:
        key = v.__hash__()
        for known, name in self.names.items():
            if known == key:
                return name
        base = str(v.name)
        name, n = base, 1
        while name in self.taken and not self.taken[name].same_as(v):
            name, n = f"{base}_{n}", n + 1
        self.taken[name] = v
        self.names[key] = name
        return name

    def expr(self, e, parent_prec: int = -1) -> str:
        if isinstance(e, tirx.IntImm):
            value = int(e.value)
            return f"{value:#x}u" if str(e.ty) == "uint32" and value > 9 else str(value)
        if isinstance(e, tirx.FloatImm):
            return _float_literal(float(e.value))
        if isinstance(e, (tvm.ir.Var, tirx.Var)):
            return self.var(e)
        spec = _BINOPS.get(type(e))
        if spec is not None and isinstance(e, _COMPARISONS) and (_holds_run_time_value(e) or _may_be_negative(e)):
            # a block index (uint32_t) against a value read while the kernel runs (int32_t, may be negative), or a
            # difference of indices (a mask tile's offset): compared signed, as the indices' true values are
            a, b = (f"static_cast<int32_t>({self.expr(x)})" for x in (e.a, e.b))
            text = f"{a} {spec[0]} {b}"
            return f"({text})" if spec[1] <= parent_prec else text
        if spec is not None:
            sym, prec = spec
            # left-associative: the left operand may share our precedence, the right one may not
            text = f"{self.expr(e.a, prec - 1)} {sym} {self.expr(e.b, prec)}"
            return f"({text})" if prec <= parent_prec else text
        if isinstance(e, (tirx.Min, tirx.Max)):   # signed (a clamp may see negative offsets), no <algorithm>
            a, b = (f"static_cast<int32_t>({self.expr(x)})" for x in (e.a, e.b))
            return f"({a} {'<' if isinstance(e, tirx.Min) else '>'} {b} ? {a} : {b})"
        if isinstance(e, tirx.Select) or (isinstance(e, tvm.ir.Call) and str(e.op.name).endswith("if_then_else")):
            cond, a, b = (e.condition, e.true_value, e.false_value) if isinstance(e, tirx.Select) else e.args
            return f"({self.expr(cond, 0)} ? {self.expr(a, 0)} : {self.expr(b, 0)})"
        if isinstance(e, tirx.Not):
            return f"!({self.expr(e.a)})"
        if isinstance(e, tirx.Cast) and str(e.ty).startswith("int") and (
                isinstance(e.value, tvm.ir.expr.TensorLoad) or str(e.value.ty).startswith("int")):
            return self.expr(e.value, parent_prec)      # an element read as an integer, or a handed-over value
        if isinstance(e, tvm.ir.expr.TensorLoad) and str(e.source.scope()) == "global":
            return self.scalar_read(e)
        found = ops.intrinsic_of(e)
        if found is not None and found[0].name == "read_value":
            self.used_ops.add("read_value")
            return f"static_cast<int32_t>(read_tile_value({self.arg('cb', found[1][0])}, 0, {self.expr(found[1][1])}))"
        if found is not None and found[0].name == "runtime_arg":
            name = str(found[1][0].value)
            return f"get_arg_val<uint32_t>({self.runtime_args.index(name)})"
        raise CodegenError(f"cannot print expression {type(e).__name__}: {e}")

    def scalar_read(self, load) -> str:
        """One element of an integer tensor (held as float32 tiles) read while the kernel runs: its tile into this
        kernel's scratch page, the element from its face (split_kernels gave the kernel the tensor's accessor)."""
        if self.role == ops.COMPUTE or len(load.indices) != 2:
            raise CodegenError(f"cannot print the element read {load} in the {self.role} kernel")
        name = str(load.source.name)
        scratch = next(c for c in self.cbs.values() if c["name"] == f"cb_tt_scalars_{self.role}")
        self.used_cbs.add(scratch["index"])
        self.used_ops.add("read_scalar")
        row, col = (self.expr(i, 0) for i in load.indices)
        call = f"read_scalar(accessor_{name}, tt_scalars_l1, {name}_tile_cols, {row}, {col})"
        if call not in self.scalars:     # read once per statement (a clamp names its operand twice)
            self.scalars[call] = f"{name}_{len(self.scalars_declared)}"
            self.scalars_declared.append(f"const int32_t {self.scalars[call]} = {call};")
        return self.scalars[call]

    def arg(self, kind: str, value) -> str:
        if kind == "cb":
            index = int(value)
            self.used_cbs.add(index)
            return self.cbs[index]["name"]
        if kind == "name":
            return str(value.value)
        if kind == "float":
            return _float_literal(float(value.value))
        if kind == "bits":
            return f"{int(value.value):#010x}u"
        return self.expr(value)

    # ---- statements --------------------------------------------------------------------------------------
    def stmt(self, s, depth: int) -> list[str]:
        pad = INDENT * depth
        if isinstance(s, tirx.SeqStmt):
            return [line for child in stmts_of(s) for line in self.stmt(child, depth)]
        self.scalars, before = {}, len(self.scalars_declared)

        def reads() -> list[str]:      # the elements this statement's own expressions read, declared before it
            return [f"{pad}{line}" for line in self.scalars_declared[before:]]
        if isinstance(s, tirx.Bind):
            line = f"{pad}const uint32_t {self.var(s.var)} = {self.expr(s.value)};"
            return reads() + [line]
        if isinstance(s, tirx.For):
            v = self.var(s.loop_var)
            lo = self.expr(s.min)
            hi = self.expr(s.extent) if lo == "0" else f"{lo} + {self.expr(s.extent, 4)}"
            if _has_clamp(s.extent):   # a trip count computed with signed min/max: compared as the unsigned it is
                hi = f"static_cast<uint32_t>({hi})"
            head = reads() + [f"{pad}for (uint32_t {v} = {lo}; {v} < {hi}; ++{v}) {{"]
            return [*head, *self.stmt(s.body, depth + 1), f"{pad}}}"]
        if isinstance(s, tirx.IfThenElse):
            cond = self.expr(s.condition)
            lines = reads() + [f"{pad}if ({cond}) {{", *self.stmt(s.then_case, depth + 1)]
            if s.else_case is not None:
                lines += [f"{pad}}} else {{", *self.stmt(s.else_case, depth + 1)]
            return lines + [f"{pad}}}"]
        found = ops.intrinsic_of(s)
        if found is None:
            raise CodegenError(f"unexpected statement in the {self.role} kernel: {type(s).__name__}")
        spec, args = found
        if self.role not in spec.roles:
            raise CodegenError(f"tt.{spec.name} may not appear in the {self.role} kernel")
        self.used_ops.add(spec.name)
        rendered = [self.arg(k, a) for k, a in zip(spec.args, args)]
        text = _SPLICE.format(spec.cpp, *rendered)
        if spec.name == "write_tile" and self.padding_faces_skipped(rendered[2]):
            return reads() + [f"{pad}{line};" for line in self.write_data_faces(text, rendered[2])]
        return reads() + [f"{pad}{self.on_read_noc(spec.name, args, self.on_write_noc(spec.name, text))};"]

    def data_face_runs(self, name: str) -> list[tuple[int, int]]:
        """(byte offset, bytes) of the runs of consecutive faces of `name`'s pages that hold values (layout.py,
        MatrixView.data_faces), for the formats whose pages are four faces one after another."""
        desc = self.layouts[name]
        if desc.get("data_format") not in FACE_ORDERED_FORMATS or "tile_axes" not in desc:
            return [(0, desc["page_bytes"])]
        face_bytes = desc["page_bytes"] // 4
        runs: list[list[int]] = []
        for f in view_of(desc).data_faces():
            if runs and runs[-1][1] == f:
                runs[-1][1] = f + 1
            else:
                runs.append([f, f + 1])
        return [(a * face_bytes, (b - a) * face_bytes) for a, b in runs]

    def padding_faces_skipped(self, name: str) -> bool:
        return self.data_face_runs(name) != [(0, self.layouts[name]["page_bytes"])]

    def write_data_faces(self, text: str, name: str) -> list[str]:
        """An output page written face run by face run, its padding faces left out: a per-row vector (mean, rstd,
        a log-sum-exp) stored as 32x32 tiles has values only in its pages' left two faces, so half the bytes (the
        host reads back only the values)."""
        return [self.page_write(text, offset, size) for offset, size in self.data_face_runs(name)]

    def page_write(self, text: str, offset: int = 0, size: int = 0) -> str:
        """A write_tile's noc_async_write_page(page, accessor, src) with its optional arguments: `size` bytes (0: the
        page) from `offset` into both the CB page and the DRAM page, on the writer's DRAM-write NoC when
        noc_choice.py swapped it (on_write_noc)."""
        noc = self.dram_write_noc if self.role == ops.WRITER else None
        if not offset and not size and noc is None:
            return text
        return f"{text[:-1]}{f' + {offset}' if offset else ''}, {size}, {offset}{'' if noc is None else f', {noc}'})"

    def on_write_noc(self, name: str, text: str) -> str:
        """A writer whose NoC is not the one for DRAM writes (noc_choice.py swapped it to NoC 0 for its reads) writes
        its output pages on that one: the page writes name it, and every flush or barrier waits on both NoCs."""
        n = self.dram_write_noc
        if n is None or self.role != ops.WRITER:
            return text
        if name == "write_tile":
            return self.page_write(text)
        if name == "noc_async_writes_flushed":
            return f"noc_async_writes_flushed(); noc_async_writes_flushed({n})"
        if name in ("noc_async_write_barrier", "write_barrier_before_read"):
            return f"noc_async_write_barrier(); noc_async_write_barrier({n})"
        return text

    def on_read_noc(self, name: str, args, text: str) -> str:
        """A multicast CB whose senders read on the other NoC (noc_choice.sender_read_nocs): its page reads name
        that NoC, and every read barrier of the kernel waits on both."""
        if name == "read_tile" and int(args[0]) in self.read_nocs:
            return f"{text[:-1]}, 0, {self.read_nocs[int(args[0])]})"
        if name == "noc_async_read_barrier" and self.read_nocs:
            return "; ".join([text] + [f"noc_async_read_barrier({n})" for n in sorted(set(self.read_nocs.values()))])
        return text

    # ---- whole kernel ------------------------------------------------------------------------------------
    def print(self) -> str:
        body = self.stmt(self.func.body, 1)
        if self.used_ops & {"read_rows", "read_window"}:   # its pages land in the kernel's scratch (the prologue's)
            self.used_cbs.add(next(c for c in self.cbs.values() if c["name"] == f"cb_tt_scalars_{self.role}")["index"])
        prologue = self.prologue()
        head = [f"// {self.role}.cpp -- generated by tilefarm {COMPILER_VERSION} from `{attrs.SOURCE_FILE.get(self.func)}`"
                f" for {attrs.TARGET.get(self.func)['arch']}. Do not edit.",
                "#include <cstdint>"]
        if self.role == ops.COMPUTE:
            headers = ["api/compute/common.h"] + sorted({ops.OPS[n].header for n in self.used_ops
                                                          if ops.OPS[n].header} - {"api/compute/common.h"})
            head += [f'#include "{h}"' for h in headers]
        else:
            head.append('#include "api/dataflow/dataflow_api.h"')
        head.append("")
        for index in sorted(self.used_cbs):
            cb = self.cbs[index]
            head.append(f"constexpr uint32_t {cb['name']} = tt::CBIndex::c_{index};  "
                        f"// {cb['buffer']}: {cb['num_pages']} x {cb['page_bytes']} B {cb['data_format']}")
        for arg in attrs.COMPILE_TIME_ARGS.get(self.func):
            name = arg["buffer"]
            head.append(f"constexpr uint32_t {name}_tile_cols = {self.layouts[name]['tiles'][1]};  "
                        f"// {name} is {self.layouts[name]['tiles'][0]}x{self.layouts[name]['tiles'][1]} tiles in DRAM")
        if "zero_tile" in self.used_ops:
            head += ["",
                     "// Tiles read outside a buffer are zeros: fill from the core's always-zero L1 region.",
                     "inline void zero_fill_l1(uint32_t l1_addr, uint32_t bytes) {",
                     f"{INDENT}const uint64_t zeros = get_noc_addr(MEM_ZEROS_BASE);",
                     f"{INDENT}for (uint32_t offset = 0; offset < bytes; offset += MEM_ZEROS_SIZE) {{",
                     f"{INDENT * 2}noc_async_read(zeros, l1_addr + offset, MEM_ZEROS_SIZE);",
                     f"{INDENT}}}",
                     "}"]
        if "read_scalar" in self.used_ops:
            head += ["", *READ_SCALAR.splitlines()]
        if "read_rows" in self.used_ops:
            head += ["", *READ_ROWS.splitlines()]
        if "read_window" in self.used_ops:
            head += ["", *READ_WINDOW.splitlines()]
        if "write_rows" in self.used_ops:
            head += ["", *WRITE_ROWS.splitlines()]
        if "pages_to_int32" in self.used_ops:
            head += ["", *FP32_TO_INT32.splitlines()]
        if "pages_to_bytes" in self.used_ops:
            head += ["", *PAGES_TO_BYTES.splitlines()]
        if "fill_reduce_scaler" in self.used_ops:
            head += ["",
                     "// The reduce scaler tile: bf16 1.0 in the first row of each 16x16 face, zeros elsewhere",
                     "// (api/compute/reduce.h); zeros come from MEM_ZEROS, the ones from inline NoC writes to this core.",
                     "inline void fill_reduce_scaler(uint32_t l1_addr) {",
                     f"{INDENT}const uint64_t zeros = get_noc_addr(MEM_ZEROS_BASE);",
                     f"{INDENT}for (uint32_t offset = 0; offset < 2048; offset += MEM_ZEROS_SIZE) {{",
                     f"{INDENT * 2}noc_async_read(zeros, l1_addr + offset, MEM_ZEROS_SIZE);",
                     f"{INDENT}}}",
                     f"{INDENT}noc_async_read_barrier();",
                     f"{INDENT}for (uint32_t face = 0; face < 4; ++face) {{",
                     f"{INDENT * 2}for (uint32_t word = 0; word < 8; ++word) {{",
                     f"{INDENT * 3}noc_inline_dw_write(get_noc_addr(l1_addr + face * 512 + word * 4), 0x3F803F80u);",
                     f"{INDENT * 2}}}",
                     f"{INDENT}}}",
                     f"{INDENT}noc_async_write_barrier();",
                     "}"]
        if self.used_ops & {"page_tag", "page_expect"}:
            head += ["", *self.page_identity()]
        if "mcast_send" in self.used_ops:
            flush = f"{INDENT * 2}noc_async_writes_flushed();  // Blackhole: the data leaves before the flag\n" \
                if attrs.TARGET.get(self.func)["arch"] == "blackhole" else ""
            head += ["", *MCAST_SEND.format(flush=flush).splitlines()]
        if "mcast_send_pages" in self.used_ops:
            flush = f"{INDENT}noc_async_writes_flushed();  // Blackhole: the data leaves before the flag\n" \
                if attrs.TARGET.get(self.func)["arch"] == "blackhole" else ""
            head += ["", *MCAST_SEND_PARTS.format(flush=flush).splitlines()]
        if "mcast_receive" in self.used_ops:
            head += ["", *MCAST_RECEIVE.splitlines()]
        if "mcast_receive_ready" in self.used_ops:
            head += ["", *MCAST_RECEIVE_READY.splitlines()]
        if "mcast_receive_wait" in self.used_ops:
            head += ["", *MCAST_RECEIVE_WAIT.splitlines()]
        if "swap_send" in self.used_ops:
            head += ["", *SWAP_SEND.splitlines()]
        if "copy_page" in self.used_ops:
            head += ["", *COPY_LOCAL_PAGE.splitlines()]
        if self.used_ops & {"read_scalar", "read_rows", "read_window"}:
            prologue += [f"{INDENT}cb_reserve_back(cb_tt_scalars_{self.role}, 3);  // scratch for the elements and rows read below",
                         f"{INDENT}const uint32_t tt_scalars_l1 = get_write_ptr(cb_tt_scalars_{self.role});"]
        return "\n".join(head + ["", "void kernel_main() {", *prologue, *body, "}", ""])

    def page_identity(self) -> list[str]:
        """TILEFARM_PAGE_TAG / TILEFARM_PAGE_EXPECT: on the emulator, which DRAM page a packed tile is for and which
        one a CB position must hold (a DRAM tensor's id is its creation index in main.cpp, its page the tile's index
        in it, none outside it); on a device, nothing."""
        buffers = attrs.BUFFERS.get(self.func)
        tensors = [name for name, b in buffers.items() if b["scope"] == "global" and b["role"] != "unused"]
        lines = ["// Page identity: the emulator checks every hand-off (TTEMU_PAGE_TAGS=1); a device ignores it.",
                 "#ifdef TTEMU_EMULATOR",
                 "#define TILEFARM_PAGE_TAG(t, row, col) ttemu::dev::page_tag(t##_id, t##_page(row, col), "
                 "::ttemu::Site{__FILE__, __LINE__})",
                 "#define TILEFARM_PAGE_EXPECT(cb, index, t, row, col) ttemu::dev::page_expect(cb, index, t##_id, "
                 "t##_page(row, col), ::ttemu::Site{__FILE__, __LINE__})",
                 "#else",
                 "#define TILEFARM_PAGE_TAG(t, row, col) ((void)0)",
                 "#define TILEFARM_PAGE_EXPECT(cb, index, t, row, col) ((void)0)",
                 "#endif"]
        for n, name in enumerate(tensors):
            rows, cols = self.layouts[name]["tiles"]
            lines += [f"constexpr uint32_t {name}_id = {n};",
                      f"inline uint32_t {name}_page(uint32_t row, uint32_t col) {{ "
                      f"return row < {rows} && col < {cols} ? row * {cols} + col : 0xffffffffu; }}"]
        return lines

    def prologue(self) -> list[str]:
        lines = []
        for arg in attrs.RUNTIME_ARGS.get(self.func):
            if arg["kind"] == "buffer_address":
                lines.append(f"{INDENT}const uint32_t {arg['name']} = get_arg_val<uint32_t>({self.runtime_args.index(arg['name'])});")
        previous = None
        for arg in attrs.COMPILE_TIME_ARGS.get(self.func):
            name = arg["buffer"]
            offset = "0" if previous is None else f"{previous}_args.next_compile_time_args_offset()"
            lines.append(f"{INDENT}constexpr auto {name}_args = TensorAccessorArgs<{offset}>();")
            lines.append(f"{INDENT}const auto accessor_{name} = TensorAccessor({name}_args, {name}_addr, "
                         f"{self.layouts[name]['page_bytes']});")
            previous = name
        return lines


def print_kernel(func: tirx.PrimFunc, dram_write_noc: int | None = None, read_nocs: dict | None = None) -> str:
    return KernelPrinter(func, dram_write_noc, read_nocs).print()
