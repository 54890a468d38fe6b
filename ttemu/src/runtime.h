// libttemu internal state: the emulated device, its cores, circular buffers, DRAM and the kernel threads.
#pragma once
#include <array>
#include <chrono>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ttemu/common_types.h"
#include "ttemu/device_iface.h"
#include "timing.h"

namespace ttemu {

struct ArchSpec {
    std::string name;
    std::uint32_t grid_x, grid_y, l1_bytes, dram_banks, num_cbs, dram_alignment;
    std::uint64_t bank_bytes;
    std::uint32_t noc_x0, noc_y0;  // virtual NoC coordinates of logical core (0,0) (the same on NoC 0 and 1)
};
const ArchSpec& arch_from_env();

// Each core's L1 is mapped at a fixed host address below 4 GiB, one window per core, so an L1 address a kernel
// holds in a uint32_t (a CB pointer, a semaphore) is also a host pointer it may dereference, as RISC-V code does.
constexpr std::uint64_t kL1WindowBase = 0x20000000;
constexpr std::uint64_t kL1WindowStride = 0x200000;  // 2 MiB >= the largest L1

// Semaphores (CreateSemaphore): 16-byte slots (L1_ALIGNMENT) at the same address on every core, in the reserved
// area below the CBs (on hardware they live in the kernel-config region).
constexpr std::uint32_t kMaxSemaphores = 16;
constexpr std::uint32_t kSemaphoreStride = 16;
constexpr std::uint32_t kSemaphoreBase = kL1UnreservedBase - kMaxSemaphores * kSemaphoreStride;

// ---------------------------------------------------------------- buffers (DRAM and L1, interleaved or sharded)
// Pages live at a "home" (a DRAM bank, or a worker core's L1 bank) at the buffer's address (the same in every home)
// plus an offset. Interleaved: page i in home i % homes, offset (i / homes) * aligned_page. Sharded: the tensor of
// tensor_h x tensor_w pages is cut into shards of shard_h x shard_w pages; shard (si, sj) (row-major index) lives in
// shard_home[index], its pages row-major at multiples of aligned_page.
struct DeviceBuffer {
    enum class Kind : std::uint8_t { Dram, L1 } kind = Kind::Dram;
    enum class Layout : std::uint8_t {
        Interleaved,
        HeightSharded,
        WidthSharded,
        BlockSharded
    } layout = Layout::Interleaved;
    std::uint32_t id = 0;
    std::uint64_t address = 0;  // same base address in every home
    std::uint64_t size = 0;
    std::uint32_t page_size = 0;
    std::uint32_t aligned_page = 0;  // page stride inside a home
    std::uint32_t num_pages = 0;
    std::uint32_t homes = 0;  // interleaved: banks (DRAM) or worker cores (L1)
    std::uint32_t tensor_h = 0, tensor_w = 0, shard_h = 0, shard_w = 0, shards_h = 0, shards_w = 0;
    std::vector<std::uint32_t> shard_home;  // DRAM bank, or worker core index (y * grid_x + x)
    std::vector<std::uint8_t> data;         // DRAM only: home-major, `extent()` bytes per home
    // pages ever read / written by kernels, one bit each (the timing profile's "minimum bytes the math needs")
    std::unique_ptr<std::atomic<std::uint64_t>[]> pages_read, pages_written;
    void mark_pages(bool read, std::uint32_t first, std::uint32_t count);
    std::uint64_t distinct_pages(bool read) const;
    bool sharded() const { return layout != Layout::Interleaved; }
    std::uint64_t extent() const;         // bytes at each home
    std::uint32_t storage_homes() const;  // DRAM banks / L1 cores with storage (data.size() / extent())
    // page -> (home, byte offset from the buffer address)
    std::pair<std::uint32_t, std::uint64_t> locate(std::uint32_t page) const;
    // (home, byte offset) -> page, or -1 (padding of a partial shard, or no page there)
    std::int64_t page_at(std::uint32_t home, std::uint64_t offset) const;
    std::string describe() const;  // "L1 buffer #2 (height-sharded, 4 x 1 tiles per shard)"
};

// ---------------------------------------------------------------- kernels
enum class Role : std::uint8_t { Reader, Writer, Compute };  // Reader = RISCV_1 (NCRISC), Writer = RISCV_0 (BRISC)
const char* role_name(Role r);

struct KernelDef {
    std::uint32_t handle;
    Role role;
    std::string path;     // as given (for messages)
    std::string source;   // full text
    std::string display;  // file name for messages
    std::vector<std::uint32_t> compile_args;
    std::map<std::string, std::string> defines;
    std::map<std::string, std::uint32_t> named_args;             // named_compile_args
    std::vector<std::pair<std::uint32_t, std::uint32_t>> cores;  // (x, y)
    int noc = 0;
    bool fp32_dest_acc = false, dst_full_sync = false, approx = false;
    int math_fidelity = 4;
    std::uint64_t unpack_to_dest_fp32 = 0;  // bit per CB (ComputeConfig::unpack_to_dest_mode)
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::uint32_t>> runtime_args;
    std::vector<std::uint32_t> common_args;
    void (*entry)() = nullptr;
    // Metal 2.0 named arguments (SetKernelArgsSchema): the JIT generates the kernel's args::, dfb::, sem::, tensor::
    struct Named {
        bool enabled = false;
        std::vector<std::string> rtas, crtas;
        std::map<std::string, std::uint32_t> ctas, dfbs, sems;
        struct Tensor {
            std::string name;
            std::uint32_t cta_offset, crta_word;
        };
        std::vector<Tensor> tensors;
    } named;
};

struct SemaphoreDef {
    std::uint32_t id, initial_value;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> cores;
};

struct CBConfigDef {
    std::uint32_t total_size;
    std::int64_t global_buffer = -1;               // set_globally_allocated_address: the CB lives in this L1 buffer
    std::map<std::uint8_t, std::uint8_t> formats;  // cb index -> tt::DataFormat
    std::map<std::uint8_t, std::uint32_t> page_sizes;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> cores;
};

// ---------------------------------------------------------------- per-core run state
struct KernelRun;

struct CircularBuffer {
    bool configured = false;
    std::uint32_t index = 0, base = 0, page_size = 0, num_pages = 0;
    std::uint8_t format = 0xff;
    std::uint64_t received = 0, acked = 0;  // cumulative pushes and pops (hardware tiles_received / tiles_acked)
    std::uint32_t wr_page = 0, rd_page = 0;
    std::uint32_t back_granted = 0;   // pages the producer holds via cb_reserve_back
    std::uint32_t front_granted = 0;  // pages the consumer holds via cb_wait_front
    std::uint32_t pack_seq = 0;       // tiles packed since the last push (hardware fifo_wr_tile_ptr)
    std::uint32_t high_water = 0;     // max pages resident
    KernelRun* producer = nullptr;
    KernelRun* consumer = nullptr;
    std::uint32_t used() const { return static_cast<std::uint32_t>(received - acked); }
    std::string describe() const;
};

// A region of a core's L1 that NoC transfers may touch besides CBs: semaphores and L1 buffers (pages or shards).
struct L1Region {
    std::uint32_t base = 0, size = 0;
    std::string what;  // "semaphores", "L1 buffer #3" (for messages)
};

// What an L1 page holds, for the page-identity check (page_tags.cpp, TTEMU_PAGE_TAGS=1): a DRAM page read into it
// (Source), or the DRAM page the compute kernel packed it for (Destination, said by the kernel: dev::page_tag).
struct PageTag {
    enum class Kind : std::uint8_t { Source, Destination } kind = Kind::Source;
    std::uint32_t buffer = 0;        // DeviceBuffer id
    std::uint32_t page = 0;          // page of that buffer; kNoPage: a page of no DRAM page (padding, scratch)
    const KernelRun* run = nullptr;  // who made it so, and where
    Site site{};
};
inline constexpr std::uint32_t kNoPage = 0xffffffffu;

struct Core {
    std::uint32_t x = 0, y = 0;
    std::uint8_t* l1 = nullptr;  // arch l1_bytes in this core's L1 window, zero-initialised; persists across programs
    std::array<CircularBuffer, kMaxCBs> cbs;
    std::vector<L1Region> regions;         // semaphores of the current program
    std::vector<L1Region> buffer_regions;  // L1 buffers with pages or a shard here (persist across programs)
    std::uint32_t semaphore_mask = 0;      // ids of the current program's semaphores on this core
    bool in_program = false;               // the current program runs at least one kernel here
    std::array<std::vector<std::uint32_t>, 3> mailbox;  // BRISC/NCRISC -> UNPACK/MATH/PACK (guarded by mu)
    // value of each L1 word at the first semaphore-style access of the current program (the timing replay's
    // starting values; guarded by mu)
    std::unordered_map<std::uint32_t, std::uint32_t> word_init;
    std::map<std::uint32_t, PageTag> page_tags;  // L1 offset of a page -> what it holds (guarded by tag_mu)
    std::mutex tag_mu;
    std::mutex mu;
    std::condition_variable cv;
    std::uint64_t window() const { return reinterpret_cast<std::uintptr_t>(l1); }
};

struct Counters {
    std::map<std::uint32_t, std::uint64_t> dram_bytes_read, dram_bytes_written;  // per buffer id
    std::uint64_t noc_bytes_read = 0, noc_bytes_written = 0;
    std::uint64_t noc_reads = 0, noc_writes = 0;
    std::uint64_t noc_multicasts = 0, noc_multicast_bytes = 0;  // bytes summed over the destinations
    std::uint64_t semaphore_ops = 0;                            // remote semaphore incs / sets / multicasts
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
    // matmul_set_in1_column_stride: tiles between the in1 tiles of adjacent output columns when the unpacker streams
    // in1 (ct_dim >= rt_dim); the unpacker's SrcA address step, kept until set again
    std::uint32_t in1_column_stride = 1;
    dev::SfpuOp sfpu = dev::SfpuOp::None;
    float exp_scale = 1.0f;                      // exp_tile_init<true, scale>'s input scale
    bool exp_approx = false;                     // exp_tile_init<true>: the approximate exp
    bool exp_clamp_negative = true;              // its InputClamping::ClampToNegative (the -88.5 sanitize pass)
    std::uint32_t exp_scale_bits = 0x3F800000u;  // exp_scale's fp32 bits (the approximate exp's constants)
    int sfpu_reduce_pool = -1;                   // sfpu_reduce_init<pool, format>'s configuration
    std::uint8_t sfpu_reduce_format = 0;         // (a tt::DataFormat code)
    bool face_transpose = false;                 // copy_tile transposes within each face
    Dst dst_state = Dst::Idle;
    std::uint32_t dst_capacity = 8;
    bool fp32_dest = false;
    std::uint8_t dst16_format = 5;  // Float16_b or Float16: what a 16-bit DST holds
    std::vector<float> dst;         // 16 tiles x 1024, row-major within a tile
    bool warned_pack_index = false;
    std::uint32_t pack_cb = 0;  // the CB whose format the packer is configured for
    // the unpackers' source formats (0 srcA, 1 srcB): the format each is configured for, the CB it was taken from
    // and the call that configured it (compute_kernel_hw_startup, reconfig_data_format*, *_with_dt inits)
    std::uint8_t src_format[2] = {0, 0};
    std::uint32_t src_cb[2] = {0, 0};
    std::string src_by[2];
    std::uint32_t pack_width = 1;               // tiles one pack call writes (llk_pack_init's num_tiles)
    int reduce_pool = -1, reduce_dim = -1;      // the reduce_init in effect
    std::uint32_t reduce_block_ct = 0;          // reduce_block_max_row_init's block width (0: not in effect)
    int bcast = 0;                              // the broadcast dimension of the bcast init in effect
    int pack_mask_cb = -1, pack_mask_dim = -1;  // reduce_init's packer edge mask (until reduce_uninit / another init)
    bool pack_l1_acc = false;                   // pack_reconfig_l1_acc(1): the packer adds DST to the tile in L1
    bool pack_relu = false;                     // pack_relu_config(ReluConfig::zero())
    std::int64_t last_pack = -1;                // L1 offset of the page the last pack wrote (dev::page_tag names it)
};

enum class ThreadState : std::uint8_t { Running, Blocked, Done };

// Every device API entry point, by name: the runtime records the call in progress (enter()), the deadlock report
// names it, and a timing model attaches a cost to each.
enum class Api : std::uint8_t {
    None,
    Arg,
    CbReserveBack,
    CbPushBack,
    CbWaitFront,
    CbPopFront,
    CbQuery,
    CbPointer,
    NocRead,
    NocWrite,
    NocWriteMulticast,
    NocReadBarrier,
    NocWriteBarrier,
    NocWritesFlushed,
    NocAtomicBarrier,
    SemWait,
    SemSet,
    SemInc,
    SemIncMulticast,
    SemSetRemote,
    SemSetMulticast,
    InlineWrite,
    Mailbox,
    ComputeInit,
    ComputeMath,
    ComputeSfpu,
    ComputeDst,
    ComputePack,
    ComputeConfig,
    Count
};
const char* api_name(Api api);

// What a blocked kernel waits for (the deadlock report prints it; a timing model moves the waiter's clock to the
// time the awaited event happened on `core`).
struct Wait {
    enum class Kind : std::uint8_t { None, CbFront, CbBack, Semaphore, SemaphoreAtLeast, Mailbox } kind = Kind::None;
    Core* core = nullptr;
    std::uint32_t index = 0;   // CB index, semaphore L1 offset or mailbox thread
    std::uint32_t target = 0;  // pages, value
};

struct KernelRun {
    Core* core = nullptr;
    KernelDef* kernel = nullptr;
    const std::vector<std::uint32_t>* args = nullptr;
    Api api = Api::None;  // the device API call in progress (or the last one)
    Site site{};          // its source location in the kernel
    std::uint64_t api_calls = 0;
    std::uint32_t mailbox_reads = 0;  // compute: UNPACK, MATH, PACK read their mailboxes in turn
    Wait wait;                        // guarded by core->mu while state == Blocked
    struct CbView {
        std::uint32_t cb;
        dev::CbInterface v;
        unsigned shift;  // 4 on the compute side: its fifo registers count 16-byte units
    };
    std::deque<CbView> cb_views;  // get_local_cb_interface() snapshots handed out (a deque: references stay valid)
    std::unique_ptr<ComputeState> compute;
    std::unique_ptr<timing::Trace> trace;  // the timing model's events of this kernel on this core (timing.h)
    Counters counters;
    std::uint64_t pending_read_cbs = 0;   // CBs with NoC reads in flight (cleared by noc_async_read_barrier)
    std::uint64_t pending_write_cbs = 0;  // CBs that are the source of unflushed NoC writes
    std::uint64_t pending_inline_cbs =
        0;                             // CBs written by unconfirmed noc_inline_dw_write (cleared by the write barrier)
    std::uint64_t unacked_writes = 0;  // cleared by noc_async_write_barrier
    // what the firmware checks when a kernel ends: every write sent (noc_async_writes_flushed or a barrier); and
    // writes to DRAM acknowledged (the host may read them next)
    std::uint64_t unsent_writes = 0, unacked_dram_writes = 0;
    std::atomic<ThreadState> state{ThreadState::Running};
    // The call a blocked kernel is in, rendered only when a deadlock report asks (rendering it at every block cost
    // ~8% of an emulation): the describe callable lives in block_until's frame, which the kernel cannot leave while
    // the reporter holds core->mu. Guarded by core->mu; valid while state is Blocked.
    const void* blocked_describe = nullptr;
    std::string (*blocked_render)(const void*) = nullptr;
    std::string blocked_call() const { return blocked_render ? blocked_render(blocked_describe) : std::string("?"); }
    std::thread thread;
    std::string who() const;    // "core (x,y) reader kernel 'reader.cpp'"
    std::string where() const;  // "reader.cpp:42" of the call in progress
};

inline thread_local KernelRun* t_current_run = nullptr;
inline KernelRun* current_run() { return t_current_run; }
inline void set_current_run(KernelRun* run) { t_current_run = run; }
[[noreturn]] void no_kernel_context(Api api);
// The one entry of every device API call: records which call and where (a timing model charges its cost here).
inline KernelRun& enter(Api api, Site site) {
    KernelRun* run = current_run();
    if (!run) [[unlikely]]
        no_kernel_context(api);
    run->api = api;
    run->site = site;
    ++run->api_calls;
    return *run;
}

struct KernelAbort {};

// ---------------------------------------------------------------- device
struct Device {
    const ArchSpec* arch = nullptr;
    std::vector<std::unique_ptr<DeviceBuffer>> buffers;
    std::uint64_t l1_buffers_low = 0;  // lowest address of an L1 buffer (allocated top-down); 0 = none
    std::uint64_t next_dram_addr = 0;
    std::vector<std::unique_ptr<Core>> cores;  // every worker core, row-major, created with the device
    Core& core(std::uint32_t x, std::uint32_t y) { return *cores[y * arch->grid_x + x]; }

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

    DeviceBuffer* find_buffer_at(std::uint64_t address, DeviceBuffer::Kind kind);
    void notify_all_cores();
    Core* core_at_window(std::uint64_t address);  // the core whose L1 window holds `address`, else nullptr
};
Device& device();
bool device_open();

// Page identity (page_tags.cpp): every hand-off of a tile through L1 checked against what its producer meant.
bool page_tags_on();
void tags_dram_read(KernelRun& run, std::uint32_t local, const DeviceBuffer& buf, std::uint32_t page);
void tags_dram_write(KernelRun& run, std::uint32_t local, const DeviceBuffer& buf, std::uint32_t page,
                     const std::string& call);
void tags_copy(const Core& from, std::uint32_t from_addr, Core& to, std::uint32_t to_addr, std::uint32_t bytes);
void tags_clear(Core& core, std::uint32_t local);

// Errors ---------------------------------------------------------------------------------------------------
// Raised inside a kernel thread: records the first error, aborts every kernel, unwinds the caller.
[[noreturn]] void kernel_fail(const char* kind, const std::string& call, const std::string& message);
// Raised on the host side (API misuse, compile failure): prints, writes the report, exits.
[[noreturn]] void host_fail(const char* kind, const std::string& message, int exit_code = 6);
// Metal 2.0 named arguments (named_args.cpp): the headers the JIT generates from a kernel's schema
std::string generated_bindings_header(const KernelDef& k);
std::string generated_args_header(const KernelDef& k);
void add_warning(const std::string& message);
void write_report();

// JIT (jit.cpp)
struct ProgramCBView {
    std::array<std::int32_t, kMaxCBs> tile_sizes{};
    std::array<std::uint8_t, kMaxCBs> formats{};
};
void jit_compile_kernels(std::vector<KernelDef*>& kernels, const std::vector<ProgramCBView>& cb_views);

// compute.cpp
std::unique_ptr<ComputeState> make_compute_state(const KernelDef& kernel);
void compute_finish_checks(KernelRun& run);

// buffers.cpp
std::uint8_t* page_storage(DeviceBuffer& b, std::uint32_t page);

// device_api.cpp / noc.cpp shared pieces
void note_progress(Core& core);  // wakes the core's blocked kernels; call with core.mu held
void notify_core(Core& core);    // the same, for a writer that does not hold core.mu
std::string cb_name(std::uint32_t cb);
// Blocks the calling kernel until `pred()` holds (lk holds run.core->mu); `describe` renders the call for reports.
template <typename Pred, typename Describe>
void block_until(KernelRun& run, std::unique_lock<std::mutex>& lk, Wait wait, Describe&& describe, Pred pred);
void drain_cb_views(KernelRun& run);  // applies writes made through get_local_cb_interface()

// helpers
std::string hex(std::uint64_t v);
std::string base_name(const std::string& path);
std::string strformat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
}  // namespace ttemu

// ------------------------------------------------------------------------------------------- inline templates
namespace ttemu {
template <typename Pred, typename Describe>
void block_until(KernelRun& run, std::unique_lock<std::mutex>& lk, Wait wait, Describe&& describe, Pred pred) {
    Device& dev = device();
    if (dev.abort.load(std::memory_order_relaxed)) throw KernelAbort{};
    if (pred()) return;
    using D = std::remove_reference_t<Describe>;
    run.blocked_describe = &describe;
    run.blocked_render = [](const void* d) -> std::string { return (*static_cast<const D*>(d))(); };
    run.wait = wait;
    run.state = ThreadState::Blocked;
    while (!pred()) {
        if (dev.abort) {
            run.state = ThreadState::Running;
            throw KernelAbort{};
        }
        run.core->cv.wait_for(lk, std::chrono::milliseconds(50));
    }
    run.state = ThreadState::Running;
    run.wait = Wait{};
    run.blocked_render = nullptr;
}
}  // namespace ttemu
