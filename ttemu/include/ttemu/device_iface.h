// The boundary between emulated device kernels and libttemu. Every device API header forwards here;
// the runtime knows which core and kernel the calling thread is (thread-local context).
//
// Every entry point takes the Site of the call in the kernel's source (file and line of the call expression,
// filled in by the public headers' `TTEMU_SITE` default argument): errors and deadlock reports name it, and the
// runtime records it per call (src/runtime.h: enter()), which is where a timing model charges its costs.
#pragma once
#include <cstdint>
#include "ttemu/common_types.h"

namespace ttemu {
struct Site {
    const char* file = nullptr;
    unsigned line = 0;
};
}  // namespace ttemu
// The last parameters of every public device API wrapper: the caller's source location. (Two plain defaulted
// parameters: GCC evaluates __builtin_FILE/__builtin_LINE at the call site only when they are the whole default
// argument.) Inside a wrapper, `ttemu_site` is the Site to hand to the runtime and TTEMU_FWD forwards the location
// to another wrapper.
#define TTEMU_SITE const char *ttemu_file = __builtin_FILE(), unsigned ttemu_line = __builtin_LINE()
#define ttemu_site (::ttemu::Site{ttemu_file, ttemu_line})
#define TTEMU_FWD ttemu_file, ttemu_line

namespace ttemu::dev {
using ttemu::Site;
// arguments
std::uint32_t arg(int idx, bool common, Site site);
std::uintptr_t arg_addr(int idx, bool common, Site site);
// circular buffers (role-checked: the calling kernel's role decides producer/consumer side)
void cb_reserve_back(std::int32_t cb, std::int32_t n, Site site);
void cb_push_back(std::int32_t cb, std::int32_t n, Site site);
void cb_wait_front(std::int32_t cb, std::int32_t n, Site site);
void cb_pop_front(std::int32_t cb, std::int32_t n, Site site);
bool cb_pages_reservable_at_back(std::int32_t cb, std::int32_t n, Site site);
bool cb_pages_available_at_front(std::int32_t cb, std::int32_t n, Site site);
std::uint32_t get_write_ptr(std::uint32_t cb, Site site);
std::uint32_t get_read_ptr(std::uint32_t cb, Site site);
// The CB's fifo registers as the kernel sees them (get_local_cb_interface); a write to the returned fields is
// applied to the CB at the kernel's next CB call on this core.
struct CbInterface {
    std::uint32_t fifo_size, fifo_limit, fifo_page_size, fifo_num_pages, fifo_rd_ptr, fifo_wr_ptr, tiles_acked,
        tiles_received, fifo_wr_tile_ptr;
};
CbInterface& cb_interface(std::uint32_t cb, Site site);
// Page identity (TTEMU_PAGE_TAGS=1; no-ops otherwise): the page the last pack_tile wrote is for `page` of DRAM
// buffer `buffer` (its creation index); CB position `index` from the front must hold `page` of `buffer`, as read
// from DRAM. A writer or reader that moves another page there is an error naming both lines.
void page_tag(std::uint32_t buffer, std::uint32_t page, Site site);
void page_expect(std::uint32_t cb, std::uint32_t index, std::uint32_t buffer, std::uint32_t page, Site site);

// NoC addresses. L1 addresses handed to kernels (CB pointers, semaphores) are host addresses inside the calling
// core's L1 window, so kernels may dereference them as the RISC-V cores do; NoC calls also accept plain L1
// offsets (what the host API hands out) and translate both.
std::uint64_t dram_noc_addr(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                            std::uint32_t offset);
std::uint64_t bank_noc_addr(bool is_dram, std::uint32_t bank_id, std::uint32_t addr);
std::uint64_t local_l1_noc_addr(std::uint32_t l1_addr, Site site);
std::uint64_t core_l1_noc_addr(std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t l1_addr);
std::uint64_t multicast_noc_addr(std::uint32_t x_start, std::uint32_t y_start, std::uint32_t x_end, std::uint32_t y_end,
                                 std::uint32_t l1_addr);
// A TensorAccessor page's NoC address, checked against the buffer (base address, page size, page count).
std::uint64_t accessor_noc_addr(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                                std::uint32_t offset);
// Records the source location of an object-API call before it computes addresses (see api/dataflow/noc.h).
void at(Site site);
// NoC transfers (bytes move at issue time; barriers check the protocol). `noc` is the NoC the call uses (0/1).
void noc_read(std::uint64_t src, std::uint32_t l1_dst, std::uint32_t bytes, std::uint8_t noc, const char* call,
              Site site);
void noc_write(std::uint32_t l1_src, std::uint64_t dst, std::uint32_t bytes, std::uint8_t noc, const char* call,
               Site site);
void noc_write_multicast(std::uint32_t l1_src, std::uint64_t dst_mcast, std::uint32_t bytes, std::uint32_t num_dests,
                         bool loopback, std::uint8_t noc, const char* call, Site site);
void noc_read_page(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                   std::uint32_t l1_dst, std::uint32_t offset, std::uint8_t noc, Site site);
void noc_write_page(bool is_dram, std::uint32_t base, std::uint32_t page_size, std::uint32_t page_id,
                    std::uint32_t l1_src, std::uint32_t size, std::uint32_t offset, std::uint8_t noc, Site site);
void noc_read_barrier(Site site);
void noc_write_barrier(Site site);
void noc_writes_flushed(Site site);
void noc_atomic_barrier(Site site);
// semaphores (4-byte words in L1; CreateSemaphore places them at the same address on every core of its range)
std::uintptr_t semaphore_addr(std::uint32_t id, Site site);
void sem_wait(volatile std::uint32_t* sem, std::uint32_t value, bool at_least, Site site);
void sem_set(volatile std::uint32_t* sem, std::uint32_t value, Site site);
void sem_add(volatile std::uint32_t* sem, std::uint32_t delta, Site site);  // a local (non-NoC) increment
void sem_inc(std::uint64_t noc_addr, std::uint32_t incr, std::uint8_t noc, Site site);
void sem_inc_multicast(std::uint64_t dst_mcast, std::uint32_t incr, std::uint32_t num_dests, std::uint8_t noc,
                       Site site);
void sem_set_remote(std::uint32_t l1_src, std::uint64_t dst, std::uint8_t noc, Site site);
void sem_set_multicast(std::uint32_t l1_src, std::uint64_t dst_mcast, std::uint32_t num_dests, bool loopback,
                       std::uint8_t noc, Site site);
// dataflow: a 32-bit inline write (byte-enable mask `be`) to a NoC address
void inline_dw_write(std::uint64_t addr, std::uint32_t val, std::uint8_t be, std::uint8_t noc, Site site);
// BRISC/NCRISC -> TRISC mailboxes (ckernel::mailbox_write / mailbox_read)
void mailbox_write(std::uint32_t thread, std::uint32_t value, Site site);
std::uint32_t mailbox_read(std::uint32_t from_thread, Site site);
// a kernel's ASSERT that failed
[[noreturn]] void assert_failed(const char* condition, Site site);

// compute engine (unpack -> math -> pack), see src/compute.cpp
enum class FpuOp : std::uint8_t {
    None,
    Matmul,
    Copy,
    Add,
    Sub,
    Mul,
    Reduce,
    BcastAdd,
    BcastSub,
    BcastMul,
    UnaryBcast,
    Transpose,
    Tilize,
    Untilize
};
// one member per SFPU function of the op registry (ttemu/sfpu_ops.def, generated from compiler/registry/table.py)
enum class SfpuOp : std::uint8_t {
    None,
#define TTEMU_SFPU_OP(Op, InitOp, init_call, cost) Op,
#include "ttemu/sfpu_ops.def"
};
enum class ScalarOp : std::uint8_t { Add, Sub, Mul, Div, Rsub };
void hw_startup(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb, bool reverse, Site site);
// `mode`: Matmul/Transpose: transpose in1 (each tile); Add/Sub: nonzero = acc_to_dest (DST += a op b)
void fpu_init(FpuOp op, std::uint32_t icb0, std::uint32_t icb1, std::uint32_t mode, const char* call, Site site);
void sfpu_init(SfpuOp op, const char* call, Site site);
void matmul_tiles(std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst,
                  Site site);
// matmul_block: DST[idst + r*ct_dim + c] += in0[i0 + r*kt_dim] @ in1[i1 + c*s]  (r < rt_dim, c < ct_dim; s = the
// in1 column stride when ct_dim >= rt_dim, else 1)
void matmul_block(std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst,
                  bool transpose, std::uint32_t ct_dim, std::uint32_t rt_dim, std::uint32_t kt_dim, Site site);
// matmul_set_in1_column_stride: the unpacker's step between in1 tiles of adjacent output columns
void matmul_in1_column_stride(std::uint32_t in1, std::uint32_t stride_tiles, Site site);
void binary_tiles(FpuOp op, std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1,
                  std::uint32_t idst, Site site);
// binary op with DST as one operand (binary_dest_reuse_tiles): `dst_is_a` puts DST in the first operand slot
void binary_dest_reuse(FpuOp op, std::uint32_t in, std::uint32_t itile, std::uint32_t idst, bool dst_is_a, Site site);
void copy_tile(std::uint32_t cb, std::uint32_t itile, std::uint32_t idst, Site site);
void transpose_tile(std::uint32_t cb, std::uint32_t itile, std::uint32_t idst, Site site);
void sfpu_unary(SfpuOp op, std::uint32_t idst, std::uint32_t param_bits, const char* call, Site site);
void sfpu_scalar(ScalarOp op, std::uint32_t idst, std::uint32_t param_bits, const char* call, Site site);
void sfpu_binary(SfpuOp op, std::uint32_t i0, std::uint32_t i1, std::uint32_t odst, const char* call, Site site);
// An SFPU op on some faces of DST[idst] only (bit f of `faces` = face f: 0 top-left, 1 top-right, 2 bottom-left,
// 3 bottom-right), as the LLK's VectorMode R / C / first-column variants visit them; Exp scales its input by the
// fp32 `param_bits` first (exp(x * scale)). `check_init`: the op needs its own init in effect (false: the kernels'
// own SFPI routines that bring their own constants); `approx`: the approximate variant's cost (Exp).
void sfpu_unary_faces(SfpuOp op, std::uint32_t idst, std::uint32_t param_bits, std::uint32_t faces, bool check_init,
                      bool approx, const char* call, Site site);
// An SFPU binary op on DST tiles without an init check (kernels' own SFPI routines, e.g. ttnn's sdpa_max_sfpi)
void sfpu_binary_raw(SfpuOp op, std::uint32_t i0, std::uint32_t i1, std::uint32_t odst, const char* call, Site site);
// exp_tile_init<approx, scale, clamping>: the approximate exp bakes `scale` (fp32 bits) into its constants, so every
// later exp_tile computes exp(x * scale) until the next init, with the LLK's algorithm (Schraudolph's, bit for bit:
// compute.cpp's exp_approx_llk) and its instruction count; `clamp_negative`: InputClamping::ClampToNegative
void sfpu_exp_init(std::uint32_t scale_bits, bool approx, bool clamp_negative, const char* call, Site site);
// sfpu_reduce_init<pool, format> and sfpu_reduce<pool, format, dim>(idst, ct_dim, rt_dim) (ckernel_sfpu_reduce.h):
// the exact reduction of the DST tiles idst .. idst + ct_dim * rt_dim - 1 (rt_dim rows of ct_dim tiles); pool and dim
// numbered as for reduce_init, format a tt::DataFormat code
void sfpu_reduce_init(int pool, std::uint8_t format, Site site);
void sfpu_reduce(int pool, int dim, std::uint8_t format, std::uint32_t idst, std::uint32_t ct_dim, std::uint32_t rt_dim,
                 Site site);
// copy with each 16x16 face transposed in place (llk_unpack_A_init(transpose_of_faces=false, within_face=true))
void copy_face_transpose_init(std::uint32_t cb, const char* call, Site site);
void tile_regs_acquire(Site site);
void tile_regs_commit(Site site);
void tile_regs_wait(Site site);
void tile_regs_release(Site site);
void pack_tile(std::uint32_t idst, std::uint32_t ocb, std::uint32_t out_index, bool out_of_order, Site site);
// llk_pack_init(ocb, num_tiles): each later pack call writes num_tiles consecutive DST tiles to consecutive CB tiles
void pack_width(std::uint32_t ocb, std::uint32_t num_tiles, Site site);
void pack_reconfig(std::uint32_t ocb, const char* call, Site site);
void pack_l1_acc(bool enable, Site site);
void pack_relu(bool enable, Site site);
// conditional (the (old, new) forms): a source is reconfigured only when old's format differs from new's
void unpack_reconfig(std::uint32_t old_a, std::uint32_t new_a, std::uint32_t old_b, std::uint32_t new_b, bool a, bool b,
                     bool conditional, const char* call, Site site);
// reduce (pool: 0 SUM, 1 AVG, 2 MAX, 3 MIN; dim: 0 REDUCE_ROW, 1 REDUCE_COL, 2 REDUCE_SCALAR) and broadcasts
// (bcast: 0 NONE, 1 COL, 2 ROW, 3 SCALAR), numbered as ckernel's enums
void reduce_init(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t ocb, Site site);
void reduce_tile(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t itile,
                 std::uint32_t itile_scaler, std::uint32_t idst, Site site);
void reduce_uninit(Site site);
// the LLK halves of reduce_init, as ttnn's reduce helpers call them: configure the FPU for the reduce (unpack + math),
// and set (ocb >= 0) or clear (ocb < 0) the packer's reduce mask (only the reduced edge of the tile is written)
void reduce_math_init(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, Site site);
void pack_reduce_mask(int dim, int ocb, Site site);
// reduce_block_max_row (ttnn's streaming SDPA): the row maxima of `block_ct` tiles side by side, into column 0 of a
// DST tile, combined with the running maxima a face-transposed copy left in row 0 of DST's faces 0 and 2.
// `respect_trigger`: the unpacker waits on the packer's Tensix semaphore instead of a cb_wait_front, so the tiles need
// only have been pushed.
void reduce_block_max_row_init(std::uint32_t ocb, std::uint32_t block_ct, Site site);
void reduce_block_max_row(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t row_start, std::uint32_t idst,
                          bool respect_trigger, Site site);
void reduce_block_max_row_uninit(Site site);
void bcast_init(FpuOp op, int bcast, std::uint32_t icb0, std::uint32_t icb1, const char* call, Site site);
void bcast_tiles(FpuOp op, int bcast, std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1,
                 std::uint32_t idst, const char* call, Site site);
// sub_tiles_bcast_cols_custom: DST[idst + j] = in0[i0 + j] - column 0 of in1[i1] broadcast along rows, j < ct_dim,
// in one unpack call (the bcast tile once, the in0 tiles streamed)
void sub_bcast_cols_block(std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst,
                          std::uint32_t ct_dim, Site site);
void unary_bcast(int bcast, std::uint32_t cb, std::uint32_t itile, std::uint32_t idst, Site site);
// tilize / untilize: whole blocks of `ntiles` tiles between a row-major CB and a tiled CB
void tilize_block(std::uint32_t icb, std::uint32_t ntiles, std::uint32_t ocb, Site site);
void untilize_block(std::uint32_t icb, std::uint32_t ntiles, std::uint32_t ocb, Site site);
// pack_untilize_dest: DST tiles [0, block_ct_dim) -> row-major rows of an output block `full_ct_dim` tiles wide
void pack_untilize_dest(std::uint32_t ocb, std::uint32_t block_rt_dim, std::uint32_t block_c_index,
                        std::uint32_t block_ct_dim, std::uint32_t full_ct_dim, Site site);
[[noreturn]] void unsupported(const char* what, Site site = {});
}  // namespace ttemu::dev
