// The shared resources of the timing model: NoC ports and links, DRAM banks, L1 banks (timing_fabric.h).
#include "timing_fabric.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace ttemu::timing {

float* Fabric::Ledger::at(std::int64_t bin) {
    if (used.empty()) {
        used.assign(kBins * lanes, 0.0f);
        tag.assign(kBins, -1);
        if (owners) who.assign(kBins * lanes, -1);
    }
    std::size_t slot = static_cast<std::size_t>(bin % static_cast<std::int64_t>(kBins));
    float* lane = &used[slot * lanes];
    if (tag[slot] != bin) {
        tag[slot] = bin;
        std::fill_n(lane, lanes, 0.0f);
        if (owners) std::fill_n(&who[slot * lanes], lanes, -1);
    }
    return lane;
}

std::int32_t* Fabric::Ledger::owner(std::int64_t bin) {
    std::size_t slot = static_cast<std::size_t>(bin % static_cast<std::int64_t>(kBins));
    return &who[slot * lanes];
}

float Fabric::Ledger::get(std::int64_t bin, std::size_t lane) const {
    if (used.empty() || bin < 0) return 0.0f;
    std::size_t slot = static_cast<std::size_t>(bin % static_cast<std::int64_t>(kBins));
    return tag[slot] == bin ? used[slot * lanes + lane] : 0.0f;
}

Fabric::Fabric(const Costs& costs, int grid_x, int grid_y)
    : c_(costs),
      grid_x_(grid_x),
      grid_y_(grid_y),
      noc_w_(std::max(1, static_cast<int>(costs.noc_grid.empty() ? grid_x + 2 : costs.noc_grid[0]))),
      noc_h_(std::max(1, static_cast<int>(costs.noc_grid.size() < 2 ? grid_y + 2 : costs.noc_grid[1]))) {
    const std::size_t banks = static_cast<std::size_t>(std::max(1.0, costs.dram_banks));
    const std::size_t endpoints = static_cast<std::size_t>(cores()) + banks;
    auto noc_ledgers = [](std::vector<Ledger>& v, std::size_t n) {
        v.resize(n);
        for (Ledger& l : v) {
            l.lanes = kNocClasses;
            l.owners = true;
        }
    };
    for (auto& noc : ports_)
        for (auto& dir : noc) noc_ledgers(dir, endpoints);
    for (int n = 0; n < 2; ++n) {
        noc_ledgers(links_[n], static_cast<std::size_t>(noc_w_ * noc_h_ * 2));
        link_busy_[n].assign(links_[n].size(), 0.0);
    }
    bank_free_.assign(banks, 0.0);
    bank_read_.assign(banks, 0.0);
    bank_written_.assign(banks, 0.0);
    bank_busy_.assign(banks, 0.0);
    for (auto& w : write_out_) w.assign(static_cast<std::size_t>(cores()), 0.0);
    l1_.resize(static_cast<std::size_t>(cores()));
    for (Ledger& l : l1_) l.lanes = kL1Clients;
}

XY Fabric::core_xy(int core) const {
    int x = core % grid_x_, y = core / grid_x_;
    auto pick = [](const std::vector<double>& v, int i) {
        return v.empty() ? i : static_cast<int>(v[std::min<std::size_t>(static_cast<std::size_t>(i), v.size() - 1)]);
    };
    return {pick(c_.worker_noc_x, x), pick(c_.worker_noc_y, y)};
}

std::size_t Fabric::bank_of(std::uint32_t endpoint) const {
    return std::min<std::size_t>(endpoint & 0xffff, bank_free_.size() - 1);
}

XY Fabric::endpoint_xy(std::uint32_t endpoint) const {
    if (endpoint & kDramEndpoint) {
        std::size_t b = bank_of(endpoint);
        if (c_.dram_noc_xy.size() < 2 * (b + 1)) return {0, 0};
        return {static_cast<int>(c_.dram_noc_xy[2 * b]), static_cast<int>(c_.dram_noc_xy[2 * b + 1])};
    }
    return core_xy(static_cast<int>(endpoint));
}

double Fabric::latency(int noc, XY from, XY to) const {
    int dx = noc == 0 ? to.x - from.x : from.x - to.x;
    int dy = noc == 0 ? to.y - from.y : from.y - to.y;
    dx = ((dx % noc_w_) + noc_w_) % noc_w_;
    dy = ((dy % noc_h_) + noc_h_) % noc_h_;
    return 2 * c_.noc_niu_cycles + (dx + dy) * c_.noc_hop_cycles;
}

Fabric::Ledger* Fabric::port(int noc, int dir, std::uint32_t endpoint) {
    auto& ports = ports_[noc & 1][dir];
    std::size_t i = endpoint & kDramEndpoint ? static_cast<std::size_t>(cores()) + bank_of(endpoint) : endpoint;
    return &ports[std::min(i, ports.size() - 1)];
}

void Fabric::link(int noc, int x, int y, int axis, double offset) {
    std::size_t i = static_cast<std::size_t>((y * noc_w_ + x) * 2 + axis);
    hops_.push_back(Hop{&links_[noc][i], offset});
}

int Fabric::route(int noc, XY a, XY b, double first) {
    int hops = 0;
    const double hop = c_.noc_hop_cycles;
    if (noc == 0) {  // rightwards, then downwards
        for (int x = a.x; x != b.x; x = (x + 1) % noc_w_) link(0, x, a.y, 0, first + hop * hops++);
        for (int y = a.y; y != b.y; y = (y + 1) % noc_h_) link(0, b.x, y, 1, first + hop * hops++);
    } else {  // upwards, then leftwards
        for (int y = a.y; y != b.y; y = (y - 1 + noc_h_) % noc_h_) link(1, a.x, y, 1, first + hop * hops++);
        for (int x = a.x; x != b.x; x = (x - 1 + noc_w_) % noc_w_) link(1, x, b.y, 0, first + hop * hops++);
    }
    return hops;
}

std::pair<double, double> Fabric::stream(double t, double bytes, double rate, int cls, double path, double floor) {
    const double width = Ledger::kWidth, capacity = link_rate() * width, eps = 1e-6;
    const std::int32_t id = next_id_++;
    // each resource's bins are the source's, shifted by its offset (rounded to whole bins)
    std::vector<std::int64_t>& shift = shift_;
    shift.resize(hops_.size());
    for (std::size_t i = 0; i < hops_.size(); ++i) shift[i] = std::llround(hops_[i].offset / width);
    taken_.clear();
    double remaining = bytes, first = -1, last = t;
    std::int64_t bin = static_cast<std::int64_t>(t / width);
    double from = t;  // the part of the current bin left to the transfer
    for (int guard = 0; remaining > 1e-9 && guard < 1 << 20; ++guard, ++bin) {
        const double bin_end = (bin + 1) * width, span = bin_end - from;
        double room = rate * span, in_bin_rate = rate;
        for (std::size_t i = 0; i < hops_.size() && room > 0; ++i) {
            const Ledger& l = *hops_[i].ledger;
            double total = 0;
            int contenders = 0;
            for (int k = 0; k < kNocClasses; ++k) {
                const double u = l.get(bin + shift[i], static_cast<std::size_t>(k));
                total += u;
                if (u > eps && k != cls) ++contenders;
            }
            const double w = hops_[i].weight;
            double hop_room = capacity - total;
            if (contenders > 0) {  // the link's flits are shared with the other classes' packets in this bin
                const double fair = link_rate() / (contenders + 1);
                const double own = l.get(bin + shift[i], static_cast<std::size_t>(cls));
                if (fair * span - own > hop_room) {
                    hop_room = fair * span - own;
                    in_bin_rate = std::min(in_bin_rate, fair / w);
                }
            }
            room = std::min(room, hop_room / w);
        }
        if (room > 1e-9) {
            double moved = std::min(room, remaining);
            for (std::size_t i = 0; i < hops_.size(); ++i) {
                float* u = hops_[i].ledger->at(bin + shift[i]);
                std::int32_t* who = hops_[i].ledger->owner(bin + shift[i]);
                double total = 0, pool = 0;
                for (int k = 0; k < kNocClasses; ++k) {
                    total += u[k];
                    if (k != cls) pool += u[k];
                }
                const double booked = moved * hops_[i].weight;
                const double take = booked - std::max(0.0, capacity - total);
                if (take > eps && pool > eps) {  // the bytes this transfer takes from the earlier ones' share
                    for (int k = 0; k < kNocClasses; ++k) {
                        if (k == cls || u[k] <= eps) continue;
                        const double part = std::min<double>(u[k], take * u[k] / pool);
                        u[k] -= static_cast<float>(part);
                        if (who[k] >= 0 && who[k] != id)
                            taken_[(static_cast<std::int64_t>(who[k]) << 16) | static_cast<std::int64_t>(i)] += part;
                    }
                }
                u[cls] += static_cast<float>(booked);
                who[cls] = id;
            }
            if (first < 0) first = from;
            remaining -= moved;
            // within the bin the transfer moves at its rate (its share of the link where it is contended)
            last = remaining > 1e-9 ? bin_end : from + moved / in_bin_rate;
        }
        from = bin_end;
    }
    if (first < 0) first = t;
    last = std::max(last, first + bytes / rate);
    last_start_ = first;
    // the earlier transfers lose, at the hop where they lost most, what this one took: they end that much later
    std::map<std::int32_t, double> lost;  // ordered: the re-bookings happen in one order, run after run
    for (const auto& [key, part] : taken_) {
        double& m = lost[static_cast<std::int32_t>(key >> 16)];
        m = std::max(m, part);
    }
    for (const auto& [victim, lost_bytes] : lost) slow_down(victim, lost_bytes);
    // forget transfers that can no longer be overtaken (their last bin is well behind this one's first)
    if (live_.size() > prune_at_) {
        for (auto it = live_.begin(); it != live_.end();)
            it = it->second.last + 16 * width < t ? live_.erase(it) : std::next(it);
        prune_at_ = std::max<std::size_t>(4096, 2 * live_.size());
    }
    live_[id] = Live{hops_, shift, cls, rate, last, path, floor};
    return {first, last};
}

void Fabric::slow_down(std::int32_t id, double bytes) {
    auto it = live_.find(id);
    if (it == live_.end() || bytes <= 0) return;
    Live& v = it->second;
    const double width = Ledger::kWidth, capacity = link_rate() * width;
    // its lost bytes go through its route after its last byte, at its rate, where every resource has room
    double left = bytes, from = v.last, last = v.last;
    for (std::int64_t bin = static_cast<std::int64_t>(v.last / width), guard = 0; left > 1e-9 && guard < 1 << 20;
         ++bin, ++guard) {
        const double bin_end = (bin + 1) * width;
        double room = v.rate * (bin_end - from);
        for (std::size_t i = 0; i < v.hops.size() && room > 0; ++i) {
            double total = 0;
            for (int k = 0; k < kNocClasses; ++k)
                total += v.hops[i].ledger->get(bin + v.shift[i], static_cast<std::size_t>(k));
            room = std::min(room, (capacity - total) / v.hops[i].weight);
        }
        if (room > 1e-9) {
            const double part = std::min(left, room);
            for (std::size_t i = 0; i < v.hops.size(); ++i) {
                v.hops[i].ledger->at(bin + v.shift[i])[v.cls] += static_cast<float>(part * v.hops[i].weight);
                v.hops[i].ledger->owner(bin + v.shift[i])[v.cls] = id;
            }
            left -= part;
            last = left > 1e-9 ? bin_end : from + part / v.rate;
        }
        from = bin_end;
    }
    const double before = std::max(v.last + v.path, v.floor);
    v.last = std::max(last, v.last + bytes / v.rate);
    const double after = std::max(v.last + v.path, v.floor);
    if (after > before) delays_.push_back({id, after - before});
}

double Fabric::read(int noc, int dst, std::uint32_t src, double bytes, double t) {
    noc &= 1;
    const XY me = core_xy(dst), from = endpoint_xy(src);
    const double request = latency(noc, me, from);  // the request packet: a header flit, latency only
    const double path = latency(noc, from, me);
    double head = t + request, floor = 0;
    if (src & kDramEndpoint) {
        std::size_t b = bank_of(src);
        double start = std::max(head, bank_free_[b]);
        double service = bytes / dram_rate();
        bank_free_[b] = start + service;
        bank_busy_[b] += service;
        bank_read_[b] += bytes;
        head = start + c_.dram_latency_cycles;
        floor = start + service + c_.dram_latency_cycles + path;  // the bank delivers no faster than its rate
    }
    hops_.clear();
    hops_.push_back(Hop{port(noc, 0, src), 0});
    int n = route(noc, from, me, c_.noc_niu_cycles);
    hops_.push_back(Hop{port(noc, 1, static_cast<std::uint32_t>(dst)), c_.noc_niu_cycles + n * c_.noc_hop_cycles});
    // the data comes back as a response packet (class 0b11)
    auto [first, last] = stream(head, bytes, link_rate(), kNocResponse, path, floor);
    for (std::size_t i = 1; i + 1 < hops_.size(); ++i)
        link_busy_[noc][static_cast<std::size_t>(hops_[i].ledger - links_[noc].data())] += bytes / link_rate();
    double done = std::max(last + path, floor);
    if (!(src & kDramEndpoint)) book_l1(static_cast<int>(src), first, last, bytes);
    book_l1(dst, first + path, done, bytes);
    return done;
}

std::pair<double, double> Fabric::write(int noc, int src, std::uint32_t dst, double bytes, double t) {
    noc &= 1;
    const XY me = core_xy(src), to = endpoint_xy(dst);
    const double path = latency(noc, me, to);
    hops_.clear();
    hops_.push_back(Hop{port(noc, 0, static_cast<std::uint32_t>(src)), 0});
    int n = route(noc, me, to, c_.noc_niu_cycles);
    hops_.push_back(Hop{port(noc, 1, dst), c_.noc_niu_cycles + n * c_.noc_hop_cycles});
    // A write into a DRAM bank that is still ingesting earlier writes when this one's data would reach it: data
    // leaves L1 at the link rate but the bank ingests it at its own (lower) rate, so the packet's flits fill the
    // router buffers along its route and cross every hop after the source NIU at the bank's pace, the links they sit
    // on unavailable to other packets meanwhile ([ISA] DRAMTile/README.md, Performance: "software can easily fill up
    // all the buffers in all the NoC routers along the path"). Such a write books link_rate / dram_rate link bytes a
    // byte on those hops. Without a backlog (a bank that has drained) the packet lands in the bank at the link rate.
    // The data's first byte leaves once the core's earlier writes on this NoC have (they share its NIU's port).
    double rate = link_rate();
    double& out = write_out_[noc][static_cast<std::size_t>(src)];
    if ((dst & kDramEndpoint) && bank_free_[bank_of(dst)] > std::max(t, out) + path && dram_rate() < rate) {
        rate = dram_rate();
        for (std::size_t i = 1; i < hops_.size(); ++i) hops_[i].weight = link_rate() / rate;
    }
    auto [first, last] = stream(t, bytes, rate, kNocRequest, path, 0);
    out = std::max(out, last);
    for (std::size_t i = 1; i + 1 < hops_.size(); ++i)
        link_busy_[noc][static_cast<std::size_t>(hops_[i].ledger - links_[noc].data())] +=
            bytes * hops_[i].weight / link_rate();
    double arrived = last + path, done = arrived;
    if (dst & kDramEndpoint) {
        std::size_t b = bank_of(dst);
        double service = bytes / dram_rate();
        double begin = std::max(first + path, bank_free_[b]);
        done = std::max(begin + service, arrived);
        bank_free_[b] = done;
        bank_busy_[b] += service;
        bank_written_[b] += bytes;
    } else {
        book_l1(static_cast<int>(dst), first + path, arrived, bytes);
    }
    book_l1(src, first, last, bytes);
    return {last, done};
}

double Fabric::multicast(int noc, int src, std::uint32_t rect, bool include_self, double bytes, double t,
                         std::vector<std::pair<int, double>>& arrivals) {
    noc &= 1;
    const double rate = std::min(c_.noc_mcast_bytes_per_cycle, link_rate());
    const double hop = c_.noc_hop_cycles, niu = c_.noc_niu_cycles;
    const int x0 = rect & 0xff, y0 = (rect >> 8) & 0xff, x1 = (rect >> 16) & 0xff, y1 = (rect >> 24) & 0xff;
    // the tree starts at the rectangle's first corner in the NoC's direction of flow
    const XY lo = core_xy(y0 * grid_x_ + x0), hi = core_xy(y1 * grid_x_ + x1);
    const XY first = noc == 0 ? lo : hi, last = noc == 0 ? hi : lo;
    const int step = noc == 0 ? 1 : -1;
    auto step_x = [&](int x) { return ((x + step) % noc_w_ + noc_w_) % noc_w_; };
    auto step_y = [&](int y) { return ((y + step) % noc_h_ + noc_h_) % noc_h_; };
    const XY me = core_xy(src);
    hops_.clear();
    hops_.push_back(Hop{port(noc, 0, static_cast<std::uint32_t>(src)), 0});
    int dist = 0;
    for (int x = me.x; x != first.x; x = step_x(x)) link(noc, x, me.y, 0, niu + hop * dist++);  // along X
    // along Y down the first column until every row of the rectangle is reached, remembering how far each is
    std::vector<int> rows;
    for (int ly = y0; ly <= y1; ++ly) rows.push_back(core_xy(ly * grid_x_ + x0).y);
    std::vector<std::pair<int, int>> row_dist;  // (noc y, hops from the source to (first.x, y))
    std::size_t reached = 0;
    for (int y = me.y, steps = 0; steps < noc_h_; y = step_y(y), ++steps) {
        row_dist.push_back({y, dist});
        if (std::find(rows.begin(), rows.end(), y) != rows.end() && ++reached == rows.size()) break;
        link(noc, first.x, y, 1, niu + hop * dist++);
    }
    std::vector<std::pair<int, double>> dests;  // (core, offset of its ejection)
    for (int ly = y0; ly <= y1; ++ly) {
        const int ny = core_xy(ly * grid_x_ + x0).y;
        auto it = std::find_if(row_dist.begin(), row_dist.end(), [&](const auto& r) { return r.first == ny; });
        if (it == row_dist.end()) continue;
        int d = it->second;
        for (int x = first.x; x != last.x; x = step_x(x)) link(noc, x, ny, 0, niu + hop * d++);  // along the row
        for (int lx = x0; lx <= x1; ++lx) {
            int core = ly * grid_x_ + lx;
            if (core == src) continue;
            const XY cxy = core_xy(core);
            int along = ((cxy.x - first.x) * step % noc_w_ + noc_w_) % noc_w_;
            double offset = niu + hop * (it->second + along);
            dests.push_back({core, offset});
            hops_.push_back(Hop{port(noc, 1, static_cast<std::uint32_t>(core)), offset});
        }
    }
    // NOC_CMD_PATH_RESERVE (tt-metal's default for multicasts): every router of the tree reports ready to the
    // initiator before any data leaves it ([ISA] NoC/README.md, Performance): a round trip to the farthest receiver
    double farthest = 0;
    for (const auto& d : dests) farthest = std::max(farthest, d.second + niu);
    auto [start, end] = stream(t + 2 * farthest, bytes, rate, kNocBroadcast, 0, 0);
    for (const Hop& h : hops_)
        if (h.ledger >= links_[noc].data() && h.ledger < links_[noc].data() + links_[noc].size())
            link_busy_[noc][static_cast<std::size_t>(h.ledger - links_[noc].data())] += bytes / link_rate();
    for (const auto& [core, offset] : dests) {
        double arrived = end + offset + niu;
        book_l1(core, start + offset + niu, arrived, bytes);
        arrivals.push_back({core, arrived});
    }
    if (include_self) arrivals.push_back({src, end});
    book_l1(src, start, end, bytes * (include_self ? 2 : 1));
    return end;
}

double Fabric::link_busy_max() const {
    double m = 0;
    for (const auto& noc : link_busy_)
        for (double b : noc) m = std::max(m, b);
    return m;
}

// ---- L1 bank ledger
void Fabric::book_l1(int core, double t0, double t1, double bytes) {
    l1_use(core, kL1Noc, t0, t1, bytes / c_.l1_bank_bytes_per_cycle);
}

void Fabric::l1_use(int core, L1Client client, double t0, double t1, double bank_cycles) {
    if (core < 0 || core >= cores() || bank_cycles <= 0) return;
    Ledger& l = l1_[static_cast<std::size_t>(core)];
    if (t1 <= t0) t1 = t0 + 1;
    const double per_cycle = bank_cycles / (t1 - t0);
    auto b0 = static_cast<std::int64_t>(t0 / Ledger::kWidth), b1 = static_cast<std::int64_t>(t1 / Ledger::kWidth);
    for (std::int64_t b = b0; b <= b1; ++b) {
        double lo = std::max(t0, b * Ledger::kWidth), hi = std::min(t1, (b + 1) * Ledger::kWidth);
        if (hi > lo) l.at(b)[client] += static_cast<float>(per_cycle * (hi - lo));
    }
}

double Fabric::l1_stretch(int core, L1Client client, double t, double cycles) const {
    if (core < 0 || core >= cores() || cycles <= 0) return cycles;
    const Ledger& l = l1_[static_cast<std::size_t>(core)];
    const double t1 = t + cycles;
    double others = 0;
    auto b0 = static_cast<std::int64_t>(t / Ledger::kWidth), b1 = static_cast<std::int64_t>(t1 / Ledger::kWidth);
    for (std::int64_t b = b0; b <= b1; ++b) {
        double lo = std::max(t, b * Ledger::kWidth), hi = std::min(t1, (b + 1) * Ledger::kWidth);
        if (hi <= lo) continue;
        double in_bin = 0;
        for (int c = 0; c < kL1Clients; ++c)
            if (c != client) in_bin += l.get(b, static_cast<std::size_t>(c));
        others += in_bin * (hi - lo) / Ledger::kWidth;
    }
    double share = std::min(0.5, others / (c_.l1_banks * cycles));
    return cycles / (1.0 - share);
}

}  // namespace ttemu::timing
