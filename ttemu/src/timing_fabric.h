// What the cores of the timing model share (timing.h): the NoC fabric, the DRAM banks and every core's L1 banks.
//
// NoC: every NIU port (a core's or a DRAM bank's, per NoC and direction) and every router-to-router link (per NoC,
// router and axis) carries one flit (noc_bytes_per_cycle) per cycle. Routes are the hardware's: NoC 0 flows
// rightwards then downwards, NoC 1 upwards then leftwards, on a torus; a multicast follows its tree (along X to the
// rectangle, along Y down its first column, then along each of its rows). Routers cut through, so a transfer
// streams through all the resources of its route at once, each reached a fixed latency after the one before.
// Packets on one link with different virtual channel numbers are interleaved flit by flit, packets with the same one
// wait for each other ([ISA] NoC/RoutingPaths.md, Congestion), and a channel's class bits are fixed by the kind of
// packet: unicast requests (writes), broadcast requests (multicasts), responses (read data) ([ISA] NoC/README.md,
// Virtual channels). So each resource keeps a ledger of the bytes booked per time bin in one lane per class: a
// transfer moves, bin by bin, what every resource of its route still has room for, up to its own rate; where another
// class already holds the bin, the transfer gets its share of the link (link rate / the classes contending) and moves
// at that rate, and the earlier transfers lose the bytes it took: those are booked again after their last byte, where
// their route has room, and they complete that much later (delays(), which the engine applies to the barriers waiting
// for them). Within a class the earlier-booked transfer keeps the link (transfers of one class are not interleaved
// packet by packet: see ttemu/README.md).
//
// DRAM: each bank (channel) serves reads and writes in the order they reach it, at its bandwidth.
//
// L1: sixteen banks, each one 128-bit access per cycle ([ISA] L1.md). The NoC, the unpackers and the packers
// reach them through their own ports, so what they share is the banks: every client's accesses are booked in a
// ledger of bank-cycles per time bin, and the unpacker or packer runs slower by the share of bank-cycles the
// others use meanwhile (a conflicting access waits a cycle for the bank).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "timing.h"

namespace ttemu::timing {

struct XY {
    int x = 0, y = 0;
};

enum L1Client : int { kL1Noc = 0, kL1Unpack = 1, kL1Pack = 2, kL1Clients = 3 };
// The virtual channel classes of the NoC's packets ([ISA] NoC/README.md, Virtual channels): one ledger lane each.
enum NocClass : int { kNocRequest = 0, kNocBroadcast = 1, kNocResponse = 2, kNocClasses = 3 };

class Fabric {
public:
    Fabric(const Costs& costs, int grid_x, int grid_y);

    int cores() const { return grid_x_ * grid_y_; }
    XY core_xy(int core) const;
    XY endpoint_xy(std::uint32_t endpoint) const;  // a core index or kDramEndpoint | bank
    double latency(int noc, XY from, XY to) const;

    // A read by core `dst` of `bytes` at `src` (core or DRAM bank), issued at t: when the data is in dst's L1.
    double read(int noc, int dst, std::uint32_t src, double bytes, double t);
    // A write of `bytes` from core `src` to `dst` (core or DRAM bank), ready at t: {the time the data has left
    // src's L1, the time it is written at dst}.
    std::pair<double, double> write(int noc, int src, std::uint32_t dst, double bytes, double t);
    // A multicast of `bytes` from core `src` to the cores of `rect` (logical x0 | y0 << 8 | x1 << 16 | y1 << 24),
    // ready at t: returns the time the data has left src's L1 and adds (core, time written) to `arrivals`.
    double multicast(int noc, int src, std::uint32_t rect, bool include_self, double bytes, double t,
                     std::vector<std::pair<int, double>>& arrivals);
    // The cores of a rectangle (logical coordinates), row by row.
    template <typename F>
    void for_rect(std::uint32_t rect, bool include_self, int self, F&& f) const {
        int x0 = rect & 0xff, y0 = (rect >> 8) & 0xff, x1 = (rect >> 16) & 0xff, y1 = (rect >> 24) & 0xff;
        for (int y = y0; y <= y1; ++y)
            for (int x = x0; x <= x1; ++x) {
                int core = y * grid_x_ + x;
                if (core == self && !include_self) continue;
                f(core);
            }
    }

    // L1 bank ledger: `client` uses `bank_cycles` of core's banks spread over [t0, t1].
    void l1_use(int core, L1Client client, double t0, double t1, double bank_cycles);
    // How much longer an access stream of `client` that alone takes `cycles` from t takes beside the other
    // clients' bookings: cycles / (1 - their share of the bank-cycles), the share capped at 1/2.
    double l1_stretch(int core, L1Client client, double t, double cycles) const;

    // DRAM statistics per bank
    std::size_t banks() const { return bank_free_.size(); }
    double bank_read(std::size_t b) const { return bank_read_[b]; }
    double bank_written(std::size_t b) const { return bank_written_[b]; }
    double bank_busy(std::size_t b) const { return bank_busy_[b]; }
    double link_busy_max() const;  // the busiest link's busy cycles (report)

    // The id of the transfer the last read, write or multicast started (ids count up from 0), and the time its first
    // byte left its source.
    int last_transfer() const { return next_id_ - 1; }
    double last_start() const { return last_start_; }
    // Earlier transfers that later ones slowed down since the last call: (id, how much later they complete).
    std::vector<std::pair<int, double>>& delays() { return delays_; }

private:
    // Amounts booked per time bin, in a ring of bins (a booking older than the ring is forgotten).
    struct Ledger {
        static constexpr std::size_t kBins = 4096;
        static constexpr double kWidth = 64;
        std::size_t lanes = 1;
        std::vector<float> used;
        std::vector<std::int64_t> tag;
        std::vector<std::int32_t> who;  // NoC ledgers: per bin and lane the transfer that booked it last (-1: none)
        bool owners = false;
        float* at(std::int64_t bin);            // the lanes of `bin` (allocated and reset on first use)
        std::int32_t* owner(std::int64_t bin);  // the owners of `bin`'s lanes (after `at`)
        float get(std::int64_t bin, std::size_t lane) const;
    };
    struct Hop {
        Ledger* ledger;
        double offset;        // cycles after the transfer's head leaves the source NIU that it reaches this resource
        double weight = 1.0;  // link bytes a byte of the transfer occupies here (> 1: its flits are paced downstream)
    };

    // A transfer that later ones may still slow down: its route, class, rate and when its last byte leaves the source.
    struct Live {
        std::vector<Hop> hops;
        std::vector<std::int64_t> shift;
        int cls;
        double rate, last, path, floor;  // done = max(last + path, floor)
    };

    const Costs& c_;
    int grid_x_, grid_y_, noc_w_, noc_h_;
    std::vector<Ledger> ports_[2][2];  // [noc][0 inject, 1 eject][core, then DRAM banks]: bytes per bin
    std::vector<Ledger> links_[2];     // [noc][(y * noc_w + x) * 2 + axis]: bytes per bin
    std::vector<double> link_busy_[2];
    std::vector<double> bank_free_, bank_read_, bank_written_, bank_busy_;
    std::vector<double> write_out_[2];  // per NoC and core: when its last write's last byte left its NIU
    std::vector<Ledger> l1_;            // per core: bank-cycles per bin and client
    std::vector<Hop> hops_;             // scratch route
    std::vector<std::int64_t> shift_;
    std::int32_t next_id_ = 0;
    double last_start_ = 0;
    std::unordered_map<std::int32_t, Live> live_;
    std::size_t prune_at_ = 4096;
    std::unordered_map<std::int64_t, double> taken_;  // scratch: (victim id, hop) -> bytes a transfer took from it
    std::vector<std::pair<int, double>> delays_;

    std::size_t bank_of(std::uint32_t endpoint) const;
    Ledger* port(int noc, int dir, std::uint32_t endpoint);
    double link_rate() const { return c_.noc_bytes_per_cycle; }
    double dram_rate() const { return c_.dram_bytes_per_cycle(); }
    // Appends the links of the unicast route from `a` to `b` (hop offsets after `first`): returns the hop count.
    int route(int noc, XY a, XY b, double first);
    void link(int noc, int x, int y, int axis, double offset);
    // Streams `bytes` of class `cls` through hops_ at up to `rate` from t as a new transfer: returns {first byte out
    // of the source, last byte out}. `path` and `floor` give its completion (max(last + path, floor)) for delays().
    std::pair<double, double> stream(double t, double bytes, double rate, int cls, double path, double floor);
    // Moves transfer `id`'s last `bytes` after its last byte, into the room its route has there: it completes later
    // (recorded in delays_).
    void slow_down(std::int32_t id, double bytes);
    void book_l1(int core, double t0, double t1, double bytes);
};

}  // namespace ttemu::timing
