// Device-side API for data-movement (and compute) kernels: runtime args, circular buffers, mailboxes.
// NoC transfers and semaphores are in noc.cpp. Every call checks the protocol it belongs to and fails with the
// core, kernel, call and source line named; the call's text is only formatted when it is reported.
#include <algorithm>
#include <cstring>

#include "runtime.h"

namespace ttemu {

std::string cb_name(std::uint32_t cb) { return "CB c_" + std::to_string(cb); }

void note_progress(Core& core) {
    device().progress.fetch_add(1, std::memory_order_relaxed);
    core.cv.notify_all();
}

void notify_core(Core& core) {
    { std::lock_guard<std::mutex> lk(core.mu); }  // a waiter is either before its check or inside wait()
    note_progress(core);
}

void no_kernel_context(Api api) {
    host_fail("device-api", std::string("device API call ") + api_name(api) + " outside a running kernel");
}

namespace {

template <typename Call>
CircularBuffer& cb_checked(KernelRun& run, std::int32_t cb, Call&& call) {
    const ArchSpec& arch = *device().arch;
    if (cb < 0 || static_cast<std::uint32_t>(cb) >= arch.num_cbs)
        kernel_fail(
            "cb-index", call(),
            strformat("CB index %d is out of range: %s has CBs c_0..c_%u", cb, arch.name.c_str(), arch.num_cbs - 1));
    CircularBuffer& c = run.core->cbs[cb];
    if (!c.configured)
        kernel_fail("cb-unconfigured", call(),
                    cb_name(cb) + " is not configured on this core (no CreateCircularBuffer covers it)");
    return c;
}

// Each side of a CB (producer: reserve/push, consumer: wait/pop) belongs to exactly one kernel on the core, the
// first that uses it. One kernel may hold both sides (a compute kernel's PACK and UNPACK threads; a data-movement
// kernel using a CB as scratch, as ttnn's readers do). Called with the core mutex held.
template <typename Call>
void claim(KernelRun& run, CircularBuffer& c, bool producer, Call&& call) {
    KernelRun*& owner = producer ? c.producer : c.consumer;
    if (owner == &run) [[likely]]
        return;
    const char* side = producer ? "producer (cb_reserve_back/cb_push_back)" : "consumer (cb_wait_front/cb_pop_front)";
    if (owner)
        kernel_fail(
            "cb-role", call(),
            strformat("wrong role: the %s side of %s already belongs to the %s kernel '%s'; each side of a CB "
                      "must be used by exactly one kernel",
                      side, cb_name(c.index).c_str(), role_name(owner->kernel->role), owner->kernel->display.c_str()));
    owner = &run;
}

// Timing events of CB and argument calls: on a compute kernel, waits and pops run on UNPACK, reserves and pushes on
// PACK (as the compute API's UNPACK(...) / PACK(...) wrappers place them); data-movement kernels have one stream.
timing::Stream cb_stream(const KernelRun& run, bool producer) {
    if (run.kernel->role != Role::Compute) return timing::kDataMovement;
    return producer ? timing::kPack : timing::kUnpack;
}
void cb_event(KernelRun& run, bool producer, timing::Ev kind, std::uint32_t count, std::uint32_t cb) {
    if (run.trace)
        timing::record(run, cb_stream(run, producer), kind, static_cast<float>(timing::costs().dm_cb_cycles), count,
                       cb);
}
void small_cost(KernelRun& run, double cycles, bool all_threads = false) {
    if (!run.trace) return;
    if (run.kernel->role == Role::Compute && all_threads) {
        for (auto s : {timing::kUnpack, timing::kMath, timing::kPack}) timing::busy(run, s, cycles);
    } else {
        timing::busy(run, run.kernel->role == Role::Compute ? timing::kUnpack : timing::kDataMovement, cycles);
    }
}

}  // namespace

namespace dev {

std::uint32_t arg(int idx, bool common, Site site) {
    KernelRun& run = enter(Api::Arg, site);
    const std::vector<std::uint32_t>& args = common ? run.kernel->common_args : *run.args;
    if (idx < 0 || static_cast<std::size_t>(idx) >= args.size()) [[unlikely]]
        kernel_fail("arg-out-of-range", strformat("%s(%d)", common ? "get_common_arg_val" : "get_arg_val", idx),
                    strformat("only %zu %sruntime arg(s) were set for this kernel%s", args.size(),
                              common ? "common " : "", common ? "" : " on this core"));
    if (run.trace) small_cost(run, timing::costs().dm_arg_cycles, true);
    return args[static_cast<std::size_t>(idx)];
}

std::uintptr_t arg_addr(int idx, bool common, Site site) {
    KernelRun& run = enter(Api::Arg, site);
    const std::vector<std::uint32_t>& args = common ? run.kernel->common_args : *run.args;
    if (idx < 0 || static_cast<std::size_t>(idx) > args.size()) [[unlikely]]
        kernel_fail(
            "arg-out-of-range", strformat("%s(%d)", common ? "get_common_arg_addr" : "get_arg_addr", idx),
            strformat("only %zu %sruntime arg(s) were set for this kernel", args.size(), common ? "common " : ""));
    if (run.trace) small_cost(run, timing::costs().dm_arg_cycles, true);
    return reinterpret_cast<std::uintptr_t>(args.data() + idx);
}

void cb_reserve_back(std::int32_t cb, std::int32_t n, Site site) {
    KernelRun& run = enter(Api::CbReserveBack, site);
    auto call = [&] { return strformat("cb_reserve_back(cb=%d, n=%d)", cb, n); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    if (!run.cb_views.empty()) drain_cb_views(run);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, true, call);
    if (n < 0 || static_cast<std::uint32_t>(n) > c.num_pages)
        kernel_fail(
            "cb-overflow", call(),
            strformat("%s has only %u pages; this reserve can never succeed", cb_name(cb).c_str(), c.num_pages));
    std::uint32_t need = static_cast<std::uint32_t>(n);
    if (c.wr_page + need > c.num_pages)
        kernel_fail(
            "cb-wrap", call(),
            strformat("reserving %u page(s) at write page %u runs past the end of %s (%u pages): the write pointer "
                      "wraps only at the end, so pushes must add up to the CB size per cycle (make the depth a "
                      "multiple of the push size)",
                      need, c.wr_page, cb_name(cb).c_str(), c.num_pages));
    // the pages are free once the pops reach received + need - num_pages
    std::uint64_t pops_needed = c.received + need > c.num_pages ? c.received + need - c.num_pages : 0;
    cb_event(run, true, timing::Ev::CbReserveBack, static_cast<std::uint32_t>(pops_needed),
             static_cast<std::uint32_t>(cb));
    block_until(run, lk, Wait{Wait::Kind::CbBack, run.core, static_cast<std::uint32_t>(cb), need}, call,
                [&] { return c.num_pages - c.used() >= need; });
    c.back_granted = std::max(c.back_granted, need);
}

void cb_push_back(std::int32_t cb, std::int32_t n, Site site) {
    KernelRun& run = enter(Api::CbPushBack, site);
    auto call = [&] { return strformat("cb_push_back(cb=%d, n=%d)", cb, n); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    if (!run.cb_views.empty()) drain_cb_views(run);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, true, call);
    std::uint32_t cnt = static_cast<std::uint32_t>(n);
    // The compute kernel that alone produces and consumes an intermediate CB may push pages it packed into free
    // space without reserving them (ttnn's matmul_reduce: pop, pack, push).
    const bool own_free = n >= 0 && run.kernel->role == Role::Compute && c.producer == &run &&
                          (!c.consumer || c.consumer == &run) && c.used() + cnt <= c.num_pages;
    if (n < 0 || (cnt > c.back_granted && !own_free))
        kernel_fail("cb-protocol", call(),
                    strformat("pushes %d page(s) but only %u page(s) are reserved (missing or smaller cb_reserve_back)",
                              n, c.back_granted));
    if (c.wr_page + cnt > c.num_pages)
        kernel_fail(
            "cb-wrap", call(),
            strformat("the pushed pages [%u, %u) run past the end of %s (%u pages): the write pointer wraps only at "
                      "the end, so pushes must add up to the CB size per cycle (make the depth a multiple of the "
                      "push size)",
                      c.wr_page, c.wr_page + cnt, cb_name(cb).c_str(), c.num_pages));
    if (run.kernel->role != Role::Compute && (run.pending_read_cbs >> cb & 1))
        kernel_fail("noc-barrier", call(),
                    "NoC reads into " + cb_name(cb) +
                        " are still in flight: call noc_async_read_barrier() before cb_push_back");
    if (run.pending_inline_cbs >> cb & 1)
        kernel_fail("noc-barrier", call(),
                    "noc_inline_dw_write into " + cb_name(cb) +
                        " is not confirmed: call noc_async_write_barrier() before cb_push_back");
    c.received += cnt;
    cb_event(run, true, timing::Ev::CbPush, static_cast<std::uint32_t>(c.received), static_cast<std::uint32_t>(cb));
    c.wr_page = (c.wr_page + cnt) % c.num_pages;
    c.back_granted -= std::min(cnt, c.back_granted);
    c.pack_seq = 0;
    c.high_water = std::max(c.high_water, c.used());
    note_progress(*run.core);
}

void cb_wait_front(std::int32_t cb, std::int32_t n, Site site) {
    KernelRun& run = enter(Api::CbWaitFront, site);
    auto call = [&] { return strformat("cb_wait_front(cb=%d, n=%d)", cb, n); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    if (!run.cb_views.empty()) drain_cb_views(run);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, false, call);
    if (n < 0 || static_cast<std::uint32_t>(n) > c.num_pages)
        kernel_fail("cb-overflow", call(),
                    strformat("%s has only %u pages; this wait can never succeed", cb_name(cb).c_str(), c.num_pages));
    std::uint32_t need = static_cast<std::uint32_t>(n);
    if (c.rd_page + need > c.num_pages)
        kernel_fail(
            "cb-wrap", call(),
            strformat("waiting for %u page(s) at read page %u runs past the end of %s (%u pages): the read pointer "
                      "wraps only at the end, so pops must add up to the CB size per cycle",
                      need, c.rd_page, cb_name(cb).c_str(), c.num_pages));
    // Cumulative rule: the count is relative to the front, so wait 8, 16, 24 between pops, not 8, 8, 8.
    cb_event(run, false, timing::Ev::CbWaitFront, static_cast<std::uint32_t>(c.acked + need),
             static_cast<std::uint32_t>(cb));
    block_until(run, lk, Wait{Wait::Kind::CbFront, run.core, static_cast<std::uint32_t>(cb), need}, call,
                [&] { return c.used() >= need; });
    c.front_granted = std::max(c.front_granted, need);
}

void cb_pop_front(std::int32_t cb, std::int32_t n, Site site) {
    KernelRun& run = enter(Api::CbPopFront, site);
    auto call = [&] { return strformat("cb_pop_front(cb=%d, n=%d)", cb, n); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    if (!run.cb_views.empty()) drain_cb_views(run);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, false, call);
    std::uint32_t cnt = static_cast<std::uint32_t>(n);
    // A kernel that produced the pages itself may pop them without waiting (ttnn's in-place updates of its own
    // intermediates: the pages are resident, the hardware's pop only advances the read pointer).
    const bool own_resident = n >= 0 && c.producer == &run && c.used() >= cnt;
    if (n < 0 || (cnt > c.front_granted && !own_resident))
        kernel_fail(
            "cb-protocol", call(),
            strformat("pops %d page(s) but only %u page(s) were obtained by cb_wait_front", n, c.front_granted));
    if (c.rd_page + cnt > c.num_pages)
        kernel_fail("cb-wrap", call(),
                    strformat("the popped pages [%u, %u) run past the end of %s (%u pages): pops must add up to the CB "
                              "size per cycle",
                              c.rd_page, c.rd_page + cnt, cb_name(cb).c_str(), c.num_pages));
    if (run.kernel->role != Role::Compute && (run.pending_write_cbs >> cb & 1))
        kernel_fail("noc-barrier", call(),
                    "NoC writes from " + cb_name(cb) +
                        " are not flushed: call noc_async_writes_flushed() (or noc_async_write_barrier()) before "
                        "cb_pop_front");
    c.acked += cnt;
    cb_event(run, false, timing::Ev::CbPop, static_cast<std::uint32_t>(c.acked), static_cast<std::uint32_t>(cb));
    c.rd_page = (c.rd_page + cnt) % c.num_pages;
    c.front_granted -= std::min(cnt, c.front_granted);
    note_progress(*run.core);
}

bool cb_pages_reservable_at_back(std::int32_t cb, std::int32_t n, Site site) {
    KernelRun& run = enter(Api::CbQuery, site);
    auto call = [&] { return strformat("cb_pages_reservable_at_back(cb=%d, n=%d)", cb, n); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, true, call);
    if (run.trace) timing::busy(run, cb_stream(run, true), timing::costs().dm_cb_cycles);
    return n >= 0 && c.num_pages - c.used() >= static_cast<std::uint32_t>(n);
}

bool cb_pages_available_at_front(std::int32_t cb, std::int32_t n, Site site) {
    KernelRun& run = enter(Api::CbQuery, site);
    auto call = [&] { return strformat("cb_pages_available_at_front(cb=%d, n=%d)", cb, n); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    CircularBuffer& c = cb_checked(run, cb, call);
    claim(run, c, false, call);
    if (run.trace) timing::busy(run, cb_stream(run, false), timing::costs().dm_cb_cycles);
    return n >= 0 && c.used() >= static_cast<std::uint32_t>(n);
}

std::uint32_t get_write_ptr(std::uint32_t cb, Site site) {
    KernelRun& run = enter(Api::CbPointer, site);
    auto call = [&] { return strformat("get_write_ptr(cb=%u)", cb); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    if (!run.cb_views.empty()) drain_cb_views(run);
    CircularBuffer& c = cb_checked(run, static_cast<std::int32_t>(cb), call);
    if (run.trace) small_cost(run, timing::costs().dm_arg_cycles);
    return static_cast<std::uint32_t>(run.core->window() + c.base + c.wr_page * c.page_size);
}

std::uint32_t get_read_ptr(std::uint32_t cb, Site site) {
    KernelRun& run = enter(Api::CbPointer, site);
    auto call = [&] { return strformat("get_read_ptr(cb=%u)", cb); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    if (!run.cb_views.empty()) drain_cb_views(run);
    CircularBuffer& c = cb_checked(run, static_cast<std::int32_t>(cb), call);
    if (run.trace) small_cost(run, timing::costs().dm_arg_cycles);
    return static_cast<std::uint32_t>(run.core->window() + c.base + c.rd_page * c.page_size);
}

// get_local_cb_interface(cb): a snapshot of the CB's fifo registers (byte addresses in the core's L1 window; on the
// compute side, as on the TRISCs, addresses and sizes count 16-byte units). A kernel that moves fifo_rd_ptr /
// fifo_wr_ptr (ttnn's matmul aliases two CBs' read pointers this way) has the move applied before its next CB call;
// the new pointer must be page-aligned inside the CB.
CbInterface& cb_interface(std::uint32_t cb, Site site) {
    KernelRun& run = enter(Api::CbPointer, site);
    auto call = [&] { return strformat("get_local_cb_interface(cb=%u)", cb); };
    std::unique_lock<std::mutex> lk(run.core->mu);
    if (!run.cb_views.empty()) drain_cb_views(run);
    CircularBuffer& c = cb_checked(run, static_cast<std::int32_t>(cb), call);
    std::uint32_t base = static_cast<std::uint32_t>(run.core->window() + c.base);
    const unsigned shift = run.kernel->role == Role::Compute ? 4 : 0;
    CbInterface v{(c.num_pages * c.page_size) >> shift,
                  (base + c.num_pages * c.page_size) >> shift,
                  c.page_size >> shift,
                  c.num_pages,
                  (base + c.rd_page * c.page_size) >> shift,
                  (base + c.wr_page * c.page_size) >> shift,
                  static_cast<std::uint32_t>(c.acked),
                  static_cast<std::uint32_t>(c.received),
                  c.pack_seq};
    run.cb_views.push_back({cb, v, shift});
    return run.cb_views.back().v;
}

}  // namespace dev

void drain_cb_views(KernelRun& run) {
    for (auto& [cb, view, shift] : run.cb_views) {
        CircularBuffer& c = run.core->cbs[cb];
        std::uint32_t base = static_cast<std::uint32_t>(run.core->window() + c.base);
        dev::CbInterface v = view;
        v.fifo_rd_ptr <<= shift;
        v.fifo_wr_ptr <<= shift;
        auto page_of = [&](std::uint32_t ptr, const char* field) {
            if (ptr < base || ptr >= base + c.num_pages * c.page_size || (ptr - base) % c.page_size)
                kernel_fail("cb-protocol", std::string("get_local_cb_interface(") + std::to_string(cb) + ")." + field,
                            strformat("%s set to %s, which is not a page boundary inside %s", field, hex(ptr).c_str(),
                                      cb_name(cb).c_str()));
            return (ptr - base) / c.page_size;
        };
        if (v.fifo_rd_ptr != base + c.rd_page * c.page_size) c.rd_page = page_of(v.fifo_rd_ptr, "fifo_rd_ptr");
        if (v.fifo_wr_ptr != base + c.wr_page * c.page_size) {
            const std::uint32_t page = page_of(v.fifo_wr_ptr, "fifo_wr_ptr");
            // A producer that moves its write pointer back over pages it pushed (ttnn's cb_push_back_hold_wr_ptr:
            // the pages are visible to the reader, the pointer stays at the block's start) writes from there again:
            // its reserved window grows by those pages, as the hardware's pointer arithmetic allows.
            const std::uint32_t back = (c.wr_page + c.num_pages - page) % c.num_pages;
            if (c.producer == &run && back <= c.used()) c.back_granted += back;
            c.wr_page = page;
        }
    }
    run.cb_views.clear();
}

namespace dev {

// Mailboxes: a data-movement kernel posts a value to one of the compute kernel's three threads; the compute
// kernel (one thread here, running the UNPACK, MATH and PACK programs in order) reads them round-robin, so the
// three reads ttnn writes as UNPACK(...) MATH(...) PACK(...) each get their own thread's value.
void mailbox_write(std::uint32_t thread, std::uint32_t value, Site site) {
    KernelRun& run = enter(Api::Mailbox, site);
    if (thread > 2)
        kernel_fail("mailbox", strformat("mailbox_write(thread=%u)", thread),
                    "only the compute threads (UnpackThreadId, MathThreadId, PackThreadId) have mailboxes here");
    std::lock_guard<std::mutex> lk(run.core->mu);
    run.core->mailbox[thread].push_back(value);
    if (run.trace)
        timing::record(run, timing::kDataMovement, timing::Ev::MailboxWrite,
                       static_cast<float>(timing::costs().mailbox_cycles), thread);
    note_progress(*run.core);
}

std::uint32_t mailbox_read(std::uint32_t from_thread, Site site) {
    KernelRun& run = enter(Api::Mailbox, site);
    if (run.kernel->role != Role::Compute)
        kernel_fail("mailbox", "mailbox_read", "only compute kernels read mailboxes in the emulator");
    std::uint32_t thread = run.mailbox_reads++ % 3;
    if (run.trace)
        timing::record(run, static_cast<timing::Stream>(thread), timing::Ev::MailboxRead,
                       static_cast<float>(timing::costs().mailbox_cycles), thread);
    std::unique_lock<std::mutex> lk(run.core->mu);
    auto& box = run.core->mailbox[thread];
    block_until(
        run, lk, Wait{Wait::Kind::Mailbox, run.core, thread, 1},
        [&] { return strformat("mailbox_read(%u) [thread %u]", from_thread, thread); }, [&] { return !box.empty(); });
    std::uint32_t v = box.front();
    box.erase(box.begin());
    return v;
}

[[noreturn]] void assert_failed(const char* condition, Site site) {
    KernelRun& run = enter(Api::None, site);
    (void)run;
    kernel_fail("assert", std::string("ASSERT(") + condition + ")", "the kernel's assertion failed");
}

void unsupported(const char* what, Site site) {
    if (current_run()) enter(Api::None, site);
    kernel_fail("unsupported", what, "not supported by the tilefarm emulator");
}

}  // namespace dev
}  // namespace ttemu
