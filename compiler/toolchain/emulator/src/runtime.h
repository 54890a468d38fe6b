// libttemu internal state: the emulated device, its cores, circular buffers, DRAM and the kernel threads.
#pragma once
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ttemu/common_types.h"
#include "ttemu/device_iface.h"

namespace ttemu {

struct ArchSpec {
    std::string name;
    std::uint32_t grid_x, grid_y, l1_bytes, dram_banks, num_cbs, dram_alignment;
    std::uint64_t bank_bytes;
};
const ArchSpec& arch_from_env();

// ---------------------------------------------------------------- DRAM
struct DramBuffer {
    std::uint32_t id;
    std::uint64_t address;        // same base address in every bank (interleaved)
    std::uint64_t size;
    std::uint32_t page_size;
    std::uint32_t aligned_page;   // page stride inside a bank
    std::uint32_t num_pages;
    std::uint32_t pages_per_bank;
    std::vector<std::uint8_t> data;  // page i at i * page_size
    std::uint64_t bank_extent() const { return static_cast<std::uint64_t>(pages_per_bank) * aligned_page; }
};

// ---------------------------------------------------------------- kernels
enum class Role : std::uint8_t { Reader, Writer, Compute };  // Reader = RISCV_1 (NCRISC), Writer = RISCV_0 (BRISC)
const char* role_name(Role r);

struct KernelDef {
    std::uint32_t handle;
    Role role;
    std::string path;            // as given (for messages)
    std::string source;          // full text
    std::string display;         // file name for messages
    std::vector<std::uint32_t> compile_args;
    std::map<std::string, std::string> defines;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> cores;  // (x, y)
    int noc = 0;
    bool fp32_dest_acc = false, dst_full_sync = false, approx = false;
    int math_fidelity = 4;
    std::uint64_t unpack_to_dest_fp32 = 0;  // bit per CB (ComputeConfig::unpack_to_dest_mode)
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::uint32_t>> runtime_args;
    std::vector<std::uint32_t> common_args;
    void (*entry)() = nullptr;
};

struct CBConfigDef {
    std::uint32_t total_size;
    std::map<std::uint8_t, std::uint8_t> formats;      // cb index -> tt::DataFormat
    std::map<std::uint8_t, std::uint32_t> page_sizes;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> cores;
};

// ---------------------------------------------------------------- per-core run state
struct KernelRun;

struct CircularBuffer {
    bool configured = false;
    std::uint32_t index = 0, base = 0, page_size = 0, num_pages = 0;
    std::uint8_t format = 0xff;
    std::uint64_t received = 0, acked = 0;   // cumulative pushes and pops (hardware tiles_received / tiles_acked)
    std::uint32_t wr_page = 0, rd_page = 0;
    std::uint32_t back_granted = 0;          // pages the producer holds via cb_reserve_back
    std::uint32_t front_granted = 0;         // pages the consumer holds via cb_wait_front
    std::uint32_t pack_seq = 0;              // tiles packed since the last push (hardware fifo_wr_tile_ptr)
    std::uint32_t high_water = 0;            // max pages resident
    KernelRun* producer = nullptr;
    KernelRun* consumer = nullptr;
    std::uint32_t used() const { return static_cast<std::uint32_t>(received - acked); }
    std::string describe() const;
};

struct Core {
    std::uint32_t x = 0, y = 0;
    std::uint8_t* l1 = nullptr;  // arch l1_bytes, zero-initialised; persists across programs
    std::array<CircularBuffer, kMaxCBs> cbs;
    std::mutex mu;
    std::condition_variable cv;
};

struct Counters {
    std::map<std::uint32_t, std::uint64_t> dram_bytes_read, dram_bytes_written;  // per buffer id
    std::uint64_t noc_bytes_read = 0, noc_bytes_written = 0;
    std::uint64_t noc_reads = 0, noc_writes = 0;
    std::map<std::string, std::uint64_t> tile_ops;
    std::uint64_t dst_acquires = 0;
    void merge(const Counters& o);
};

// Compute engine state of one compute kernel on one core (compute.cpp).
struct ComputeState {
    enum class Dst : std::uint8_t { Idle, Acquired, Committed, Waited };
    bool started = false;
    bool reverse = false;
    std::uint32_t start_cbs[3] = {0, 0, 0};
    dev::FpuOp fpu = dev::FpuOp::None;
    std::uint32_t fpu_in0 = 0, fpu_in1 = 0, transpose = 0;
    dev::SfpuOp sfpu = dev::SfpuOp::None;
    Dst dst_state = Dst::Idle;
    std::uint32_t dst_capacity = 8;
    bool fp32_dest = false;
    std::uint8_t dst16_format = 5;   // Float16_b or Float16: what a 16-bit DST holds
    std::vector<float> dst;          // 16 tiles x 1024, row-major within a tile
    bool warned_pack_index = false;
    std::uint32_t pack_cb = 0;       // the CB whose format the packer is configured for
    int reduce_pool = -1, reduce_dim = -1;  // the reduce_init in effect
    int bcast = 0;                   // the broadcast dimension of the bcast init in effect
    int pack_mask_cb = -1, pack_mask_dim = -1;  // reduce_init's packer edge mask (until reduce_uninit / another init)
};

enum class ThreadState : std::uint8_t { Running, Blocked, Done };

struct KernelRun {
    Core* core = nullptr;
    KernelDef* kernel = nullptr;
    const std::vector<std::uint32_t>* args = nullptr;
    std::unique_ptr<ComputeState> compute;
    Counters counters;
    std::uint64_t pending_read_cbs = 0;    // CBs with NoC reads in flight (cleared by noc_async_read_barrier)
    std::uint64_t pending_write_cbs = 0;   // CBs that are the source of unflushed NoC writes
    std::uint64_t pending_inline_cbs = 0;  // CBs written by unconfirmed noc_inline_dw_write (cleared by the write barrier)
    std::uint64_t unacked_writes = 0;      // cleared by noc_async_write_barrier
    std::atomic<ThreadState> state{ThreadState::Running};
    std::string blocked_call;              // guarded by core->mu
    int blocked_cb = -1;
    std::thread thread;
    std::string who() const;               // "core (x,y) reader kernel 'reader.cpp'"
};

struct KernelAbort {};

// ---------------------------------------------------------------- device
struct Device {
    const ArchSpec* arch = nullptr;
    std::vector<std::unique_ptr<DramBuffer>> buffers;
    std::uint64_t next_dram_addr = 0;
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::unique_ptr<Core>> cores;
    Core& core(std::uint32_t x, std::uint32_t y);

    // run state
    std::atomic<bool> abort{false};
    std::atomic<std::uint64_t> progress{0};
    std::mutex error_mu;
    std::string error_kind, error_message;
    std::vector<std::string> warnings;
    std::vector<KernelRun*> live_runs;

    // accumulated over the process
    std::map<std::pair<std::uint32_t, std::uint32_t>, Counters> core_counters;
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::array<std::uint32_t, kMaxCBs>> cb_high_water;
    std::uint32_t programs_run = 0;
    std::uint32_t jit_compiled = 0, jit_cache_hits = 0;
    double jit_seconds = 0, run_seconds = 0;

    DramBuffer* find_buffer_at(std::uint64_t address);
    void notify_all_cores();
};
Device& device();
bool device_open();

// Errors ---------------------------------------------------------------------------------------------------
// Raised inside a kernel thread: records the first error, aborts every kernel, unwinds the caller.
[[noreturn]] void kernel_fail(const char* kind, const std::string& call, const std::string& message);
// Raised on the host side (API misuse, compile failure): prints, writes the report, exits.
[[noreturn]] void host_fail(const char* kind, const std::string& message, int exit_code = 6);
void add_warning(const std::string& message);
void write_report();

KernelRun* current_run();
void set_current_run(KernelRun* run);

// JIT (jit.cpp)
struct ProgramCBView {
    std::array<std::int32_t, kMaxCBs> tile_sizes{};
    std::array<std::uint8_t, kMaxCBs> formats{};
};
void jit_compile_kernels(std::vector<KernelDef*>& kernels, const std::vector<ProgramCBView>& cb_views);

// compute.cpp
std::unique_ptr<ComputeState> make_compute_state(const KernelDef& kernel);
void compute_finish_checks(KernelRun& run);

// helpers
std::string hex(std::uint64_t v);
std::string strformat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
}  // namespace ttemu
