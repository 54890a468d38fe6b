"""The approximately-timed device model (src/timing*.cpp, compiler/device_costs.json): what makes kernels fast or
slow shows up in the modelled device time the way it does on hardware - DRAM bank contention, read barriers that
expose latency, multicast against unicast fan-out, double buffering, math fidelity - and the model is deterministic,
the same with or without the arithmetic (timing-only mode)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from compiler.target import device_costs
from compiler.toolchain import emulate

from .conftest import BUNDLES, eltwise_cfg
from .test_ttnn_kernels import PROGRAMS, NPY_UTIL, MatmulConfig, bf16

COSTS = device_costs("wormhole_b0")


def device_cycles(result: emulate.EmulationResult) -> float:
    timing = result.report["timing"]
    assert timing is not None and timing["programs"], "the report has no timing section"
    assert all(p["forced_waits"] == 0 for p in timing["programs"]), timing["programs"][0]["forced_at"]
    return timing["device_cycles"]


def kernel_cycles(result: emulate.EmulationResult) -> float:
    """Device time without the program launch: what the kernels themselves take."""
    device_cycles(result)
    return sum(p["kernel_cycles"] for p in result.report["timing"]["programs"])


def program(result: emulate.EmulationResult) -> dict:
    return result.report["timing"]["programs"][0]


@pytest.fixture
def traffic(tmp_path):
    """Runs the data-movement patterns of bundles/traffic (see its main.cpp) and returns the result."""
    counter = iter(range(1000))

    def go(mode: int, cores: int, tiles: int, *, cb_pages: int = 8, barrier_every: int = 8, flag: int = 0,
           **kwargs) -> emulate.EmulationResult:
        n = next(counter)
        bundle = tmp_path / f"traffic-{n}"
        shutil.copytree(BUNDLES / "traffic", bundle)
        shutil.copy(BUNDLES / "common" / "npy_util.hpp", bundle / "npy_util.hpp")
        cfg = np.array([[mode, cores, tiles, cb_pages, barrier_every, flag]], np.float32)
        return emulate.run_host_program(bundle / "main.cpp", {"cfg": cfg}, tmp_path / f"work-{n}", **kwargs)

    return go


def test_cores_reading_one_dram_bank_contend_for_it(traffic):
    interleaved = traffic(0, cores=8, tiles=32)
    one_bank = traffic(0, cores=8, tiles=32, flag=1)
    bytes_read = 8 * 32 * 2048
    # every byte goes through bank 0: at least bytes / (the bank's bandwidth) cycles
    bank_rate = COSTS["dram_bank_gbps"] * COSTS["dram_efficiency"] / COSTS["clock_ghz"]
    assert kernel_cycles(one_bank) >= bytes_read / bank_rate
    banks = program(one_bank)["dram"]["banks"]
    assert banks[0]["bytes_read"] == bytes_read and all(b["bytes_read"] == 0 for b in banks[1:])
    spread = program(interleaved)["dram"]["banks"]
    assert sum(b["bytes_read"] for b in spread) == bytes_read and min(b["bytes_read"] for b in spread) > 0
    # the same bytes spread over every bank arrive several times faster
    assert kernel_cycles(one_bank) > 3 * kernel_cycles(interleaved)
    # the readers of the contended bank spend their time waiting on the NoC, the consumers on the CB
    readers = [s for s in program(one_bank)["streams"] if s["risc"] == "NCRISC"]
    sinks = [s for s in program(one_bank)["streams"] if s["risc"] == "BRISC"]
    assert all(s["wait_noc"] > 4 * s["busy"] for s in readers)
    assert all(s["wait_cb"] > 0 and s["cb_wait"]["0"] == s["wait_cb"] for s in sinks)


def test_a_read_barrier_per_tile_exposes_the_dram_latency(traffic):
    batched = traffic(0, cores=1, tiles=64, barrier_every=8)
    per_tile = traffic(0, cores=1, tiles=64, barrier_every=1)
    # one barrier per tile pays the round trip for every tile; eight in flight overlap it
    assert kernel_cycles(per_tile) > 2 * kernel_cycles(batched)
    assert kernel_cycles(per_tile) > 64 * COSTS["dram_latency_cycles"]


def test_multicast_sends_a_tile_once_where_unicast_sends_it_per_receiver(traffic):
    multicast = traffic(1, cores=8, tiles=16)
    unicast = traffic(1, cores=8, tiles=16, flag=1)
    assert unicast.report["totals"]["noc_multicasts"] == 0 and multicast.report["totals"]["noc_multicasts"] == 16
    # 7 receivers: unicast pushes 7x the bytes through the sender's NoC port
    min_unicast = 16 * 7 * 2048 / COSTS["noc_bytes_per_cycle"]
    assert kernel_cycles(unicast) >= min_unicast
    assert kernel_cycles(unicast) > 3 * kernel_cycles(multicast)


def busiest_link_bytes(writers: int, pages: int, page_bytes: int) -> float:
    """Bytes on the busiest NoC 0 link when cores 0..writers-1 (row-major on the 8 x 8 grid) each write `pages`
    pages of an interleaved DRAM buffer, core i from page i mod 12: NoC 0 goes rightwards then downwards, wrapping."""
    (w, h), xs, ys, ends = COSTS["noc_grid"], COSTS["worker_noc_x"], COSTS["worker_noc_y"], COSTS["dram_noc_xy"]
    banks = [(int(ends[2 * b]), int(ends[2 * b + 1])) for b in range(len(ends) // 2)]
    load: dict[tuple, float] = {}
    for i in range(writers):
        x, y = int(xs[i % 8]), int(ys[i // 8])
        for k in range(pages):
            bx, by = banks[(i + k) % len(banks)]
            links = [("x", (x + d) % w, y) for d in range((bx - x) % w)]
            links += [("y", bx, (y + d) % h) for d in range((by - y) % h)]
            for link in links:
                load[link] = load.get(link, 0.0) + page_bytes
    return max(load.values())


def test_writes_into_a_backlogged_dram_bank_hold_their_route(traffic):
    link_rate = COSTS["noc_bytes_per_cycle"]
    bank_rate = COSTS["dram_bank_gbps"] * COSTS["dram_efficiency"] / COSTS["clock_ghz"]
    # one core writing every bank in turn: each bank has drained before its next page comes, so the pages land at the
    # link rate and the writer's NIU bounds it (tt-low-level-documentation: 29.8 B/cycle)
    one = traffic(3, cores=1, tiles=256)
    assert 256 * 2048 / kernel_cycles(one) > 0.9 * link_rate
    # 64 cores at once on NoC 0: 8 of the 12 banks sit in NoC column 5, and the banks fall behind the traffic, so
    # the writes into them cross the column at the banks' pace: below what the busiest link would carry at the link
    # rate, at most bank_rate / link_rate of it (measured: 51.4 B/cycle, against 96 at the link rate)
    every = traffic(3, cores=64, tiles=64)
    at_link_rate = 64 * 64 * 2048 / (busiest_link_bytes(64, 64, 2048) / link_rate)
    rate = 64 * 64 * 2048 / kernel_cycles(every)
    assert rate < 1.02 * at_link_rate * bank_rate / link_rate
    assert rate > 0.5 * at_link_rate * bank_rate / link_rate


def barrier_line(kernel: str, call: str) -> int:
    """The source line of `call` in a traffic kernel (the report's per-line statistics are keyed by it)."""
    text = (BUNDLES / "traffic" / kernel).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if line.strip().startswith(call))


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_read_response_shares_a_link_with_a_long_write_by_its_class(traffic, arch):
    """A 2 KB read response meets a 128 KB write (a chain forward) on one link and one ejection port. They are
    packets of different virtual channel classes (a response, a unicast request), which the routers interleave flit
    by flit ([ISA] NoC/README.md, Virtual channels; NoC/RoutingPaths.md, Congestion): the response moves at half the
    link's rate instead of waiting for the whole write, and the write ends later by the flits the response took.
    Hand count: a link carries noc_bytes_per_cycle (r); alone the response takes 2048 / r cycles, beside the write
    2048 / (r / 2), i.e. 2048 / r more; the write gives up 2048 bytes, 2048 / r cycles at its rate. Without the
    classes the response waited for the write's 64 x 2048 / r cycles. (The writer spends the first part of the write
    in the call, issuing it packet by packet, and the rest at its barrier.)"""
    rate = device_costs(arch)["noc_bytes_per_cycle"]
    read_wait, write_wait = barrier_line("late_reader.cpp", "noc_async_read_barrier"), \
        barrier_line("long_writer.cpp", "noc_async_write_barrier")
    write_call = barrier_line("long_writer.cpp", "if (write) noc_async_write")

    def run(write: bool, read: bool) -> tuple[float, float, float, float]:
        result = traffic(2, cores=3, tiles=64, flag=int(write) | int(read) << 1, arch=arch)
        lines = program(result)["lines"]
        wait = {(l["kernel"], l["line"]): l["wait"] for l in lines}
        writer_end, = [s["end"] for s in program(result)["streams"] if s["kernel"] == "long_writer.cpp"]
        return (wait.get(("late_reader.cpp", read_wait), 0.0), wait.get(("long_writer.cpp", write_wait), 0.0),
                wait.get(("long_writer.cpp", write_call), 0.0), writer_end)

    read_alone, _, _, _ = run(write=False, read=True)
    _, write_alone, in_call_alone, writer_end_alone = run(write=True, read=False)
    read_beside, write_beside, _, writer_end_beside = run(write=True, read=True)
    assert in_call_alone > 0 and writer_end_alone >= 64 * 2048 / rate  # the write is on the link its whole length
    assert read_beside - read_alone == pytest.approx(2048 / rate, abs=0.5)
    # the writer was already waiting at its barrier when the read came: that wait, and its end, grow by the same
    assert write_beside - write_alone == pytest.approx(2048 / rate, abs=0.5)
    assert writer_end_beside - writer_end_alone == pytest.approx(2048 / rate, abs=0.5)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_flush_returns_once_the_last_packet_starts_to_leave(traffic, arch):
    """noc_async_writes_flushed waits for NIU_MST_NONPOSTED_WR_REQ_SENT, which the NIU increments for a packet before
    the packet's data has been read from L1 ([ISA] NoC/Counters.md, write requests): a write is sent once its last
    packet starts to leave, not once its last byte has. So after the flush, the write barrier still waits for the last
    packet's data to leave (plus the hops and the acknowledgement); after a one-packet write it waits for all of it.
    Hand count: a 64-tile (128 KB) write is several packets of noc_max_packet_bytes (p) at noc_bytes_per_cycle (r):
    the barrier after the flush waits p / r + L, after a one-tile write 2048 / r + L (L: the hops and the
    acknowledgement, the same route), a difference of (p - 2048) / r. Were the flush the last byte leaving, both
    barriers would wait L alone."""
    costs = device_costs(arch)
    rate, packet = costs["noc_bytes_per_cycle"], costs["noc_max_packet_bytes"]
    flush_line = barrier_line("long_writer.cpp", "if (flush) noc_async_writes_flushed")
    barrier = barrier_line("long_writer.cpp", "noc_async_write_barrier")

    def waits(tiles: int) -> tuple[float, float]:
        result = traffic(2, cores=3, tiles=tiles, flag=1 | 4, arch=arch)
        wait = {l["line"]: l["wait"] for l in program(result)["lines"] if l["kernel"] == "long_writer.cpp"}
        return wait.get(flush_line, 0.0), wait.get(barrier, 0.0)

    _, after_one = waits(1)
    flush_long, after_long = waits(64)
    assert 64 * 2048 > 2 * packet  # the long write is several packets
    assert flush_long > 0  # the flush waited for the packets before the last one
    assert after_long > packet / rate
    # within a tenth of a packet: after the one-tile write the RISC's own cycles (the command, the flush call) overlap
    # the data, after the long one the flush waited
    assert after_long - after_one == pytest.approx((packet - 2048) / rate, abs=0.1 * packet / rate)


def test_double_buffered_cbs_overlap_reading_and_computing(make_bundle, run):
    rng = np.random.default_rng(1)
    x = bf16(rng.standard_normal((32 * 16, 64)).astype(np.float32))
    y = bf16(rng.standard_normal((32 * 16, 64)).astype(np.float32))
    # exp per tile (32 SFPU rows of its instructions) takes about as long as reading the next two tiles from DRAM
    exp = {"compute.cpp": "#define OP_INIT copy_init(cb_x); exp_tile_init();\n"
                          "#define OP_BODY copy_tile(cb_x, 0, 0); exp_tile(0);"}
    single = run(make_bundle("eltwise", prepend=exp), {"x": x, "y": y, "cfg": eltwise_cfg(cb_pages=1)})
    double = run(make_bundle("eltwise", prepend=exp), {"x": x, "y": y, "cfg": eltwise_cfg(cb_pages=2)})
    np.testing.assert_array_equal(single.outputs["z"], double.outputs["z"])
    # with one page the reader waits for the unpacker to pop the tile before it can read the next; with two it reads
    # the next while the unpacker still holds the current one, and the program ends sooner
    reader_wait = {name: next(s for s in program(r)["streams"] if s["risc"] == "NCRISC")["cb_wait"].get("0", 0.0)
                   for name, r in (("single", single), ("double", double))}
    assert reader_wait["single"] > 0 and reader_wait["double"] == 0
    assert kernel_cycles(double) < kernel_cycles(single)


@pytest.fixture(scope="module")
def ttnn_home():
    from compiler.toolchain import sdk_headers
    return sdk_headers.ensure_kernels()


@pytest.fixture
def matmul(tmp_path, ttnn_home):
    """ttnn's 2-D multicast matmul (tests/emulator/ttnn_programs/matmul_2d_mcast.cpp) on random bf16 data."""
    counter = iter(range(1000))

    def go(cfg: MatmulConfig, **kwargs) -> emulate.EmulationResult:
        n = next(counter)
        src = tmp_path / f"mm-{n}"
        src.mkdir()
        shutil.copy(PROGRAMS / "matmul_2d_mcast.cpp", src / "main.cpp")
        shutil.copy(NPY_UTIL, src / "npy_util.hpp")
        rng = np.random.default_rng(5)
        inputs = {"cfg": cfg.cfg()}
        if not cfg.no_data:
            inputs["a"] = bf16(rng.standard_normal((cfg.m, cfg.k)).astype(np.float32))
            inputs["b"] = bf16(rng.standard_normal((cfg.k, cfg.n)).astype(np.float32))
        return emulate.run_host_program(src / "main.cpp", inputs, tmp_path / f"work-{n}",
                                        env={"TT_METAL_HOME": str(ttnn_home)}, timeout_s=600, **kwargs)

    return go


def config(fidelity: int, **kw) -> MatmulConfig:
    base = dict(m=512, k=512, n=512, grid=(4, 4), in0_block_w=4, out_subblock_h=4, out_subblock_w=2, per_core_m=4,
                per_core_n=4, packer_l1_acc=True, math_fidelity=fidelity)
    base.update(kw)
    return MatmulConfig(**base)


def test_the_approximate_exp_costs_its_llk_instruction_count(make_bundle, run):
    """exp_tile with the precise exp, then the LLK's approximate exp with and without its negative-input clamp: the
    math thread's busy time drops by the instruction slots per SFPU row times 32 rows per tile, per tile."""
    from compiler.registry import SFPU_FUNCTIONS
    rng = np.random.default_rng(3)
    x = bf16(rng.standard_normal((32 * 8, 64)).astype(np.float32))
    precise = next(fn for fn in SFPU_FUNCTIONS if fn.call == "exp_tile").cost.value
    variants = {"precise": ("exp_tile_init();", "exp_tile(0);", precise),
                "clamped": ("exp_tile_init<true>();", "exp_tile<true>(0);", COSTS["sfpu_instr_exp_approx_clamped"]),
                "unclamped": ("exp_tile_init<true, 0x3F800000u, InputClamping::None>();",
                              "exp_tile<true, false, InputClamping::None, 32>(0, VectorMode::None);",
                              COSTS["sfpu_instr_exp_approx"])}
    busy = {}
    for name, (init, call, _) in variants.items():
        bundle = make_bundle("eltwise", prepend={"compute.cpp": f"#define OP_INIT copy_init(cb_x); {init}\n"
                                                                f"#define OP_BODY copy_tile(cb_x, 0, 0); {call}"})
        result = run(bundle, {"x": x, "y": x, "cfg": eltwise_cfg()})
        busy[name] = sum(s["busy"] for s in program(result)["streams"] if s["risc"] == "TRISC1")
    tiles = x.size // 1024
    for name in ("clamped", "unclamped"):
        saved = (busy["precise"] - busy[name]) / tiles
        assert saved == pytest.approx(32 * (precise - variants[name][2]), rel=1e-3)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_the_packer_flag_writes_cost_their_llk_instruction_count(make_bundle, run, arch):
    """pack_reconfig_l1_acc and pack_relu_config are a stall and masked config writes in the LLK (Wormhole writes the
    L1-accumulate bit into each of its four packers' sections, Blackhole's one packer once), not a format
    reconfiguration: the pack thread's busy time grows by the cost table's count per call, and the output is
    unchanged (accumulation off, no ReLU)."""
    costs = device_costs(arch)
    rng = np.random.default_rng(5)
    x = bf16(rng.standard_normal((32 * 4, 64)).astype(np.float32))
    y = bf16(rng.standard_normal((32 * 4, 64)).astype(np.float32))
    calls = 3
    variants = {"none": "", "l1_acc": "pack_reconfig_l1_acc(0); " * calls,
                "relu": "pack_relu_config(ReluConfig::none()); " * calls}
    pack_busy = {}
    for name, extra in variants.items():
        bundle = make_bundle("eltwise", replace={"compute.cpp": [("pack_tile(0, cb_z);",
                                                                  extra + "\n        pack_tile(0, cb_z);")]})
        result = run(bundle, {"x": x, "y": y, "cfg": eltwise_cfg()}, arch=arch)
        np.testing.assert_array_equal(result.outputs["z"], bf16(x + y))
        pack_busy[name] = sum(s["busy"] for s in program(result)["streams"] if s["risc"] == "TRISC2")
        if extra:
            line = next(i for i, text in enumerate((bundle / "compute.cpp").read_text().splitlines(), 1)
                        if text.strip().startswith(extra.strip()))
            hit, = [l for l in program(result)["lines"] if l["kernel"] == "compute.cpp" and l["line"] == line]
            assert hit["risc"] == "TRISC2" and hit["calls"] == x.size // 1024 * calls
            key = {"l1_acc": "pack_l1_acc_config_cycles", "relu": "pack_relu_config_cycles"}[name]
            assert hit["busy"] / hit["calls"] == pytest.approx(costs[key], rel=1e-6)
    # the flags are paid on the pack thread, nothing else in the loop changes
    assert pack_busy["none"] < pack_busy["l1_acc"] and pack_busy["none"] < pack_busy["relu"]
    assert device_costs("wormhole_b0")["pack_l1_acc_config_cycles"] > device_costs("blackhole")["pack_l1_acc_config_cycles"]


def test_timing_only_gives_the_full_runs_device_time_and_the_model_is_deterministic(matmul):
    full = matmul(config(2))
    again = matmul(config(2))
    timing_only = matmul(config(2), timing_only=True)
    assert device_cycles(full) == device_cycles(again) == device_cycles(timing_only)
    assert full.report["timing"]["timing_only"] is False and timing_only.report["timing"]["timing_only"] is True
    # the same per-stream, per-line picture, not just the same total
    assert program(full)["streams"] == program(timing_only)["streams"]
    assert program(full)["lines"] == program(timing_only)["lines"]
    # ... while only the full run computes the product
    exact = full.outputs["c"]
    assert np.abs(exact).max() > 1
    assert not np.array_equal(timing_only.outputs.get("c", np.zeros_like(exact)), exact)


def test_fidelity_phases_cost_matrix_engine_cycles(matmul):
    # bfloat8_b operands: the unpacker's bytes per 4 x 2 call are small enough that each fidelity phase shows
    times = {f: device_cycles(matmul(config(f, no_data=True, dtype=1), timing_only=True)) for f in (0, 2, 4)}
    assert times[0] < times[2] < times[4]
    # bfloat16 operands unpack twice the bytes: LoFi and HiFi2 both wait for the unpacker, HiFi4 for the FPU
    bf16_times = {f: device_cycles(matmul(config(f, no_data=True), timing_only=True)) for f in (0, 2, 4)}
    assert abs(bf16_times[0] / bf16_times[2] - 1) < 0.02 and bf16_times[4] > 1.1 * bf16_times[2]
    hifi4 = matmul(config(4, no_data=True), timing_only=True)
    streams = program(hifi4)["streams"]
    products = sum(s["tile_products"] for s in streams)
    assert products == (512 // 32) ** 3
    # the math thread of every core is busy at least for its tile products at 64 cycles each
    per_core = products / 16
    for s in streams:
        if s["risc"] == "TRISC1":
            assert s["tile_products"] == per_core and s["busy"] >= per_core * COSTS["fpu_cycles_hifi4"]


def test_per_line_cycles_add_up_to_the_streams(matmul, ttnn_home):
    result = matmul(config(2, no_data=True), timing_only=True)
    prog = program(result)
    lines = prog["lines"]
    assert abs(sum(l["busy"] for l in lines) - sum(s["busy"] for s in prog["streams"])) < 1e-3 * sum(
        s["busy"] for s in prog["streams"])
    waits = sum(s["wait_cb"] + s["wait_noc"] + s["wait_pipe"] for s in prog["streams"])
    assert abs(sum(l["wait"] for l in lines) - waits) <= 1e-3 * max(waits, 1)
    # the compute kernel's matmul_block call: once per K step per subblock on every core
    kernel = ttnn_home / "ttnn/cpp/ttnn/operations/matmul/device/kernels/compute/bmm_large_block_zm_fused_bias_activation.cpp"
    line = next(i for i, text in enumerate(kernel.read_text().splitlines(), 1) if "matmul_block(" in text
                and "matmul_block_init" not in text)
    hits = [l for l in lines if l["kernel"] == kernel.name and l["line"] == line]
    assert {l["risc"] for l in hits} == {"TRISC0", "TRISC1"}
    k_blocks, subblocks = 512 // 32 // 4, (4 // 4) * (4 // 2)
    assert all(l["calls"] == 16 * k_blocks * subblocks * 4 for l in hits)
    # and it is the busiest line of the math thread
    math = [l for l in lines if l["risc"] == "TRISC1"]
    assert max(math, key=lambda l: l["busy"])["line"] == line


def test_every_cost_has_a_source_and_every_fitted_one_names_its_rows():
    import json
    import sys
    table = json.loads((Path(__file__).parents[2] / "compiler" / "device_costs.json").read_text())
    arches = {k: v for k, v in table.items() if not k.startswith("_")}
    assert set(arches) == {"wormhole_b0", "blackhole"}
    names = set(arches["wormhole_b0"])
    for arch, costs in arches.items():
        assert set(costs) == names, arch
        for name, entry in costs.items():
            assert entry["kind"] in {"documented", "derived", "estimate", "calibrated"}, (arch, name)
            assert set(entry) == ({"value", "kind", "source", "fitted_on"} if entry["kind"] == "calibrated"
                                  else {"value", "kind", "source"}), (arch, name)
            assert len(entry["source"]) > 10, (arch, name)
    # the fitted constants are exactly the ones bench/timing_model.py fits, each on the row it names
    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    from timing_model import FIT
    calibrated = {(arch, n): e["fitted_on"] for arch, c in arches.items() for n, e in c.items()
                  if e["kind"] == "calibrated"}
    assert set(calibrated) == set(FIT)
    for (arch, name), rows in calibrated.items():
        dtype, fidelity, m, k, n = FIT[(arch, name)]
        assert len(rows) == 1 and rows[0].startswith(f"{arch} {m}x{k}x{n} {dtype} {fidelity} DRAM"), (arch, name, rows)
    # Wormhole's fitting rows are its 4096^3 bf16 HiFi2 / HiFi4 rows; Blackhole fits on at most two bf16 rows of its own
    assert {FIT[k] for k in FIT if k[0] == "wormhole_b0"} == {("bfloat16", "HiFi2", 4096, 4096, 4096),
                                                              ("bfloat16", "HiFi4", 4096, 4096, 4096)}
    blackhole_rows = {FIT[k] for k in FIT if k[0] == "blackhole"}
    assert len(blackhole_rows) <= 2 and all(row[0] == "bfloat16" for row in blackhole_rows)


def test_an_incomplete_cost_table_is_refused(make_bundle, tmp_path):
    costs = emulate.costs_env("wormhole_b0")
    partial = ";".join(item for item in costs.split(";") if not item.startswith("dram_latency_cycles="))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    with pytest.raises(emulate.EmulationError) as info:
        emulate.run_program(make_bundle("eltwise"), {"x": x, "y": x, "cfg": eltwise_cfg()}, tmp_path / "w",
                            timing=False, env={"TTEMU_COSTS": partial})
    assert info.value.kind == "host-api" and "dram_latency_cycles" in info.value.message


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_broadcast_operand_costs_the_faces_the_unpacker_reads(make_bundle, run, arch):
    """The LLK's unpacker reads only the faces of a broadcast operand that hold what is broadcast (llk_unpack_AB.h:
    a column broadcast faces 0 and 2, a scalar face 0, a row broadcast a face per face of A): against sub_tiles on
    the same tiles, the unpacker's busy time per call drops by the unread faces' bytes at the unpacker's L1 rate;
    the math thread's is the same (one eltwise pass)."""
    costs = device_costs(arch)
    rng = np.random.default_rng(11)
    x = bf16(rng.standard_normal((32 * 4, 64)).astype(np.float32))
    y = bf16(rng.standard_normal((32 * 4, 64)).astype(np.float32))
    variants = {"none": ("sub_init(cb_x, cb_y);", "sub_tiles(cb_x, cb_y, 0, 0, 0);", 4),
                "cols": ("sub_bcast_cols_init(cb_x, cb_y);", "sub_tiles_bcast_cols(cb_x, cb_y, 0, 0, 0);", 2),
                "rows": ("sub_bcast_rows_init(cb_x, cb_y);", "sub_tiles_bcast_rows(cb_x, cb_y, 0, 0, 0);", 4),
                "scalar": ("sub_bcast_scalar_init(cb_x, cb_y);", "sub_tiles_bcast_scalar(cb_x, cb_y, 0, 0, 0);", 1)}
    busy = {}
    for name, (init, body, _) in variants.items():
        bundle = make_bundle("eltwise", prepend={"compute.cpp": f"#define OP_INIT {init}\n#define OP_BODY {body}"})
        result = run(bundle, {"x": x, "y": y, "cfg": eltwise_cfg()}, arch=arch)
        streams = program(result)["streams"]
        busy[name] = {"TRISC0": sum(s["engine_busy"] for s in streams if s["risc"] == "TRISC0"),  # the unpackers
                      "TRISC1": sum(s["busy"] for s in streams if s["risc"] == "TRISC1")}
    tiles = x.size // 1024
    face_cycles = 2048 / 4 / costs["unpack_bytes_per_cycle"]     # one bfloat16 face at the unpacker's rate
    for name, (_, _, faces) in variants.items():
        saved = (busy["none"]["TRISC0"] - busy[name]["TRISC0"]) / tiles
        assert saved == pytest.approx((4 - faces) * face_cycles, rel=1e-3, abs=1e-3), name
        assert busy[name]["TRISC1"] == pytest.approx(busy["none"]["TRISC1"], rel=1e-9), name
