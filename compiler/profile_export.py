"""profile.json in the formats Tenstorrent's own tools read.

    chrome_trace(profile)            Trace Event Format JSON (what Perfetto's UI and chrome://tracing load): one
                                     process per core, one thread per RISC (BRISC, NCRISC, TRISC0-2, as tt-metal's
                                     device profiler names them), a complete event ("X") per stretch the RISC was
                                     busy or waiting (on a CB, the NoC, the compute pipeline), as the timing model's
                                     timeline has them (bins of `bin_cycles`), after a "program dispatch" slice
    ops_perf_row(profile, plan)      one row of tt-metal's ops_perf_results CSV (tt_metal/tools/profiler/
                                     process_ops_logs.py; the columns tt-perf-report and ttnn-visualizer read):
                                     device kernel and per-RISC durations, core counts, math fidelity, the
                                     tensors, and the performance model's PM IDEAL / COMPUTE / BANDWIDTH

Every figure is the timing model's (modelled, not measured on a device): the trace says so in its metadata, the CSV
row in its ATTRIBUTES.
"""
from __future__ import annotations

import csv
import io

CATEGORY_NAMES = {"busy": "busy", "wait_cb": "waiting on a CB", "wait_noc": "waiting on the NoC",
                  "wait_pipe": "waiting in the compute pipeline"}
RISC_ORDER = ("BRISC", "NCRISC", "TRISC0", "TRISC1", "TRISC2")


def _us(cycles: float, clock_ghz: float) -> float:
    return cycles / clock_ghz / 1000.0


def _stretches(timeline: dict, end: float) -> list[tuple[str, float, float]]:
    """(category, start cycle, cycles) runs of a RISC's binned timeline, none past `end` (the kernels' end); within
    a bin the categories are laid out one after the other (the bin keeps how much of each, not their order), the one
    the previous bin ended with first, so that a run crossing bins stays one stretch. (The bins' amounts are whole
    cycles: a bin may hold a cycle more than its width, pushing the next one on by as much.)"""
    width = float(timeline["bin_cycles"])
    bins = max((len(timeline.get(c) or []) for c in CATEGORY_NAMES), default=0)
    runs: list[list] = []
    for b in range(bins):
        amounts = {c: float((timeline.get(c) or [0] * bins)[b]) for c in CATEGORY_NAMES}
        previous = runs[-1][0] if runs else None
        order = sorted(CATEGORY_NAMES, key=lambda c: c != previous)
        at = max(b * width, runs[-1][1] + runs[-1][2] if runs else 0.0)
        for category in order:
            amount = amounts[category]
            if amount <= 0:
                continue
            if runs and runs[-1][0] == category and abs(runs[-1][1] + runs[-1][2] - at) < 1e-6:
                runs[-1][2] += amount
            else:
                runs.append([category, at, amount])
            at += amount
    return [(c, start, min(length, end - start)) for c, start, length in runs if start < end]


def chrome_trace(profile: dict) -> dict:
    """The per-core, per-RISC timeline as a Trace Event Format object ({"traceEvents": [...], ...}), times in
    microseconds from the program's dispatch."""
    clock = float(profile["clock_ghz"])
    dispatch = float(profile["dispatch_cycles"])
    events: list[dict] = [
        {"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": f"device ({profile['arch']})"}},
        {"ph": "M", "pid": 0, "tid": 0, "name": "process_sort_index", "args": {"sort_index": 0}},
        {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "program"}},
        {"ph": "X", "pid": 0, "tid": 0, "name": "program dispatch", "cat": "dispatch", "ts": 0.0,
         "dur": _us(dispatch, clock), "args": {"cycles": dispatch}},
        {"ph": "X", "pid": 0, "tid": 0, "name": profile["kernel"], "cat": "kernels", "ts": _us(dispatch, clock),
         "dur": _us(float(profile["kernel_cycles"]), clock), "args": {"cycles": profile["kernel_cycles"]}},
    ]
    for index, core in enumerate(profile["cores"], 1):
        x, y = core["core"]
        events += [{"ph": "M", "pid": index, "tid": 0, "name": "process_name", "args": {"name": f"core ({x},{y})"}},
                   {"ph": "M", "pid": index, "tid": 0, "name": "process_sort_index", "args": {"sort_index": index}}]
        for risc in core["riscs"]:
            tid = RISC_ORDER.index(risc["risc"]) + 1 if risc["risc"] in RISC_ORDER else len(RISC_ORDER) + 1
            events += [{"ph": "M", "pid": index, "tid": tid, "name": "thread_name",
                        "args": {"name": f"{risc['risc']} {risc['kernel']}"}},
                       {"ph": "M", "pid": index, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}]
            for category, start, length in _stretches(risc["timeline"], float(profile["kernel_cycles"])):
                events.append({"ph": "X", "pid": index, "tid": tid, "name": CATEGORY_NAMES[category],
                               "cat": category, "ts": _us(dispatch + start, clock), "dur": _us(length, clock),
                               "args": {"cycles": round(length, 1)}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"producer": "tilefarm timing model (modelled, not measured on a device)",
                          "kernel": profile["kernel"], "arch": profile["arch"], "clock_ghz": clock,
                          "device_time_ns": profile["device_time_ns"], "bottleneck": profile["bottleneck"]}}


# tt-metal's ops_perf_results columns, in its order (tt_metal/tools/profiler/process_ops_logs.py, as the profiler
# writes them and tt-perf-report reads them); the ones tilefarm has no figure for stay empty, as the profiler leaves
# a column it did not measure
OPS_PERF_COLUMNS = (
    "OP CODE", "OP TYPE", "GLOBAL CALL COUNT", "DEVICE ID", "ATTRIBUTES", "MATH FIDELITY", "CORE COUNT",
    "PARALLELIZATION STRATEGY", "HOST START TS", "HOST END TS", "HOST DURATION [ns]", "DEVICE FW START CYCLE",
    "DEVICE FW END CYCLE", "OP TO OP LATENCY [ns]", "OP TO OP LATENCY BR/NRISC START [ns]", "DEVICE FW DURATION [ns]",
    "DEVICE KERNEL DURATION [ns]", "DEVICE KERNEL DURATION DM START [ns]", "DEVICE KERNEL DURATION PER CORE MIN [ns]",
    "DEVICE KERNEL DURATION PER CORE MAX [ns]", "DEVICE KERNEL DURATION PER CORE AVG [ns]",
    "DEVICE KERNEL FIRST TO LAST START [ns]", "DEVICE BRISC KERNEL DURATION [ns]", "DEVICE NCRISC KERNEL DURATION [ns]",
    "DEVICE TRISC0 KERNEL DURATION [ns]", "DEVICE TRISC1 KERNEL DURATION [ns]", "DEVICE TRISC2 KERNEL DURATION [ns]",
    "DEVICE ERISC KERNEL DURATION [ns]", "DEVICE COMPUTE CB WAIT FRONT [ns]", "DEVICE COMPUTE CB RESERVE BACK [ns]",
    "DISPATCH TOTAL CQ CMD OP TIME [ns]", "DISPATCH GO SEND WAIT TIME [ns]",
    *(f"{io}_{n}_{field}" for io, count in (("INPUT", 4), ("OUTPUT", 1)) for n in range(count)
      for field in ("W_PAD[LOGICAL]", "Z_PAD[LOGICAL]", "Y_PAD[LOGICAL]", "X_PAD[LOGICAL]", "LAYOUT", "DATATYPE",
                    "MEMORY")),
    "METAL TRACE ID", "METAL TRACE REPLAY SESSION ID", "COMPUTE KERNEL SOURCE", "COMPUTE KERNEL HASH",
    "DATA MOVEMENT KERNEL SOURCE", "DATA MOVEMENT KERNEL HASH", "PM IDEAL [ns]", "PM COMPUTE [ns]",
    "PM BANDWIDTH [ns]", "PM REQ I BW", "PM REQ O BW", "PM FPU UTIL (%)", "NOC UTIL (%)", "DRAM BW UTIL (%)",
    "DEVICE ARCH", "AVAILABLE WORKER CORE COUNT",
)


def _risc_span(core: dict, risc: str) -> float:
    """Cycles from a RISC's kernel start to its end (everything but the idle tail after it finished)."""
    return max((r["busy"] + r["wait_cb"] + r["wait_noc"] + r["wait_pipe"] for r in core["riscs"] if r["risc"] == risc),
               default=0.0)


def _tensor(buffer: dict) -> dict:
    """A plan buffer as the profiler's tensor columns: shape as W, Z, Y, X (padded[logical]), layout, type, memory."""
    logical = [1] * (4 - len(buffer["shape"])) + list(buffer["shape"])[-4:]
    padded = [1] * (4 - len(buffer["padded_shape"])) + list(buffer["padded_shape"])[-4:]
    memory = "L1_BLOCK_SHARDED" if buffer.get("memory") == "L1" else "DRAM_INTERLEAVED"
    return {"W_PAD[LOGICAL]": f"{padded[0]}[{logical[0]}]", "Z_PAD[LOGICAL]": f"{padded[1]}[{logical[1]}]",
            "Y_PAD[LOGICAL]": f"{padded[2]}[{logical[2]}]", "X_PAD[LOGICAL]": f"{padded[3]}[{logical[3]}]",
            "LAYOUT": "TILE", "DATATYPE": buffer["dtype"].upper(), "MEMORY": f"DEV_0_{memory}"}


def ops_perf_row(profile: dict, plan: dict, costs: dict) -> dict[str, object]:
    """The program as one ops_perf_results row (column -> value; columns without a figure are absent)."""
    clock = float(profile["clock_ghz"])
    ns = lambda cycles: round(cycles / clock)  # noqa: E731
    spans = [max(_risc_span(core, r["risc"]) for r in core["riscs"]) for core in profile["cores"]] or [0.0]
    row: dict[str, object] = {
        "OP CODE": profile["kernel"], "OP TYPE": "tt_dnn_device", "GLOBAL CALL COUNT": 1, "DEVICE ID": 0,
        "ATTRIBUTES": f"{{'source': '{profile['source_file']}'; 'figures': 'tilefarm timing model (modelled)'; "
                      f"'bottleneck': '{profile['bottleneck'].replace(chr(39), '')}'}}",
        "MATH FIDELITY": profile["math_fidelity"] or "", "CORE COUNT": profile["cores_used"],
        "PARALLELIZATION STRATEGY": plan.get("work", {}).get("policy", ""),
        "DEVICE FW DURATION [ns]": ns(profile["device_cycles"]),
        "DEVICE KERNEL DURATION [ns]": ns(profile["kernel_cycles"]),
        "DEVICE KERNEL DURATION PER CORE MIN [ns]": ns(min(spans)),
        "DEVICE KERNEL DURATION PER CORE MAX [ns]": ns(max(spans)),
        "DEVICE KERNEL DURATION PER CORE AVG [ns]": ns(sum(spans) / len(spans)),
        "DEVICE KERNEL FIRST TO LAST START [ns]": 0,  # the model starts every core's kernels together
        "DEVICE COMPUTE CB WAIT FRONT [ns]": ns(_mean_wait(profile, "TRISC0")),
        "DEVICE COMPUTE CB RESERVE BACK [ns]": ns(_mean_wait(profile, "TRISC2")),
        "COMPUTE KERNEL SOURCE": str([k["file"] for k in plan["kernels"] if k["role"] == "compute"]).replace(",", ";"),
        "DATA MOVEMENT KERNEL SOURCE": str([k["file"] for k in plan["kernels"] if k["role"] != "compute"]).replace(",", ";"),
        "DEVICE ARCH": profile["arch"], "AVAILABLE WORKER CORE COUNT": profile["grid_cores"],
    }
    for risc in RISC_ORDER:
        row[f"DEVICE {risc} KERNEL DURATION [ns]"] = ns(max(_risc_span(core, risc) for core in profile["cores"]))
    buffers = plan["buffers"]
    for io_kind, role, limit in (("INPUT", "input", 4), ("OUTPUT", "output", 1)):
        for n, buffer in enumerate([b for b in buffers if b["role"] == role][:limit]):
            row.update({f"{io_kind}_{n}_{k}": v for k, v in _tensor(buffer).items()})
    # the performance model's ideal: the matrix engine's cycles at the fidelity over the grid (GEMM_FLOPS), and the
    # minimum DRAM bytes at the banks' achievable bandwidth; PM IDEAL is the larger
    compute_ns = profile["ideal_cycles"] / clock
    dram_gbps = costs["dram_banks"] * costs["dram_bank_gbps"] * costs["dram_efficiency"]
    bandwidth_ns = (profile["dram_read_min_bytes"] + profile["dram_write_min_bytes"]) / dram_gbps
    moved = profile["dram_read_bytes"] + profile["dram_written_bytes"]
    row.update({"PM IDEAL [ns]": round(max(compute_ns, bandwidth_ns)), "PM COMPUTE [ns]": round(compute_ns),
                "PM BANDWIDTH [ns]": round(bandwidth_ns), "PM FPU UTIL (%)": round(100 * profile["matrix_utilization"], 3),
                "DRAM BW UTIL (%)": round(100 * moved / (profile["device_time_ns"] * dram_gbps), 3)
                if profile["device_time_ns"] else 0.0})
    return row


def _mean_wait(profile: dict, risc: str) -> float:
    waits = [r["wait_cb"] for core in profile["cores"] for r in core["riscs"] if r["risc"] == risc]
    return sum(waits) / len(waits) if waits else 0.0


def ops_perf_csv(profile: dict, plan: dict, costs: dict) -> str:
    """ops_perf_results.csv text: the header and the program's row."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=OPS_PERF_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerow(ops_perf_row(profile, plan, costs))
    return out.getvalue()
