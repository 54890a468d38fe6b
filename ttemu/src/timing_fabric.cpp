// The shared resources of the timing model: NoC ports and links, DRAM banks, L1 banks (timing_fabric.h).
#include "timing_fabric.h"

#include <algorithm>
#include <cmath>

namespace ttemu::timing {

float* Fabric::Ledger::at(std::int64_t bin) {
    if (used.empty()) {
        used.assign(kBins * lanes, 0.0f);
        tag.assign(kBins, -1);
    }
    std::size_t slot = static_cast<std::size_t>(bin % static_cast<std::int64_t>(kBins));
    float* lane = &used[slot * lanes];
    if (tag[slot] != bin) {
        tag[slot] = bin;
        std::fill_n(lane, lanes, 0.0f);
    }
    return lane;
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
    for (auto& noc : ports_)
        for (auto& dir : noc) dir.resize(endpoints);
    for (int n = 0; n < 2; ++n) {
        links_[n].resize(static_cast<std::size_t>(noc_w_ * noc_h_ * 2));
        link_busy_[n].assign(links_[n].size(), 0.0);
    }
    bank_free_.assign(banks, 0.0);
    bank_read_.assign(banks, 0.0);
    bank_written_.assign(banks, 0.0);
    bank_busy_.assign(banks, 0.0);
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

std::pair<double, double> Fabric::stream(double t, double bytes, double rate) {
    const double width = Ledger::kWidth, capacity = link_rate() * width;
    // each resource's bins are the source's, shifted by its offset (rounded to whole bins)
    std::vector<std::int64_t>& shift = shift_;
    shift.resize(hops_.size());
    for (std::size_t i = 0; i < hops_.size(); ++i) shift[i] = std::llround(hops_[i].offset / width);
    double remaining = bytes, first = -1, last = t;
    std::int64_t bin = static_cast<std::int64_t>(t / width);
    double from = t;  // the part of the current bin left to the transfer
    for (int guard = 0; remaining > 1e-9 && guard < 1 << 20; ++guard, ++bin) {
        double bin_end = (bin + 1) * width;
        double room = rate * (bin_end - from);
        for (std::size_t i = 0; i < hops_.size() && room > 0; ++i)
            room = std::min(room, capacity - hops_[i].ledger->get(bin + shift[i], 0));
        if (room > 1e-9) {
            double moved = std::min(room, remaining);
            for (std::size_t i = 0; i < hops_.size(); ++i)
                hops_[i].ledger->at(bin + shift[i])[0] += static_cast<float>(moved);
            if (first < 0) first = from;
            remaining -= moved;
            // within the bin the transfer moves at its rate, from the bin's share left to it
            last = remaining > 1e-9 ? bin_end : from + moved / rate;
        }
        from = bin_end;
    }
    if (first < 0) first = t;
    return {first, std::max(last, first + bytes / rate)};
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
    auto [first, last] = stream(head, bytes, link_rate());
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
    auto [first, last] = stream(t, bytes, link_rate());
    for (std::size_t i = 1; i + 1 < hops_.size(); ++i)
        link_busy_[noc][static_cast<std::size_t>(hops_[i].ledger - links_[noc].data())] += bytes / link_rate();
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
    auto [start, end] = stream(t, bytes, rate);
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
