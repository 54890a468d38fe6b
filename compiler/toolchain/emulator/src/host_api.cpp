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

std::string CircularBuffer::describe() const {
    return strformat("CB c_%u: %u pages x %u B %s at L1 %s; %u page(s) filled, %u free (pushed %llu, popped %llu); "
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
    for (auto& [k, v] : o.tile_ops) tile_ops[k] += v;
    dst_acquires += o.dst_acquires;
}

// ------------------------------------------------------------------------------------------- device
const ArchSpec& arch_from_env() {
    // Numbers from compiler/target.py and metalium_api.md §5.
    static const ArchSpec wh{"wormhole_b0", 8, 8, 1499136, 12, 32, 32, 1ull << 30};
    static const ArchSpec bh{"blackhole", 13, 10, 1572864, 8, 64, 64, 4ull << 30};
    const char* env = std::getenv("TTEMU_ARCH");
    std::string a = env && *env ? env : "wormhole_b0";
    if (a == "wormhole_b0" || a == "wormhole") return wh;
    if (a == "blackhole") return bh;
    host_fail("host-api", "TTEMU_ARCH=" + a + " is not an emulated architecture (wormhole_b0, blackhole)");
}

namespace {
Device* g_device = nullptr;
thread_local KernelRun* t_run = nullptr;
std::mutex g_run_mu;
std::condition_variable g_run_cv;
bool g_report_written = false;

void report_at_exit() { write_report(); }
}  // namespace

Device& device() {
    if (!g_device) {
        g_device = new Device();
        g_device->arch = &arch_from_env();
        g_device->next_dram_addr = 0x40000;  // keep low DRAM for "firmware", like the real allocator's base
        std::atexit(report_at_exit);
    }
    return *g_device;
}
bool device_open() { return g_device != nullptr; }

Core& Device::core(std::uint32_t x, std::uint32_t y) {
    auto& slot = cores[{x, y}];
    if (!slot) {
        slot = std::make_unique<Core>();
        slot->x = x;
        slot->y = y;
        slot->l1 = static_cast<std::uint8_t*>(std::calloc(arch->l1_bytes, 1));
    }
    return *slot;
}

DramBuffer* Device::find_buffer_at(std::uint64_t address) {
    for (auto& b : buffers)
        if (b->address == address) return b.get();
    return nullptr;
}

void Device::notify_all_cores() {
    for (auto& [xy, c] : cores) c->cv.notify_all();
    g_run_cv.notify_all();
}

KernelRun* current_run() { return t_run; }
void set_current_run(KernelRun* run) { t_run = run; }

void kernel_fail(const char* kind, const std::string& call, const std::string& message) {
    Device& dev = device();
    KernelRun* run = current_run();
    std::string full = (run ? run->who() : std::string("host")) + ": " + call + ": " + message;
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
        const DramBuffer& b = *dev.buffers[i];
        std::uint64_t rd = total.dram_bytes_read[b.id], wr = total.dram_bytes_written[b.id];
        o << (i ? ",\n    " : "\n    ") << "{\"id\": " << b.id << ", \"address\": " << b.address << ", \"size\": " << b.size
          << ", \"page_size\": " << b.page_size << ", \"num_pages\": " << b.num_pages << ", \"bytes_read\": " << rd
          << ", \"bytes_written\": " << wr << ", \"tiles_read\": " << rd / b.page_size
          << ", \"tiles_written\": " << wr / b.page_size << "}";
    }
    o << "],\n  \"cores\": [";
    bool first = true;
    for (auto& [xy, c] : dev.core_counters) {
        o << (first ? "\n    " : ",\n    ") << "{\"core\": [" << xy.first << ", " << xy.second << "], \"noc_bytes_read\": "
          << c.noc_bytes_read << ", \"noc_bytes_written\": " << c.noc_bytes_written << ", \"noc_reads\": " << c.noc_reads
          << ", \"noc_writes\": " << c.noc_writes << ", \"dst_acquires\": " << c.dst_acquires
          << ", \"tile_ops\": " << json_ops(c.tile_ops) << ", \"dram\": {";
        bool f2 = true;
        for (auto& b : dev.buffers) {
            auto r = c.dram_bytes_read.find(b->id);
            auto w = c.dram_bytes_written.find(b->id);
            std::uint64_t rd = r == c.dram_bytes_read.end() ? 0 : r->second;
            std::uint64_t wr = w == c.dram_bytes_written.end() ? 0 : w->second;
            if (!rd && !wr) continue;
            o << (f2 ? "" : ", ") << "\"" << b->id << "\": {\"tiles_read\": " << rd / b->page_size
              << ", \"tiles_written\": " << wr / b->page_size << ", \"bytes_read\": " << rd << ", \"bytes_written\": " << wr
              << "}";
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
    o << "],\n  \"totals\": {\"noc_bytes_read\": " << total.noc_bytes_read << ", \"noc_bytes_written\": "
      << total.noc_bytes_written << ", \"dst_acquires\": " << total.dst_acquires << ", \"tile_ops\": " << json_ops(total.tile_ops)
      << "}\n}\n";
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
            host_fail("host-api", strformat("%s: core range %s is outside the %ux%u worker grid of %s", api, r.str().c_str(),
                                            arch.grid_x, arch.grid_y, arch.name.c_str()));
        for (std::size_t y = r.start_coord.y; y <= r.end_coord.y; ++y)
            for (std::size_t x = r.start_coord.x; x <= r.end_coord.x; ++x)
                out.insert({static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y)});
    }
    return {out.begin(), out.end()};
}

std::string base_name(const std::string& p) {
    auto i = p.find_last_of('/');
    return i == std::string::npos ? p : p.substr(i + 1);
}

KernelDef& kernel_of(const tt::tt_metal::Program& program, tt::tt_metal::KernelHandle handle, const char* api) {
    auto& ks = program.state().kernels;
    if (handle >= ks.size()) host_fail("host-api", strformat("%s: kernel handle %u does not belong to this program", api, handle));
    return *ks[handle];
}

void set_args(const tt::tt_metal::Program& program, tt::tt_metal::KernelHandle handle, const CoreSpec& spec,
              const std::vector<std::uint32_t>& args) {
    KernelDef& k = kernel_of(program, handle, "SetRuntimeArgs");
    if (args.size() > 341)
        host_fail("host-api", strformat("SetRuntimeArgs: %zu args for kernel '%s' exceed the limit of 341", args.size(), k.display.c_str()));
    for (auto& xy : expand(spec, "SetRuntimeArgs")) {
        if (std::find(k.cores.begin(), k.cores.end(), xy) == k.cores.end())
            host_fail("host-api", strformat("SetRuntimeArgs: kernel '%s' is not placed on core (%u,%u)", k.display.c_str(), xy.first, xy.second));
        k.runtime_args[xy] = args;
    }
}

tt::tt_metal::KernelHandle add_kernel(tt::tt_metal::Program& program, const std::string& path, const std::string& source,
                                      const CoreSpec& spec,
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
        if (!dm->named_compile_args.empty()) host_fail("host-api", "CreateKernel: named_compile_args are not emulated");
    } else if (auto* cc = std::get_if<tt::tt_metal::ComputeConfig>(&config)) {
        k->role = Role::Compute;
        k->compile_args = cc->compile_args;
        k->defines = cc->defines;
        k->fp32_dest_acc = cc->fp32_dest_acc_en;
        k->dst_full_sync = cc->dst_full_sync_en;
        k->approx = cc->math_approx_mode;
        k->math_fidelity = static_cast<int>(cc->math_fidelity);
        for (std::size_t i = 0; i < cc->unpack_to_dest_mode.size() && i < kMaxCBs; ++i)
            if (cc->unpack_to_dest_mode[i] == tt::tt_metal::UnpackToDestMode::UnpackToDestFp32) k->unpack_to_dest_fp32 |= 1ull << i;
        if (!cc->named_compile_args.empty()) host_fail("host-api", "CreateKernel: named_compile_args are not emulated");
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
                          "ttemu: error [crash] %s: signal %d (%s) inside the kernel; note that L1 addresses are not host "
                          "pointers in the emulator, so kernels must move data with NoC calls\n",
                          run ? run->who().c_str() : "host", sig, strsignal(sig));
    if (n > 0) (void)!write(2, buf, static_cast<std::size_t>(n));
    std::_Exit(3);
}

void kernel_thread(KernelRun* run) {
    set_current_run(run);
    try {
        run->kernel->entry();
        if (run->kernel->role == Role::Compute) {
            compute_finish_checks(*run);
        } else if (run->unacked_writes) {
            kernel_fail("noc-barrier", "kernel_main returned",
                        strformat("%llu NoC write(s) were never confirmed: call noc_async_write_barrier() before "
                                  "the kernel ends",
                                  static_cast<unsigned long long>(run->unacked_writes)));
        }
    } catch (const KernelAbort&) {
    } catch (const std::exception& e) {
        try {
            kernel_fail("kernel-exception", "kernel_main", e.what());
        } catch (const KernelAbort&) {
        }
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
        msg += "\n  " + r->who() + ": blocked in " + r->blocked_call;
        if (r->blocked_cb >= 0) msg += "\n      " + r->core->cbs[r->blocked_cb].describe();
    }
    return msg;
}

void run_program(host::ProgramState& ps) {
    Device& dev = device();
    const ArchSpec& arch = *dev.arch;
    auto t0 = std::chrono::steady_clock::now();

    // Cores in use and CB layout per core.
    std::set<std::pair<std::uint32_t, std::uint32_t>> used;
    for (auto& k : ps.kernels) used.insert(k->cores.begin(), k->cores.end());
    for (auto& xy : used) {
        Core& core = dev.core(xy.first, xy.second);
        for (auto& c : core.cbs) c = CircularBuffer{};
        std::uint32_t next = kL1UnreservedBase;
        for (auto& cfg : ps.cbs) {
            if (std::find(cfg.cores.begin(), cfg.cores.end(), xy) == cfg.cores.end()) continue;
            for (auto& [idx, format] : cfg.formats) {
                CircularBuffer& c = core.cbs[idx];
                if (c.configured)
                    host_fail("host-api", strformat("CreateCircularBuffer: CB c_%u is configured twice on core (%u,%u)", idx, xy.first, xy.second));
                c.configured = true;
                c.index = idx;
                c.base = next;
                c.format = format;
                c.page_size = cfg.page_sizes.at(idx);
                c.num_pages = cfg.total_size / c.page_size;
            }
            next += (cfg.total_size + 31) / 32 * 32;
            if (next > arch.l1_bytes)
                host_fail("host-api", strformat("circular buffers on core (%u,%u) need %u B of L1 but only %u B are free above "
                                                "the reserved %u B",
                                                xy.first, xy.second, next - kL1UnreservedBase, arch.l1_bytes - kL1UnreservedBase,
                                                kL1UnreservedBase));
        }
    }
    // One kernel per processor per core.
    std::map<std::tuple<std::uint32_t, std::uint32_t, int>, KernelDef*> placed;
    for (auto& k : ps.kernels)
        for (auto& xy : k->cores) {
            auto& slot = placed[{xy.first, xy.second, static_cast<int>(k->role)}];
            if (slot)
                host_fail("host-api", strformat("kernels '%s' and '%s' both occupy the %s processor of core (%u,%u)",
                                                slot->display.c_str(), k->display.c_str(), role_name(k->role), xy.first, xy.second));
            slot = k.get();
        }
    // JIT: the CB descriptors come from the kernel's cores, which must agree.
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
            } else if (v.formats != view.formats) {
                host_fail("host-api", strformat("kernel '%s' spans cores whose CB data formats differ (e.g. core (%u,%u)); "
                                                "one compiled kernel needs one set of CB descriptors",
                                                k->display.c_str(), xy.first, xy.second));
            }
        }
        kernels.push_back(k.get());
        views.push_back(view);
    }
    jit_compile_kernels(kernels, views);

    // Launch.
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
            runs.push_back(std::move(r));
        }
    for (auto& r : runs) r->thread = std::thread(kernel_thread, r.get());

    // Watchdog: a deadlock is every unfinished kernel blocked with no progress for TTEMU_DEADLOCK_MS.
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

    // Counters.
    for (auto& r : runs) dev.core_counters[{r->core->x, r->core->y}].merge(r->counters);
    for (auto& xy : used) {
        Core& core = dev.core(xy.first, xy.second);
        auto& hw = dev.cb_high_water[xy];
        for (std::uint32_t i = 0; i < kMaxCBs; ++i) {
            hw[i] = std::max(hw[i], core.cbs[i].high_water);
            const CircularBuffer& c = core.cbs[i];
            if (c.configured && c.used() && dev.error_kind.empty())
                add_warning(strformat("core (%u,%u): program ended with %u page(s) pushed but never popped in CB c_%u", xy.first,
                                      xy.second, c.used(), i));
        }
    }
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
    std::ifstream in(file_name, std::ios::binary);
    if (!in) {
        const char* home = std::getenv("TT_METAL_HOME");
        if (home && file_name[0] != '/') in.open(std::string(home) + "/" + file_name, std::ios::binary);
        if (!in) ttemu::host_fail("host-api", "CreateKernel: kernel source '" + file_name + "' not found (absolute, or relative to the working directory)");
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    char resolved[4096];
    std::string path = realpath(file_name.c_str(), resolved) ? std::string(resolved) : file_name;
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
    const auto& arch = ttemu::device().arch;
    for (auto& [idx, format] : config.data_formats()) {
        if (idx >= arch->num_cbs)
            ttemu::host_fail("host-api", ttemu::strformat("CreateCircularBuffer: CB index %u exceeds %s's %u CBs", idx,
                                                          arch->name.c_str(), arch->num_cbs));
        auto ps = config.page_sizes().find(idx);
        if (ps == config.page_sizes().end() || ps->second == 0)
            ttemu::host_fail("host-api", ttemu::strformat("CreateCircularBuffer: CB c_%u has no page size (call set_page_size)", idx));
        if (config.total_size() == 0 || config.total_size() % ps->second != 0)
            ttemu::host_fail("host-api", ttemu::strformat("CreateCircularBuffer: CB c_%u total size %u is not a multiple of its page size %u",
                                                          idx, config.total_size(), ps->second));
        def.formats[idx] = static_cast<std::uint8_t>(format);
        def.page_sizes[idx] = ps->second;
    }
    def.cores = ttemu::expand(core_spec, "CreateCircularBuffer");
    program.state().cbs.push_back(def);
    return program.state().cbs.size();
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
    if (cores.size() != runtime_args.size()) ttemu::host_fail("host-api", "SetRuntimeArgs: cores and args differ in length");
    for (std::size_t i = 0; i < cores.size(); ++i) ttemu::set_args(program, kernel, cores[i], runtime_args[i]);
}
void SetCommonRuntimeArgs(const Program& program, KernelHandle kernel, const std::vector<std::uint32_t>& runtime_args) {
    ttemu::kernel_of(program, kernel, "SetCommonRuntimeArgs").common_args = runtime_args;
}
void SetCommonRuntimeArgs(const Program& program, KernelHandle kernel, std::initializer_list<std::uint32_t> runtime_args) {
    ttemu::kernel_of(program, kernel, "SetCommonRuntimeArgs").common_args = runtime_args;
}
std::vector<std::uint32_t>& GetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreCoord& core) {
    return ttemu::kernel_of(program, kernel, "GetRuntimeArgs").runtime_args[{static_cast<std::uint32_t>(core.x), static_cast<std::uint32_t>(core.y)}];
}

TensorAccessorArgs::TensorAccessorArgs(const distributed::MeshBuffer& buffer, tensor_accessor::ArgConfig config) {
    if (static_cast<std::uint8_t>(config) & ~static_cast<std::uint8_t>(tensor_accessor::ArgConfig::IsDram))
        ttemu::host_fail("host-api", "TensorAccessorArgs: only interleaved layouts without runtime args are emulated");
    std::uint32_t align = ttemu::device().arch->dram_alignment;
    config_word_ = static_cast<std::uint32_t>(tensor_accessor::ArgConfig::IsDram);
    aligned_page_size_ = static_cast<std::uint32_t>((buffer.page_size() + align - 1) / align * align);
}

namespace distributed {

std::shared_ptr<MeshDevice> MeshDevice::create_unit_mesh(int device_id, std::size_t, std::size_t, std::size_t,
                                                        const DispatchCoreConfig&) {
    if (device_id != 0) ttemu::host_fail("host-api", "create_unit_mesh: the emulator has one device (id 0)");
    // An emulated device may have a device node (TTEMU_DEVICE), held exclusively while the program runs, like
    // /dev/tenstorrent/N: a missing node or one another process holds is a device error (exit 7), not a kernel bug.
    if (const char* node = std::getenv("TTEMU_DEVICE"); node && *node) {
        int fd = ::open(node, O_RDWR | O_CLOEXEC);
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

std::shared_ptr<MeshBuffer> MeshBuffer::create(const ReplicatedBufferConfig& global_config,
                                               const DeviceLocalBufferConfig& local, MeshDevice* mesh_device,
                                               std::optional<DeviceAddr> address) {
    auto& dev = ttemu::device();
    if (local.buffer_type != BufferType::DRAM) ttemu::host_fail("host-api", "MeshBuffer::create: only DRAM buffers are emulated");
    if (address) ttemu::host_fail("host-api", "MeshBuffer::create: explicit addresses are not emulated");
    if (local.page_size == 0 || global_config.size == 0 || global_config.size % local.page_size != 0)
        ttemu::host_fail("host-api", ttemu::strformat("MeshBuffer::create: size %llu must be a non-zero multiple of page_size %llu",
                                                      (unsigned long long)global_config.size, (unsigned long long)local.page_size));
    auto b = std::make_unique<ttemu::DramBuffer>();
    std::uint32_t align = dev.arch->dram_alignment;
    b->id = static_cast<std::uint32_t>(dev.buffers.size());
    b->size = global_config.size;
    b->page_size = static_cast<std::uint32_t>(local.page_size);
    b->aligned_page = (b->page_size + align - 1) / align * align;
    b->num_pages = static_cast<std::uint32_t>(global_config.size / local.page_size);
    b->pages_per_bank = (b->num_pages + dev.arch->dram_banks - 1) / dev.arch->dram_banks;
    b->address = dev.next_dram_addr;
    dev.next_dram_addr += (b->bank_extent() + 4095) / 4096 * 4096;
    if (dev.next_dram_addr > dev.arch->bank_bytes) ttemu::host_fail("host-api", "MeshBuffer::create: DRAM is full");
    b->data.assign(b->size, 0);
    auto out = std::make_shared<MeshBuffer>(b->id, b->address, b->size, b->page_size, mesh_device);
    dev.buffers.push_back(std::move(b));
    return out;
}

namespace detail {
static ttemu::DramBuffer& lookup(const MeshBuffer& buffer) {
    auto& dev = ttemu::device();
    if (buffer.ttemu_id() >= dev.buffers.size()) ttemu::host_fail("host-api", "unknown MeshBuffer");
    return *dev.buffers[buffer.ttemu_id()];
}
void write_buffer(MeshCommandQueue&, const MeshBuffer& buffer, const void* src, std::size_t bytes) {
    auto& b = lookup(buffer);
    if (bytes != b.size)
        ttemu::host_fail("host-api", ttemu::strformat("EnqueueWriteMeshBuffer: %zu bytes given for buffer #%u of %llu bytes", bytes,
                                                      b.id, (unsigned long long)b.size));
    std::memcpy(b.data.data(), src, bytes);
}
std::size_t buffer_bytes(const MeshBuffer& buffer) { return lookup(buffer).size; }
void read_buffer(MeshCommandQueue&, void* dst, const MeshBuffer& buffer, std::size_t bytes) {
    auto& b = lookup(buffer);
    std::memcpy(dst, b.data.data(), std::min<std::size_t>(bytes, b.size));
}
}  // namespace detail

void EnqueueMeshWorkload(MeshCommandQueue&, MeshWorkload& workload, bool) {
    for (auto& p : workload.ttemu_programs()) ttemu::run_program(p.state());
}
void Finish(MeshCommandQueue&) {}

}  // namespace distributed
}  // namespace tt::tt_metal
