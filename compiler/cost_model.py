"""What an LLK call costs on the compute kernel's TRISCs: one model, read by the compiler's block chooser
(passes/choose_blocks.py) and by the emulator's timing model (src/compute.cpp, through TTEMU_COSTS' `matmul_block`);
an SFPU call and a pack by the same formulas as the emulator's sfpu_event and pack_event (sfpu_call_cycles,
pack_tile_cycles: TTTensorize's balance of the packer against the math thread reads them).

A `matmul_block(rt, ct)` call (matmul_tiles is the 1 x 1 case) unpacks the operand it reuses once per tile and streams
the other once per output tile (tt-llk's llk_unpack_AB_matmul: in0 is reused when ct >= rt), then multiplies its
rt x ct tile products. Its cost is linear in what it moves and computes (compiler/device_costs.json's constants):

    unpack = max(unpack_call_cycles + unpack_instr_cycles x tiles unpacked,
                 (in0 tiles x in0 tile bytes + in1 tiles x in1 tile bytes) / unpack_bytes_per_cycle)
    math   = tile products x (math_tile_cycles x fidelity phases + fpu cycles at the fidelity)

(the unpack thread issues a call's instructions - the LLK call and an UNPACR's two address cycles per tile - while
the unpackers fetch the previous call's data: tt-llk keeps two config contexts in flight, wait_for_next_context(2),
and an UNPACR's fetch is pipelined behind the next one's address cycles; so back-to-back calls cost the larger of the
two, which is what the emulator's timing model charges, ttemu/src/timing_sim.cpp; the math MOP replays a tile's MVMULs once per fidelity phase: LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4 phases; a block
format's shared exponents reach the unpacker through a port of their own, so the emulator counts only a tile's datum
bytes against the unpacker's rate)

so for every call shape a DST holds the emulator is handed the five coefficients [unpack constant, per in0 byte, per
in1 byte, math constant, products] (`matmul_block_terms`) and evaluates them against the call's CB formats and the
kernel's fidelity, as `matmul_block_cycles` does here for the compiler.
"""
from __future__ import annotations

import functools

MAX_DST_TILES = 16   # the most tiles one DST section holds (16-bit, full sync): the largest call shape


def matmul_block_terms(costs: dict, rt: int, ct: int) -> tuple[float, float, float, float, float]:
    """(unpack constant: the unpack thread's instructions, unpack cycles per in0 tile byte, per in1 tile byte: the
    unpackers' data, math constant, tile products)."""
    reuse_in0 = ct >= rt
    products = rt * ct
    in0_tiles = rt if reuse_in0 else products
    in1_tiles = products if reuse_in0 else ct
    rate = float(costs["unpack_bytes_per_cycle"])
    return (float(costs["unpack_call_cycles"]) + float(costs["unpack_instr_cycles"]) * (in0_tiles + in1_tiles),
            in0_tiles / rate, in1_tiles / rate, float(costs["math_tile_cycles"]) * products, float(products))


def matmul_block_cycles(costs: dict, rt: int, ct: int, in0_tile_bytes: float, in1_tile_bytes: float,
                        fidelity: str) -> tuple[float, float]:
    """(unpack cycles, math cycles) of one of back-to-back calls at `fidelity` (LoFi, HiFi2, HiFi3, HiFi4): the
    unpack thread's instructions and the unpackers' data overlap, so the larger of the two."""
    instructions, per_in0, per_in1, math, products = matmul_block_terms(costs, rt, ct)
    fpu = float(costs[f"fpu_cycles_{fidelity.lower()}"])
    phases = fpu / float(costs["fpu_cycles_lofi"])
    return (max(instructions, per_in0 * in0_tile_bytes + per_in1 * in1_tile_bytes), math * phases + products * fpu)


def sfpu_call_cycles(costs: dict, instructions: float) -> float:
    """An SFPU call over one tile on the math thread: the tile's issue (math_tile_cycles) and its rows at the call's
    instructions a row (ttemu/src/compute.cpp sfpu_event)."""
    return float(costs["math_tile_cycles"]) + float(costs["sfpu_rows_per_tile"]) * instructions


def pack_tile_cycles(costs: dict, page_bytes: float, accumulate: bool) -> float:
    """A pack of one tile: the call and the tile's bytes at the packer's rate, the L1-accumulating rate when it adds
    into the tile in L1 (ttemu/src/compute.cpp pack_event: the call on the pack thread, the bytes on the packer)."""
    rate = costs["pack_l1_acc_bytes_per_cycle"] if accumulate else costs["pack_bytes_per_cycle"]
    return float(costs["pack_call_cycles"]) + page_bytes / float(rate)


def matmul_block_table(costs: dict) -> list[float]:
    """[rt, ct, the five terms] for every rt x ct <= MAX_DST_TILES, flattened: TTEMU_COSTS' `matmul_block`."""
    out: list[float] = []
    for rt in range(1, MAX_DST_TILES + 1):
        for ct in range(1, MAX_DST_TILES // rt + 1):
            out += [rt, ct, *matmul_block_terms(costs, rt, ct)]
    return out


def noc_route(load: dict, costs: dict, noc: int, src: tuple, dst: tuple, nbytes: float) -> None:
    """Add `nbytes` to every router link a transfer from NoC coordinates `src` to `dst` crosses on `noc` (the
    emulator's routes, ttemu/src/timing_fabric.h: NoC 0 right then down, NoC 1 up then left, on a torus); `load`
    maps (noc, x, y, axis) -> bytes."""
    width, height = (int(v) for v in costs["noc_grid"])
    for link in noc_links(width, height, noc, (int(src[0]), int(src[1])), (int(dst[0]), int(dst[1]))):
        load[link] = load.get(link, 0.0) + nbytes


@functools.lru_cache(maxsize=65536)
def noc_links(width: int, height: int, noc: int, src: tuple[int, int], dst: tuple[int, int]) -> tuple:
    """The links (noc, x, y, axis) of noc_route's route from `src` to `dst` on a `width` x `height` torus, in the
    order it crosses them: a pure function of its arguments, so remembered (the block chooser routes the same bank
    to the same core for every candidate it prices)."""
    x, y = src
    links = []
    if noc == 0:
        while x != dst[0]:
            links.append((0, x, y, 0))
            x = (x + 1) % width
        while y != dst[1]:
            links.append((0, x, y, 1))
            y = (y + 1) % height
    else:
        while y != dst[1]:
            links.append((1, x, y, 1))
            y = (y - 1) % height
        while x != dst[0]:
            links.append((1, x, y, 0))
            x = (x - 1) % width
    return tuple(links)


def dram_bank_xys(costs: dict) -> list[tuple[int, int]]:
    """The NoC coordinates of each DRAM bank's endpoint (the table's dram_noc_xy pairs)."""
    flat = costs["dram_noc_xy"]
    return [(int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]


def dram_read_link_cycles(costs: dict, reads: list) -> float:
    """Cycles the busiest NoC link carries DRAM read data: `reads` is [(logical core (x, y), bytes, noc)], each
    core's bytes spread evenly over the banks (interleaved pages) and routed from every bank to the core."""
    geometry = (tuple(int(x) for x in costs["worker_noc_x"]), tuple(int(y) for y in costs["worker_noc_y"]),
                *(int(v) for v in costs["noc_grid"]), tuple(dram_bank_xys(costs)), float(costs["noc_bytes_per_cycle"]))
    return _busiest_read_link(geometry, tuple(((int(cx), int(cy)), nbytes, int(noc)) for (cx, cy), nbytes, noc in reads))


@functools.lru_cache(maxsize=1024)
def _busiest_read_link(geometry: tuple, reads: tuple) -> float:
    """dram_read_link_cycles of the device geometry (worker NoC x's, y's, NoC grid width, height, bank endpoints,
    link bytes per cycle): a pure function of its arguments, so remembered (the block chooser prices the same reads
    again for other candidates)."""
    xs, ys, width, height, banks, bytes_per_cycle = geometry
    load: dict = {}
    for (cx, cy), nbytes, noc in reads:
        share = nbytes / len(banks)
        # what noc_route from every bank in turn adds, a link at a time: the same additions in the same order
        for link, times in _links_from_banks(width, height, banks, noc, (xs[cx], ys[cy])):
            total = load.get(link, 0.0)
            for _ in range(times):
                total += share
            load[link] = total
    return max(load.values(), default=0.0) / bytes_per_cycle


@functools.lru_cache(maxsize=4096)
def _links_from_banks(width: int, height: int, banks: tuple, noc: int, here: tuple[int, int]) -> tuple:
    """((link, how many of the banks' routes to `here` cross it), ...) in the order the routes first cross them."""
    counts: dict = {}
    for bank in banks:
        for link in noc_links(width, height, noc, bank, here):
            counts[link] = counts.get(link, 0) + 1
    return tuple(counts.items())
