#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>
#include "tt-metalium/mesh_buffer.hpp"
#include "tt-metalium/mesh_command_queue.hpp"
#include "tt-metalium/mesh_device.hpp"
#include "tt-metalium/mesh_workload.hpp"

namespace tt::tt_metal::distributed {
namespace detail {
void write_buffer(MeshCommandQueue& cq, const MeshBuffer& buffer, const void* src, std::size_t bytes);
std::size_t buffer_bytes(const MeshBuffer& buffer);
void read_buffer(MeshCommandQueue& cq, void* dst, const MeshBuffer& buffer, std::size_t bytes);
}  // namespace detail

template <typename DType>
void EnqueueWriteMeshBuffer(MeshCommandQueue& mesh_cq, const std::shared_ptr<MeshBuffer>& mesh_buffer,
                            const std::vector<DType>& src, bool blocking = false) {
    static_assert(std::is_trivially_copyable_v<DType>);
    detail::write_buffer(mesh_cq, *mesh_buffer, src.data(), src.size() * sizeof(DType));
}
template <typename DType>
void EnqueueReadMeshBuffer(MeshCommandQueue& mesh_cq, std::vector<DType>& dst,
                           const std::shared_ptr<MeshBuffer>& mesh_buffer, bool blocking = true) {
    static_assert(std::is_trivially_copyable_v<DType>);
    dst.resize(detail::buffer_bytes(*mesh_buffer) / sizeof(DType));
    detail::read_buffer(mesh_cq, dst.data(), *mesh_buffer, dst.size() * sizeof(DType));
}
void EnqueueMeshWorkload(MeshCommandQueue& mesh_cq, MeshWorkload& mesh_workload, bool blocking);
void Finish(MeshCommandQueue& mesh_cq);
}  // namespace tt::tt_metal::distributed
