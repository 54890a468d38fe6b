#pragma once
#include <cstddef>
#include <set>
#include <string>
#include <vector>
#include <algorithm>

struct CoreCoord {
    std::size_t x = 0;
    std::size_t y = 0;
    constexpr CoreCoord() = default;
    constexpr CoreCoord(std::size_t x_, std::size_t y_) : x(x_), y(y_) {}
    std::string str() const { return "(x=" + std::to_string(x) + ",y=" + std::to_string(y) + ")"; }
    friend constexpr bool operator==(const CoreCoord& a, const CoreCoord& b) { return a.x == b.x && a.y == b.y; }
    friend constexpr bool operator!=(const CoreCoord& a, const CoreCoord& b) { return !(a == b); }
    friend constexpr bool operator<(const CoreCoord& a, const CoreCoord& b) {
        return a.y < b.y || (a.y == b.y && a.x < b.x);
    }
};

struct CoreRange {
    CoreCoord start_coord;
    CoreCoord end_coord;
    CoreRange(const CoreCoord& point) : start_coord(point), end_coord(point) {}
    CoreRange(const CoreCoord& start, const CoreCoord& end);  // inclusive; start <= end per axis
    bool contains(const CoreCoord& c) const {
        return c.x >= start_coord.x && c.x <= end_coord.x && c.y >= start_coord.y && c.y <= end_coord.y;
    }
    std::size_t size() const { return (end_coord.x - start_coord.x + 1) * (end_coord.y - start_coord.y + 1); }
    CoreCoord grid_size() const { return {end_coord.x - start_coord.x + 1, end_coord.y - start_coord.y + 1}; }
    std::string str() const { return "[" + start_coord.str() + " - " + end_coord.str() + "]"; }
    friend bool operator==(const CoreRange& a, const CoreRange& b) {
        return a.start_coord == b.start_coord && a.end_coord == b.end_coord;
    }
    friend bool operator<(const CoreRange& a, const CoreRange& b) {
        return a.start_coord < b.start_coord || (a.start_coord == b.start_coord && a.end_coord < b.end_coord);
    }
};

class CoreRangeSet {
public:
    CoreRangeSet() = default;
    CoreRangeSet(const CoreRange& r) : ranges_{r} {}
    CoreRangeSet(const std::set<CoreRange>& rs) : ranges_(rs.begin(), rs.end()) {}
    CoreRangeSet(const std::vector<CoreRange>& rs) : ranges_(rs) {}
    const std::vector<CoreRange>& ranges() const { return ranges_; }
    std::size_t num_cores() const {
        std::size_t n = 0;
        for (const auto& r : ranges_) n += r.size();
        return n;
    }
    bool contains(const CoreCoord& c) const {
        return std::any_of(ranges_.begin(), ranges_.end(), [&](const CoreRange& r) { return r.contains(c); });
    }
    bool empty() const { return ranges_.empty(); }
    CoreRangeSet merge(const CoreRangeSet& other) const {
        std::vector<CoreRange> all = ranges_;
        all.insert(all.end(), other.ranges_.begin(), other.ranges_.end());
        return CoreRangeSet(all);
    }

private:
    std::vector<CoreRange> ranges_;
};

namespace tt::tt_metal {
using ::CoreCoord;
using ::CoreRange;
using ::CoreRangeSet;
}  // namespace tt::tt_metal
