// The NoC as kernels see it: address encoding, L1 access checks, unicast and multicast transfers between L1, DRAM
// and other cores' L1, and semaphores. Bytes move at issue time; barriers check the protocol. A write into another
// core's L1 must land in a CB page that core's producer kernel has reserved, in a semaphore, or in an L1 buffer;
// a multicast must reach exactly `num_dests` cores that run the program.
#include <algorithm>
#include <cstring>

#include "runtime.h"

namespace ttemu {
namespace {

// Our own NoC address encoding (kernels treat it as opaque; offsets added to it stay in the low 32 bits).
constexpr std::uint64_t kDramTag = 1ull << 63;    // bank 40..47, DRAM address 0..39
constexpr std::uint64_t kL1Tag = 1ull << 62;      // x 48..55, y 40..47, L1 address 0..31
constexpr std::uint64_t kL1BankTag = 1ull << 61;  // interleaved L1 bank (not emulated)
constexpr std::uint64_t kMcastTag = 1ull << 60;   // x_start 54..59, y_start 48..53, x_end 42..47, y_end 36..41
constexpr std::uint64_t kTagMask = 0xfull << 60;
constexpr std::uint32_t kNocWriteAlignment = 16;  // NOC_{L1,DRAM}_WRITE_ALIGNMENT_BYTES, both archs

std::uint32_t dram_align(std::uint32_t page_size) {
    std::uint32_t a = device().arch->dram_alignment;
    return (page_size + a - 1) / a * a;
}

// An L1 address from a NoC address or a remote descriptor: a window address (any core's: the same L1 address on
// every core) or a plain offset.
std::uint32_t remote_offset(std::uint64_t addr) {
    addr &= 0xffffffffull;
    if (addr >= kL1WindowBase) return static_cast<std::uint32_t>((addr - kL1WindowBase) % kL1WindowStride);
    return static_cast<std::uint32_t>(addr);
}

// A local L1 address as the calling kernel passed it: its own window address or a plain offset.
template <typename Call>
std::uint32_t local_offset(KernelRun& run, std::uint64_t addr, Call&& call) {
    if (addr < kL1WindowBase) return static_cast<std::uint32_t>(addr);
    Core* c = device().core_at_window(addr);
    if (c != run.core)
        kernel_fail(
            "l1-address", call(),
            c ? strformat("%s is an address in core (%u,%u)'s L1, not this core's", hex(addr).c_str(), c->x, c->y)
              : hex(addr) + " is not an L1 address");
    return static_cast<std::uint32_t>(addr - c->window());
}

const L1Region* region_holding(const Core& core, std::uint32_t addr, std::uint64_t end) {
    for (const auto* list : {&core.regions, &core.buffer_regions})
        for (auto& r : *list)
            if (addr >= r.base && end <= static_cast<std::uint64_t>(r.base) + r.size) return &r;
    return nullptr;
}

std::uint64_t cb_end(const CircularBuffer& c) {
    return static_cast<std::uint64_t>(c.base) + std::uint64_t{c.num_pages} * c.page_size;
}

// Checks an L1 access by the calling kernel on its own core and returns the CB it touches (-1: none): the range
// must lie inside pages the kernel holds (producer: reserved; consumer: waited for), a semaphore, an L1 buffer,
// or (reading) MEM_ZEROS.
template <typename Call>
int check_own_l1(KernelRun& run, std::uint32_t addr, std::uint32_t bytes, bool write, Call&& call) {
    const ArchSpec& arch = *device().arch;
    if (bytes == 0) return -1;
    std::uint64_t end = static_cast<std::uint64_t>(addr) + bytes;
    if (end > arch.l1_bytes)
        kernel_fail("l1-out-of-range", call(),
                    strformat("L1 range [%s, %s) is outside this core's %u-byte L1", hex(addr).c_str(),
                              hex(end).c_str(), arch.l1_bytes));
    if (addr >= kMemZerosBase && addr < kMemZerosBase + kMemZerosSize) {
        if (write) kernel_fail("l1-reserved", call(), "writes into MEM_ZEROS (read-only zeros)");
        if (end > kMemZerosBase + kMemZerosSize)
            kernel_fail("l1-out-of-range", call(),
                        strformat("reads %u bytes from MEM_ZEROS_BASE but MEM_ZEROS_SIZE is %u", bytes, kMemZerosSize));
        return -1;
    }
    Core& core = *run.core;
    std::unique_lock<std::mutex> lk(core.mu);
    CircularBuffer* hit = nullptr;
    for (auto& c : core.cbs) {
        if (!c.configured) continue;
        if (addr >= c.base && addr < cb_end(c)) {
            if (!hit || c.producer == &run || c.consumer == &run) hit = &c;
        }
    }
    if (!hit) {
        if (region_holding(core, addr, end)) return -1;
        kernel_fail(
            "l1-not-cb", call(),
            strformat("L1 range [%s, %s) is not inside any circular buffer, semaphore or L1 buffer on this core",
                      hex(addr).c_str(), hex(end).c_str()));
    }
    CircularBuffer& c = *hit;
    if (end > cb_end(c))
        kernel_fail(
            "cb-out-of-range", call(),
            strformat("L1 range [%s, %s) runs past the end of %s (%u pages of %u B at %s)", hex(addr).c_str(),
                      hex(end).c_str(), cb_name(c.index).c_str(), c.num_pages, c.page_size, hex(c.base).c_str()));
    std::uint32_t first = (addr - c.base) / c.page_size;
    std::uint32_t last = static_cast<std::uint32_t>((end - 1 - c.base) / c.page_size);
    bool is_prod = c.producer == &run, is_cons = c.consumer == &run;
    if (is_prod && first >= c.wr_page && last < c.wr_page + c.back_granted) return static_cast<int>(c.index);
    if (is_cons && first >= c.rd_page && last < c.rd_page + c.front_granted) return static_cast<int>(c.index);
    // The producer may send out pages it has already pushed: only it writes them, so they hold what it put there
    // until it reserves them again (ttnn's SDPA reader forwards a K/V chunk along its chain after handing it to
    // compute).
    if (is_prod && !write) return -1;
    if (!is_prod && !is_cons)
        kernel_fail("cb-role", call(),
                    strformat("%s %s without holding it: call cb_reserve_back (producer) or cb_wait_front (consumer) "
                              "first",
                              write ? "writes into" : "reads from", cb_name(c.index).c_str()));
    std::string held;
    if (is_prod) held += strformat("pages [%u, %u) reserved by cb_reserve_back", c.wr_page, c.wr_page + c.back_granted);
    if (is_cons)
        held += std::string(held.empty() ? "" : " and ") +
                strformat("pages [%u, %u) obtained by cb_wait_front", c.rd_page, c.rd_page + c.front_granted);
    kernel_fail("cb-out-of-range", call(),
                strformat("out-of-range CB access: L1 range [%s, %s) is page(s) %u..%u of %s, but this kernel holds "
                          "only %s",
                          hex(addr).c_str(), hex(end).c_str(), first, last, cb_name(c.index).c_str(), held.c_str()));
}

// Checks an access to `dst`'s L1 through the NoC (another core's, or this core's by its NoC address). The core must
// run the program; the range must lie in a semaphore, an L1 buffer or a CB, and a write into a CB must land in
// pages that CB's producer has reserved (the receiver reserves, signals the sender, then the data arrives).
template <typename Call>
void check_noc_l1(KernelRun& run, Core& dst, std::uint32_t addr, std::uint32_t bytes, bool write, Call&& call) {
    const ArchSpec& arch = *device().arch;
    std::uint64_t end = static_cast<std::uint64_t>(addr) + bytes;
    auto where = [&] { return strformat("core (%u,%u)", dst.x, dst.y); };
    if (end > arch.l1_bytes)
        kernel_fail("l1-out-of-range", call(),
                    strformat("L1 range [%s, %s) on %s is outside its %u-byte L1", hex(addr).c_str(), hex(end).c_str(),
                              where().c_str(), arch.l1_bytes));
    if (bytes == 0) return;
    std::unique_lock<std::mutex> lk(dst.mu);
    // an L1 buffer's pages are memory: reachable whether or not the core runs a kernel
    for (auto& r : dst.buffer_regions)
        if (addr >= r.base && end <= static_cast<std::uint64_t>(r.base) + r.size) return;
    if (!dst.in_program)
        kernel_fail("noc-no-receiver", call(),
                    strformat("%s runs no kernel of this program: nothing there receives the %s", where().c_str(),
                              write ? "write" : "read"));
    if (!write && addr >= kMemZerosBase && end <= kMemZerosBase + kMemZerosSize) return;
    if (region_holding(dst, addr, end)) return;
    const CircularBuffer* inside = nullptr;
    for (auto& c : dst.cbs) {
        if (!c.configured || addr < c.base || end > cb_end(c)) continue;
        inside = &c;
        if (!write) return;
        std::uint32_t first = (addr - c.base) / c.page_size;
        std::uint32_t last = static_cast<std::uint32_t>((end - 1 - c.base) / c.page_size);
        if (c.producer && first >= c.wr_page && last < c.wr_page + c.back_granted) return;
    }
    if (!inside)
        kernel_fail("l1-out-of-range", call(),
                    strformat("L1 range [%s, %s) on %s is not inside any circular buffer, semaphore or L1 buffer there",
                              hex(addr).c_str(), hex(end).c_str(), where().c_str()));
    const CircularBuffer& c = *inside;
    std::uint32_t first = (addr - c.base) / c.page_size;
    std::uint32_t last = static_cast<std::uint32_t>((end - 1 - c.base) / c.page_size);
    std::string held =
        c.producer
            ? strformat("its producer, the %s kernel '%s', has reserved %s", role_name(c.producer->kernel->role),
                        c.producer->kernel->display.c_str(),
                        c.back_granted ? strformat("pages [%u, %u)", c.wr_page, c.wr_page + c.back_granted).c_str()
                                       : "no pages (no cb_reserve_back)")
            : std::string("no kernel there has reserved it (no cb_reserve_back)");
    kernel_fail("cb-out-of-range", call(),
                strformat("writes pages %u..%u of %s on %s, but %s", first, last, cb_name(c.index).c_str(),
                          where().c_str(), held.c_str()));
}

// Copies between a DRAM buffer and an L1 pointer; `encoded` is a DRAM NoC address (bank, address in the bank).
template <typename Call>
void dram_access(KernelRun& run, std::uint64_t encoded, std::uint8_t* l1, std::uint32_t bytes, bool to_l1,
                 Call&& call) {
    Device& dev = device();
    std::uint32_t bank = static_cast<std::uint32_t>((encoded >> 40) & 0xff);
    std::uint64_t addr = encoded & 0xffffffffffull;
    if (bank >= dev.arch->dram_banks)
        kernel_fail("dram-out-of-range", call(), strformat("DRAM bank %u does not exist", bank));
    DeviceBuffer* buf = nullptr;
    for (auto& b : dev.buffers)
        if (b->kind == DeviceBuffer::Kind::Dram && addr >= b->address && addr < b->address + b->extent()) buf = b.get();
    if (!buf)
        kernel_fail(
            "dram-out-of-range", call(),
            strformat("DRAM address %s in bank %u is not inside any allocated buffer", hex(addr).c_str(), bank));
    const std::uint64_t off = addr - buf->address;
    if (off + bytes > buf->extent())
        kernel_fail("dram-out-of-range", call(),
                    strformat("DRAM range [%s, +%u B) in bank %u runs past the end of %s in that bank",
                              hex(addr).c_str(), bytes, bank, buf->describe().c_str()));
    if (buf->sharded()) {
        if (std::find(buf->shard_home.begin(), buf->shard_home.end(), bank) == buf->shard_home.end())
            kernel_fail("dram-out-of-range", call(),
                        strformat("bank %u holds no shard of %s", bank, buf->describe().c_str()));
    } else {
        // every page the transfer touches must exist (the padding of an aligned page reads as zeros)
        for (std::uint64_t o = off / buf->aligned_page * buf->aligned_page; o < off + bytes; o += buf->aligned_page)
            if (buf->page_at(bank, o) < 0)
                kernel_fail("dram-out-of-range", call(),
                            strformat("DRAM access reaches page %llu of buffer #%u, which has %u pages of %u B",
                                      static_cast<unsigned long long>((o / buf->aligned_page) * buf->homes + bank),
                                      buf->id, buf->num_pages, buf->page_size));
    }
    std::uint8_t* p = buf->data.data() + static_cast<std::size_t>(bank) * buf->extent() + off;
    const std::uint32_t local = static_cast<std::uint32_t>(l1 - run.core->l1);
    for (std::uint64_t o = off / buf->aligned_page * buf->aligned_page; o < off + bytes; o += buf->aligned_page) {
        std::int64_t page = buf->page_at(bank, o);
        if (page < 0) continue;
        buf->mark_pages(to_l1, static_cast<std::uint32_t>(page), 1);
        if (o < off || buf->sharded()) continue;  // page identity: whole pages of interleaved buffers
        const std::uint32_t at = local + static_cast<std::uint32_t>(o - off);
        if (to_l1)
            tags_dram_read(run, at, *buf, static_cast<std::uint32_t>(page));
        else
            tags_dram_write(run, at, *buf, static_cast<std::uint32_t>(page), call());
    }
    if (to_l1) {
        std::memcpy(l1, p, bytes);
        run.counters.dram_bytes_read[buf->id] += bytes;
    } else {
        std::memcpy(p, l1, bytes);
        run.counters.dram_bytes_written[buf->id] += bytes;
    }
}

template <typename Call>
Core& core_at_xy(std::uint32_t nx, std::uint32_t ny, Call&& call) {
    Device& dev = device();
    const ArchSpec& a = *dev.arch;
    if (nx < a.noc_x0 || ny < a.noc_y0 || nx - a.noc_x0 >= a.grid_x || ny - a.noc_y0 >= a.grid_y)
        kernel_fail(
            "noc-address", call(),
            strformat("NoC coordinates (%u,%u) are not a worker core (worker cores of %s span (%u..%u, %u..%u); "
                      "use worker_core_from_logical_core on the host)",
                      nx, ny, a.name.c_str(), a.noc_x0, a.noc_x0 + a.grid_x - 1, a.noc_y0, a.noc_y0 + a.grid_y - 1));
    return dev.core(nx - a.noc_x0, ny - a.noc_y0);
}

template <typename Call>
Core& core_at_noc(std::uint64_t encoded, Call&& call) {
    return core_at_xy(static_cast<std::uint32_t>((encoded >> 48) & 0xff),
                      static_cast<std::uint32_t>((encoded >> 40) & 0xff), call);
}

// The cores a multicast address covers, in row-major order. NoC 0 routes right/down, so its rectangle runs from
// the top-left start to the bottom-right end; NoC 1 routes left/up, so start is the bottom-right corner (ttnn's
// program factories swap start and end for NoC 1).
template <typename Call>
std::vector<Core*> multicast_cores(std::uint64_t mcast, std::uint8_t noc, Call&& call) {
    if ((mcast & kTagMask) != kMcastTag)
        kernel_fail("noc-address", call(), "the destination is not a multicast address (use get_noc_multicast_addr)");
    std::uint32_t xs = (mcast >> 54) & 0x3f, ys = (mcast >> 48) & 0x3f, xe = (mcast >> 42) & 0x3f,
                  ye = (mcast >> 36) & 0x3f;
    bool forward = xs <= xe && ys <= ye, backward = xs >= xe && ys >= ye;
    if (noc > 1) kernel_fail("noc-address", call(), strformat("NoC %u does not exist (0 or 1)", noc));
    if ((noc == 0 && !forward) || (noc == 1 && !backward))
        kernel_fail(
            "noc-multicast", call(),
            strformat("multicast rectangle start (%u,%u), end (%u,%u) on NoC %u: NoC %u needs start %s end on both "
                      "axes (%s)",
                      xs, ys, xe, ye, noc, noc, noc == 0 ? "<=" : ">=",
                      noc == 0 ? "top-left to bottom-right"
                               : "NoC 1 multicasts from the bottom-right corner: swap "
                                 "start and end"));
    std::uint32_t x0 = std::min(xs, xe), x1 = std::max(xs, xe), y0 = std::min(ys, ye), y1 = std::max(ys, ye);
    std::vector<Core*> out;
    for (std::uint32_t y = y0; y <= y1; ++y)
        for (std::uint32_t x = x0; x <= x1; ++x) out.push_back(&core_at_xy(x, y, call));
    return out;
}

// The logical rectangle a multicast covers, packed for the timing model: x0 | y0 << 8 | x1 << 16 | y1 << 24.
std::uint32_t rect_of(const std::vector<Core*>& cores) {
    std::uint32_t x0 = 255, y0 = 255, x1 = 0, y1 = 0;
    for (Core* c : cores) {
        x0 = std::min(x0, c->x);
        y0 = std::min(y0, c->y);
        x1 = std::max(x1, c->x);
        y1 = std::max(y1, c->y);
    }
    return x0 | y0 << 8 | x1 << 16 | y1 << 24;
}

void count_write(KernelRun& run, int cb, std::uint32_t bytes, bool dram = false) {
    if (cb >= 0) run.pending_write_cbs |= 1ull << cb;
    run.unacked_writes += 1;
    run.unsent_writes += 1;
    if (dram) run.unacked_dram_writes += 1;
    run.counters.noc_bytes_written += bytes;
    run.counters.noc_writes += 1;
}

// One unicast NoC transfer between this core's L1 (`local`) and a NoC address (`remote`): DRAM, or another (or
// this) core's L1. `reading` = remote -> local.
template <typename Call>
void noc_transfer(KernelRun& run, std::uint64_t remote, std::uint64_t local_addr, std::uint32_t bytes, bool reading,
                  std::uint8_t noc, Call&& call, bool record = true) {
    Device& dev = device();
    if (dev.abort.load(std::memory_order_relaxed)) throw KernelAbort{};
    std::uint32_t local = local_offset(run, local_addr, call);
    int cb = check_own_l1(run, local, bytes, reading, call);
    std::uint8_t* mine = run.core->l1 + local;
    std::uint64_t tag = remote & kTagMask;
    std::uint32_t endpoint = 0;  // the timing model's view of the other side: a core index or a DRAM bank
    // a core's L1 at `addr`: checked as the NoC reaches it, then copied (a write wakes that core's waiters)
    auto l1_transfer = [&](Core& other, std::uint32_t addr) {
        endpoint = other.y * dev.arch->grid_x + other.x;
        check_noc_l1(run, other, addr, bytes, !reading, call);
        if (reading) {
            std::memmove(mine, other.l1 + addr, bytes);
            tags_copy(other, addr, *run.core, local, bytes);
        } else {
            std::memmove(other.l1 + addr, mine, bytes);
            tags_copy(*run.core, local, other, addr, bytes);
            notify_core(other);
        }
    };
    // A NoC write (L1 -> DRAM or L1) of any length needs its source and destination congruent mod 16
    // (tt-isa-documentation WormholeB0/NoC/Alignment.md, "C16"; tt-metal's watcher checks
    // NOC_DRAM_WRITE_ALIGNMENT_BYTES = NOC_L1_WRITE_ALIGNMENT_BYTES = 16 on Wormhole and Blackhole): a 2-byte write
    // is fine where the two addresses agree in their low four bits.
    if (!reading) {
        const std::uint64_t dst = tag == kDramTag ? (remote & 0xffffffffffull)
                                  : tag == kL1Tag ? remote_offset(remote)
                                                  : (remote & 0xffffffffull);
        if ((dst ^ local) % kNocWriteAlignment)
            kernel_fail("noc-alignment", call(),
                        strformat("a NoC write from L1 %s to %s address %s: source and destination must agree modulo "
                                  "%u bytes (%u != %u)",
                                  hex(local).c_str(), tag == kDramTag ? "DRAM" : "L1", hex(dst).c_str(),
                                  kNocWriteAlignment, static_cast<unsigned>(local % kNocWriteAlignment),
                                  static_cast<unsigned>(dst % kNocWriteAlignment)));
    }
    if (tag == kDramTag) {
        dram_access(run, remote, mine, bytes, reading, call);
        endpoint = timing::kDramEndpoint | static_cast<std::uint32_t>((remote >> 40) & 0xff);
    } else if (tag == kL1Tag) {
        l1_transfer(core_at_noc(remote, call), remote_offset(remote));
    } else if (tag == kL1BankTag) {
        // an L1 bank (interleaved L1 buffers: bank b is worker core b, row-major); the address is the same on all
        std::uint32_t bank = static_cast<std::uint32_t>((remote >> 40) & 0xff);
        if (bank >= dev.cores.size())
            kernel_fail("noc-address", call(),
                        strformat("L1 bank %u does not exist (%zu worker cores)", bank, dev.cores.size()));
        l1_transfer(*dev.cores[bank], static_cast<std::uint32_t>(remote & 0xffffffffull));
    } else {
        kernel_fail("noc-address", call(),
                    std::string(reading ? "source" : "destination") +
                        " is not a NoC address (use get_noc_addr, get_noc_multicast_addr or a TensorAccessor)");
    }
    if (reading) {
        if (cb >= 0) run.pending_read_cbs |= 1ull << cb;
        run.counters.noc_bytes_read += bytes;
        run.counters.noc_reads += 1;
    } else {
        count_write(run, cb, bytes, tag == kDramTag);
    }
    if (run.trace && record)
        timing::record(run, timing::kDataMovement, reading ? timing::Ev::NocRead : timing::Ev::NocWrite,
                       static_cast<float>(timing::costs().noc_cmd_cycles), endpoint, bytes, 0, 0, noc);
    dev.progress.fetch_add(1, std::memory_order_relaxed);
}

template <typename Call>
DeviceBuffer& accessor_buffer(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                              Call&& call) {
    const auto kind = is_dram ? DeviceBuffer::Kind::Dram : DeviceBuffer::Kind::L1;
    DeviceBuffer* buf = device().find_buffer_at(base, kind);
    if (!buf)
        kernel_fail(is_dram ? "dram-out-of-range" : "l1-out-of-range", call(),
                    strformat("TensorAccessor base address %s is not the address of any %s buffer", hex(base).c_str(),
                              is_dram ? "DRAM" : "L1"));
    if (buf->sharded()) dev::unsupported("a TensorAccessor over a sharded buffer");
    if (page_size != buf->page_size && page_size != buf->aligned_page)
        kernel_fail("accessor-mismatch", call(),
                    strformat("TensorAccessor page size %u B does not match %s's page size %u B", page_size,
                              buf->describe().c_str(), buf->page_size));
    if (page_id >= buf->num_pages)
        kernel_fail(is_dram ? "dram-out-of-range" : "l1-out-of-range", call(),
                    strformat("page %u is outside %s", page_id, buf->describe().c_str()));
    return *buf;
}

// Writes `bytes` from this core's L1 to every core of a multicast rectangle (the sender too when `loopback`);
// returns the number of cores written.
template <typename Call>
std::uint32_t multicast(KernelRun& run, std::uint32_t local, std::uint64_t mcast, std::uint32_t bytes,
                        std::uint32_t num_dests, bool loopback, std::uint8_t noc, Call&& call,
                        std::uint32_t* rect = nullptr) {
    std::vector<Core*> cores = multicast_cores(mcast, noc, call);
    if (rect) *rect = rect_of(cores);
    std::uint32_t addr = remote_offset(mcast);
    std::uint32_t targets = 0;
    for (Core* c : cores) targets += loopback || c != run.core;
    if (targets != num_dests)
        kernel_fail("noc-multicast", call(),
                    strformat("num_dests is %u but the rectangle holds %u destination core(s)%s", num_dests, targets,
                              loopback ? " (loopback: the sender counts)"
                              : std::find(cores.begin(), cores.end(), run.core) != cores.end()
                                  ? " (the sender is inside the rectangle and does not count)"
                                  : ""));
    if (targets == 0) kernel_fail("noc-multicast", call(), "the multicast has no destination");
    for (Core* c : cores) {
        if (c == run.core && !loopback) continue;
        check_noc_l1(run, *c, addr, bytes, true, call);
    }
    const std::uint8_t* src = run.core->l1 + local;
    for (Core* c : cores) {
        if (c == run.core && !loopback) continue;
        if (c->l1 + addr != src) {
            std::memmove(c->l1 + addr, src, bytes);
            tags_copy(*run.core, local, *c, addr, bytes);
        }
        notify_core(*c);
    }
    run.counters.noc_multicasts += 1;
    run.counters.noc_multicast_bytes += static_cast<std::uint64_t>(bytes) * targets;
    return targets;
}

// A semaphore pointer the kernel holds -> its L1 offset on this core (it must be in this core's window and in the
// semaphores or another region the NoC may touch).
template <typename Call>
std::uint32_t semaphore_offset(KernelRun& run, volatile std::uint32_t* sem, Call&& call) {
    std::uint64_t addr = reinterpret_cast<std::uintptr_t>(sem);
    if (addr < kL1WindowBase)
        kernel_fail("l1-address", call(),
                    strformat("%s is not an L1 pointer of this core (take semaphore pointers from get_semaphore())",
                              hex(addr).c_str()));
    std::uint32_t off = local_offset(run, addr, call);
    if (off % 4) kernel_fail("l1-address", call(), "a semaphore is a 4-byte aligned word");
    return off;
}

std::atomic<std::uint32_t>& word_at(Core& core, std::uint32_t off) {
    return *reinterpret_cast<std::atomic<std::uint32_t>*>(core.l1 + off);
}

// The timing replay starts each semaphore-style word from its value at the program's first access to it.
void touch_word(Core& core, std::uint32_t off) {
    if (!timing::enabled()) return;
    std::lock_guard<std::mutex> lk(core.mu);
    core.word_init.try_emplace(off, word_at(core, off).load(std::memory_order_acquire));
}

std::uint32_t core_index(const Core& c) { return c.y * device().arch->grid_x + c.x; }

void word_event(KernelRun& run, timing::Ev kind, std::uint32_t endpoint, std::uint32_t off, std::uint32_t value,
                std::uint16_t aux, std::uint8_t noc) {
    if (run.trace)
        timing::record(run, timing::kDataMovement, kind, static_cast<float>(timing::costs().sem_cycles), endpoint, off,
                       value, aux, noc);
}
constexpr std::uint16_t kWordAdd = 1, kWordRect = 2, kWordLoopback = 4;

}  // namespace

Core* Device::core_at_window(std::uint64_t address) {
    if (address < kL1WindowBase) return nullptr;
    std::uint64_t idx = (address - kL1WindowBase) / kL1WindowStride;
    if (idx >= cores.size() || (address - kL1WindowBase) % kL1WindowStride >= arch->l1_bytes) return nullptr;
    return cores[idx].get();
}

namespace dev {

std::uint64_t dram_noc_addr(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                            std::uint32_t offset) {
    // a page's bank and offset (page id / banks, the bank tables): what an interleaved page read costs its RISC
    // beyond the command (compiler/device_costs.json noc_page_addr_cycles)
    if (KernelRun* run = current_run(); run && run->trace && run->kernel->role != Role::Compute)
        timing::busy(*run, timing::kDataMovement, timing::costs().noc_page_addr_cycles);
    const ArchSpec& arch = *device().arch;
    std::uint32_t banks = is_dram ? arch.dram_banks : arch.grid_x * arch.grid_y;
    std::uint32_t stride = is_dram ? dram_align(page_size) : (page_size + 15) / 16 * 16;
    std::uint64_t addr = base + static_cast<std::uint64_t>(page_id / banks) * stride + offset;
    return (is_dram ? kDramTag : kL1BankTag) | (static_cast<std::uint64_t>(page_id % banks) << 40) |
           (addr & 0xffffffffffull);
}

std::uint64_t bank_noc_addr(bool is_dram, std::uint32_t bank_id, std::uint32_t addr) {
    return (is_dram ? kDramTag : kL1BankTag) | (static_cast<std::uint64_t>(bank_id & 0xff) << 40) | addr;
}

void at(Site site) { enter(Api::None, site); }

std::uint64_t accessor_noc_addr(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                                std::uint32_t offset) {
    accessor_buffer(is_dram, base, page_size, page_id,
                    [&] { return strformat("TensorAccessor page %u (offset %u)", page_id, offset); });
    return dram_noc_addr(is_dram, base, page_size, page_id, offset);
}

std::uint64_t local_l1_noc_addr(std::uint32_t l1_addr, Site site) {
    KernelRun& run = enter(Api::None, site);
    const ArchSpec& a = *device().arch;
    return kL1Tag | (static_cast<std::uint64_t>(run.core->x + a.noc_x0) << 48) |
           (static_cast<std::uint64_t>(run.core->y + a.noc_y0) << 40) | l1_addr;
}

std::uint64_t core_l1_noc_addr(std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t l1_addr) {
    return kL1Tag | (static_cast<std::uint64_t>(noc_x & 0xff) << 48) |
           (static_cast<std::uint64_t>(noc_y & 0xff) << 40) | l1_addr;
}

std::uint64_t multicast_noc_addr(std::uint32_t x_start, std::uint32_t y_start, std::uint32_t x_end, std::uint32_t y_end,
                                 std::uint32_t l1_addr) {
    return kMcastTag | (static_cast<std::uint64_t>(x_start & 0x3f) << 54) |
           (static_cast<std::uint64_t>(y_start & 0x3f) << 48) | (static_cast<std::uint64_t>(x_end & 0x3f) << 42) |
           (static_cast<std::uint64_t>(y_end & 0x3f) << 36) | l1_addr;
}

void noc_read(std::uint64_t src, std::uint32_t l1_dst, std::uint32_t bytes, std::uint8_t noc, const char* fn,
              Site site) {
    noc_transfer(enter(Api::NocRead, site), src, l1_dst, bytes, true, noc, [&] {
        return strformat("%s(src=%s, l1_dst=%s, size=%u)", fn, hex(src).c_str(), hex(l1_dst).c_str(), bytes);
    });
}

void noc_write(std::uint32_t l1_src, std::uint64_t dst, std::uint32_t bytes, std::uint8_t noc, const char* fn,
               Site site) {
    noc_transfer(enter(Api::NocWrite, site), dst, l1_src, bytes, false, noc, [&] {
        return strformat("%s(l1_src=%s, dst=%s, size=%u)", fn, hex(l1_src).c_str(), hex(dst).c_str(), bytes);
    });
}

void noc_write_multicast(std::uint32_t l1_src, std::uint64_t dst_mcast, std::uint32_t bytes, std::uint32_t num_dests,
                         bool loopback, std::uint8_t noc, const char* fn, Site site) {
    KernelRun& run = enter(Api::NocWriteMulticast, site);
    if (device().abort.load(std::memory_order_relaxed)) throw KernelAbort{};
    auto call = [&] {
        return strformat("%s(l1_src=%s, dst=%s, size=%u, num_dests=%u, noc=%u)", fn, hex(l1_src).c_str(),
                         hex(dst_mcast).c_str(), bytes, num_dests, noc);
    };
    std::uint32_t local = local_offset(run, l1_src, call);
    int cb = check_own_l1(run, local, bytes, false, call);
    std::uint32_t rect = 0;
    multicast(run, local, dst_mcast, bytes, num_dests, loopback, noc, call, &rect);
    count_write(run, cb, bytes);
    if (run.trace)
        timing::record(run, timing::kDataMovement, timing::Ev::NocMcast,
                       static_cast<float>(timing::costs().noc_cmd_cycles), rect, bytes, 0, loopback ? 1 : 0, noc);
    device().progress.fetch_add(1, std::memory_order_relaxed);
}

void noc_read_page(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                   std::uint32_t l1_dst, std::uint32_t offset, std::uint8_t noc, Site site) {
    KernelRun& run = enter(Api::NocRead, site);
    auto call = [&] {
        return strformat("noc_async_read_page(id=%u, l1_dst=%s, offset=%u)", page_id, hex(l1_dst).c_str(), offset);
    };
    accessor_buffer(is_dram, base, page_size, page_id, call);
    noc_transfer(run, dram_noc_addr(is_dram, base, page_size, page_id, offset), l1_dst, page_size, true, noc, call);
}

void noc_write_page(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                    std::uint32_t l1_src, std::uint32_t size, std::uint32_t offset, std::uint8_t noc, Site site) {
    KernelRun& run = enter(Api::NocWrite, site);
    auto call = [&] {
        return strformat("noc_async_write_page(id=%u, l1_src=%s, size=%u, offset=%u)", page_id, hex(l1_src).c_str(),
                         size, offset);
    };
    accessor_buffer(is_dram, base, page_size, page_id, call);
    noc_transfer(run, dram_noc_addr(is_dram, base, page_size, page_id, offset), l1_src, size ? size : page_size, false,
                 noc, call);
}

void inline_dw_write(std::uint64_t addr, std::uint32_t val, std::uint8_t be, std::uint8_t noc, Site site) {
    KernelRun& run = enter(Api::InlineWrite, site);
    if (device().abort) throw KernelAbort{};
    auto call = [&] {
        return strformat("noc_inline_dw_write(addr=%s, val=%s, be=%s)", hex(addr).c_str(), hex(val).c_str(),
                         hex(be).c_str());
    };
    if ((addr & kTagMask) != kL1Tag)
        kernel_fail("noc-address", call(), "noc_inline_dw_write takes the NoC address of a core's L1 (not DRAM)");
    Core& to = core_at_noc(addr, call);
    std::uint32_t l1 = remote_offset(addr);
    if (l1 % 4) kernel_fail("noc-address", call(), "inline writes are 4-byte aligned");
    int cb = -1;
    if (&to == run.core) {
        // like a read into the CB: it must be confirmed (noc_async_write_barrier) before the pages are pushed
        cb = check_own_l1(run, l1, 4, true, call);
        if (cb >= 0) run.pending_inline_cbs |= 1ull << cb;
    } else {
        check_noc_l1(run, to, l1, 4, true, call);
    }
    touch_word(to, l1);
    for (int b = 0; b < 4; ++b)
        if (be >> b & 1) to.l1[l1 + b] = static_cast<std::uint8_t>(val >> (8 * b));
    word_event(run, timing::Ev::WordWrite, core_index(to), l1, word_at(to, l1).load(), 0, noc);
    if (&to != run.core) notify_core(to);
    run.unacked_writes += 1;
    run.unsent_writes += 1;
    run.counters.noc_bytes_written += 4;
    run.counters.noc_writes += 1;
    device().progress.fetch_add(1, std::memory_order_relaxed);
}

namespace {
void barrier_event(KernelRun& run, timing::Ev kind) {
    if (run.trace) timing::record(run, timing::kDataMovement, kind, static_cast<float>(timing::costs().barrier_cycles));
}
}  // namespace

void noc_read_barrier(Site site) {
    KernelRun& run = enter(Api::NocReadBarrier, site);
    run.pending_read_cbs = 0;
    barrier_event(run, timing::Ev::ReadBarrier);
}
void noc_writes_flushed(Site site) {
    KernelRun& run = enter(Api::NocWritesFlushed, site);
    run.pending_write_cbs = 0;
    run.unsent_writes = 0;
    barrier_event(run, timing::Ev::WritesFlushed);
}
void noc_atomic_barrier(Site site) { barrier_event(enter(Api::NocAtomicBarrier, site), timing::Ev::WriteBarrier); }
void noc_write_barrier(Site site) {
    KernelRun& run = enter(Api::NocWriteBarrier, site);
    run.pending_write_cbs = 0;
    run.pending_inline_cbs = 0;
    run.unacked_writes = 0;
    run.unsent_writes = 0;
    run.unacked_dram_writes = 0;
    barrier_event(run, timing::Ev::WriteBarrier);
}

// ------------------------------------------------------------------------------------------- semaphores
std::uintptr_t semaphore_addr(std::uint32_t id, Site site) {
    KernelRun& run = enter(Api::None, site);
    if (id >= kMaxSemaphores || !(run.core->semaphore_mask >> id & 1))
        kernel_fail("semaphore", strformat("get_semaphore(%u)", id),
                    strformat("no semaphore with id %u was created on this core (CreateSemaphore)", id));
    return static_cast<std::uintptr_t>(run.core->window() + kSemaphoreBase + id * kSemaphoreStride);
}

void sem_wait(volatile std::uint32_t* sem, std::uint32_t value, bool at_least, Site site) {
    KernelRun& run = enter(Api::SemWait, site);
    auto call = [&] {
        return strformat("%s(sem=%s, %u)", at_least ? "noc_semaphore_wait_min" : "noc_semaphore_wait",
                         hex(reinterpret_cast<std::uintptr_t>(sem)).c_str(), value);
    };
    std::uint32_t off = semaphore_offset(run, sem, call);
    touch_word(*run.core, off);
    auto& word = word_at(*run.core, off);
    auto done = [&] {
        std::uint32_t v = word.load(std::memory_order_acquire);
        return at_least ? v >= value : v == value;
    };
    if (run.trace)
        timing::record(run, timing::kDataMovement, timing::Ev::WordWait, static_cast<float>(timing::costs().sem_cycles),
                       0, off, value, at_least ? 1 : 0);
    if (done()) return;
    std::unique_lock<std::mutex> lk(run.core->mu);
    block_until(run, lk, Wait{at_least ? Wait::Kind::SemaphoreAtLeast : Wait::Kind::Semaphore, run.core, off, value},
                call, done);
}

void sem_set(volatile std::uint32_t* sem, std::uint32_t value, Site site) {
    KernelRun& run = enter(Api::SemSet, site);
    auto call = [&] {
        return strformat("noc_semaphore_set(sem=%s, %u)", hex(reinterpret_cast<std::uintptr_t>(sem)).c_str(), value);
    };
    std::uint32_t off = semaphore_offset(run, sem, call);
    touch_word(*run.core, off);
    word_at(*run.core, off).store(value, std::memory_order_release);
    word_event(run, timing::Ev::WordLocal, 0, off, value, 0, 0);
    notify_core(*run.core);
}

void sem_add(volatile std::uint32_t* sem, std::uint32_t delta, Site site) {
    KernelRun& run = enter(Api::SemSet, site);
    auto call = [&] {
        return strformat("Semaphore::up/down(sem=%s, %d)", hex(reinterpret_cast<std::uintptr_t>(sem)).c_str(),
                         static_cast<int>(delta));
    };
    std::uint32_t off = semaphore_offset(run, sem, call);
    touch_word(*run.core, off);
    word_at(*run.core, off).fetch_add(delta, std::memory_order_acq_rel);
    word_event(run, timing::Ev::WordLocal, 0, off, delta, kWordAdd, 0);
    notify_core(*run.core);
}

void sem_inc(std::uint64_t addr, std::uint32_t incr, std::uint8_t noc, Site site) {
    KernelRun& run = enter(Api::SemInc, site);
    auto call = [&] { return strformat("noc_semaphore_inc(addr=%s, %u, noc=%u)", hex(addr).c_str(), incr, noc); };
    if ((addr & kTagMask) != kL1Tag)
        kernel_fail("noc-address", call(),
                    "noc_semaphore_inc takes the NoC address of a core's L1 (get_noc_addr(x, y, sem))");
    Core& to = core_at_noc(addr, call);
    std::uint32_t off = remote_offset(addr);
    if (off % 4) kernel_fail("l1-address", call(), "a semaphore is a 4-byte aligned word");
    check_noc_l1(run, to, off, 4, true, call);
    touch_word(to, off);
    word_at(to, off).fetch_add(incr, std::memory_order_acq_rel);
    word_event(run, timing::Ev::WordWrite, core_index(to), off, incr, kWordAdd, noc);
    run.counters.semaphore_ops += 1;
    notify_core(to);
}

void sem_inc_multicast(std::uint64_t dst_mcast, std::uint32_t incr, std::uint32_t num_dests, std::uint8_t noc,
                       Site site) {
    KernelRun& run = enter(Api::SemIncMulticast, site);
    auto call = [&] {
        return strformat("noc_semaphore_inc_multicast(addr=%s, %u, num_dests=%u, noc=%u)", hex(dst_mcast).c_str(), incr,
                         num_dests, noc);
    };
    std::vector<Core*> cores = multicast_cores(dst_mcast, noc, call);
    std::uint32_t off = remote_offset(dst_mcast);
    if (std::find(cores.begin(), cores.end(), run.core) != cores.end())
        kernel_fail("noc-multicast", call(), "the sender cannot be a destination of noc_semaphore_inc_multicast");
    if (cores.size() != num_dests)
        kernel_fail("noc-multicast", call(),
                    strformat("num_dests is %u but the rectangle holds %zu core(s)", num_dests, cores.size()));
    for (Core* c : cores) check_noc_l1(run, *c, off, 4, true, call);
    for (Core* c : cores) {
        touch_word(*c, off);
        word_at(*c, off).fetch_add(incr, std::memory_order_acq_rel);
        notify_core(*c);
    }
    word_event(run, timing::Ev::WordWrite, rect_of(cores), off, incr, kWordAdd | kWordRect, noc);
    run.counters.semaphore_ops += 1;
}

void sem_set_remote(std::uint32_t l1_src, std::uint64_t dst, std::uint8_t noc, Site site) {
    KernelRun& run = enter(Api::SemSetRemote, site);
    auto call = [&] {
        return strformat("noc_semaphore_set_remote(l1_src=%s, dst=%s)", hex(l1_src).c_str(), hex(dst).c_str());
    };
    Core* to = (dst & kTagMask) == kL1Tag ? &core_at_noc(dst, call) : nullptr;
    if (to) touch_word(*to, remote_offset(dst));
    noc_transfer(run, dst, l1_src, 4, false, noc, call, false);
    // a semaphore signal may be a kernel's last act (ttnn's K/V chains relay one and return): its single 4-byte
    // packet leaves at issue, so it does not count as an unsent write at the kernel's end
    if (run.unsent_writes) run.unsent_writes -= 1;
    if (to) {
        // the value written is the source word's (re-reading the target could see the receiver's next set already)
        std::uint32_t value;
        std::memcpy(&value, run.core->l1 + local_offset(run, l1_src, call), 4);
        word_event(run, timing::Ev::WordWrite, core_index(*to), remote_offset(dst), value, 0, noc);
    }
    run.counters.semaphore_ops += 1;
}

void sem_set_multicast(std::uint32_t l1_src, std::uint64_t dst_mcast, std::uint32_t num_dests, bool loopback,
                       std::uint8_t noc, Site site) {
    KernelRun& run = enter(Api::SemSetMulticast, site);
    if (device().abort.load(std::memory_order_relaxed)) throw KernelAbort{};
    auto call = [&] {
        return strformat("%s(l1_src=%s, dst=%s, num_dests=%u, noc=%u)",
                         loopback ? "noc_semaphore_set_multicast_loopback_src" : "noc_semaphore_set_multicast",
                         hex(l1_src).c_str(), hex(dst_mcast).c_str(), num_dests, noc);
    };
    std::uint32_t local = local_offset(run, l1_src, call);
    check_own_l1(run, local, 4, false, call);
    std::uint32_t addr = remote_offset(dst_mcast);
    for (Core* c : multicast_cores(dst_mcast, noc, call))
        if (loopback || c != run.core) touch_word(*c, addr);
    std::uint32_t rect = 0;
    multicast(run, local, dst_mcast, 4, num_dests, loopback, noc, call, &rect);
    std::uint32_t value;
    std::memcpy(&value, run.core->l1 + local, 4);
    word_event(run, timing::Ev::WordWrite, rect, addr, value, kWordRect | (loopback ? kWordLoopback : 0), noc);
    run.unacked_writes += 1;  // (a semaphore signal: not an unsent write at the kernel's end, as sem_set_remote)
    run.counters.semaphore_ops += 1;
    device().progress.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace dev
}  // namespace ttemu
