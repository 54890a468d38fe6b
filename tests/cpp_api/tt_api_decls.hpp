// Declarations (no definitions) of the TT-Metalium 0.81.1 API subset that tilefarm's generated code uses,
// signatures as in the 0.81.1 headers. Used only to `g++ -fsyntax-only` generated kernels and host programs;
// the emulator (compiler/toolchain/emulator) provides working implementations under the same include paths.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#ifndef TT_API_HOST
// ---------------------------------------------------------------- device side
namespace tt { enum CBIndex : std::uint8_t { c_0, c_1, c_2, c_3, c_4, c_5, c_6, c_7, c_8, c_9, c_10, c_11, c_12, c_13, c_14, c_15,
    c_16, c_17, c_18, c_19, c_20, c_21, c_22, c_23, c_24, c_25, c_26, c_27, c_28, c_29, c_30, c_31 }; }
enum class DataFormat : std::uint8_t { Float32 = 0, Float16 = 1, Float16_b = 5, Bfp8_b = 6 };
enum class SrcOrder { Regular, Reverse };
enum class VectorMode { R, C, RC };
#ifndef KERNEL_COMPILE_TIME_ARGS
#define KERNEL_COMPILE_TIME_ARGS 0
#endif
constexpr std::uint32_t kernel_compile_time_args[] = {KERNEL_COMPILE_TIME_ARGS};
template <std::uint32_t Idx> constexpr std::uint32_t get_ct_arg() {
    static_assert(Idx < sizeof(kernel_compile_time_args) / sizeof(kernel_compile_time_args[0]), "Index out of range");
    return kernel_compile_time_args[Idx];
}
#define get_compile_time_arg_val(arg_idx) get_ct_arg<arg_idx>()
template <typename T> T get_arg_val(int arg_idx);
template <typename T> T get_common_arg_val(int arg_idx);
void cb_reserve_back(std::int32_t operand, std::int32_t num_pages);
void cb_push_back(std::int32_t operand, std::int32_t num_pages);
void cb_wait_front(std::int32_t operand, std::int32_t num_pages);
void cb_pop_front(std::int32_t operand, std::int32_t num_pages);
std::uint32_t get_write_ptr(std::uint32_t operand);
std::uint32_t get_read_ptr(std::uint32_t operand);
constexpr std::int32_t get_tile_size(const std::int32_t operand) { return operand < 16 ? 2048 : 4096; }
constexpr std::uint32_t MEM_ZEROS_BASE = 0x1000;
constexpr std::uint32_t MEM_ZEROS_SIZE = 512;
extern std::uint8_t noc_index;
std::uint64_t get_noc_addr(std::uint32_t addr, std::uint8_t noc = noc_index);
void noc_async_read(std::uint64_t src_noc_addr, std::uint32_t dst_local_l1_addr, std::uint32_t size, std::uint8_t noc = noc_index);
void noc_async_read_barrier(std::uint8_t noc = noc_index);
void noc_async_write_barrier(std::uint8_t noc = noc_index);
void noc_async_writes_flushed(std::uint8_t noc = noc_index);
#define tt_l1_ptr
std::uint64_t get_noc_addr(std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t addr, std::uint8_t noc = noc_index);
std::uint64_t get_noc_multicast_addr(std::uint32_t noc_x_start, std::uint32_t noc_y_start, std::uint32_t noc_x_end,
                                     std::uint32_t noc_y_end, std::uint32_t addr, std::uint8_t noc = noc_index);
template <int type = 0> std::uintptr_t get_semaphore(std::uint32_t semaphore_id);
void noc_semaphore_set(volatile tt_l1_ptr std::uint32_t* sem_addr, std::uint32_t val);
void noc_semaphore_wait(volatile tt_l1_ptr std::uint32_t* sem_addr, std::uint32_t val);
void noc_semaphore_inc(std::uint64_t addr, std::uint32_t incr, std::uint8_t noc_id = noc_index, std::uint8_t vc = 1);
void noc_async_write_multicast(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr_multicast, std::uint32_t size,
                               std::uint32_t num_dests, bool linked = false, std::uint8_t noc = noc_index);
void noc_async_write_multicast_loopback_src(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr_multicast,
                                            std::uint32_t size, std::uint32_t num_dests, bool linked = false,
                                            std::uint8_t noc = noc_index);
void noc_semaphore_set_multicast(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr_multicast,
                                 std::uint32_t num_dests, bool linked = false, std::uint8_t noc = noc_index,
                                 std::uint8_t vc = 4);
void noc_semaphore_set_multicast_loopback_src(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr_multicast,
                                              std::uint32_t num_dests, bool linked = false, std::uint8_t noc = noc_index);
enum class InlineWriteDst : std::uint8_t { DEFAULT = 0, L1 = 1, REG = 2 };
template <InlineWriteDst dst_type = InlineWriteDst::DEFAULT, bool posted = false, bool flush = true>
void noc_inline_dw_write(std::uint64_t addr, std::uint32_t val, std::uint8_t be = 0xF, std::uint8_t noc = noc_index,
                         std::uint8_t vc = 1, std::uint32_t customized_src_addr = 0);
template <std::uint32_t CTA_OFFSET, std::uint32_t CRTA_OFFSET = 0> struct TensorAccessorArgs {
    constexpr TensorAccessorArgs() = default;
    static constexpr std::uint32_t next_compile_time_args_offset() { return CTA_OFFSET + 2; }
    static_assert((get_ct_arg<CTA_OFFSET>() & 1u) == 0, "sharded buffers are not interleaved DRAM");
    static constexpr std::uint32_t aligned_page_size = get_ct_arg<CTA_OFFSET + 1>();
};
template <typename Args> struct TensorAccessor {
    TensorAccessor(const Args& args, std::uint32_t bank_base_address, std::uint32_t page_size = 0);
    std::uint64_t get_noc_addr(std::uint32_t page_id, std::uint32_t offset = 0, std::uint8_t noc = noc_index) const;
};
template <typename AddrGen> void noc_async_read_page(std::uint32_t id, const AddrGen& addrgen, std::uint32_t dst_local_l1_addr,
                                                     std::uint32_t offset = 0, std::uint8_t noc = noc_index);
template <typename AddrGen> void noc_async_write_page(std::uint32_t id, const AddrGen& addrgen, std::uint32_t src_local_l1_addr,
                                                      std::uint32_t size = 0, std::uint32_t offset = 0, std::uint8_t noc = noc_index);
// compute
template <SrcOrder src_order = SrcOrder::Regular> void compute_kernel_hw_startup(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb);
void compute_kernel_hw_startup(std::uint32_t icb0, std::uint32_t ocb);
void tile_regs_acquire();
void tile_regs_commit();
void tile_regs_wait();
void tile_regs_release();
void pack_tile(std::uint32_t ifrom_dst, std::uint32_t icb, std::uint32_t output_tile_index = 0);
void matmul_init(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t transpose = 0);
void matmul_tiles(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t in0_tile_index, std::uint32_t in1_tile_index, std::uint32_t idst);
void copy_init(std::uint32_t cbid, std::uint32_t transpose = 0, bool transpose_within_16x16_face = false);
void copy_tile(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index);
void add_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false);
void sub_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false);
void mul_init(std::uint32_t icb0, std::uint32_t icb1);
void add_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1, std::uint32_t idst);
void sub_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1, std::uint32_t idst);
void mul_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1, std::uint32_t idst);
void add_binary_tile_init(); void sub_binary_tile_init(); void mul_binary_tile_init();
void add_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst);
void sub_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst);
void mul_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst);
void binary_max_tile_init(); void binary_min_tile_init();
void binary_max_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, VectorMode vector_mode = VectorMode::RC);
void binary_min_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, VectorMode vector_mode = VectorMode::RC);
void binop_with_scalar_tile_init();
void add_unary_tile(std::uint32_t idst, std::uint32_t param1);
void sub_unary_tile(std::uint32_t idst, std::uint32_t param1);
void mul_unary_tile(std::uint32_t idst, std::uint32_t param1);
void rsub_unary_tile(std::uint32_t idst, std::uint32_t param1);
void unary_max_tile_init(); void unary_min_tile_init();
template <bool fast_and_approx = false> void log_tile_init();
template <bool fast_and_approx = false> void log_tile(std::uint32_t idst);
void unary_max_tile(std::uint32_t idst, std::uint32_t param0);
void unary_min_tile(std::uint32_t idst, std::uint32_t param0);
template <bool approx = false> void exp_tile_init();
template <bool approx = false> void exp_tile(std::uint32_t idst, VectorMode vector_mode = VectorMode::RC);
void sqrt_tile_init();
template <bool FAST_APPROX = false> void sqrt_tile(std::uint32_t idst);
void recip_tile_init();
void recip_tile(std::uint32_t idst, VectorMode vector_mode = VectorMode::RC);
void fill_tile_init();
void fill_tile(std::uint32_t idst, float param0);
void copy_dest_values_init();
template <DataFormat DATA_FORMAT> void copy_dest_values(std::uint32_t idst_in, std::uint32_t idst_out);
enum class ReduceDim : std::uint8_t { REDUCE_ROW, REDUCE_COL, REDUCE_SCALAR };
enum class PoolType : std::uint8_t { SUM, AVG, MAX, MIN };
enum class BroadcastType : std::uint8_t { NONE = 0x0, COL = 0x1, ROW = 0x2, SCALAR = 0x3 };
template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = false>
void reduce_init(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t ocb, std::uint32_t call_line = 0);
void reduce_uninit(std::uint32_t icb = 0);
template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = false>
void reduce_tile(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t itile, std::uint32_t itile_scaler, std::uint32_t idst);
#define TT_BCAST_DECLS(op, dim)                                                                               \
    void op##_bcast_##dim##_init(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t call_line = 0);            \
    template <bool is_fp32_dest_acc_en = false>                                                                   \
    void op##_tiles_bcast_##dim(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1, \
                                std::uint32_t idst);
TT_BCAST_DECLS(add, cols) TT_BCAST_DECLS(sub, cols) TT_BCAST_DECLS(mul, cols)
TT_BCAST_DECLS(add, rows) TT_BCAST_DECLS(sub, rows) TT_BCAST_DECLS(mul, rows)
TT_BCAST_DECLS(add, scalar) TT_BCAST_DECLS(sub, scalar) TT_BCAST_DECLS(mul, scalar)
#undef TT_BCAST_DECLS
template <BroadcastType bcast_type, bool is_fp32_dest_acc_en = false> void unary_bcast_init(std::uint32_t icb);
template <BroadcastType bcast_type, bool is_fp32_dest_acc_en = false> void unary_bcast(std::uint32_t icb, std::uint32_t in_tile_index, std::uint32_t dst_tile_index);
void pack_reconfig_data_format(const std::uint32_t new_cb_id);
void reconfig_data_format(const std::uint32_t icb0_new_operand, const std::uint32_t icb1_new_operand);
void kernel_main();
#else
// ---------------------------------------------------------------- host side
namespace tt {
enum class DataFormat : std::uint8_t { Float32 = 0, Float16 = 1, Float16_b = 5, Bfp8_b = 6 };
enum CBIndex : std::uint8_t { c_0, c_1, c_2, c_3, c_4, c_5, c_6, c_7, c_8, c_9, c_10, c_11, c_12, c_13, c_14, c_15,
    c_16, c_17, c_18, c_19, c_20, c_21, c_22, c_23, c_24, c_25, c_26, c_27, c_28, c_29, c_30, c_31 };
namespace tt_metal {
struct CoreCoord { std::size_t x = 0, y = 0; };
struct CoreRange { CoreRange(const CoreCoord& start, const CoreCoord& end); bool operator<(const CoreRange&) const; };
struct CoreRangeSet { explicit CoreRangeSet(const std::set<CoreRange>& ranges); };
using CoreSpec = std::variant<CoreCoord, CoreRange, CoreRangeSet>;
enum class BufferType { DRAM, L1 };
enum class MathFidelity : std::uint8_t { LoFi = 0, HiFi2 = 2, HiFi3 = 3, HiFi4 = 4 };
enum class DataMovementProcessor { RISCV_0, RISCV_1 };
enum NOC : std::uint8_t { RISCV_0_default = 0, RISCV_1_default = 1, NOC_0 = 0, NOC_1 = 1 };
struct DataMovementConfig {
    DataMovementProcessor processor = DataMovementProcessor::RISCV_0;
    NOC noc = NOC::RISCV_0_default;
    std::vector<std::uint32_t> compile_args;
    std::map<std::string, std::string> defines;
};
enum class UnpackToDestMode : std::uint8_t { Default, UnpackToDestFp32 };
struct ComputeConfig {
    MathFidelity math_fidelity = MathFidelity::HiFi4;
    bool fp32_dest_acc_en = false;
    bool dst_full_sync_en = false;
    std::vector<UnpackToDestMode> unpack_to_dest_mode;
    bool bfp8_pack_precise = false;
    bool math_approx_mode = false;
    std::vector<std::uint32_t> compile_args;
    std::map<std::string, std::string> defines;
};
using KernelHandle = std::uint32_t;
class Program {};
Program CreateProgram();
class CircularBufferConfig {
public:
    CircularBufferConfig(std::uint32_t total_size, const std::map<std::uint8_t, tt::DataFormat>& data_format_spec);
    CircularBufferConfig& set_page_size(std::uint8_t buffer_index, std::uint32_t page_size);
};
std::uintptr_t CreateCircularBuffer(Program& program, const CoreSpec& core_spec, const CircularBufferConfig& config);
KernelHandle CreateKernel(Program& program, const std::string& file_name, const CoreSpec& core_spec,
                          const std::variant<DataMovementConfig, ComputeConfig>& config);
void SetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreSpec& core_spec, std::initializer_list<std::uint32_t> runtime_args);
std::uint32_t CreateSemaphore(Program& program, const std::variant<CoreRange, CoreRangeSet>& core_spec, std::uint32_t initial_value);
namespace distributed {
class MeshBuffer;
}
class TensorAccessorArgs {
public:
    explicit TensorAccessorArgs(const distributed::MeshBuffer& buffer);
    void append_to(std::vector<std::uint32_t>& compile_time_args) const;
};
namespace distributed {
struct MeshShape {};
struct MeshCoordinateRange { explicit MeshCoordinateRange(const MeshShape& shape); };
class MeshCommandQueue {};
struct DeviceLocalBufferConfig { std::uint64_t page_size; BufferType buffer_type; };
struct ReplicatedBufferConfig { std::uint64_t size; };
class MeshDevice {
public:
    static std::shared_ptr<MeshDevice> create_unit_mesh(int device_id);
    MeshCommandQueue& mesh_command_queue(std::size_t cq_id = 0);
    const MeshShape& shape() const;
    CoreCoord worker_core_from_logical_core(const CoreCoord& logical_core) const;
    bool close();
};
class MeshBuffer {
public:
    static std::shared_ptr<MeshBuffer> create(const ReplicatedBufferConfig& config, const DeviceLocalBufferConfig& device_local, MeshDevice* mesh_device);
    std::uint64_t address() const;
};
class MeshWorkload { public: void add_program(const MeshCoordinateRange& range, Program&& program); };
template <typename T> void EnqueueWriteMeshBuffer(MeshCommandQueue& cq, std::shared_ptr<MeshBuffer>& buffer, std::vector<T>& src, bool blocking = false);
template <typename T> void EnqueueReadMeshBuffer(MeshCommandQueue& cq, std::vector<T>& dst, std::shared_ptr<MeshBuffer>& buffer, bool blocking = true);
void EnqueueMeshWorkload(MeshCommandQueue& cq, MeshWorkload& workload, bool blocking);
void Finish(MeshCommandQueue& cq);
}  // namespace distributed
}  // namespace tt_metal
}  // namespace tt
#endif
