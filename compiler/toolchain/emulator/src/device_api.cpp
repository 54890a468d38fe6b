// Device-side API for data-movement (and compute) kernels: runtime args, circular buffers, NoC transfers.
// Every call checks the protocol it belongs to and fails with the core, kernel and call named.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime.h"

namespace ttemu {
namespace {

constexpr std::uint64_t kDramTag = 1ull << 63;
constexpr std::uint64_t kL1Tag = 1ull << 62;
constexpr std::uint64_t kL1InterleavedTag = 1ull << 61;

KernelRun& run_or_die() {
    KernelRun* run = current_run();
    if (!run) host_fail("device-api", "a device API function was called outside a running kernel");
    return *run;
}

std::string cb_name(std::int32_t cb) { return "CB c_" + std::to_string(cb); }

CircularBuffer& cb_checked(KernelRun& run, std::int32_t cb, const std::string& call) {
    const ArchSpec& arch = *device().arch;
    if (cb < 0 || static_cast<std::uint32_t>(cb) >= arch.num_cbs)
        kernel_fail("cb-index", call,
                    strformat("CB index %d is out of range: %s has CBs c_0..c_%u", cb, arch.name.c_str(), arch.num_cbs - 1));
    CircularBuffer& c = run.core->cbs[cb];
    if (!c.configured)
        kernel_fail("cb-unconfigured", call,
                    cb_name(cb) + " is not configured on this core (no CreateCircularBuffer covers it)");
    return c;
}

// Each side of a CB (producer: reserve/push, consumer: wait/pop) belongs to exactly one kernel on the core.
// A compute kernel may hold both sides (its PACK thread produces, its UNPACK thread consumes); a
// data-movement kernel may not. Called with the core mutex held.
void claim(KernelRun& run, CircularBuffer& c, bool producer, const std::string& call) {
    KernelRun*& owner = producer ? c.producer : c.consumer;
    const char* side = producer ? "producer (cb_reserve_back/cb_push_back)" : "consumer (cb_wait_front/cb_pop_front)";
    if (owner && owner != &run)
        kernel_fail("cb-role", call,
                    strformat("wrong role: the %s side of %s already belongs to the %s kernel '%s'; each side of a CB "
                              "must be used by exactly one kernel",
                              side, cb_name(c.index).c_str(), role_name(owner->kernel->role),
                              owner->kernel->display.c_str()));
    KernelRun* other = producer ? c.consumer : c.producer;
    if (other == &run && run.kernel->role != Role::Compute)
        kernel_fail("cb-role", call,
                    strformat("wrong role: this data-movement kernel already %s %s; only a compute kernel may both "
                              "produce and consume the same CB",
                              producer ? "consumes (wait/pop)" : "produces into (reserve/push)", cb_name(c.index).c_str()));
    owner = &run;
}

template <typename Pred>
void block_until(KernelRun& run, std::unique_lock<std::mutex>& lk, const std::string& call, int cb, Pred pred) {
    Device& dev = device();
    if (dev.abort) throw KernelAbort{};
    if (pred()) return;
    run.blocked_call = call;
    run.blocked_cb = cb;
    run.state = ThreadState::Blocked;
    while (!pred()) {
        if (dev.abort) {
            run.state = ThreadState::Running;
            throw KernelAbort{};
        }
        run.core->cv.wait_for(lk, std::chrono::milliseconds(50));
    }
    run.state = ThreadState::Running;
    run.blocked_call.clear();
    run.blocked_cb = -1;
}

void note_progress(Core& core) {
    device().progress.fetch_add(1, std::memory_order_relaxed);
    core.cv.notify_all();
}

std::uint32_t dram_align(std::uint32_t page_size) {
    std::uint32_t a = device().arch->dram_alignment;
    return (page_size + a - 1) / a * a;
}

// Checks an L1 access by the calling kernel against its own core's layout and returns the CB it touches (-1: none).
int check_own_l1(KernelRun& run, std::uint32_t addr, std::uint32_t bytes, bool write, const std::string& call) {
    const ArchSpec& arch = *device().arch;
    if (bytes == 0) return -1;
    std::uint64_t end = static_cast<std::uint64_t>(addr) + bytes;
    if (end > arch.l1_bytes)
        kernel_fail("l1-out-of-range", call,
                    strformat("L1 range [%s, %s) is outside this core's %u-byte L1", hex(addr).c_str(),
                              hex(end).c_str(), arch.l1_bytes));
    if (addr >= kMemZerosBase && addr < kMemZerosBase + kMemZerosSize) {
        if (write) kernel_fail("l1-reserved", call, "writes into MEM_ZEROS (read-only zeros)");
        if (end > kMemZerosBase + kMemZerosSize)
            kernel_fail("l1-out-of-range", call,
                        strformat("reads %u bytes from MEM_ZEROS_BASE but MEM_ZEROS_SIZE is %u", bytes, kMemZerosSize));
        return -1;
    }
    Core& core = *run.core;
    std::unique_lock<std::mutex> lk(core.mu);
    CircularBuffer* hit = nullptr;
    for (auto& c : core.cbs) {
        if (!c.configured) continue;
        std::uint64_t cend = static_cast<std::uint64_t>(c.base) + static_cast<std::uint64_t>(c.num_pages) * c.page_size;
        if (addr >= c.base && addr < cend) {
            if (!hit || c.producer == &run || c.consumer == &run) hit = &c;
        }
    }
    if (!hit)
        kernel_fail("l1-not-cb", call,
                    strformat("L1 range [%s, %s) is not inside any circular buffer on this core", hex(addr).c_str(),
                              hex(end).c_str()));
    CircularBuffer& c = *hit;
    std::uint64_t cend = static_cast<std::uint64_t>(c.base) + static_cast<std::uint64_t>(c.num_pages) * c.page_size;
    if (end > cend)
        kernel_fail("cb-out-of-range", call,
                    strformat("L1 range [%s, %s) runs past the end of %s (%u pages of %u B at %s)", hex(addr).c_str(),
                              hex(end).c_str(), cb_name(c.index).c_str(), c.num_pages, c.page_size, hex(c.base).c_str()));
    std::uint32_t first = (addr - c.base) / c.page_size;
    std::uint32_t last = static_cast<std::uint32_t>((end - 1 - c.base) / c.page_size);
    bool is_prod = c.producer == &run, is_cons = c.consumer == &run;
    if (is_prod && first >= c.wr_page && last < c.wr_page + c.back_granted) return static_cast<int>(c.index);
    if (is_cons && first >= c.rd_page && last < c.rd_page + c.front_granted) return static_cast<int>(c.index);
    if (!is_prod && !is_cons)
        kernel_fail("cb-role", call,
                    strformat("%s %s without holding it: call cb_reserve_back (producer) or cb_wait_front (consumer) "
                              "first",
                              write ? "writes into" : "reads from", cb_name(c.index).c_str()));
    std::string held;
    if (is_prod) held += strformat("pages [%u, %u) reserved by cb_reserve_back", c.wr_page, c.wr_page + c.back_granted);
    if (is_cons)
        held += std::string(held.empty() ? "" : " and ") +
                strformat("pages [%u, %u) obtained by cb_wait_front", c.rd_page, c.rd_page + c.front_granted);
    kernel_fail("cb-out-of-range", call,
                strformat("out-of-range CB access: L1 range [%s, %s) is page(s) %u..%u of %s, but this kernel holds "
                          "only %s",
                          hex(addr).c_str(), hex(end).c_str(), first, last, cb_name(c.index).c_str(), held.c_str()));
}

// Copies between a DRAM buffer and host memory (an L1 pointer); `encoded` is a DRAM NoC address.
void dram_access(KernelRun& run, std::uint64_t encoded, std::uint8_t* l1, std::uint32_t bytes, bool to_l1,
                 const std::string& call) {
    Device& dev = device();
    std::uint32_t bank = static_cast<std::uint32_t>((encoded >> 40) & 0xff);
    std::uint64_t addr = encoded & 0xffffffffffull;
    if (bank >= dev.arch->dram_banks)
        kernel_fail("dram-out-of-range", call, strformat("DRAM bank %u does not exist", bank));
    DramBuffer* buf = nullptr;
    for (auto& b : dev.buffers)
        if (addr >= b->address && addr < b->address + b->bank_extent()) buf = b.get();
    if (!buf)
        kernel_fail("dram-out-of-range", call,
                    strformat("DRAM address %s in bank %u is not inside any allocated buffer", hex(addr).c_str(), bank));
    std::uint64_t off = addr - buf->address;
    std::uint32_t row = static_cast<std::uint32_t>(off / buf->aligned_page);
    std::uint32_t in_page = static_cast<std::uint32_t>(off % buf->aligned_page);
    std::uint32_t done = 0;
    while (done < bytes) {
        std::uint64_t page = static_cast<std::uint64_t>(row) * dev.arch->dram_banks + bank;
        if (page >= buf->num_pages)
            kernel_fail("dram-out-of-range", call,
                        strformat("DRAM access reaches page %llu of buffer #%u, which has %u pages of %u B",
                                  static_cast<unsigned long long>(page), buf->id, buf->num_pages, buf->page_size));
        std::uint32_t chunk = std::min(bytes - done, buf->aligned_page - in_page);
        std::uint32_t real = in_page < buf->page_size ? std::min(chunk, buf->page_size - in_page) : 0;
        std::uint8_t* p = buf->data.data() + page * buf->page_size + in_page;
        if (to_l1) {
            if (real) std::memcpy(l1 + done, p, real);
            if (chunk > real) std::memset(l1 + done + real, 0, chunk - real);
        } else if (real) {
            std::memcpy(p, l1 + done, real);
        }
        done += chunk;
        ++row;
        in_page = 0;
    }
    if (to_l1)
        run.counters.dram_bytes_read[buf->id] += bytes;
    else
        run.counters.dram_bytes_written[buf->id] += bytes;
}

Core& core_at_noc(KernelRun& run, std::uint64_t encoded, const std::string& call) {
    Device& dev = device();
    std::uint32_t nx = static_cast<std::uint32_t>((encoded >> 48) & 0xff);
    std::uint32_t ny = static_cast<std::uint32_t>((encoded >> 40) & 0xff);
    bool wh = dev.arch->name == "wormhole_b0";
    std::uint32_t x0 = wh ? 18 : 1, y0 = wh ? 18 : 2;
    if (nx < x0 || ny < y0 || nx - x0 >= dev.arch->grid_x || ny - y0 >= dev.arch->grid_y)
        kernel_fail("noc-address", call,
                    strformat("NoC coordinates (%u,%u) are not a worker core (use worker_core_from_logical_core on the "
                              "host)",
                              nx, ny));
    return dev.core(nx - x0, ny - y0);
}

void check_remote_l1(std::uint32_t addr, std::uint32_t bytes, const std::string& call) {
    if (static_cast<std::uint64_t>(addr) + bytes > device().arch->l1_bytes)
        kernel_fail("l1-out-of-range", call, strformat("remote L1 range at %s (+%u B) is outside L1", hex(addr).c_str(), bytes));
}

}  // namespace

namespace dev {

std::uint32_t arg(int idx, bool common) {
    KernelRun& run = run_or_die();
    const std::vector<std::uint32_t>& args = common ? run.kernel->common_args : *run.args;
    const char* fn = common ? "get_common_arg_val" : "get_arg_val";
    if (idx < 0 || static_cast<std::size_t>(idx) >= args.size())
        kernel_fail("arg-out-of-range", strformat("%s(%d)", fn, idx),
                    strformat("only %zu %sruntime arg(s) were set for this kernel%s", args.size(), common ? "common " : "",
                              common ? "" : " on this core"));
    return args[static_cast<std::size_t>(idx)];
}

void cb_reserve_back(std::int32_t cb, std::int32_t n) {
    KernelRun& run = run_or_die();
    std::string call = strformat("cb_reserve_back(cb=%d, n=%d)", cb, n);
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, true, call);
    if (n < 0 || static_cast<std::uint32_t>(n) > c.num_pages)
        kernel_fail("cb-overflow", call, strformat("%s has only %u pages; this reserve can never succeed", cb_name(cb).c_str(), c.num_pages));
    std::uint32_t need = static_cast<std::uint32_t>(n);
    if (c.wr_page + need > c.num_pages)
        kernel_fail("cb-wrap", call,
                    strformat("reserving %u page(s) at write page %u runs past the end of %s (%u pages): the write pointer "
                              "wraps only at the end, so pushes must add up to the CB size per cycle (make the depth a "
                              "multiple of the push size)",
                              need, c.wr_page, cb_name(cb).c_str(), c.num_pages));
    block_until(run, lk, call, cb, [&] { return c.num_pages - c.used() >= need; });
    c.back_granted = std::max(c.back_granted, need);
}

void cb_push_back(std::int32_t cb, std::int32_t n) {
    KernelRun& run = run_or_die();
    std::string call = strformat("cb_push_back(cb=%d, n=%d)", cb, n);
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, true, call);
    std::uint32_t cnt = static_cast<std::uint32_t>(n);
    if (n < 0 || cnt > c.back_granted)
        kernel_fail("cb-protocol", call,
                    strformat("pushes %d page(s) but only %u page(s) are reserved (missing or smaller cb_reserve_back)", n,
                              c.back_granted));
    if (c.wr_page + cnt > c.num_pages)
        kernel_fail("cb-wrap", call,
                    strformat("the pushed pages [%u, %u) run past the end of %s (%u pages): the write pointer wraps only at "
                              "the end, so pushes must add up to the CB size per cycle (make the depth a multiple of the "
                              "push size)",
                              c.wr_page, c.wr_page + cnt, cb_name(cb).c_str(), c.num_pages));
    if (run.kernel->role != Role::Compute && (run.pending_read_cbs >> cb & 1))
        kernel_fail("noc-barrier", call,
                    "NoC reads into " + cb_name(cb) +
                        " are still in flight: call noc_async_read_barrier() before cb_push_back");
    if (run.pending_inline_cbs >> cb & 1)
        kernel_fail("noc-barrier", call,
                    "noc_inline_dw_write into " + cb_name(cb) +
                        " is not confirmed: call noc_async_write_barrier() before cb_push_back");
    c.received += cnt;
    c.wr_page = (c.wr_page + cnt) % c.num_pages;
    c.back_granted -= cnt;
    c.pack_seq = 0;
    c.high_water = std::max(c.high_water, c.used());
    note_progress(*run.core);
}

void cb_wait_front(std::int32_t cb, std::int32_t n) {
    KernelRun& run = run_or_die();
    std::string call = strformat("cb_wait_front(cb=%d, n=%d)", cb, n);
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, false, call);
    if (n < 0 || static_cast<std::uint32_t>(n) > c.num_pages)
        kernel_fail("cb-overflow", call, strformat("%s has only %u pages; this wait can never succeed", cb_name(cb).c_str(), c.num_pages));
    std::uint32_t need = static_cast<std::uint32_t>(n);
    if (c.rd_page + need > c.num_pages)
        kernel_fail("cb-wrap", call,
                    strformat("waiting for %u page(s) at read page %u runs past the end of %s (%u pages): the read pointer "
                              "wraps only at the end, so pops must add up to the CB size per cycle",
                              need, c.rd_page, cb_name(cb).c_str(), c.num_pages));
    // Cumulative rule: the count is relative to the front, so wait 8, 16, 24 between pops, not 8, 8, 8.
    block_until(run, lk, call, cb, [&] { return c.used() >= need; });
    c.front_granted = std::max(c.front_granted, need);
}

void cb_pop_front(std::int32_t cb, std::int32_t n) {
    KernelRun& run = run_or_die();
    std::string call = strformat("cb_pop_front(cb=%d, n=%d)", cb, n);
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, false, call);
    std::uint32_t cnt = static_cast<std::uint32_t>(n);
    if (n < 0 || cnt > c.front_granted)
        kernel_fail("cb-protocol", call,
                    strformat("pops %d page(s) but only %u page(s) were obtained by cb_wait_front", n, c.front_granted));
    if (c.rd_page + cnt > c.num_pages)
        kernel_fail("cb-wrap", call,
                    strformat("the popped pages [%u, %u) run past the end of %s (%u pages): pops must add up to the CB "
                              "size per cycle",
                              c.rd_page, c.rd_page + cnt, cb_name(cb).c_str(), c.num_pages));
    if (run.kernel->role != Role::Compute && (run.pending_write_cbs >> cb & 1))
        kernel_fail("noc-barrier", call,
                    "NoC writes from " + cb_name(cb) +
                        " are not flushed: call noc_async_writes_flushed() (or noc_async_write_barrier()) before "
                        "cb_pop_front");
    c.acked += cnt;
    c.rd_page = (c.rd_page + cnt) % c.num_pages;
    c.front_granted -= cnt;
    note_progress(*run.core);
}

bool cb_pages_reservable_at_back(std::int32_t cb, std::int32_t n) {
    KernelRun& run = run_or_die();
    std::string call = strformat("cb_pages_reservable_at_back(cb=%d, n=%d)", cb, n);
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, true, call);
    return n >= 0 && c.num_pages - c.used() >= static_cast<std::uint32_t>(n);
}

bool cb_pages_available_at_front(std::int32_t cb, std::int32_t n) {
    KernelRun& run = run_or_die();
    std::string call = strformat("cb_pages_available_at_front(cb=%d, n=%d)", cb, n);
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, false, call);
    return n >= 0 && c.used() >= static_cast<std::uint32_t>(n);
}

std::uint32_t get_write_ptr(std::uint32_t cb) {
    KernelRun& run = run_or_die();
    std::string call = strformat("get_write_ptr(cb=%u)", cb);
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, static_cast<std::int32_t>(cb), call);
    return c.base + c.wr_page * c.page_size;
}

std::uint32_t get_read_ptr(std::uint32_t cb) {
    KernelRun& run = run_or_die();
    std::string call = strformat("get_read_ptr(cb=%u)", cb);
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, static_cast<std::int32_t>(cb), call);
    return c.base + c.rd_page * c.page_size;
}

std::uint64_t dram_noc_addr(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                            std::uint32_t offset) {
    std::uint32_t banks = device().arch->dram_banks;
    std::uint64_t addr = base + static_cast<std::uint64_t>(page_id / banks) * dram_align(page_size) + offset;
    return (is_dram ? kDramTag : kL1InterleavedTag) | (static_cast<std::uint64_t>(page_id % banks) << 40) |
           (addr & 0xffffffffffull);
}

std::uint32_t my_noc_x() {
    bool wh = device().arch->name == "wormhole_b0";
    return run_or_die().core->x + (wh ? 18 : 1);
}
std::uint32_t my_noc_y() {
    bool wh = device().arch->name == "wormhole_b0";
    return run_or_die().core->y + (wh ? 18 : 2);
}

std::uint64_t local_l1_noc_addr(std::uint32_t l1_addr) {
    return kL1Tag | (static_cast<std::uint64_t>(my_noc_x()) << 48) | (static_cast<std::uint64_t>(my_noc_y()) << 40) | l1_addr;
}

std::uint64_t core_l1_noc_addr(std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t l1_addr) {
    return kL1Tag | (static_cast<std::uint64_t>(noc_x & 0xff) << 48) | (static_cast<std::uint64_t>(noc_y & 0xff) << 40) |
           l1_addr;
}

namespace {
// One NoC transfer between this core's L1 (`local`) and a NoC address (`remote`): DRAM, or another/our own core's
// L1. `reading` = remote -> local. Both directions share the address decoding and the range checks.
void noc_transfer(KernelRun& run, std::uint64_t remote, std::uint32_t local, std::uint32_t bytes, bool reading,
                  const std::string& call) {
    if (device().abort) throw KernelAbort{};
    int cb = check_own_l1(run, local, bytes, reading, call);
    std::uint8_t* mine = run.core->l1 + local;
    if (remote & kDramTag) {
        dram_access(run, remote, mine, bytes, reading, call);
    } else if (remote & kL1Tag) {
        Core& other = core_at_noc(run, remote, call);
        std::uint32_t addr = static_cast<std::uint32_t>(remote & 0xffffffffull);
        if (&other == run.core)
            check_own_l1(run, addr, bytes, !reading, call);
        else
            check_remote_l1(addr, bytes, call);
        if (reading)
            std::memmove(mine, other.l1 + addr, bytes);
        else
            std::memmove(other.l1 + addr, mine, bytes);
    } else if (remote & kL1InterleavedTag) {
        unsupported("interleaved L1 buffers (BufferType::L1)");
    } else {
        kernel_fail("noc-address", call, std::string(reading ? "source" : "destination") +
                                             " is not a NoC address (use get_noc_addr or a TensorAccessor)");
    }
    if (reading) {
        if (cb >= 0) run.pending_read_cbs |= 1ull << cb;
        run.counters.noc_bytes_read += bytes;
        run.counters.noc_reads += 1;
    } else {
        if (cb >= 0) run.pending_write_cbs |= 1ull << cb;
        run.unacked_writes += 1;
        run.counters.noc_bytes_written += bytes;
        run.counters.noc_writes += 1;
    }
    device().progress.fetch_add(1, std::memory_order_relaxed);
}

void do_read(KernelRun& run, std::uint64_t src, std::uint32_t l1_dst, std::uint32_t bytes, const std::string& call) {
    noc_transfer(run, src, l1_dst, bytes, true, call);
}

void do_write(KernelRun& run, std::uint32_t l1_src, std::uint64_t dst, std::uint32_t bytes, const std::string& call) {
    noc_transfer(run, dst, l1_src, bytes, false, call);
}

DramBuffer& accessor_buffer(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                            const std::string& call) {
    if (!is_dram) unsupported("TensorAccessor over an L1 buffer");
    DramBuffer* buf = device().find_buffer_at(base);
    if (!buf)
        kernel_fail("dram-out-of-range", call,
                    strformat("TensorAccessor base address %s is not the address of any DRAM buffer", hex(base).c_str()));
    if (page_size != buf->page_size)
        kernel_fail("accessor-mismatch", call,
                    strformat("TensorAccessor page size %u B does not match DRAM buffer #%u's page size %u B", page_size,
                              buf->id, buf->page_size));
    if (page_id >= buf->num_pages)
        kernel_fail("dram-out-of-range", call,
                    strformat("page %u is outside DRAM buffer #%u (%u pages of %u B)", page_id, buf->id, buf->num_pages,
                              buf->page_size));
    return *buf;
}
}  // namespace

void noc_read(std::uint64_t src, std::uint32_t l1_dst, std::uint32_t bytes, const char* fn) {
    KernelRun& run = run_or_die();
    do_read(run, src, l1_dst, bytes, strformat("%s(src=%s, l1_dst=%s, size=%u)", fn, hex(src).c_str(), hex(l1_dst).c_str(), bytes));
}

void noc_write(std::uint32_t l1_src, std::uint64_t dst, std::uint32_t bytes, const char* fn) {
    KernelRun& run = run_or_die();
    do_write(run, l1_src, dst, bytes, strformat("%s(l1_src=%s, dst=%s, size=%u)", fn, hex(l1_src).c_str(), hex(dst).c_str(), bytes));
}

void noc_read_page(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id, std::uint32_t l1_dst,
                   std::uint32_t offset) {
    KernelRun& run = run_or_die();
    std::string call = strformat("noc_async_read_page(id=%u, l1_dst=%s, offset=%u)", page_id, hex(l1_dst).c_str(), offset);
    accessor_buffer(is_dram, base, page_size, page_id, call);
    do_read(run, dram_noc_addr(is_dram, base, page_size, page_id, offset), l1_dst, page_size, call);
}

void noc_write_page(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id, std::uint32_t l1_src,
                    std::uint32_t size, std::uint32_t offset) {
    KernelRun& run = run_or_die();
    std::string call = strformat("noc_async_write_page(id=%u, l1_src=%s, size=%u, offset=%u)", page_id,
                                 hex(l1_src).c_str(), size, offset);
    accessor_buffer(is_dram, base, page_size, page_id, call);
    do_write(run, l1_src, dram_noc_addr(is_dram, base, page_size, page_id, offset), size ? size : page_size, call);
}

void inline_dw_write(std::uint64_t addr, std::uint32_t val, std::uint8_t be) {
    KernelRun& run = run_or_die();
    if (device().abort) throw KernelAbort{};
    std::string call = strformat("noc_inline_dw_write(addr=%s, val=%s, be=%s)", hex(addr).c_str(), hex(val).c_str(),
                                 hex(be).c_str());
    if (!(addr & kL1Tag))
        kernel_fail("noc-address", call, "noc_inline_dw_write takes the NoC address of a core's L1 (not DRAM)");
    Core& to = core_at_noc(run, addr, call);
    std::uint32_t l1 = static_cast<std::uint32_t>(addr & 0xffffffffull);
    if (l1 % 4) kernel_fail("noc-address", call, "inline writes are 4-byte aligned");
    int cb = &to == run.core ? check_own_l1(run, l1, 4, true, call) : (check_remote_l1(l1, 4, call), -1);
    for (int b = 0; b < 4; ++b)
        if (be >> b & 1) to.l1[l1 + b] = static_cast<std::uint8_t>(val >> (8 * b));
    // like a read into the CB: it must be confirmed (noc_async_write_barrier) before the pages are pushed
    if (cb >= 0) run.pending_inline_cbs |= 1ull << cb;
    run.unacked_writes += 1;
    run.counters.noc_bytes_written += 4;
    run.counters.noc_writes += 1;
    device().progress.fetch_add(1, std::memory_order_relaxed);
}

void noc_read_barrier() { run_or_die().pending_read_cbs = 0; }
void noc_writes_flushed() { run_or_die().pending_write_cbs = 0; }
void noc_write_barrier() {
    KernelRun& run = run_or_die();
    run.pending_write_cbs = 0;
    run.pending_inline_cbs = 0;
    run.unacked_writes = 0;
}

void unsupported(const char* what) {
    kernel_fail("unsupported", what, "not supported by the tilefarm emulator");
}

}  // namespace dev
}  // namespace ttemu
