#pragma once
#include <cstdint>
#include <memory>
#include <vector>
#include "tt-metalium/mesh_buffer.hpp"

namespace tt::tt_metal {
namespace tensor_accessor {
enum class ArgConfig : std::uint8_t {
    None = 0,
    Sharded = 1,
    IsDram = 2,
    RuntimeRank = 4,
    RuntimeNumBanks = 8,
    RuntimeTensorShape = 16,
    RuntimeShardShape = 32,
    RuntimeBankCoords = 64,
    RuntimePageSize = 128
};
}
// CT args: [config_word, aligned_page_size] for an interleaved buffer; a sharded one adds tt-metal's layout (rank,
// num_banks, tensor shape, shard shape in pages, bank coordinates two per word): its accessor compiles, but page
// addressing through it is not emulated.
class TensorAccessorArgs {
public:
    TensorAccessorArgs() = default;
    explicit TensorAccessorArgs(const distributed::MeshBuffer& buffer,
                                tensor_accessor::ArgConfig config = tensor_accessor::ArgConfig::None);
    explicit TensorAccessorArgs(const std::shared_ptr<distributed::MeshBuffer>& buffer,
                                tensor_accessor::ArgConfig config = tensor_accessor::ArgConfig::None)
        : TensorAccessorArgs(*buffer, config) {}
    explicit TensorAccessorArgs(const distributed::MeshBuffer* buffer,
                                tensor_accessor::ArgConfig config = tensor_accessor::ArgConfig::None)
        : TensorAccessorArgs(*buffer, config) {}
    void append_to(std::vector<std::uint32_t>& compile_time_args) const {
        compile_time_args.push_back(config_word_);
        compile_time_args.push_back(aligned_page_size_);
        compile_time_args.insert(compile_time_args.end(), shard_args_.begin(), shard_args_.end());
    }
    void append_to(std::vector<std::uint32_t>& compile_time_args,
                   std::vector<std::uint32_t>& common_runtime_args) const {
        append_to(compile_time_args);
    }
    std::vector<std::uint32_t> get_compile_time_args() const {
        std::vector<std::uint32_t> v;
        append_to(v);
        return v;
    }
    static TensorAccessorArgs create_dram_interleaved() {
        TensorAccessorArgs a;
        a.config_word_ = static_cast<std::uint32_t>(tensor_accessor::ArgConfig::IsDram);
        return a;
    }

private:
    std::uint32_t config_word_ = 0;
    std::uint32_t aligned_page_size_ = 0;
    std::vector<std::uint32_t> shard_args_;
};
}  // namespace tt::tt_metal
