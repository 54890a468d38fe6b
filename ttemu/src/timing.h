// The approximately-timed device model.
//
// While a program runs functionally, every device API call appends an event to a per-RISC trace of its kernel
// (`record` below): a cost in cycles on that RISC, plus what the call synchronises with (a CB count, a semaphore
// word, a NoC transfer and its endpoints, the DST handshake between the three compute threads). When the program
// has finished, `simulate` replays the traces as a discrete-event simulation in simulated-time order: one clock
// per RISC (BRISC, NCRISC, TRISC0/1/2 per core), waits move the waiter's clock to the time the awaited event
// happened on the other side, DRAM banks and NoC ports are shared resources served in time order. The replay
// depends only on the traces, which depend only on each kernel's program order, so the device time is
// deterministic and identical with or without the arithmetic (timing-only mode, TTEMU_TIMING_ONLY=1).
//
// Costs come from TTEMU_COSTS ("key=value;key=v1,v2;..."), written by compiler/toolchain/emulate.py from
// compiler/device_costs.json; without it nothing is recorded.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ttemu {
struct KernelRun;
struct Core;
struct KernelDef;

namespace timing {

struct Costs {
    bool loaded = false;
    double clock_ghz = 1.0;
    double fpu_cycles[5] = {16, 16, 32, 48, 64};  // by MathFidelity enumerator (LoFi 0, HiFi2 2, HiFi3 3, HiFi4 4)
    double unpack_bytes_per_cycle = 64, unpack_instr_cycles = 2;
    double pack_bytes_per_cycle = 64, pack_l1_acc_bytes_per_cycle = 32;
    // fixed costs on the TRISCs: of one LLK call on the UNPACK and PACK threads, and of each tile an LLK call
    // processes on the MATH thread
    double unpack_call_cycles = 0, math_tile_cycles = 0, pack_call_cycles = 0;
    double l1_banks = 16, l1_bank_bytes_per_cycle = 16;  // L1: banks, each one 128-bit access per cycle
    double eltwise_cycles_per_tile = 8, datacopy_cycles_per_tile = 8, reduce_cycles_per_tile = 16,
           transpose_cycles_per_tile = 16;
    double sfpu_rows_per_tile = 32;
    double sfpu_instr_exp_approx = 2.125;        // the approximate exp (exp_tile_init<true>), per 32-datum row
    double sfpu_instr_exp_approx_clamped = 3.0;  // the same with InputClamping::ClampToNegative (its default)
    // SFPU instructions per 32-datum row of each SFPU function (the op registry's costs, ttemu/sfpu_ops.def)
#define TTEMU_SFPU_COST(key, value) double key = value;
#include "ttemu/sfpu_ops.def"
    double init_hw_startup_cycles = 0, init_fpu_cycles = 0, init_sfpu_cycles = 0, reconfig_cycles = 0,
           tile_regs_cycles = 0;
    // the packer's L1-accumulate and ReLU flags: a stall and masked register writes, counted from the LLK
    double pack_l1_acc_config_cycles = 0, pack_relu_config_cycles = 0;
    double dm_arg_cycles = 0, dm_cb_cycles = 0, noc_cmd_cycles = 0, barrier_cycles = 0, sem_cycles = 0,
           mailbox_cycles = 0;
    double noc_bytes_per_cycle = 32, noc_hop_cycles = 9, noc_niu_cycles = 5, noc_mcast_bytes_per_cycle = 22;
    double noc_max_packet_bytes = 8192;  // a longer transfer is issued as several packets, one command each
    double noc_page_addr_cycles = 0;     // a page's bank and offset from its id (interleaved accessors)
    double dram_banks = 12, dram_bank_gbps = 24, dram_efficiency = 1, dram_latency_cycles = 0;
    double dispatch_ns = 0;
    std::vector<double> noc_grid, worker_noc_x, worker_noc_y, dram_noc_xy;
    // matmul_block(rt, ct) calls: [rt, ct, unpack constant, unpack per in0 tile byte, per in1 tile byte, math constant,
    // tile products] per call shape, the compiler's cost model (compiler/cost_model.py) tabulated
    std::vector<double> matmul_block;
    double dram_bytes_per_cycle() const { return dram_bank_gbps * dram_efficiency / clock_ghz; }
};
// The cost model's terms of a matmul_block(rt, ct) call, or nullptr when the table has no such call shape.
const double* matmul_block_terms(std::uint32_t rt, std::uint32_t ct);
const Costs& costs();
inline bool enabled() { return costs().loaded; }
bool math_skipped();  // TTEMU_TIMING_ONLY=1: compute calls keep every check and event but skip the arithmetic

// ---------------------------------------------------------------- trace events
enum class Ev : std::uint8_t {
    Busy,           // cost cycles of work
    CbWaitFront,    // wait until the CB's pushes reach a
    CbReserveBack,  // wait until the CB's pops reach a
    CbPush,         // the CB's pushes become a
    CbPop,          // the CB's pops become a
    NocRead,        // a = endpoint, b = bytes (remote -> this core)
    NocWrite,       // a = endpoint, b = bytes (this core -> remote)
    NocMcast,       // a = rectangle, b = bytes, aux bit 0 = loopback
    ReadBarrier,
    WriteBarrier,   // every write acknowledged
    WritesFlushed,  // every write has been sent: its last packet has started to leave (timing_sim last_packet_sent)
    WordWrite,      // a = endpoint (core) or rectangle (aux bit 1), b = L1 offset, c = value; aux bit 0 = add
    WordLocal,      // this core's word b := c (aux bit 0: += c)
    WordWait,       // until this core's word b == c (aux bit 0: >= c)
    MailboxWrite,   // a = thread
    MailboxRead,    // a = thread
    UnpackOp,       // a = FPU op sequence number, b = steps, c = bytes read from L1; cost = unpack cycles
    MathOp,      // a = FPU op sequence number (or kNone: no unpack), b = steps, c = tile products; cost = math cycles
    PackOp,      // a = FPU op it packs the result of (or kNone), c = bytes written to L1, aux bit 0 = L1
                 // accumulation; cost = pack cycles
    DstAcquire,  // a = section number (1-based) MATH acquires
    DstCommit,
    DstWait,  // PACK waits for the commit of section a
    DstRelease,
};
constexpr std::uint32_t kNone = 0xffffffffu;
constexpr std::uint32_t kDramEndpoint = 0x10000u;  // endpoint codes: core index, or kDramEndpoint | bank

struct Event {
    Ev kind;
    std::uint8_t noc;
    std::uint16_t aux;
    std::uint32_t line;
    const char* file;
    std::uint32_t a, b, c;
    float cost;
};

// A compute kernel runs its UNPACK, MATH and PACK programs as one host thread; each gets its own stream.
enum Stream : std::uint8_t { kUnpack = 0, kMath = 1, kPack = 2, kDataMovement = 0 };

struct Trace {
    std::vector<Event> streams[3];
    std::uint32_t fpu_ops = 0;  // FPU op sequence numbers handed out
    std::uint32_t dst_acquires = 0, dst_commits = 0, dst_waits = 0, dst_releases = 0;
    std::uint32_t mailbox_reads[3] = {0, 0, 0};
};

// Appends an event to the calling kernel's stream `s` at the current call's source line.
void record(KernelRun& run, Stream s, Ev kind, float cost, std::uint32_t a = 0, std::uint32_t b = 0,
            std::uint32_t c = 0, std::uint16_t aux = 0, std::uint8_t noc = 0);
inline void busy(KernelRun& run, Stream s, double cycles) { record(run, s, Ev::Busy, static_cast<float>(cycles)); }

// Per-program simulation over the kernels' traces; adds the program's results to the report's "timing" section.
void simulate(const std::vector<KernelRun*>& runs, std::uint32_t program_index);
std::string report_json();  // the "timing" member of report.json ("null" when timing is off)

// Cost helpers used by the API implementations
double tile_bytes(std::uint8_t format);
double unpack_call();
double math_tile();
double pack_call();
double unpack_cycles(double bytes, double loads);
double fpu_cycles(int math_fidelity);
}  // namespace timing
}  // namespace ttemu
