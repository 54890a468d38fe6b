#pragma once
#include <utility>
#include <vector>
#include "tt-metalium/mesh_device.hpp"
#include "tt-metalium/program.hpp"

namespace tt::tt_metal::distributed {
class MeshCoordinate {
public:
    MeshCoordinate(std::uint32_t r = 0, std::uint32_t c = 0) : r_(r), c_(c) {}

private:
    std::uint32_t r_, c_;
};
class MeshCoordinateRange {
public:
    explicit MeshCoordinateRange(const MeshShape& shape) : shape_(shape) {}
    MeshCoordinateRange(const MeshCoordinate& start, const MeshCoordinate& end) {}
    const MeshShape& shape() const { return shape_; }

private:
    MeshShape shape_;
};
class MeshWorkload {
public:
    MeshWorkload() = default;
    void add_program(const MeshCoordinateRange& device_range, Program&& program) {
        programs_.push_back(std::move(program));
    }
    std::vector<Program>& ttemu_programs() { return programs_; }

private:
    std::vector<Program> programs_;
};
}  // namespace tt::tt_metal::distributed
