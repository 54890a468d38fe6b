// The timing model's replay: a discrete-event simulation of one program over its kernels' traces (timing.h).
//
// Every RISC stream has a clock. Streams run in simulated-time order (the one with the smallest clock next, and a
// stream yields as soon as it passes the next one), so the shared resources - DRAM banks and the NoC ports of
// every core - serve requests in the order they happen. A wait that is not yet satisfied parks the stream on the
// object it waits for (a CB, a semaphore word, a mailbox, the DST / source-register handshake of its core); when
// that object changes the stream re-checks at the time of the change. Counters (CB pushes and pops, mailbox
// writes, DST sections, FPU ops) keep the time of every step, so "the time the awaited event happened" is exact;
// semaphore words keep a short time-ordered history of writes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <queue>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "runtime.h"
#include "timing.h"
#include "timing_fabric.h"

namespace ttemu::timing {
namespace {

enum Category : int { kBusyCat = 0, kWaitCb = 1, kWaitNoc = 2, kWaitPipe = 3, kCategories = 4 };
const char* const kCategoryNames[kCategories] = {"busy", "wait_cb", "wait_noc", "wait_pipe"};

// Busy / waiting time per time bin; bins double in width to keep at most kMaxBins.
struct Timeline {
    static constexpr std::size_t kMaxBins = 1024;
    double width = 64;
    std::vector<std::array<float, kCategories>> bins;
    void add(double t0, double t1, int cat) {
        if (t1 <= t0) return;
        while (t1 / width >= kMaxBins) coarsen();
        std::size_t b0 = static_cast<std::size_t>(t0 / width), b1 = static_cast<std::size_t>(t1 / width);
        if (bins.size() <= b1) bins.resize(b1 + 1, {0, 0, 0, 0});
        for (std::size_t b = b0; b <= b1; ++b) {
            double lo = std::max(t0, b * width), hi = std::min(t1, (b + 1) * width);
            if (hi > lo) bins[b][cat] += static_cast<float>(hi - lo);
        }
    }
    void coarsen() {
        std::vector<std::array<float, kCategories>> merged((bins.size() + 1) / 2, {0, 0, 0, 0});
        for (std::size_t i = 0; i < bins.size(); ++i)
            for (int c = 0; c < kCategories; ++c) merged[i / 2][c] += bins[i][c];
        bins.swap(merged);
        width *= 2;
    }
};

struct LineKey {
    const char* file;
    std::uint32_t line;
    bool operator==(const LineKey& o) const { return file == o.file && line == o.line; }
};
struct LineHash {
    std::size_t operator()(const LineKey& k) const { return std::hash<const void*>()(k.file) * 31u + k.line; }
};
struct LineStat {
    double busy = 0, wait = 0;
    std::uint64_t calls = 0;
};

// A ring of the most recent times of a counter's steps (step i at index i % size).
struct Ring {
    static constexpr std::size_t kSize = 4096;
    std::vector<double> t = std::vector<double>(kSize, 0.0);
    std::uint64_t n = 0;  // steps recorded
    void push(double time) { t[n++ % kSize] = time; }
    double at(std::uint64_t i) const { return t[i % kSize]; }
};

// The time-ordered writes of a 4-byte word since its last fold.
struct Word {
    std::uint32_t base = 0;
    struct Change {
        double time;
        bool add;
        std::uint32_t value;
    };
    std::vector<Change> changes;
    void insert(double time, bool add, std::uint32_t value) {
        auto pos = std::upper_bound(changes.begin(), changes.end(), time,
                                    [](double t, const Change& c) { return t < c.time; });
        changes.insert(pos, Change{time, add, value});
        if (changes.size() > 512) {  // fold the oldest half: waits that far back in time are long resolved
            for (std::size_t i = 0; i < 256; ++i) base = changes[i].add ? base + changes[i].value : changes[i].value;
            changes.erase(changes.begin(), changes.begin() + 256);
        }
    }
    // The earliest time >= t at which the word satisfies (== target) or (>= target); -1 if it never does yet.
    double ready(double t, bool at_least, std::uint32_t target) const {
        auto ok = [&](std::uint32_t v) { return at_least ? v >= target : v == target; };
        std::uint32_t v = base;
        std::size_t i = 0;
        for (; i < changes.size() && changes[i].time <= t; ++i)
            v = changes[i].add ? v + changes[i].value : changes[i].value;
        if (ok(v)) return t;
        for (; i < changes.size(); ++i) {
            v = changes[i].add ? v + changes[i].value : changes[i].value;
            if (ok(v)) return changes[i].time;
        }
        return -1;
    }
};

struct Counter {  // a monotone count (CB pushes / pops) with the time of every step still needed
    std::vector<std::pair<std::uint32_t, double>> steps;  // (count after the step, time)
    std::size_t lo = 0;
    std::uint32_t floor = 0;                  // counts below this were reached long ago (their steps are trimmed)
    double ready(std::uint32_t need) const {  // time the count first reached `need`, -1 if not yet
        if (need == 0 || need < floor) return 0;
        auto it =
            std::lower_bound(steps.begin() + static_cast<std::ptrdiff_t>(lo), steps.end(), need,
                             [](const std::pair<std::uint32_t, double>& s, std::uint32_t n) { return s.first < n; });
        return it == steps.end() ? -1 : it->second;
    }
    void trim_below(std::uint32_t count) {  // steps that reached less than `count` are no longer needed
        floor = std::max(floor, count);
        while (lo < steps.size() && steps[lo].first < count) ++lo;
        if (lo > 4096 && lo * 2 > steps.size()) {
            steps.erase(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(lo));
            lo = 0;
        }
    }
};

struct CoreSim {
    std::array<Counter, kMaxCBs> pushes, pops;
    std::array<std::uint32_t, kMaxCBs> num_pages{};
    std::unordered_map<std::uint32_t, Word> words;
    std::array<std::vector<double>, 3> mailbox_writes;
    std::array<std::size_t, 3> mailbox_reads{};
    Ring unpack_start, unpack_end, unpack_steps, math_end, commits, releases;
    std::uint32_t dst_sections = 2;
    double packed = 0;    // when the packers finish the work they have accepted
    double unpacked = 0;  // when the unpackers finish the work they have been given
};

struct SimStream {
    KernelRun* run = nullptr;
    int core = 0;
    int s = 0;
    const std::vector<Event>* events = nullptr;
    std::size_t pc = 0;
    double clock = 0, end = 0;
    bool done = false, in_heap = false, cost_paid = false, blocked = false;
    bool unpack_issued = false;  // the current UnpackOp's instructions are charged (its data not yet started)
    double reads_done = 0, writes_acked = 0, writes_flushed = 0, last_write[2] = {0, 0};
    // the barrier event this stream executed last (and nothing since), whose wait a slowed transfer lengthens; or -1
    std::int64_t after_barrier = -1;
    double time[kCategories] = {0, 0, 0, 0};
    std::uint64_t tile_products = 0;
    double engine_busy = 0;  // a compute UNPACK / PACK thread's unpackers / packers: cycles moving data
    std::map<std::uint32_t, double> cb_wait;
    std::unordered_map<LineKey, LineStat, LineHash> lines;
    // a direct-mapped cache in front of `lines` (every event charges its line; most streams run a few dozen lines)
    std::array<std::pair<LineKey, LineStat*>, 64> line_cache{};
    LineStat& line(const Event& e) {
        auto& slot = line_cache[e.line & 63];
        if (slot.second && slot.first.file == e.file && slot.first.line == e.line) return *slot.second;
        LineStat& stat = lines[LineKey{e.file, e.line}];  // node-based: the reference stays valid
        slot = {LineKey{e.file, e.line}, &stat};
        return stat;
    }
    Timeline timeline;
};

struct HeapItem {
    double t;
    int id;
    bool operator<(const HeapItem& o) const { return t != o.t ? t > o.t : id > o.id; }  // min-heap
};

const char* risc_name(const KernelRun& run, int s) {
    if (run.kernel->role == Role::Compute) return s == kUnpack ? "TRISC0" : s == kMath ? "TRISC1" : "TRISC2";
    return run.kernel->role == Role::Reader ? "NCRISC" : "BRISC";
}

std::string json_escape(const std::string& s) {
    std::string o;
    for (char ch : s) {
        if (ch == '"' || ch == '\\') o += '\\';
        if (static_cast<unsigned char>(ch) < 0x20) continue;
        o += ch;
    }
    return o;
}

class Engine {
public:
    explicit Engine(const std::vector<KernelRun*>& runs)
        : c_(costs()),
          dev_(device()),
          fabric_(c_, static_cast<int>(dev_.arch->grid_x), static_cast<int>(dev_.arch->grid_y)) {
        grid_x_ = dev_.arch->grid_x;
        cores_.resize(dev_.cores.size());
        for (KernelRun* run : runs) {
            if (!run->trace) continue;
            int core = static_cast<int>(run->core->y * grid_x_ + run->core->x);
            CoreSim& cs = cores_[static_cast<std::size_t>(core)];
            for (std::uint32_t i = 0; i < kMaxCBs; ++i) cs.num_pages[i] = run->core->cbs[i].num_pages;
            if (run->kernel->role == Role::Compute) cs.dst_sections = run->kernel->dst_full_sync ? 1 : 2;
            int nstreams = run->kernel->role == Role::Compute ? 3 : 1;
            for (int s = 0; s < nstreams; ++s) {
                SimStream st;
                st.run = run;
                st.core = core;
                st.s = s;
                st.events = &run->trace->streams[s];
                streams_.push_back(std::move(st));
            }
        }
    }

    void run() {
        for (std::size_t i = 0; i < streams_.size(); ++i) schedule(static_cast<int>(i), 0);
        for (;;) {
            if (heap_.empty()) {
                // Every unfinished stream waits on something no replayed event provides (e.g. a word the kernel
                // wrote with a plain store): release the earliest one where it stands.
                int pick = -1;
                for (std::size_t i = 0; i < streams_.size(); ++i)
                    if (!streams_[i].done &&
                        (pick < 0 || streams_[i].clock < streams_[static_cast<std::size_t>(pick)].clock))
                        pick = static_cast<int>(i);
                if (pick < 0) break;
                SimStream& s = streams_[static_cast<std::size_t>(pick)];
                ++forced_;
                if (s.pc < s.events->size() && forced_at_.size() < 20) {
                    const Event& e = (*s.events)[s.pc];
                    forced_at_.push_back(strformat("%s:%u (%s, event %d)", e.file ? base_name(e.file).c_str() : "?",
                                                   e.line, risc_name(*s.run, s.s), static_cast<int>(e.kind)));
                }
                s.pc++;
                s.cost_paid = false;
                s.blocked = false;
                schedule(pick, s.clock);
                continue;
            }
            HeapItem item = heap_.top();
            heap_.pop();
            SimStream& s = streams_[static_cast<std::size_t>(item.id)];
            if (item.t < s.clock && !s.done) {  // a slowed transfer moved its barrier's end: run it then
                heap_.push({s.clock, item.id});
                continue;
            }
            s.in_heap = false;
            if (s.done) continue;
            while (!s.done) {
                if (!step(item.id)) break;
                if (!heap_.empty() && s.clock > heap_.top().t) {
                    schedule(item.id, s.clock);
                    break;
                }
            }
        }
    }

    double device_cycles() const {
        double end = 0;
        for (auto& s : streams_) end = std::max(end, s.end);
        return end + c_.dispatch_ns * c_.clock_ghz;
    }
    // The math RISC's span from its first start to its last end across cores: what the device profiler's TRISC1
    // kernel duration measures (every kernel starts at the launch, so the span is the last math stream's end).
    double trisc1_cycles() const {
        double end = 0;
        for (auto& s : streams_)
            if (s.run->kernel->role == Role::Compute && s.s == kMath) end = std::max(end, s.end);
        return end;
    }

    std::string json(std::uint32_t program_index) const {
        double end = 0;
        for (auto& s : streams_) end = std::max(end, s.end);
        const double dispatch = c_.dispatch_ns * c_.clock_ghz;
        std::ostringstream o;
        o.precision(10);
        o << "{\"index\": " << program_index << ", \"kernel_cycles\": " << end << ", \"dispatch_cycles\": " << dispatch
          << ", \"device_cycles\": " << end + dispatch << ", \"trisc1_cycles\": " << trisc1_cycles()
          << ", \"forced_waits\": " << forced_ << ", \"forced_at\": [";
        for (std::size_t i = 0; i < forced_at_.size(); ++i)
            o << (i ? ", " : "") << "\"" << json_escape(forced_at_[i]) << "\"";
        o << "], \"streams\": [";
        bool first = true;
        for (auto& s : streams_) {
            const KernelRun& run = *s.run;
            o << (first ? "\n  " : ",\n  ") << "{\"core\": [" << run.core->x << ", " << run.core->y
              << "], \"kernel\": \"" << json_escape(run.kernel->display) << "\", \"role\": \""
              << role_name(run.kernel->role) << "\", \"risc\": \"" << risc_name(run, s.s)
              << "\", \"fidelity\": " << run.kernel->math_fidelity << ", \"end\": " << s.end
              << ", \"tile_products\": " << s.tile_products << ", \"engine_busy\": " << s.engine_busy;
            for (int cat = 0; cat < kCategories; ++cat) o << ", \"" << kCategoryNames[cat] << "\": " << s.time[cat];
            o << ", \"cb_wait\": {";
            bool f2 = true;
            for (auto& [cb, t] : s.cb_wait) {
                o << (f2 ? "" : ", ") << "\"" << cb << "\": " << t;
                f2 = false;
            }
            o << "}, \"timeline\": {\"bin_cycles\": " << s.timeline.width;
            for (int cat = 0; cat < kCategories; ++cat) {
                o << ", \"" << kCategoryNames[cat] << "\": [";
                for (std::size_t b = 0; b < s.timeline.bins.size(); ++b)
                    o << (b ? "," : "") << static_cast<long long>(std::lround(s.timeline.bins[b][cat]));
                o << "]";
            }
            o << "}}";
            first = false;
        }
        // per source line, summed over cores: (file, line, kernel, RISC)
        std::map<std::tuple<std::string, std::uint32_t, std::string, std::string>, std::pair<LineStat, int>> lines;
        for (auto& s : streams_)
            for (auto& [key, stat] : s.lines) {
                auto& agg = lines[{key.file ? key.file : "", key.line, s.run->kernel->display, risc_name(*s.run, s.s)}];
                agg.first.busy += stat.busy;
                agg.first.wait += stat.wait;
                agg.first.calls += stat.calls;
                agg.second += 1;
            }
        o << "],\n \"lines\": [";
        first = true;
        for (auto& [key, agg] : lines) {
            o << (first ? "\n  " : ",\n  ") << "{\"file\": \"" << json_escape(std::get<0>(key))
              << "\", \"line\": " << std::get<1>(key) << ", \"kernel\": \"" << json_escape(std::get<2>(key))
              << "\", \"risc\": \"" << std::get<3>(key) << "\", \"busy\": " << agg.first.busy
              << ", \"wait\": " << agg.first.wait << ", \"calls\": " << agg.first.calls
              << ", \"streams\": " << agg.second << "}";
            first = false;
        }
        o << "],\n \"noc\": {\"busiest_link_cycles\": " << fabric_.link_busy_max() << "}";
        o << ",\n \"dram\": {\"bank_bytes_per_cycle\": " << c_.dram_bytes_per_cycle() << ", \"banks\": [";
        for (std::size_t b = 0; b < fabric_.banks(); ++b)
            o << (b ? ", " : "") << "{\"bank\": " << b << ", \"bytes_read\": " << fabric_.bank_read(b)
              << ", \"bytes_written\": " << fabric_.bank_written(b) << ", \"busy_cycles\": " << fabric_.bank_busy(b)
              << "}";
        o << "]}}";
        return o.str();
    }

private:
    const Costs& c_;
    Device& dev_;
    std::uint32_t grid_x_ = 1;
    std::vector<CoreSim> cores_;
    std::vector<SimStream> streams_;
    std::priority_queue<HeapItem> heap_;
    std::unordered_map<std::uint64_t, std::vector<int>> waiters_;
    Fabric fabric_;
    std::vector<std::pair<int, double>> arrivals_;  // scratch: a multicast's (core, time written)
    // NoC transfers a later one may still slow down (Fabric::delays): by transfer id, the stream that issued it and
    // the times it contributed to that stream's barriers
    struct Issued {
        int stream;
        Ev kind;
        int noc;
        double sent, done, acked;  // sent: the flush point (last_packet_sent); done: landed; acked: acknowledged
    };
    std::unordered_map<int, Issued> issued_;
    std::size_t issued_prune_at_ = 8192;
    std::uint64_t forced_ = 0;
    std::vector<std::string> forced_at_;

    // waiter keys: object kind, core, index
    enum Obj : std::uint64_t {
        kCbFront = 1,
        kCbBack,
        kWord,
        kMailbox,
        kUnpacked,
        kUnpackedEnd,
        kMathed,
        kCommits,
        kReleases
    };
    static std::uint64_t key(Obj obj, int core, std::uint32_t index) {
        return (static_cast<std::uint64_t>(obj) << 56) | (static_cast<std::uint64_t>(core) << 40) | index;
    }

    void schedule(int id, double t) {
        SimStream& s = streams_[static_cast<std::size_t>(id)];
        if (s.in_heap || s.done) return;
        s.in_heap = true;
        // the stream's next events are read when it is popped: fetch them now (hundreds of streams each advance a
        // few events per turn, too many for the hardware prefetcher to follow)
        if (s.pc < s.events->size()) {
            const char* next = reinterpret_cast<const char*>(s.events->data() + s.pc);
            __builtin_prefetch(next);
            __builtin_prefetch(next + 64);
        }
        heap_.push({t, id});
    }
    void park(int id, std::uint64_t k) {
        streams_[static_cast<std::size_t>(id)].blocked = true;
        waiters_[k].push_back(id);
    }
    void wake(std::uint64_t k, double t) {
        auto it = waiters_.find(k);
        if (it == waiters_.end()) return;
        std::vector<int> ids;
        ids.swap(it->second);
        waiters_.erase(it);
        for (int id : ids) schedule(id, std::max(streams_[static_cast<std::size_t>(id)].clock, t));
    }

    void charge(SimStream& s, const Event& e, double cycles, int cat) {
        if (cycles <= 0) return;
        s.timeline.add(s.clock, s.clock + cycles, cat);
        s.time[cat] += cycles;
        LineStat& l = s.line(e);
        if (cat == kBusyCat)
            l.busy += cycles;
        else
            l.wait += cycles;
        s.clock += cycles;
    }
    // The wait of event `e` ends at `ready` (>= now): charges the waiting time.
    void finish_wait(SimStream& s, const Event& e, double ready, int cat) {
        double w = ready - s.clock;
        if (w > 0) {
            charge(s, e, w, cat);
            if (e.kind == Ev::CbWaitFront || e.kind == Ev::CbReserveBack) s.cb_wait[e.b] += w;
        }
    }

    // ---- NoC transfers through the shared fabric (timing_fabric.h)
    void noc_read(SimStream& s, int id, const Event& e) {
        const double done = fabric_.read(e.noc & 1, s.core, e.a, e.b, s.clock);
        s.reads_done = std::max(s.reads_done, done);
        issued(s, Issued{id, Ev::NocRead, e.noc & 1, done, done, done});
        issue_packets(s, e, false, 0, 0);
    }

    void noc_write(SimStream& s, int id, const Event& e) {
        const int noc = e.noc & 1;
        auto [left, done] = fabric_.write(noc, s.core, e.a, e.b, s.clock);
        const double start = fabric_.last_start();
        const double acked = done + fabric_.latency(noc, fabric_.endpoint_xy(e.a), fabric_.core_xy(s.core));
        const double sent = last_packet_sent(e.b, start, left);
        s.writes_flushed = std::max(s.writes_flushed, sent);
        s.last_write[noc] = std::max(s.last_write[noc], done);
        s.writes_acked = std::max(s.writes_acked, acked);
        issued(s, Issued{id, Ev::NocWrite, noc, sent, done, acked});
        issue_packets(s, e, true, start, left);
    }

    void noc_mcast(SimStream& s, int id, const Event& e) {
        const int noc = e.noc & 1;
        arrivals_.clear();
        double left = fabric_.multicast(noc, s.core, e.a, e.aux & 1, e.b, s.clock, arrivals_);
        const double start = fabric_.last_start();
        const double sent = last_packet_sent(e.b, start, left);
        s.writes_flushed = std::max(s.writes_flushed, sent);
        const XY me = fabric_.core_xy(s.core);
        double last = left, acked = left;
        for (const auto& [core, done] : arrivals_) {
            s.last_write[noc] = std::max(s.last_write[noc], done);
            last = std::max(last, done);
            acked = std::max(acked, done + fabric_.latency(noc, fabric_.core_xy(core), me));
        }
        s.writes_acked = std::max(s.writes_acked, acked);
        issued(s, Issued{id, Ev::NocMcast, noc, sent, last, acked});
        issue_packets(s, e, true, start, left);
    }

    // When a write counts as sent, which is what noc_async_writes_flushed waits for (tt-metal's
    // ncrisc_noc_nonposted_writes_sent compares NIU_MST_NONPOSTED_WR_REQ_SENT with the packets issued): the NIU
    // increments that counter for a packet, by one and its data-flit counter by all of the packet's flits at once,
    // "before the data reads from L1 ... are complete" ([ISA] WormholeB0/ and BlackholeA0/NoC/Counters.md, write
    // requests; the data having left L1 is a later event, NIU_MST_WRITE_REQS_OUTGOING_ID's decrement). So a write is
    // sent once its last packet starts to leave: a one-packet write at its first byte, a longer one when all but its
    // last packet have left (its packets leave one after another on one virtual channel, issue_packets below), not
    // when its last byte has.
    double last_packet_sent(double bytes, double start, double left) const {
        const double packet = c_.noc_max_packet_bytes;
        if (packet <= 0 || bytes <= packet || left <= start) return start;
        const double before_last = packet * (std::ceil(bytes / packet) - 1);
        return start + (left - start) * before_last / bytes;
    }

    // A transfer longer than one packet (noc_max_packet_bytes) is issued packet by packet through one NIU request
    // initiator (tt-metal's ncrisc_noc_fast_{read,write}_any_len: each further packet waits for the initiator, then
    // costs a command like the first). The initiator is free again once its packet has been assigned a virtual
    // channel at the first hop ([ISA] NoC/MemoryMap.md, NOC_CMD_CTRL), and a write's packets all ask for one static
    // virtual channel (NOC_CMD_VC_STATIC), which a packet holds until it has fully crossed that hop ([ISA]
    // NoC/README.md, Virtual channels): packet k is assigned once packet k - 1 has left the NIU, so the RISC issues
    // the last packet once all but the last two have left (the data leaving at the transfer's own pace between its
    // first and its last byte out). A read's request packets are one header flit each: they wait for nothing.
    void issue_packets(SimStream& s, const Event& e, bool data_leaves, double start, double left) {
        const double packet = c_.noc_max_packet_bytes, bytes = e.b;
        if (packet <= 0 || bytes <= packet) return;
        const auto packets = static_cast<std::uint32_t>(std::ceil(bytes / packet));
        double t = s.clock;
        for (std::uint32_t k = 2; k <= packets; ++k) {
            if (data_leaves && k >= 3) t = std::max(t, start + (left - start) * (k - 2) * packet / bytes);
            t += c_.noc_cmd_cycles;
        }
        const double commands = (packets - 1) * c_.noc_cmd_cycles;
        finish_wait(s, e, t - commands, kWaitNoc);
        charge(s, e, commands, kBusyCat);
    }

    // Remembers the transfer just issued and applies the delays it caused to the earlier ones: their streams'
    // barrier times move later, and a barrier that already waited for the old time waits longer.
    void issued(SimStream& s, Issued what) {
        if (issued_.size() > issued_prune_at_) {
            for (auto it = issued_.begin(); it != issued_.end();)
                it = it->second.acked + 1024 < s.clock ? issued_.erase(it) : std::next(it);
            issued_prune_at_ = std::max<std::size_t>(8192, 2 * issued_.size());
        }
        issued_[fabric_.last_transfer()] = what;
        for (const auto& [id, delay] : fabric_.delays()) {
            auto it = issued_.find(id);
            if (it == issued_.end()) continue;
            Issued& t = it->second;
            t.sent += delay;
            t.done += delay;
            t.acked += delay;
            SimStream& v = streams_[static_cast<std::size_t>(t.stream)];
            if (t.kind == Ev::NocRead) {
                v.reads_done = std::max(v.reads_done, t.done);
            } else {
                v.writes_flushed = std::max(v.writes_flushed, t.sent);
                v.last_write[t.noc] = std::max(v.last_write[t.noc], t.done);
                v.writes_acked = std::max(v.writes_acked, t.acked);
            }
            if (v.after_barrier < 0) continue;
            const Event& b = (*v.events)[static_cast<std::size_t>(v.after_barrier)];
            const double until = b.kind == Ev::ReadBarrier    ? v.reads_done
                                 : b.kind == Ev::WriteBarrier ? v.writes_acked
                                                              : v.writes_flushed;
            if (until > v.clock) {
                charge(v, b, until - v.clock, kWaitNoc);
                if (v.done) v.end = v.clock;
            }
        }
        fabric_.delays().clear();
    }

    Word& word(int core, std::uint32_t offset) {
        CoreSim& cs = cores_[static_cast<std::size_t>(core)];
        auto it = cs.words.find(offset);
        if (it != cs.words.end()) return it->second;
        Word w;
        const Core& real = *dev_.cores[static_cast<std::size_t>(core)];
        auto init = real.word_init.find(offset);
        w.base = init != real.word_init.end() ? init->second : 0;
        return cs.words.emplace(offset, w).first->second;
    }
    void word_change(int core, std::uint32_t offset, double t, bool add, std::uint32_t value) {
        word(core, offset).insert(t, add, value);
        wake(key(kWord, core, offset), t);
    }
    void word_write(SimStream& s, const Event& e) {
        const int noc = e.noc & 1;
        const bool add = e.aux & 1;
        const XY me = fabric_.core_xy(s.core);
        auto one = [&](int core) {
            const XY to = fabric_.core_xy(core);
            double arrive = std::max(s.clock + fabric_.latency(noc, me, to), s.last_write[noc]);
            s.writes_acked = std::max(s.writes_acked, arrive + fabric_.latency(noc, to, me));
            word_change(core, e.b, arrive, add, e.c);
        };
        if (e.aux & 2)
            fabric_.for_rect(e.a, e.aux & 4, s.core, one);
        else
            one(static_cast<int>(e.a));
    }

    // Executes the stream's current event; false when it blocks (or has finished). Most events cost their cycles
    // first and then wait or take effect; the compute pipeline's ops wait for their operands first.
    bool step(int id) {
        SimStream& s = streams_[static_cast<std::size_t>(id)];
        if (s.pc >= s.events->size()) {
            s.done = true;
            s.end = s.clock;
            return false;
        }
        s.after_barrier = -1;
        const Event& e = (*s.events)[s.pc];
        CoreSim& cs = cores_[static_cast<std::size_t>(s.core)];
        const bool cost_after = e.kind == Ev::UnpackOp || e.kind == Ev::MathOp || e.kind == Ev::PackOp;
        if (!s.cost_paid && e.kind != Ev::PackOp && s.s == kPack && s.run->kernel->role == Role::Compute)
            finish_wait(s, e, std::max(s.clock, cs.packed), kWaitPipe);  // the packers' work done (below)
        if (!s.cost_paid && e.kind != Ev::UnpackOp && s.s == kUnpack && s.run->kernel->role == Role::Compute)
            finish_wait(s, e, std::max(s.clock, cs.unpacked), kWaitPipe);  // the unpackers' work done (below)
        if (!s.cost_paid) {
            s.line(e).calls += 1;
            if (!cost_after) charge(s, e, e.cost, kBusyCat);
            s.cost_paid = true;
        }
        auto wait_for = [&](double ready, int cat, std::uint64_t k) {
            if (ready < 0) {
                park(id, k);
                return false;
            }
            finish_wait(s, e, std::max(ready, s.clock), cat);
            return true;
        };
        bool advanced = true;
        switch (e.kind) {
            case Ev::Busy: break;
            case Ev::CbWaitFront:
                advanced = wait_for(cs.pushes[e.b].ready(e.a), kWaitCb, key(kCbFront, s.core, e.b));
                break;
            case Ev::CbReserveBack:
                advanced = wait_for(cs.pops[e.b].ready(e.a), kWaitCb, key(kCbBack, s.core, e.b));
                break;
            case Ev::CbPush:
                cs.pushes[e.b].steps.push_back({e.a, s.clock});
                cs.pops[e.b].trim_below(e.a > cs.num_pages[e.b] ? e.a - cs.num_pages[e.b] + 1 : 0);
                wake(key(kCbFront, s.core, e.b), s.clock);
                break;
            case Ev::CbPop:
                cs.pops[e.b].steps.push_back({e.a, s.clock});
                cs.pushes[e.b].trim_below(e.a + 1);
                wake(key(kCbBack, s.core, e.b), s.clock);
                break;
            case Ev::NocRead: noc_read(s, id, e); break;
            case Ev::NocWrite: noc_write(s, id, e); break;
            case Ev::NocMcast: noc_mcast(s, id, e); break;
            case Ev::ReadBarrier:
                finish_wait(s, e, std::max(s.clock, s.reads_done), kWaitNoc);
                s.after_barrier = static_cast<std::int64_t>(s.pc);
                break;
            case Ev::WriteBarrier:
                finish_wait(s, e, std::max(s.clock, s.writes_acked), kWaitNoc);
                s.after_barrier = static_cast<std::int64_t>(s.pc);
                break;
            case Ev::WritesFlushed:
                finish_wait(s, e, std::max(s.clock, s.writes_flushed), kWaitNoc);
                s.after_barrier = static_cast<std::int64_t>(s.pc);
                break;
            case Ev::WordWrite: word_write(s, e); break;
            case Ev::WordLocal: word_change(s.core, e.b, s.clock, e.aux & 1, e.c); break;
            case Ev::WordWait:
                advanced =
                    wait_for(word(s.core, e.b).ready(s.clock, e.aux & 1, e.c), kWaitNoc, key(kWord, s.core, e.b));
                break;
            case Ev::MailboxWrite:
                cs.mailbox_writes[e.a % 3].push_back(s.clock);
                wake(key(kMailbox, s.core, e.a % 3), s.clock);
                break;
            case Ev::MailboxRead: {
                auto& writes = cs.mailbox_writes[e.a % 3];
                std::size_t n = cs.mailbox_reads[e.a % 3];
                advanced = wait_for(n < writes.size() ? writes[n] : -1, kWaitCb, key(kMailbox, s.core, e.a % 3));
                if (advanced) ++cs.mailbox_reads[e.a % 3];
                break;
            }
            case Ev::UnpackOp: {
                // The call's instructions (its cost beyond the data: the LLK call's address and config writes, the
                // context semaphore, an UNPACR's two-cycle address calculation per tile) issue on the unpack
                // thread; the unpackers then fetch the data at their L1 rate while the thread goes on. The thread
                // waits only for a free config context (tt-llk's wait_for_next_context(2): two in flight, so call
                // f's instructions wait for call f - 2's data), and an UNPACR's address cycles overlap the previous
                // UNPACR's pipelined fetch ([ISA] TensixCoprocessor/UNPACR_Regular.md, Performance). So
                // consecutive calls cost max(instructions, data) a call, not their sum. The data of op f starts
                // once the unpackers have finished op f - 1's and op f - 2's math has freed its source registers
                // (double-buffered); every other event on the unpack thread waits for the unpackers (llk_pop_tiles:
                // STALLWAIT on the unpacker before the CB's acknowledgement).
                std::uint32_t f = e.a;
                double context = f < 2 ? s.clock : (cs.unpack_end.n > f - 2 ? cs.unpack_end.at(f - 2) : -1);
                double regs = f < 2 ? s.clock : (cs.math_end.n > f - 2 ? cs.math_end.at(f - 2) : -1);
                advanced = wait_for(context, kWaitPipe, key(kUnpackedEnd, s.core, 0)) &&
                           (regs >= 0 || (park(id, key(kMathed, s.core, 0)), false));
                if (advanced) {
                    const double l1 = e.c / c_.unpack_bytes_per_cycle;
                    if (!s.unpack_issued) {
                        charge(s, e, e.cost - l1, kBusyCat);
                        s.unpack_issued = true;
                    }
                    // reading L1 beside the NoC and the packer: the banks they take meanwhile slow the unpacker
                    const double t0 = std::max({s.clock, cs.unpacked, regs});
                    const double t1 = t0 + fabric_.l1_stretch(s.core, kL1Unpack, t0, l1);
                    fabric_.l1_use(s.core, kL1Unpack, t0, t1, e.c / c_.l1_bank_bytes_per_cycle);
                    s.unpack_issued = false;
                    cs.unpacked = t1;
                    s.engine_busy += t1 - t0;
                    cs.unpack_start.push(t0);
                    cs.unpack_end.push(t1);
                    cs.unpack_steps.push(e.b ? e.b : 1);
                    wake(key(kUnpacked, s.core, 0), t1);
                    wake(key(kUnpackedEnd, s.core, 0), t1);
                }
                break;
            }
            case Ev::MathOp: {
                std::uint32_t f = e.a;
                if (f == kNone) {  // SFPU work: nothing to unpack
                    charge(s, e, e.cost, kBusyCat);
                    break;
                }
                if (cs.unpack_end.n <= f) {
                    advanced = wait_for(-1, kWaitPipe, key(kUnpacked, s.core, 0));
                    break;
                }
                // the math starts when the first step is unpacked, and ends no earlier than one step after the
                // last one is (the unpacker and the FPU overlap within the op)
                double u_start = cs.unpack_start.at(f), u_end = cs.unpack_end.at(f), steps = cs.unpack_steps.at(f);
                double u_step = (u_end - u_start) / steps, m_step = e.cost / (e.b ? e.b : 1);
                finish_wait(s, e, std::max(s.clock, u_start + u_step), kWaitPipe);
                double start = s.clock;
                charge(s, e, e.cost, kBusyCat);
                finish_wait(s, e, std::max(s.clock, u_end + m_step), kWaitPipe);
                (void)start;
                s.tile_products += e.c;
                cs.math_end.push(s.clock);
                wake(key(kMathed, s.core, 0), s.clock);
                break;
            }
            case Ev::PackOp:
                if (e.a != kNone)
                    advanced =
                        wait_for(cs.math_end.n > e.a ? cs.math_end.at(e.a) : -1, kWaitPipe, key(kMathed, s.core, 0));
                if (advanced) {
                    // The call's instructions (its cost beyond the data) issue on the pack thread; its PACRs hand
                    // the data to the packers, which move it at their L1 rate while the thread goes on: PACR blocks
                    // the thread only until the packers accept the work, and waiting for them to finish takes a
                    // STALLWAIT ([ISA] TensixCoprocessor/Packers/README.md), which tt-llk's _llk_pack_ does not
                    // issue between tiles (wormhole_b0 cpack_common.h program_packer_destination) but the DST
                    // release and the CB push do (llk_pack_common.h, llk_io_pack.h): so consecutive pack calls
                    // overlap one call's instructions with the previous one's data, and every other event on the
                    // pack thread waits for the packers (above). The packers take the next call's work once the
                    // previous one's is done.
                    // An L1 accumulation reads and writes each bank it touches (two bank-cycles per 128 bits).
                    const bool accumulate = e.aux & 1;
                    const double l1 = e.c / (accumulate ? c_.pack_l1_acc_bytes_per_cycle : c_.pack_bytes_per_cycle);
                    charge(s, e, e.cost - l1, kBusyCat);
                    finish_wait(s, e, std::max(s.clock, cs.packed), kWaitPipe);
                    const double t0 = s.clock;
                    cs.packed = t0 + fabric_.l1_stretch(s.core, kL1Pack, t0, l1);
                    s.engine_busy += cs.packed - t0;
                    fabric_.l1_use(s.core, kL1Pack, t0, cs.packed,
                                   e.c / c_.l1_bank_bytes_per_cycle * (accumulate ? 2 : 1));
                }
                break;
            case Ev::DstAcquire: {
                std::uint64_t k = e.a;
                double ready = k <= cs.dst_sections                   ? s.clock
                               : cs.releases.n >= k - cs.dst_sections ? cs.releases.at(k - cs.dst_sections - 1)
                                                                      : -1;
                advanced = wait_for(ready, kWaitPipe, key(kReleases, s.core, 0));
                break;
            }
            case Ev::DstCommit:
                cs.commits.push(s.clock);
                wake(key(kCommits, s.core, 0), s.clock);
                break;
            case Ev::DstWait:
                advanced =
                    wait_for(cs.commits.n >= e.a ? cs.commits.at(e.a - 1) : -1, kWaitPipe, key(kCommits, s.core, 0));
                break;
            case Ev::DstRelease:
                cs.releases.push(s.clock);
                wake(key(kReleases, s.core, 0), s.clock);
                break;
        }
        if (!advanced) return false;
        s.pc++;
        s.cost_paid = false;
        s.blocked = false;
        return true;
    }
};

std::mutex g_programs_mu;
std::vector<std::string> g_programs;
double g_device_cycles = 0, g_trisc1_cycles = 0;

}  // namespace

void simulate(const std::vector<KernelRun*>& runs, std::uint32_t program_index) {
    if (!enabled()) return;
    Engine engine(runs);
    engine.run();
    std::string j = engine.json(program_index);
    std::lock_guard<std::mutex> lk(g_programs_mu);
    g_device_cycles += engine.device_cycles();
    g_trisc1_cycles += engine.trisc1_cycles();
    g_programs.push_back(std::move(j));
}

std::string report_json() {
    if (!enabled()) return "null";
    const Costs& c = costs();
    std::lock_guard<std::mutex> lk(g_programs_mu);
    std::ostringstream o;
    o.precision(10);
    o << "{\"clock_ghz\": " << c.clock_ghz << ", \"timing_only\": " << (math_skipped() ? "true" : "false")
      << ", \"device_cycles\": " << g_device_cycles << ", \"trisc1_cycles\": " << g_trisc1_cycles
      << ", \"programs\": [";
    for (std::size_t i = 0; i < g_programs.size(); ++i) o << (i ? ",\n" : "\n") << g_programs[i];
    o << "]}";
    return o.str();
}

}  // namespace ttemu::timing
