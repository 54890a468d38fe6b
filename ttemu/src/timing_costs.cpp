// The cost table (TTEMU_COSTS) and trace recording: the functional side of the timing model (see timing.h).
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "formats.h"
#include "runtime.h"
#include "timing.h"

namespace ttemu::timing {
namespace {

std::vector<double> parse_values(const std::string& text) {
    std::vector<double> out;
    std::size_t i = 0;
    while (i <= text.size()) {
        std::size_t j = text.find(',', i);
        if (j == std::string::npos) j = text.size();
        std::string item = text.substr(i, j - i);
        char* end = nullptr;
        double v = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0') return {};
        out.push_back(v);
        i = j + 1;
    }
    return out;
}

Costs load() {
    Costs c;
    const char* env = std::getenv("TTEMU_COSTS");
    if (!env || !*env) return c;
    std::map<std::string, double*> scalars = {
        {"clock_ghz", &c.clock_ghz},
        {"fpu_cycles_lofi", &c.fpu_cycles[0]},
        {"fpu_cycles_hifi2", &c.fpu_cycles[2]},
        {"fpu_cycles_hifi3", &c.fpu_cycles[3]},
        {"fpu_cycles_hifi4", &c.fpu_cycles[4]},
        {"unpack_bytes_per_cycle", &c.unpack_bytes_per_cycle},
        {"unpack_instr_cycles", &c.unpack_instr_cycles},
        {"pack_bytes_per_cycle", &c.pack_bytes_per_cycle},
        {"pack_l1_acc_bytes_per_cycle", &c.pack_l1_acc_bytes_per_cycle},
        {"unpack_call_cycles", &c.unpack_call_cycles},
        {"math_tile_cycles", &c.math_tile_cycles},
        {"pack_call_cycles", &c.pack_call_cycles},
        {"l1_banks", &c.l1_banks},
        {"l1_bank_bytes_per_cycle", &c.l1_bank_bytes_per_cycle},
        {"eltwise_cycles_per_tile", &c.eltwise_cycles_per_tile},
        {"datacopy_cycles_per_tile", &c.datacopy_cycles_per_tile},
        {"reduce_cycles_per_tile", &c.reduce_cycles_per_tile},
        {"transpose_cycles_per_tile", &c.transpose_cycles_per_tile},
        {"sfpu_rows_per_tile", &c.sfpu_rows_per_tile},
        {"sfpu_instr_exp_approx", &c.sfpu_instr_exp_approx},
        {"sfpu_instr_exp_approx_clamped", &c.sfpu_instr_exp_approx_clamped},
#define TTEMU_SFPU_COST(key, value) {#key, &c.key},
#include "ttemu/sfpu_ops.def"
        {"init_hw_startup_cycles", &c.init_hw_startup_cycles},
        {"init_fpu_cycles", &c.init_fpu_cycles},
        {"init_sfpu_cycles", &c.init_sfpu_cycles},
        {"reconfig_cycles", &c.reconfig_cycles},
        {"pack_l1_acc_config_cycles", &c.pack_l1_acc_config_cycles},
        {"pack_relu_config_cycles", &c.pack_relu_config_cycles},
        {"tile_regs_cycles", &c.tile_regs_cycles},
        {"dm_arg_cycles", &c.dm_arg_cycles},
        {"dm_cb_cycles", &c.dm_cb_cycles},
        {"noc_cmd_cycles", &c.noc_cmd_cycles},
        {"barrier_cycles", &c.barrier_cycles},
        {"sem_cycles", &c.sem_cycles},
        {"mailbox_cycles", &c.mailbox_cycles},
        {"noc_bytes_per_cycle", &c.noc_bytes_per_cycle},
        {"noc_hop_cycles", &c.noc_hop_cycles},
        {"noc_niu_cycles", &c.noc_niu_cycles},
        {"noc_mcast_bytes_per_cycle", &c.noc_mcast_bytes_per_cycle},
        {"noc_max_packet_bytes", &c.noc_max_packet_bytes},
        {"noc_page_addr_cycles", &c.noc_page_addr_cycles},
        {"dram_banks", &c.dram_banks},
        {"dram_bank_gbps", &c.dram_bank_gbps},
        {"dram_efficiency", &c.dram_efficiency},
        {"dram_latency_cycles", &c.dram_latency_cycles},
        {"dispatch_ns", &c.dispatch_ns},
    };
    std::map<std::string, std::vector<double>*> lists = {
        {"noc_grid", &c.noc_grid},       {"worker_noc_x", &c.worker_noc_x}, {"worker_noc_y", &c.worker_noc_y},
        {"dram_noc_xy", &c.dram_noc_xy}, {"matmul_block", &c.matmul_block},
    };
    std::map<std::string, bool> seen;
    std::string text = env;
    std::size_t i = 0;
    while (i < text.size()) {
        std::size_t j = text.find(';', i);
        if (j == std::string::npos) j = text.size();
        std::string item = text.substr(i, j - i);
        i = j + 1;
        if (item.empty()) continue;
        std::size_t eq = item.find('=');
        std::string key = item.substr(0, eq == std::string::npos ? item.size() : eq);
        std::vector<double> values =
            eq == std::string::npos ? std::vector<double>{} : parse_values(item.substr(eq + 1));
        if (values.empty()) host_fail("host-api", "TTEMU_COSTS: '" + item + "' is not key=number[,number...]");
        if (auto s = scalars.find(key); s != scalars.end()) {
            if (values.size() != 1) host_fail("host-api", "TTEMU_COSTS: " + key + " takes one number");
            *s->second = values[0];
        } else if (auto l = lists.find(key); l != lists.end()) {
            *l->second = values;
        } else {
            host_fail("host-api", "TTEMU_COSTS: unknown cost '" + key + "'");
        }
        seen[key] = true;
    }
    for (auto& [k, _] : scalars)
        if (!seen.count(k)) host_fail("host-api", "TTEMU_COSTS: cost '" + k + "' is missing");
    for (auto& [k, _] : lists)
        if (!seen.count(k)) host_fail("host-api", "TTEMU_COSTS: layout '" + k + "' is missing");
    c.fpu_cycles[1] = c.fpu_cycles[2];  // MathFidelity enumerator 1 is unused; HiFi2 if a kernel passes it
    if (c.noc_grid.size() != 2 || c.dram_noc_xy.size() != 2 * static_cast<std::size_t>(c.dram_banks))
        host_fail("host-api", "TTEMU_COSTS: noc_grid needs 2 numbers and dram_noc_xy 2 per DRAM bank");
    if (c.matmul_block.size() % 7)
        host_fail("host-api", "TTEMU_COSTS: matmul_block holds 7 numbers per call shape (rt, ct and five terms)");
    c.loaded = true;
    return c;
}

}  // namespace

namespace {
Costs g_costs;
std::atomic<int> g_state{0};  // 0 not read, 1 read, 2 refused (the report must not re-enter the loading)
std::mutex g_load_mu;
}  // namespace

const Costs& costs() {
    if (g_state.load(std::memory_order_acquire) != 0) return g_costs;
    std::lock_guard<std::mutex> lk(g_load_mu);
    if (g_state.load(std::memory_order_relaxed) == 0) {
        g_state.store(2, std::memory_order_release);  // a refusal (host_fail inside load) leaves timing off
        Costs c = load();
        g_costs = c;
        g_state.store(1, std::memory_order_release);
    }
    return g_costs;
}

bool math_skipped() {
    static const bool skip = [] {
        const char* env = std::getenv("TTEMU_TIMING_ONLY");
        return env && *env && std::strcmp(env, "0") != 0;
    }();
    return skip;
}

void record(KernelRun& run, Stream s, Ev kind, float cost, std::uint32_t a, std::uint32_t b, std::uint32_t c,
            std::uint16_t aux, std::uint8_t noc) {
    Trace* trace = run.trace.get();
    if (!trace) return;
    trace->streams[s].push_back(Event{kind, noc, aux, run.site.line, run.site.file, a, b, c, cost});
}

double tile_bytes(std::uint8_t format) {
    std::uint32_t b = fmt::tile_bytes(format);
    return b ? b : 2048.0;
}
const double* matmul_block_terms(std::uint32_t rt, std::uint32_t ct) {
    const std::vector<double>& t = costs().matmul_block;
    for (std::size_t i = 0; i + 7 <= t.size(); i += 7)
        if (t[i] == rt && t[i + 1] == ct) return &t[i + 2];
    return nullptr;
}
double unpack_call() { return costs().unpack_call_cycles; }
double math_tile() { return costs().math_tile_cycles; }
double pack_call() { return costs().pack_call_cycles; }
double unpack_cycles(double bytes, double loads) {
    const Costs& c = costs();
    return loads * c.unpack_instr_cycles + bytes / c.unpack_bytes_per_cycle;
}
double fpu_cycles(int math_fidelity) {
    int f = math_fidelity < 0 ? 0 : math_fidelity > 4 ? 4 : math_fidelity;
    return costs().fpu_cycles[f];
}

}  // namespace ttemu::timing
