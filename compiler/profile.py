"""profile.json: where a program's modelled device time goes, from the emulator's timing model (report["timing"],
ttemu/src/timing_sim.cpp) and the plan.

    device time      the model's device cycles (kernels + program dispatch) at the arch's clock
    TRISC1 span      the math RISC's first start to its last end across cores: what Tenstorrent's device profiler
                     reports as the TRISC1 kernel duration (GEMM_FLOPS' "device based utilization" divides by it)
    cores            per core, per RISC: busy / waiting on a CB / waiting on the NoC (reads, writes, barriers,
                     semaphores) / waiting in the compute pipeline (UNPACK-MATH-PACK handshakes) / idle until the
                     program's last kernel ends
    DRAM             bytes the banks served, against the minimum the kernel's math needs (every input read once,
                     every output written once: each tensor's values at its format's bytes a value, not the padding
                     of its tiles: a per-row vector fills one column of its 32x32 tiles)
    matrix engine    utilization as Tenstorrent's GEMM_FLOPS report defines it: ideal cycles / modelled cycles, with
                     ideal = tile products x cycles per tile at the fidelity / cores of the target's grid
    lines            the user's own source lines (linemap.json: generated C++ line -> source lines), each with the
                     cycles its C++ lines' device calls took (busy and waiting), summed over every RISC of every
                     core (so they add up to far more than the device time), and its share of all of them; line 0
                     holds the generated code no source line maps to
    unmapped         line 0 by the call it makes (semaphore waits of a multicast, barriers...), with its purpose
    bottleneck       the verdict in words
"""
from __future__ import annotations

from collections import defaultdict

FIDELITY_NAMES = {0: "LoFi", 2: "HiFi2", 3: "HiFi3", 4: "HiFi4"}
CATEGORIES = ("busy", "wait_cb", "wait_noc", "wait_pipe")
TOP_GENERATED_LINES = 40


def value_bytes(buffer: dict) -> float:
    """A plan buffer's values at its format's bytes a value (a page holds a 32x32 tile: block-float formats' shared
    exponents counted pro rata), without the padding of its tiles."""
    values = 1
    for extent in buffer["shape"]:
        values *= int(extent)
    return values * buffer["page_bytes"] / 1024


def build_profile(report: dict, plan: dict, linemap: dict | None, costs: dict,
                  kernels: dict[str, str] | None = None) -> dict:
    """The profile of the last program of an emulated run (report.json as the emulator wrote it); `kernels` (the
    generated C++ by file name) names the calls behind the cycles no line of the user's source maps to."""
    timing = report.get("timing")
    if not timing or not timing.get("programs"):
        raise ValueError("the run has no timing section (the emulator ran without its timing model)")
    program = timing["programs"][-1]
    clock_ghz = float(timing["clock_ghz"])
    kernel_cycles = float(program["kernel_cycles"])
    device_cycles = float(program["device_cycles"])
    trisc1_cycles = float(program.get("trisc1_cycles", 0.0))
    streams = program["streams"]
    cb_names = {str(cb["index"]): cb["name"] for cb in plan["circular_buffers"]}

    cores = _cores(streams, kernel_cycles, cb_names)
    math = [s for s in streams if s["risc"] == "TRISC1"]
    tile_products = sum(s["tile_products"] for s in math)
    fidelity = FIDELITY_NAMES.get(max((s["fidelity"] for s in math if s["tile_products"]), default=-1))
    grid_cores = int(plan["target"]["num_cores"])
    ideal = tile_products * costs[f"fpu_cycles_{fidelity.lower()}"] / grid_cores if fidelity else 0.0

    banks = program["dram"]["banks"]
    read = sum(b["bytes_read"] for b in banks)
    written = sum(b["bytes_written"] for b in banks)
    read_min = sum(value_bytes(b) for b in plan["buffers"] if b["role"] == "input" or b.get("accumulate"))
    write_min = sum(value_bytes(b) for b in plan["buffers"] if b["role"] == "output")

    profile = {
        "kernel": plan["kernel"], "source_file": plan["source_file"], "arch": plan["target"]["arch"],
        "clock_ghz": clock_ghz, "timing_only": bool(timing.get("timing_only")),
        "device_time_ns": device_cycles / clock_ghz, "device_cycles": device_cycles,
        "kernel_cycles": kernel_cycles, "dispatch_cycles": float(program["dispatch_cycles"]),
        "cores_used": len(cores), "grid_cores": grid_cores,
        "matrix_utilization": min(1.0, ideal / device_cycles) if device_cycles else 0.0,
        "trisc1_cycles": trisc1_cycles, "trisc1_span_ns": trisc1_cycles / clock_ghz,
        "matrix_utilization_trisc1": min(1.0, ideal / trisc1_cycles) if trisc1_cycles else 0.0,
        "tile_products": tile_products, "math_fidelity": fidelity, "ideal_cycles": ideal,
        "dram_read_bytes": read, "dram_written_bytes": written,
        "dram_read_min_bytes": read_min, "dram_write_min_bytes": write_min,
        "dram_read_ratio": read / read_min if read_min else None,
        "cores": cores,
        "lines": _user_lines(program["lines"], linemap),
        "unmapped": _unmapped(program["lines"], linemap, kernels or {}),
        "generated_lines": _generated_lines(program["lines"]),
    }
    profile["bottleneck"] = verdict(profile, streams, cb_names, {cb["name"]: cb["role"] for cb in plan["circular_buffers"]})
    return profile


def _cores(streams: list[dict], kernel_cycles: float, cb_names: dict[str, str]) -> list[dict]:
    by_core: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for s in streams:
        times = {c: float(s[c]) for c in CATEGORIES}
        by_core[tuple(s["core"])].append({
            "risc": s["risc"], "kernel": s["kernel"], "role": s["role"], **times,
            "idle": max(0.0, kernel_cycles - sum(times.values())),
            "cb_wait": {cb_names.get(cb, f"c_{cb}"): float(t) for cb, t in s["cb_wait"].items()},
            "timeline": s["timeline"]})
    cores = []
    for xy, riscs in sorted(by_core.items(), key=lambda item: (item[0][1], item[0][0])):
        math = next((r for r in riscs if r["risc"] == "TRISC1"), None)
        busiest = max(r["busy"] for r in riscs)
        cores.append({"core": list(xy), "utilization": (math or {"busy": busiest})["busy"] / kernel_cycles
                      if kernel_cycles else 0.0, "riscs": riscs})
    return cores


def _generated_lines(lines: list[dict]) -> list[dict]:
    """The generated C++ lines that took the most cycles (summed over the cores and RISCs that ran them)."""
    merged: dict[tuple[str, int], dict] = {}
    for entry in lines:
        key = (entry["kernel"], int(entry["line"]))
        row = merged.setdefault(key, {"file": entry["kernel"], "line": key[1], "busy": 0.0, "wait": 0.0, "calls": 0})
        row["busy"] += float(entry["busy"])
        row["wait"] += float(entry["wait"])
        row["calls"] += int(entry["calls"])
    return sorted(merged.values(), key=lambda r: -(r["busy"] + r["wait"]))[:TOP_GENERATED_LINES]


def _user_lines(lines: list[dict], linemap: dict | None) -> list[dict]:
    """Cycles per line of the user's source: each generated line's cycles go to the source lines linemap.json
    maps it to (split evenly when it maps to several); lines the map leaves out are counted under line 0."""
    files = (linemap or {}).get("files", {})
    cycles: dict[int, dict[str, float]] = defaultdict(lambda: {"busy": 0.0, "wait": 0.0})
    for entry in lines:
        targets = files.get(entry["kernel"], {}).get(str(entry["line"])) or [0]
        for line in targets:
            cycles[int(line)]["busy"] += float(entry["busy"]) / len(targets)
            cycles[int(line)]["wait"] += float(entry["wait"]) / len(targets)
    total = sum(c["busy"] + c["wait"] for c in cycles.values())
    rows = [{"line": line, "cycles": c["busy"] + c["wait"], "busy": c["busy"], "wait": c["wait"],
             "share": (c["busy"] + c["wait"]) / total if total else 0.0} for line, c in cycles.items()]
    return sorted(rows, key=lambda r: r["line"])


# What the generated calls without a line of the user's source are for (the first word of the call)
CALL_PURPOSES = (
    ("noc_semaphore", "waiting for or signalling other cores (the multicast handshake of a shared read)"),
    ("noc_async_write_multicast", "multicasting a block to the cores that share it"),
    ("noc_async_read_barrier", "waiting for NoC reads to land"),
    ("noc_async_write_barrier", "waiting for NoC writes to be sent"),
    ("noc_async", "NoC reads and writes"),
    ("cb_wait_front", "waiting for a circular buffer's data"),
    ("cb_reserve_back", "waiting for room in a circular buffer"),
    ("cb_", "circular-buffer bookkeeping"),
    ("tile_regs", "DST register hand-over between the compute RISCs"),
)


def _unmapped(lines: list[dict], linemap: dict | None, kernels: dict[str, str]) -> list[dict]:
    """The cycles of generated lines no line of the user's source maps to (profile line 0), by the call they make
    (`noc_semaphore_wait`, ...), with what such a call is for and where it is: the compiler's own code around the
    kernel's, mostly waits. Largest first."""
    files = (linemap or {}).get("files", {})
    texts = {name: text.splitlines() for name, text in kernels.items()}
    calls: dict[str, dict] = {}
    for entry in lines:
        if files.get(entry["kernel"], {}).get(str(entry["line"])):
            continue
        source = texts.get(entry["kernel"], [])
        number = int(entry["line"])
        text = source[number - 1].strip() if 0 < number <= len(source) else ""
        call = text.split("(", 1)[0].split()[-1] if "(" in text and text.split("(", 1)[0].split() else "(other)"
        row = calls.setdefault(call, {"call": call, "cycles": 0.0, "busy": 0.0, "wait": 0.0, "where": [],
                                      "purpose": next((why for prefix, why in CALL_PURPOSES if call.startswith(prefix)),
                                                      "generated code")})
        row["busy"] += float(entry["busy"])
        row["wait"] += float(entry["wait"])
        row["cycles"] += float(entry["busy"]) + float(entry["wait"])
        where = f"{entry['kernel']}:{number}"
        if where not in row["where"]:
            row["where"].append(where)
    return sorted(calls.values(), key=lambda r: -r["cycles"])


def verdict(profile: dict, streams: list[dict], cb_names: dict[str, str], roles: dict[str, str] | None = None) -> str:
    """What bounds the program, in words: the compute kernel's math RISC tells (busy: compute-bound; waiting for
    its input CBs: the reader; for its output CB: the writer), with the DRAM traffic against the minimum."""
    kernel = profile["kernel_cycles"] or 1.0
    roles = roles or {}
    math = [s for s in streams if s["risc"] == "TRISC1"]
    unpack = [s for s in streams if s["risc"] == "TRISC0"]
    packers = [s for s in streams if s["risc"] == "TRISC2"]
    parts = []
    if math:
        busy = sum(s["busy"] for s in math) / (len(math) * kernel)
        waits: dict[str, float] = defaultdict(float)
        for s in unpack + packers:  # UNPACK waits on the input CBs, PACK on the output CB
            for cb, t in s["cb_wait"].items():
                waits[cb_names.get(cb, f"c_{cb}")] += float(t) / len(math)
        cb, waited = max(waits.items(), key=lambda item: item[1], default=(None, 0.0))
        share = waited / kernel
        utilization = profile["matrix_utilization"]
        if busy >= 0.6 and profile["math_fidelity"] and utilization < busy / 2:
            parts.append(f"compute-bound on per-call overhead: the math RISC is busy {busy:.0%} of the kernel time "
                         f"but the matrix engine does useful work {utilization:.0%} of it (at "
                         f"{profile['math_fidelity']}): fewer, larger tile operations would help")
        elif busy >= 0.6:
            parts.append(f"compute-bound: the math RISC is busy {busy:.0%} of the kernel time "
                         f"({utilization:.0%} matrix-engine utilization"
                         + (f" at {profile['math_fidelity']})" if profile["math_fidelity"] else ")"))
        elif cb is not None and share >= 0.2:
            role = roles.get(cb, "input")
            if role == "intermediate":
                parts.append(f"pipeline-bound: compute waits on its own intermediate {cb} {share:.0%} of the time")
            else:
                side = "writer" if role == "output" else "reader"
                parts.append(f"{side}-bound: compute waits on {cb} {share:.0%} of the time")
        else:
            parts.append(f"latency-bound: compute is busy {busy:.0%} of the time and waits on no single CB for long")
    else:
        movers = [s for s in streams if s["role"] in ("reader", "writer")]
        noc = sum(s["wait_noc"] for s in movers) / (max(1, len(movers)) * kernel)
        parts.append(f"data-movement only: the movers wait on the NoC/DRAM {noc:.0%} of the time")
    ratio = profile["dram_read_ratio"]
    if ratio is not None and ratio >= 1.5:
        parts.append(f"DRAM reads {ratio:.1f}x the minimum")
    if profile["dispatch_cycles"] >= 0.25 * profile["device_cycles"]:
        parts.append(f"program dispatch is {profile['dispatch_cycles'] / profile['device_cycles']:.0%} of the time")
    return "; ".join(parts)
