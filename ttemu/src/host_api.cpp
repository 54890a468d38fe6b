// Host API (tt::tt_metal / tt::tt_metal::distributed subset) and the program runner: one thread per kernel per
// core, a deadlock watchdog, error reporting and the JSON counters report.
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "formats.h"
#include "runtime.h"
#include "tt-metalium/distributed.hpp"
#include "tt-metalium/host_api.hpp"
#include "tt-metalium/tensor_accessor_args.hpp"

namespace ttemu {

// ------------------------------------------------------------------------------------------- small helpers
std::string strformat(const char* f, ...) {
    va_list ap;
    va_start(ap, f);
    char buf[1024];
    int n = std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    if (n < static_cast<int>(sizeof buf)) return std::string(buf, n > 0 ? n : 0);
    std::string s(static_cast<std::size_t>(n) + 1, '\0');
    va_start(ap, f);
    std::vsnprintf(s.data(), s.size(), f, ap);
    va_end(ap);
    s.pop_back();
    return s;
}
std::string hex(std::uint64_t v) { return strformat("0x%llx", static_cast<unsigned long long>(v)); }

const char* role_name(Role r) {
    switch (r) {
        case Role::Reader: return "reader";
        case Role::Writer: return "writer";
        case Role::Compute: return "compute";
    }
    return "?";
}

std::string KernelRun::who() const {
    const char* proc = kernel->role == Role::Compute ? "TRISC" : kernel->role == Role::Reader ? "RISCV_1" : "RISCV_0";
    return strformat("core (%u,%u) %s kernel '%s' [%s]", core->x, core->y, role_name(kernel->role),
                     kernel->display.c_str(), proc);
}

std::string KernelRun::where() const {
    if (!site.file) return kernel->display;
    return base_name(site.file) + ":" + std::to_string(site.line);
}

std::string base_name(const std::string& p) {
    auto i = p.find_last_of('/');
    return i == std::string::npos ? p : p.substr(i + 1);
}

const char* api_name(Api api) {
    static const char* const names[] = {"(none)",
                                        "get_arg_val",
                                        "cb_reserve_back",
                                        "cb_push_back",
                                        "cb_wait_front",
                                        "cb_pop_front",
                                        "cb query",
                                        "cb pointer",
                                        "noc read",
                                        "noc write",
                                        "noc multicast write",
                                        "noc_async_read_barrier",
                                        "noc_async_write_barrier",
                                        "noc_async_writes_flushed",
                                        "noc_async_atomic_barrier",
                                        "noc_semaphore_wait",
                                        "noc_semaphore_set",
                                        "noc_semaphore_inc",
                                        "noc_semaphore_inc_multicast",
                                        "noc_semaphore_set_remote",
                                        "noc_semaphore_set_multicast",
                                        "noc_inline_dw_write",
                                        "mailbox",
                                        "compute init",
                                        "compute math (FPU)",
                                        "compute math (SFPU)",
                                        "tile_regs_*",
                                        "pack",
                                        "compute config"};
    static_assert(sizeof(names) / sizeof(names[0]) == static_cast<std::size_t>(Api::Count));
    return names[static_cast<std::size_t>(api)];
}

std::string CircularBuffer::describe() const {
    return strformat(
        "CB c_%u: %u pages x %u B %s at L1 %s; %u page(s) filled, %u free (pushed %llu, popped %llu); "
        "producer %s, consumer %s",
        index, num_pages, page_size, fmt::name(format), hex(base).c_str(), used(), num_pages - used(),
        static_cast<unsigned long long>(received), static_cast<unsigned long long>(acked),
        producer ? (std::string(role_name(producer->kernel->role)) + " '" + producer->kernel->display + "'").c_str()
                 : "none yet",
        consumer ? (std::string(role_name(consumer->kernel->role)) + " '" + consumer->kernel->display + "'").c_str()
                 : "none yet");
}

void Counters::merge(const Counters& o) {
    for (auto& [k, v] : o.dram_bytes_read) dram_bytes_read[k] += v;
    for (auto& [k, v] : o.dram_bytes_written) dram_bytes_written[k] += v;
    noc_bytes_read += o.noc_bytes_read;
    noc_bytes_written += o.noc_bytes_written;
    noc_reads += o.noc_reads;
    noc_writes += o.noc_writes;
    noc_multicasts += o.noc_multicasts;
    noc_multicast_bytes += o.noc_multicast_bytes;
    semaphore_ops += o.semaphore_ops;
    for (auto& [k, v] : o.tile_ops) tile_ops[k] += v;
    dst_acquires += o.dst_acquires;
}

// ------------------------------------------------------------------------------------------- device
const ArchSpec& arch_from_env() {
    // Numbers from compiler/target.py and metalium_api.md §5.
    static const ArchSpec wh{"wormhole_b0", 8, 8, 1499136, 12, 32, 32, 1ull << 30, 18, 18};
    static const ArchSpec bh{"blackhole", 13, 10, 1572864, 8, 64, 64, 4ull << 30, 1, 2};
    const char* env = std::getenv("TTEMU_ARCH");
    std::string a = env && *env ? env : "wormhole_b0";
    if (a == "wormhole_b0" || a == "wormhole") return wh;
    if (a == "blackhole") return bh;
    host_fail("host-api", "TTEMU_ARCH=" + a + " is not an emulated architecture (wormhole_b0, blackhole)");
}

namespace {
Device* g_device = nullptr;
std::mutex g_run_mu;
std::condition_variable g_run_cv;
bool g_report_written = false;

void report_at_exit() { write_report(); }
}  // namespace

Device& device() {
    if (!g_device) {
        g_device = new Device();
        const ArchSpec& arch = arch_from_env();
        g_device->arch = &arch;
        g_device->next_dram_addr = 0x40000;  // keep low DRAM for "firmware", like the real allocator's base
        // Every worker core's L1 at its fixed window (zero pages until touched).
        for (std::uint32_t y = 0; y < arch.grid_y; ++y)
            for (std::uint32_t x = 0; x < arch.grid_x; ++x) {
                auto core = std::make_unique<Core>();
                core->x = x;
                core->y = y;
                void* want = reinterpret_cast<void*>(kL1WindowBase + g_device->cores.size() * kL1WindowStride);
                void* got = mmap(want, kL1WindowStride, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
                if (got != want)
                    host_fail("device",
                              strformat("cannot map core (%u,%u)'s L1 at %s: %s", x, y,
                                        hex(reinterpret_cast<std::uintptr_t>(want)).c_str(), std::strerror(errno)),
                              7);
                core->l1 = static_cast<std::uint8_t*>(got);
                g_device->cores.push_back(std::move(core));
            }
        std::atexit(report_at_exit);
    }
    return *g_device;
}
bool device_open() { return g_device != nullptr; }

void Device::notify_all_cores() {
    for (auto& c : cores) c->cv.notify_all();
    g_run_cv.notify_all();
}

void kernel_fail(const char* kind, const std::string& call, const std::string& message) {
    Device& dev = device();
    KernelRun* run = current_run();
    std::string full =
        run ? run->who() + " at " + run->where() + ": " + call + ": " + message : "host: " + call + ": " + message;
    {
        std::lock_guard<std::mutex> lk(dev.error_mu);
        if (dev.error_kind.empty()) {
            dev.error_kind = kind;
            dev.error_message = full;
        }
    }
    dev.abort = true;
    dev.notify_all_cores();
    throw KernelAbort{};
}

void host_fail(const char* kind, const std::string& message, int exit_code) {
    Device& dev = device();
    {
        std::lock_guard<std::mutex> lk(dev.error_mu);
        if (dev.error_kind.empty()) {
            dev.error_kind = kind;
            dev.error_message = message;
        }
    }
    std::fprintf(stderr, "ttemu: error [%s] %s\n", kind, message.c_str());
    std::fflush(stderr);
    write_report();
    std::_Exit(exit_code);
}

void add_warning(const std::string& message) {
    Device& dev = device();
    std::lock_guard<std::mutex> lk(dev.error_mu);
    if (dev.warnings.size() < 100) dev.warnings.push_back(message);
}

// ------------------------------------------------------------------------------------------- report
namespace {
std::string json_str(const std::string& s) {
    std::string o = "\"";
    for (char ch : s) {
        switch (ch) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            default:
                if (static_cast<unsigned char>(ch) < 0x20)
                    o += strformat("\\u%04x", ch);
                else
                    o += ch;
        }
    }
    return o + "\"";
}
std::string json_ops(const std::map<std::string, std::uint64_t>& ops) {
    std::string s = "{";
    for (auto& [k, v] : ops) s += (s.size() > 1 ? ", " : "") + json_str(k) + ": " + std::to_string(v);
    return s + "}";
}
}  // namespace

void write_report() {
    const char* path = std::getenv("TTEMU_REPORT");
    if (!path || !*path || !g_device || g_report_written) return;
    g_report_written = true;
    Device& dev = *g_device;
    std::ostringstream o;
    o << "{\n  \"arch\": " << json_str(dev.arch->name) << ",\n  \"programs_run\": " << dev.programs_run << ",\n";
    if (dev.error_kind.empty())
        o << "  \"error\": null,\n";
    else
        o << "  \"error\": {\"kind\": " << json_str(dev.error_kind) << ", \"message\": " << json_str(dev.error_message)
          << "},\n";
    o << "  \"warnings\": [";
    for (std::size_t i = 0; i < dev.warnings.size(); ++i) o << (i ? ", " : "") << json_str(dev.warnings[i]);
    o << "],\n  \"jit\": {\"compiled\": " << dev.jit_compiled << ", \"cache_hits\": " << dev.jit_cache_hits
      << ", \"seconds\": " << dev.jit_seconds << "},\n  \"run_seconds\": " << dev.run_seconds << ",\n";
    Counters total;
    for (auto& [xy, c] : dev.core_counters) total.merge(c);
    o << "  \"buffers\": [";
    for (std::size_t i = 0; i < dev.buffers.size(); ++i) {
        const DeviceBuffer& b = *dev.buffers[i];
        std::uint64_t rd = total.dram_bytes_read[b.id], wr = total.dram_bytes_written[b.id];
        o << (i ? ",\n    " : "\n    ") << "{\"id\": " << b.id << ", \"kind\": \""
          << (b.kind == DeviceBuffer::Kind::L1 ? "l1" : "dram")
          << "\", \"sharded\": " << (b.sharded() ? "true" : "false") << ", \"address\": " << b.address
          << ", \"size\": " << b.size << ", \"page_size\": " << b.page_size << ", \"num_pages\": " << b.num_pages
          << ", \"bytes_read\": " << rd << ", \"bytes_written\": " << wr << ", \"tiles_read\": " << rd / b.page_size
          << ", \"tiles_written\": " << wr / b.page_size << ", \"distinct_pages_read\": " << b.distinct_pages(true)
          << ", \"distinct_pages_written\": " << b.distinct_pages(false) << "}";
    }
    o << "],\n  \"cores\": [";
    bool first = true;
    for (auto& [xy, c] : dev.core_counters) {
        o << (first ? "\n    " : ",\n    ") << "{\"core\": [" << xy.first << ", " << xy.second
          << "], \"noc_bytes_read\": " << c.noc_bytes_read << ", \"noc_bytes_written\": " << c.noc_bytes_written
          << ", \"noc_reads\": " << c.noc_reads << ", \"noc_writes\": " << c.noc_writes
          << ", \"noc_multicasts\": " << c.noc_multicasts << ", \"noc_multicast_bytes\": " << c.noc_multicast_bytes
          << ", \"semaphore_ops\": " << c.semaphore_ops << ", \"dst_acquires\": " << c.dst_acquires
          << ", \"tile_ops\": " << json_ops(c.tile_ops) << ", \"dram\": {";
        bool f2 = true;
        for (auto& b : dev.buffers) {
            auto r = c.dram_bytes_read.find(b->id);
            auto w = c.dram_bytes_written.find(b->id);
            std::uint64_t rd = r == c.dram_bytes_read.end() ? 0 : r->second;
            std::uint64_t wr = w == c.dram_bytes_written.end() ? 0 : w->second;
            if (!rd && !wr) continue;
            o << (f2 ? "" : ", ") << "\"" << b->id << "\": {\"tiles_read\": " << rd / b->page_size
              << ", \"tiles_written\": " << wr / b->page_size << ", \"bytes_read\": " << rd
              << ", \"bytes_written\": " << wr << "}";
            f2 = false;
        }
        o << "}, \"cb_high_water_pages\": {";
        bool f3 = true;
        auto hw = dev.cb_high_water.find(xy);
        if (hw != dev.cb_high_water.end())
            for (std::uint32_t i = 0; i < kMaxCBs; ++i)
                if (hw->second[i]) {
                    o << (f3 ? "" : ", ") << "\"" << i << "\": " << hw->second[i];
                    f3 = false;
                }
        o << "}}";
        first = false;
    }
    o << "],\n  \"totals\": {\"noc_bytes_read\": " << total.noc_bytes_read
      << ", \"noc_bytes_written\": " << total.noc_bytes_written << ", \"noc_multicasts\": " << total.noc_multicasts
      << ", \"noc_multicast_bytes\": " << total.noc_multicast_bytes << ", \"semaphore_ops\": " << total.semaphore_ops
      << ", \"dst_acquires\": " << total.dst_acquires << ", \"tile_ops\": " << json_ops(total.tile_ops)
      << "},\n  \"timing\": " << timing::report_json() << "\n}\n";
    std::string tmp = std::string(path) + ".tmp";
    {
        std::ofstream f(tmp);
        f << o.str();
    }
    std::rename(tmp.c_str(), path);
}

// ------------------------------------------------------------------------------------------- program state
namespace host {
struct ProgramState {
    std::vector<std::unique_ptr<KernelDef>> kernels;
    std::vector<CBConfigDef> cbs;
    std::vector<SemaphoreDef> semaphores;
};
}  // namespace host

namespace {

using tt::tt_metal::CoreSpec;

std::vector<std::pair<std::uint32_t, std::uint32_t>> expand(const CoreSpec& spec, const char* api) {
    std::vector<CoreRange> ranges;
    if (auto* c = std::get_if<CoreCoord>(&spec)) ranges.push_back(CoreRange(*c));
    if (auto* r = std::get_if<CoreRange>(&spec)) ranges.push_back(*r);
    if (auto* s = std::get_if<CoreRangeSet>(&spec)) ranges = s->ranges();
    const ArchSpec& arch = *device().arch;
    std::set<std::pair<std::uint32_t, std::uint32_t>> out;
    for (auto& r : ranges) {
        if (r.end_coord.x >= arch.grid_x || r.end_coord.y >= arch.grid_y)
            host_fail("host-api", strformat("%s: core range %s is outside the %ux%u worker grid of %s", api,
                                            r.str().c_str(), arch.grid_x, arch.grid_y, arch.name.c_str()));
        for (std::size_t y = r.start_coord.y; y <= r.end_coord.y; ++y)
            for (std::size_t x = r.start_coord.x; x <= r.end_coord.x; ++x)
                out.insert({static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y)});
    }
    return {out.begin(), out.end()};
}

KernelDef& kernel_of(const tt::tt_metal::Program& program, tt::tt_metal::KernelHandle handle, const char* api) {
    auto& ks = program.state().kernels;
    if (handle >= ks.size())
        host_fail("host-api", strformat("%s: kernel handle %u does not belong to this program", api, handle));
    return *ks[handle];
}

void set_args(const tt::tt_metal::Program& program, tt::tt_metal::KernelHandle handle, const CoreSpec& spec,
              const std::vector<std::uint32_t>& args) {
    KernelDef& k = kernel_of(program, handle, "SetRuntimeArgs");
    if (args.size() > 341)
        host_fail("host-api", strformat("SetRuntimeArgs: %zu args for kernel '%s' exceed the limit of 341", args.size(),
                                        k.display.c_str()));
    for (auto& xy : expand(spec, "SetRuntimeArgs")) {
        if (std::find(k.cores.begin(), k.cores.end(), xy) == k.cores.end())
            host_fail("host-api", strformat("SetRuntimeArgs: kernel '%s' is not placed on core (%u,%u)",
                                            k.display.c_str(), xy.first, xy.second));
        k.runtime_args[xy] = args;
    }
}

tt::tt_metal::KernelHandle add_kernel(tt::tt_metal::Program& program, const std::string& path,
                                      const std::string& source, const CoreSpec& spec,
                                      const std::variant<tt::tt_metal::DataMovementConfig, tt::tt_metal::ComputeConfig,
                                                         tt::tt_metal::EthernetConfig>& config) {
    auto k = std::make_unique<KernelDef>();
    k->handle = static_cast<std::uint32_t>(program.state().kernels.size());
    k->path = path;
    k->source = source;
    k->display = path.empty() ? "<string kernel>" : base_name(path);
    k->cores = expand(spec, "CreateKernel");
    if (auto* dm = std::get_if<tt::tt_metal::DataMovementConfig>(&config)) {
        k->role = dm->processor == tt::tt_metal::DataMovementProcessor::RISCV_0 ? Role::Writer : Role::Reader;
        k->noc = static_cast<int>(dm->noc);
        k->compile_args = dm->compile_args;
        k->defines = dm->defines;
        k->named_args.insert(dm->named_compile_args.begin(), dm->named_compile_args.end());
    } else if (auto* cc = std::get_if<tt::tt_metal::ComputeConfig>(&config)) {
        k->role = Role::Compute;
        k->compile_args = cc->compile_args;
        k->defines = cc->defines;
        k->fp32_dest_acc = cc->fp32_dest_acc_en;
        k->dst_full_sync = cc->dst_full_sync_en;
        k->approx = cc->math_approx_mode;
        k->math_fidelity = static_cast<int>(cc->math_fidelity);
        for (std::size_t i = 0; i < cc->unpack_to_dest_mode.size() && i < kMaxCBs; ++i)
            if (cc->unpack_to_dest_mode[i] == tt::tt_metal::UnpackToDestMode::UnpackToDestFp32)
                k->unpack_to_dest_fp32 |= 1ull << i;
        k->named_args.insert(cc->named_compile_args.begin(), cc->named_compile_args.end());
    } else {
        host_fail("host-api", "CreateKernel: EthernetConfig kernels are not emulated");
    }
    program.state().kernels.push_back(std::move(k));
    return program.state().kernels.back()->handle;
}

// ------------------------------------------------------------------------------------------- running a program
void on_crash(int sig) {
    KernelRun* run = current_run();
    char buf[512];
    int n = std::snprintf(buf, sizeof buf,
                          "ttemu: error [crash] %s: signal %d (%s) inside the kernel (last device API call at %s): a "
                          "pointer outside the core's L1 (L1 offsets from the host, such as buffer addresses, are not "
                          "pointers here; use get_write_ptr/get_read_ptr/get_semaphore or NoC calls)\n",
                          run ? run->who().c_str() : "host", sig, strsignal(sig), run ? run->where().c_str() : "-");
    if (n > 0) (void)!write(2, buf, static_cast<std::size_t>(n));
    std::_Exit(3);
}

}  // namespace

KernelDef& program_kernel(const tt::tt_metal::Program& program, tt::tt_metal::KernelHandle handle, const char* api) {
    return kernel_of(program, handle, api);
}
}  // namespace ttemu

// The core's coordinates as the firmware publishes them to kernels (per kernel thread here).
thread_local std::uint8_t my_x[2], my_y[2];
thread_local std::uint8_t my_logical_x_, my_logical_y_, my_relative_x_, my_relative_y_;

namespace ttemu {
namespace {

void kernel_thread(KernelRun* run) {
    set_current_run(run);
    const ArchSpec& arch = *device().arch;
    my_x[0] = my_x[1] = static_cast<std::uint8_t>(run->core->x + arch.noc_x0);
    my_y[0] = my_y[1] = static_cast<std::uint8_t>(run->core->y + arch.noc_y0);
    my_logical_x_ = my_relative_x_ = static_cast<std::uint8_t>(run->core->x);
    my_logical_y_ = my_relative_y_ = static_cast<std::uint8_t>(run->core->y);
    try {
        run->kernel->entry();
        if (run->kernel->role == Role::Compute) {
            compute_finish_checks(*run);
        } else if (run->unsent_writes || run->unacked_dram_writes) {
            // the firmware asserts at a kernel's end that every write was sent (ncrisck.cc / brisck.cc); writes to
            // DRAM must also have landed, since the host may read them next
            kernel_fail("noc-barrier", "kernel_main returned",
                        strformat("%llu NoC write(s) were never confirmed: call noc_async_write_barrier() before "
                                  "the kernel ends",
                                  static_cast<unsigned long long>(run->unacked_writes)));
        }
    } catch (const KernelAbort&) {
    } catch (const std::exception& e) {
        try {
            kernel_fail("kernel-exception", "kernel_main", e.what());
        } catch (const KernelAbort&) {}
    }
    set_current_run(nullptr);
    {
        std::lock_guard<std::mutex> lk(g_run_mu);
        run->state = ThreadState::Done;
    }
    device().progress.fetch_add(1);
    run->core->cv.notify_all();
    g_run_cv.notify_all();
}

std::string deadlock_report(const std::vector<std::unique_ptr<KernelRun>>& runs, long ms) {
    std::string msg = strformat("deadlock: no progress for %ld ms and every unfinished kernel is blocked", ms);
    for (auto& r : runs) {
        std::lock_guard<std::mutex> lk(r->core->mu);
        if (r->state == ThreadState::Done) {
            msg += "\n  " + r->who() + ": finished";
            continue;
        }
        msg += "\n  " + r->who() + ": blocked in " + r->blocked_call() + " at " + r->where();
        const Wait& w = r->wait;
        switch (w.kind) {
            case Wait::Kind::CbFront:
            case Wait::Kind::CbBack: msg += "\n      " + w.core->cbs[w.index].describe(); break;
            case Wait::Kind::Semaphore:
            case Wait::Kind::SemaphoreAtLeast: {
                std::uint32_t value = *reinterpret_cast<volatile std::uint32_t*>(w.core->l1 + w.index);
                std::string sem = w.index >= kSemaphoreBase && w.index < kL1UnreservedBase
                                      ? strformat("semaphore %u", (w.index - kSemaphoreBase) / kSemaphoreStride)
                                      : "the word";
                msg += strformat("\n      %s at L1 %s holds %u; the kernel waits for %s %u", sem.c_str(),
                                 hex(w.index).c_str(), value, w.kind == Wait::Kind::Semaphore ? "==" : ">=", w.target);
                break;
            }
            case Wait::Kind::Mailbox:
                msg += "\n      no data-movement kernel wrote this mailbox (mailbox_write)";
                break;
            case Wait::Kind::None: break;
        }
    }
    return msg;
}

// run_program's phases, in order.

// Fresh per-program state on every core; semaphores get the same L1 slot on every core of their range, set to their
// initial value.
void reset_cores(host::ProgramState& ps) {
    Device& dev = device();
    for (auto& core : dev.cores) {
        core->in_program = false;
        core->regions.clear();
        core->semaphore_mask = 0;
        core->word_init.clear();
        for (auto& box : core->mailbox) box.clear();
    }
    for (auto& sem : ps.semaphores)
        for (auto& xy : sem.cores) {
            Core& core = dev.core(xy.first, xy.second);
            std::uint32_t addr = kSemaphoreBase + sem.id * kSemaphoreStride;
            core.semaphore_mask |= 1u << sem.id;
            core.regions.push_back({addr, kSemaphoreStride, strformat("semaphore %u", sem.id)});
            std::memcpy(core.l1 + addr, &sem.initial_value, 4);
        }
}

// Each core's circular buffers laid out in L1 above the reserved area (or in an L1 buffer's pages).
void lay_out_cbs(host::ProgramState& ps, const std::set<std::pair<std::uint32_t, std::uint32_t>>& used) {
    Device& dev = device();
    const ArchSpec& arch = *dev.arch;
    for (auto& xy : used) {
        Core& core = dev.core(xy.first, xy.second);
        core.in_program = true;
        for (auto& c : core.cbs) c = CircularBuffer{};
        std::uint32_t next = kL1UnreservedBase;
        for (auto& cfg : ps.cbs) {
            if (std::find(cfg.cores.begin(), cfg.cores.end(), xy) == cfg.cores.end()) continue;
            // A globally allocated CB lives in an L1 buffer's pages on this core (its shard, or its bank).
            std::uint32_t base = next;
            if (cfg.global_buffer >= 0) {
                DeviceBuffer& buf = *dev.buffers[static_cast<std::size_t>(cfg.global_buffer)];
                const std::uint32_t core_index = xy.second * arch.grid_x + xy.first;
                if (buf.kind != DeviceBuffer::Kind::L1)
                    host_fail("host-api",
                              strformat("CreateCircularBuffer: set_globally_allocated_address needs an L1 buffer; %s "
                                        "is in DRAM",
                                        buf.describe().c_str()));
                if (buf.sharded() &&
                    std::find(buf.shard_home.begin(), buf.shard_home.end(), core_index) == buf.shard_home.end())
                    host_fail("host-api", strformat("CreateCircularBuffer: core (%u,%u) holds no shard of %s", xy.first,
                                                    xy.second, buf.describe().c_str()));
                if (cfg.total_size > buf.extent())
                    host_fail(
                        "host-api",
                        strformat("CreateCircularBuffer: the CB's %u B exceed the %llu B %s holds on core (%u,%u)",
                                  cfg.total_size, (unsigned long long)buf.extent(), buf.describe().c_str(), xy.first,
                                  xy.second));
                base = static_cast<std::uint32_t>(buf.address);
            }
            for (auto& [idx, format] : cfg.formats) {
                CircularBuffer& c = core.cbs[idx];
                if (c.configured)
                    host_fail("host-api", strformat("CreateCircularBuffer: CB c_%u is configured twice on core (%u,%u)",
                                                    idx, xy.first, xy.second));
                c.configured = true;
                c.index = idx;
                c.base = base;
                c.format = format;
                c.page_size = cfg.page_sizes.at(idx);
                c.num_pages = cfg.total_size / c.page_size;
            }
            if (cfg.global_buffer >= 0) continue;
            next += (cfg.total_size + 31) / 32 * 32;
            const std::uint64_t limit = dev.l1_buffers_low ? dev.l1_buffers_low : arch.l1_bytes;
            if (next > limit)
                host_fail("host-api",
                          strformat("circular buffers on core (%u,%u) need %u B of L1 but only %llu B are free above "
                                    "the reserved %u B%s",
                                    xy.first, xy.second, next - kL1UnreservedBase,
                                    (unsigned long long)(limit - kL1UnreservedBase), kL1UnreservedBase,
                                    dev.l1_buffers_low ? " and below the L1 buffers" : ""));
        }
    }
}

// One kernel per processor per core.
void check_placement(host::ProgramState& ps) {
    std::map<std::tuple<std::uint32_t, std::uint32_t, int>, KernelDef*> placed;
    for (auto& k : ps.kernels)
        for (auto& xy : k->cores) {
            auto& slot = placed[{xy.first, xy.second, static_cast<int>(k->role)}];
            if (slot)
                host_fail("host-api", strformat("kernels '%s' and '%s' both occupy the %s processor of core (%u,%u)",
                                                slot->display.c_str(), k->display.c_str(), role_name(k->role), xy.first,
                                                xy.second));
            slot = k.get();
        }
}

// JIT-compile the kernels; the CB descriptors come from the kernel's cores, which must agree.
void compile_kernels(host::ProgramState& ps) {
    Device& dev = device();
    std::vector<KernelDef*> kernels;
    std::vector<ProgramCBView> views;
    for (auto& k : ps.kernels) {
        ProgramCBView view{};
        view.formats.fill(0xff);
        bool firstcore = true;
        for (auto& xy : k->cores) {
            ProgramCBView v{};
            v.formats.fill(0xff);
            Core& core = dev.core(xy.first, xy.second);
            for (std::uint32_t i = 0; i < kMaxCBs; ++i)
                if (core.cbs[i].configured) {
                    v.formats[i] = core.cbs[i].format;
                    v.tile_sizes[i] = static_cast<std::int32_t>(fmt::tile_bytes(core.cbs[i].format));
                }
            if (firstcore) {
                view = v;
                firstcore = false;
                continue;
            }
            // A CB index configured on only some of the kernel's cores is fine; two formats for one index are not.
            for (std::uint32_t i = 0; i < kMaxCBs; ++i) {
                if (v.formats[i] == 0xff) continue;
                if (view.formats[i] == 0xff) {
                    view.formats[i] = v.formats[i];
                    view.tile_sizes[i] = v.tile_sizes[i];
                } else if (view.formats[i] != v.formats[i]) {
                    host_fail("host-api",
                              strformat("kernel '%s' spans cores where CB c_%u has different data formats (%s on "
                                        "core (%u,%u)); one compiled kernel needs one set of CB descriptors",
                                        k->display.c_str(), i, fmt::name(v.formats[i]), xy.first, xy.second));
                }
            }
        }
        kernels.push_back(k.get());
        views.push_back(view);
    }
    jit_compile_kernels(kernels, views);
}

// A thread per kernel per core.
std::vector<std::unique_ptr<KernelRun>> launch(host::ProgramState& ps) {
    Device& dev = device();
    static std::once_flag crash_once;
    std::call_once(crash_once, [] {
        std::signal(SIGSEGV, on_crash);
        std::signal(SIGBUS, on_crash);
        std::signal(SIGFPE, on_crash);
    });
    dev.abort = false;
    static const std::vector<std::uint32_t> no_args;
    std::vector<std::unique_ptr<KernelRun>> runs;
    for (auto& k : ps.kernels)
        for (auto& xy : k->cores) {
            auto r = std::make_unique<KernelRun>();
            r->core = &dev.core(xy.first, xy.second);
            r->kernel = k.get();
            auto it = k->runtime_args.find(xy);
            r->args = it == k->runtime_args.end() ? &no_args : &it->second;
            if (k->role == Role::Compute) r->compute = make_compute_state(*k);
            if (timing::enabled()) r->trace = std::make_unique<timing::Trace>();
            runs.push_back(std::move(r));
        }
    for (auto& r : runs) r->thread = std::thread(kernel_thread, r.get());
    return runs;
}

// Until every kernel is done; a deadlock is every unfinished kernel blocked with no progress for TTEMU_DEADLOCK_MS.
void watch(std::vector<std::unique_ptr<KernelRun>>& runs) {
    Device& dev = device();
    const char* env = std::getenv("TTEMU_DEADLOCK_MS");
    long deadlock_ms = env && *env ? std::atol(env) : 2000;
    std::uint64_t last = dev.progress.load();
    auto last_change = std::chrono::steady_clock::now();
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(g_run_mu);
            g_run_cv.wait_for(lk, std::chrono::milliseconds(20));
        }
        std::size_t done = 0, blocked = 0;
        for (auto& r : runs) {
            ThreadState s = r->state.load();
            done += s == ThreadState::Done;
            blocked += s == ThreadState::Blocked;
        }
        if (done == runs.size()) break;
        if (dev.abort) continue;  // threads are unwinding
        std::uint64_t p = dev.progress.load();
        auto now = std::chrono::steady_clock::now();
        if (p != last || blocked + done != runs.size()) {
            last = p;
            last_change = now;
            continue;
        }
        long idle = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_change).count();
        if (idle >= deadlock_ms) {
            std::string msg = deadlock_report(runs, idle);
            {
                std::lock_guard<std::mutex> lk(dev.error_mu);
                if (dev.error_kind.empty()) {
                    dev.error_kind = "deadlock";
                    dev.error_message = msg;
                }
            }
            dev.abort = true;
            dev.notify_all_cores();
        }
    }
    for (auto& r : runs) r->thread.join();
}

// The timing model's replay, the counters and the warnings of the finished program.
void account(std::vector<std::unique_ptr<KernelRun>>& runs,
             const std::set<std::pair<std::uint32_t, std::uint32_t>>& used) {
    Device& dev = device();
    // The timing model replays the finished program's traces.
    if (timing::enabled() && dev.error_kind.empty()) {
        std::vector<KernelRun*> all;
        for (auto& r : runs) all.push_back(r.get());
        timing::simulate(all, dev.programs_run);
        for (auto& r : runs) r->trace.reset();
    }

    // Counters.
    for (auto& r : runs) dev.core_counters[{r->core->x, r->core->y}].merge(r->counters);
    for (auto& xy : used) {
        Core& core = dev.core(xy.first, xy.second);
        auto& hw = dev.cb_high_water[xy];
        for (std::uint32_t i = 0; i < kMaxCBs; ++i) {
            hw[i] = std::max(hw[i], core.cbs[i].high_water);
            const CircularBuffer& c = core.cbs[i];
            if (c.configured && c.used() && dev.error_kind.empty())
                add_warning(strformat("core (%u,%u): program ended with %u page(s) pushed but never popped in CB c_%u",
                                      xy.first, xy.second, c.used(), i));
        }
    }
}

void run_program(host::ProgramState& ps) {
    Device& dev = device();
    auto t0 = std::chrono::steady_clock::now();
    std::set<std::pair<std::uint32_t, std::uint32_t>> used;  // the cores the program's kernels run on
    for (auto& k : ps.kernels) used.insert(k->cores.begin(), k->cores.end());
    reset_cores(ps);
    lay_out_cbs(ps, used);
    check_placement(ps);
    compile_kernels(ps);
    auto runs = launch(ps);
    watch(runs);
    account(runs, used);
    ++dev.programs_run;
    dev.run_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!dev.error_kind.empty()) {
        bool deadlock = dev.error_kind == "deadlock";
        std::fprintf(stderr, "ttemu: error [%s] %s\n", dev.error_kind.c_str(), dev.error_message.c_str());
        for (auto& w : dev.warnings) std::fprintf(stderr, "ttemu: warning: %s\n", w.c_str());
        std::fflush(stderr);
        write_report();
        std::_Exit(deadlock ? 4 : 3);
    }
}

}  // namespace
}  // namespace ttemu

// =========================================================================================== public host API
std::uint32_t tt::tile_size(tt::DataFormat format) { return ttemu::fmt::tile_bytes(static_cast<std::uint8_t>(format)); }

CoreRange::CoreRange(const CoreCoord& start, const CoreCoord& end) : start_coord(start), end_coord(end) {
    if (end.x < start.x || end.y < start.y)
        ttemu::host_fail("host-api", "CoreRange: end " + end.str() + " is before start " + start.str());
}

namespace tt::tt_metal {

Program::Program() : state_(std::make_shared<ttemu::host::ProgramState>()) {}
Program::~Program() = default;

Program CreateProgram() { return Program(); }

KernelHandle CreateKernel(Program& program, const std::string& file_name, const CoreSpec& core_spec,
                          const std::variant<DataMovementConfig, ComputeConfig, EthernetConfig>& config) {
    // As tt-metal resolves kernel paths: absolute, relative to the working directory, or relative to TT_METAL_HOME.
    std::string found = file_name;
    std::ifstream in(found, std::ios::binary);
    if (!in) {
        const char* home = std::getenv("TT_METAL_HOME");
        if (home && *home && file_name[0] != '/') {
            found = std::string(home) + "/" + file_name;
            in.open(found, std::ios::binary);
        }
        if (!in)
            ttemu::host_fail("host-api",
                             "CreateKernel: kernel source '" + file_name +
                                 "' not found (absolute, relative to the working directory or to TT_METAL_HOME)");
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    char resolved[4096];
    std::string path = realpath(found.c_str(), resolved) ? std::string(resolved) : found;
    KernelHandle h = ttemu::add_kernel(program, path, ss.str(), core_spec, config);
    return h;
}

KernelHandle CreateKernelFromString(Program& program, const std::string& kernel_src_code, const CoreSpec& core_spec,
                                    const std::variant<DataMovementConfig, ComputeConfig, EthernetConfig>& config) {
    return ttemu::add_kernel(program, "", kernel_src_code, core_spec, config);
}

CBHandle CreateCircularBuffer(Program& program, const CoreSpec& core_spec, const CircularBufferConfig& config) {
    ttemu::CBConfigDef def;
    def.total_size = config.total_size();
    if (auto id = config.ttemu_globally_allocated_buffer()) def.global_buffer = *id;
    const auto& arch = ttemu::device().arch;
    for (auto& [idx, format] : config.data_formats()) {
        if (idx >= arch->num_cbs)
            ttemu::host_fail("host-api", ttemu::strformat("CreateCircularBuffer: CB index %u exceeds %s's %u CBs", idx,
                                                          arch->name.c_str(), arch->num_cbs));
        auto ps = config.page_sizes().find(idx);
        if (ps == config.page_sizes().end() || ps->second == 0)
            ttemu::host_fail(
                "host-api",
                ttemu::strformat("CreateCircularBuffer: CB c_%u has no page size (call set_page_size)", idx));
        if (config.total_size() == 0 || config.total_size() % ps->second != 0)
            ttemu::host_fail(
                "host-api",
                ttemu::strformat("CreateCircularBuffer: CB c_%u total size %u is not a multiple of its page size %u",
                                 idx, config.total_size(), ps->second));
        def.formats[idx] = static_cast<std::uint8_t>(format);
        def.page_sizes[idx] = ps->second;
    }
    def.cores = ttemu::expand(core_spec, "CreateCircularBuffer");
    program.state().cbs.push_back(def);
    return program.state().cbs.size();
}

// The id is the lowest one no core of the range uses yet, as tt-metal assigns it; 16 per core.
std::uint32_t CreateSemaphore(Program& program, const std::variant<CoreRange, CoreRangeSet>& core_spec,
                              std::uint32_t initial_value, CoreType core_type) {
    if (core_type != CoreType::WORKER)
        ttemu::host_fail("host-api", "CreateSemaphore: only worker-core semaphores are emulated");
    CoreSpec spec = std::holds_alternative<CoreRange>(core_spec) ? CoreSpec(std::get<CoreRange>(core_spec))
                                                                 : CoreSpec(std::get<CoreRangeSet>(core_spec));
    auto cores = ttemu::expand(spec, "CreateSemaphore");
    auto& sems = program.state().semaphores;
    for (std::uint32_t id = 0; id < ttemu::kMaxSemaphores; ++id) {
        bool taken = false;
        for (auto& s : sems)
            if (s.id == id)
                for (auto& xy : s.cores) taken |= std::find(cores.begin(), cores.end(), xy) != cores.end();
        if (!taken) {
            sems.push_back({id, initial_value, cores});
            return id;
        }
    }
    ttemu::host_fail("host-api",
                     ttemu::strformat("CreateSemaphore: every one of the %u semaphore ids is taken on a core "
                                      "of this range",
                                      ttemu::kMaxSemaphores));
}

void SetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreSpec& core_spec,
                    const std::vector<std::uint32_t>& runtime_args) {
    ttemu::set_args(program, kernel, core_spec, runtime_args);
}
void SetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreSpec& core_spec,
                    std::initializer_list<std::uint32_t> runtime_args) {
    ttemu::set_args(program, kernel, core_spec, std::vector<std::uint32_t>(runtime_args));
}
void SetRuntimeArgs(const Program& program, KernelHandle kernel, const std::vector<CoreCoord>& cores,
                    const std::vector<std::vector<std::uint32_t>>& runtime_args) {
    if (cores.size() != runtime_args.size())
        ttemu::host_fail("host-api", "SetRuntimeArgs: cores and args differ in length");
    for (std::size_t i = 0; i < cores.size(); ++i) ttemu::set_args(program, kernel, cores[i], runtime_args[i]);
}
void SetCommonRuntimeArgs(const Program& program, KernelHandle kernel, const std::vector<std::uint32_t>& runtime_args) {
    ttemu::kernel_of(program, kernel, "SetCommonRuntimeArgs").common_args = runtime_args;
}
void SetCommonRuntimeArgs(const Program& program, KernelHandle kernel,
                          std::initializer_list<std::uint32_t> runtime_args) {
    ttemu::kernel_of(program, kernel, "SetCommonRuntimeArgs").common_args = runtime_args;
}
std::vector<std::uint32_t>& GetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreCoord& core) {
    return ttemu::kernel_of(program, kernel, "GetRuntimeArgs")
        .runtime_args[{static_cast<std::uint32_t>(core.x), static_cast<std::uint32_t>(core.y)}];
}

TensorAccessorArgs::TensorAccessorArgs(const distributed::MeshBuffer& buffer, tensor_accessor::ArgConfig config) {
    if (static_cast<std::uint8_t>(config) & ~static_cast<std::uint8_t>(tensor_accessor::ArgConfig::IsDram))
        ttemu::host_fail("host-api", "TensorAccessorArgs: only interleaved layouts without runtime args are emulated");
    const Buffer& ref = *buffer.get_reference_buffer();
    const bool dram = ref.buffer_type() == BufferType::DRAM;
    std::uint32_t align = dram ? ttemu::device().arch->dram_alignment : 16;
    config_word_ = dram ? static_cast<std::uint32_t>(tensor_accessor::ArgConfig::IsDram) : 0;
    aligned_page_size_ = static_cast<std::uint32_t>((buffer.page_size() + align - 1) / align * align);
    if (ref.buffer_layout() == TensorMemoryLayout::INTERLEAVED) return;
    // a sharded buffer: tt-metal's compile-time layout (the kernel compiles and constructs its accessor; resolving a
    // page through it stops with `unsupported`, see api/tensor/tensor_accessor.h)
    const ttemu::DeviceBuffer& dev = *ttemu::device().buffers.at(ref.ttemu_id());
    config_word_ |= static_cast<std::uint32_t>(tensor_accessor::ArgConfig::Sharded);
    const auto banks = static_cast<std::uint32_t>(dev.shard_home.size());
    shard_args_ = {2, banks, dev.tensor_h, dev.tensor_w, dev.shard_h, dev.shard_w};
    const ttemu::ArchSpec& arch = *ttemu::device().arch;
    for (std::uint32_t i = 0; i < banks; i += 2) {
        auto coord = [&](std::uint32_t b) -> std::uint32_t {
            if (b >= banks) return 0;
            std::uint32_t home = dev.shard_home[b];
            return dram ? home : (((arch.noc_x0 + home % arch.grid_x) << 8) | (arch.noc_y0 + home / arch.grid_x));
        };
        shard_args_.push_back(coord(i) | (coord(i + 1) << 16));
    }
}

namespace distributed {

std::shared_ptr<MeshDevice> MeshDevice::create_unit_mesh(int device_id, std::size_t, std::size_t, std::size_t,
                                                         const DispatchCoreConfig&) {
    if (device_id != 0) ttemu::host_fail("host-api", "create_unit_mesh: the emulator has one device (id 0)");
    // An emulated device may have a device node (TTEMU_DEVICE), held exclusively while the program runs, like
    // /dev/tenstorrent/N: a missing node or one another process holds is a device error (exit 7), not a kernel bug.
    // A sandboxed program is handed the node open already (TTEMU_DEVICE_FD): it could not open it itself.
    if (const char* node = std::getenv("TTEMU_DEVICE"); node && *node) {
        const char* given = std::getenv("TTEMU_DEVICE_FD");
        int fd = given && *given ? std::atoi(given) : ::open(node, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            ttemu::host_fail("device", std::string("cannot open device ") + node + ": " + std::strerror(errno), 7);
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0)
            ttemu::host_fail("device", std::string("device ") + node + " is busy (held by another process)", 7);
        // fd stays open (and locked) until the process exits
    }
    ttemu::device();
    return std::make_shared<MeshDevice>(device_id);
}
MeshDevice::MeshDevice(int device_id) : device_id_(device_id) {}
MeshDevice::~MeshDevice() = default;
bool MeshDevice::close() {
    closed_ = true;
    ttemu::write_report();
    return true;
}
CoreCoord MeshDevice::compute_with_storage_grid_size() const {
    return {ttemu::device().arch->grid_x, ttemu::device().arch->grid_y};
}
CoreCoord MeshDevice::worker_core_from_logical_core(const CoreCoord& c) const {
    bool wh = ttemu::device().arch->name == "wormhole_b0";
    return {c.x + (wh ? 18 : 1), c.y + (wh ? 18 : 2)};
}
tt::ARCH MeshDevice::arch() const {
    return ttemu::device().arch->name == "wormhole_b0" ? tt::ARCH::WORMHOLE_B0 : tt::ARCH::BLACKHOLE;
}
std::uint32_t MeshDevice::num_dram_channels() const { return ttemu::device().arch->dram_banks; }
std::uint32_t MeshDevice::l1_size_per_core() const { return ttemu::device().arch->l1_bytes; }

void EnqueueMeshWorkload(MeshCommandQueue&, MeshWorkload& workload, bool) {
    for (auto& p : workload.ttemu_programs()) ttemu::run_program(p.state());
}
void Finish(MeshCommandQueue&) {}

}  // namespace distributed
}  // namespace tt::tt_metal
