// The boundary between emulated device kernels and libttemu. Every device API header forwards here;
// the runtime knows which core and kernel the calling thread is (thread-local context).
#pragma once
#include <cstdint>
#include "ttemu/common_types.h"

namespace ttemu::dev {
// arguments
std::uint32_t arg(int idx, bool common);
// circular buffers (role-checked: the calling kernel's role decides producer/consumer side)
void cb_reserve_back(std::int32_t cb, std::int32_t n);
void cb_push_back(std::int32_t cb, std::int32_t n);
void cb_wait_front(std::int32_t cb, std::int32_t n);
void cb_pop_front(std::int32_t cb, std::int32_t n);
bool cb_pages_reservable_at_back(std::int32_t cb, std::int32_t n);
bool cb_pages_available_at_front(std::int32_t cb, std::int32_t n);
std::uint32_t get_write_ptr(std::uint32_t cb);
std::uint32_t get_read_ptr(std::uint32_t cb);
// NoC
std::uint64_t dram_noc_addr(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                            std::uint32_t offset);
std::uint64_t local_l1_noc_addr(std::uint32_t l1_addr);
std::uint64_t core_l1_noc_addr(std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t l1_addr);
void noc_read(std::uint64_t src, std::uint32_t l1_dst, std::uint32_t bytes, const char* call);
void noc_write(std::uint32_t l1_src, std::uint64_t dst, std::uint32_t bytes, const char* call);
void noc_read_page(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                   std::uint32_t l1_dst, std::uint32_t offset);
void noc_write_page(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                    std::uint32_t l1_src, std::uint32_t size, std::uint32_t offset);
void noc_read_barrier();
void noc_write_barrier();
void noc_writes_flushed();
std::uint32_t my_noc_x();
std::uint32_t my_noc_y();

// compute engine (unpack -> math -> pack), see src/compute.cpp
enum class FpuOp : std::uint8_t { None, Matmul, Copy, Add, Sub, Mul, Reduce, BcastAdd, BcastSub, BcastMul, UnaryBcast };
enum class SfpuOp : std::uint8_t {
    None, Exp, Sqrt, Recip, Fill, BinopScalar, AddBinary, SubBinary, MulBinary, MaxBinary, MinBinary, UnaryMax,
    UnaryMin, CopyDest
};
enum class ScalarOp : std::uint8_t { Add, Sub, Mul, Div, Rsub };
void hw_startup(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb, bool reverse);
void fpu_init(FpuOp op, std::uint32_t icb0, std::uint32_t icb1, std::uint32_t transpose, const char* call);
void sfpu_init(SfpuOp op, const char* call);
void matmul_tiles(std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst);
void binary_tiles(FpuOp op, std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1,
                  std::uint32_t idst);
void copy_tile(std::uint32_t cb, std::uint32_t itile, std::uint32_t idst);
void sfpu_unary(SfpuOp op, std::uint32_t idst, std::uint32_t param_bits, const char* call);
void sfpu_scalar(ScalarOp op, std::uint32_t idst, std::uint32_t param_bits, const char* call);
void sfpu_binary(SfpuOp op, std::uint32_t i0, std::uint32_t i1, std::uint32_t odst, const char* call);
void tile_regs_acquire();
void tile_regs_commit();
void tile_regs_wait();
void tile_regs_release();
void pack_tile(std::uint32_t idst, std::uint32_t ocb, std::uint32_t out_index, bool out_of_order);
void pack_reconfig(std::uint32_t ocb, const char* call);
void pack_reconfig_check(std::uint32_t icb0, std::uint32_t icb1);
// reduce (pool: 0 SUM, 1 AVG, 2 MAX, 3 MIN; dim: 0 REDUCE_ROW, 1 REDUCE_COL, 2 REDUCE_SCALAR) and broadcasts
// (bcast: 0 NONE, 1 COL, 2 ROW, 3 SCALAR), numbered as ckernel's enums
void reduce_init(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t ocb);
void reduce_tile(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t itile,
                 std::uint32_t itile_scaler, std::uint32_t idst);
void reduce_uninit();
void bcast_init(FpuOp op, int bcast, std::uint32_t icb0, std::uint32_t icb1, const char* call);
void bcast_tiles(FpuOp op, int bcast, std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1,
                 std::uint32_t idst, const char* call);
void unary_bcast(int bcast, std::uint32_t cb, std::uint32_t itile, std::uint32_t idst);
// dataflow: a 32-bit inline write (byte-enable mask `be`) to a NoC address
void inline_dw_write(std::uint64_t addr, std::uint32_t val, std::uint8_t be);
[[noreturn]] void unsupported(const char* what);
}  // namespace ttemu::dev
