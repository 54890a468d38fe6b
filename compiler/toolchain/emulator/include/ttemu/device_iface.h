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
enum class FpuOp : std::uint8_t { None, Matmul, Copy, Add, Sub, Mul };
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
[[noreturn]] void unsupported(const char* what);
}  // namespace ttemu::dev
