// The compute engine of one Tensix core: unpack (CB -> source operands), math (FPU / SFPU into DST) and pack
// (DST -> CB). The three TRISC threads of the hardware run here as one thread in program order.
//
// Numerics modelled:
//  * CB data is converted exactly from its format (Float32, Float16_b, Float16, Bfp8_b, Bfp4_b).
//  * FPU operands (matmul_tiles, add/sub/mul_tiles, copy_tile without UnpackToDestFp32) pass through the 19-bit
//    source registers: Float32 CB data is rounded to TF32 (RNE); 16-bit formats are exact.
//  * Math is done in fp32; a matmul tile accumulates its 32 products in fp32 in k order, then adds to DST.
//  * DST holds fp32 with fp32_dest_acc_en, otherwise every value written to DST is rounded to the 16-bit DST
//    format: Float16 when compute_kernel_hw_startup's first input CB is Float16, else bf16 (RNE).
//  * SFPU functions use libm (exp, log, sqrt, 1/x) in fp32, then the DST rounding above; math fidelity is not
//    modelled (HiFi4). The approximate exp (exp_tile_init<true, scale, clamping>) computes what its LLK algorithm
//    computes, bit for bit (exp_approx_llk below); the other approximation modes are not modelled.
//  * pack_tile converts DST to the CB format with round-to-nearest-even.
//  * Int32 in DST (a 32-bit DST only): the typecasts and the bitwise / shift functions of the op registry work on
//    each element's 32-bit pattern, stored in the fp32 slot as bits and never read as a float in between.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "formats.h"
#include "runtime.h"

namespace ttemu {
namespace dev {
// Int32 in DST, as the LLKs compute it (ckernel_sfpu_typecast.h, ckernel_sfpu_shift.h, ckernel_sfpu_unary_shift.h)
std::uint32_t int32_of_fp32_bits(std::uint32_t u) {  // truncate toward zero; saturate; NaN by its sign
    float x;
    std::memcpy(&x, &u, 4);
    const bool negative = (u >> 31) != 0;
    if (std::isnan(x)) return negative ? 0x80000000u : 0x7fffffffu;
    if (x >= 2147483648.0f) return 0x7fffffffu;
    if (x < -2147483648.0f) return 0x80000000u;
    return static_cast<std::uint32_t>(static_cast<std::int32_t>(std::trunc(x)));
}
std::uint32_t fp32_bits_of_int32(std::uint32_t u) {  // SFPCAST: round to nearest even
    const float x = static_cast<float>(static_cast<std::int32_t>(u));
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    return bits;
}
std::uint32_t arithmetic_shift_right(std::uint32_t u, std::uint32_t amount) {  // amount in [0, 31]
    const std::uint32_t shifted = u >> amount;
    return (u >> 31) && amount ? shifted | (~0u << (32 - amount)) : shifted;
}
}  // namespace dev
namespace {
using dev::FpuOp;
using dev::SfpuOp;
using Dst = ComputeState::Dst;

KernelRun& compute_run(Api api, Site site, const char* call) {
    KernelRun& run = enter(api, site);
    if (run.kernel->role != Role::Compute || !run.compute) [[unlikely]]
        kernel_fail("wrong-kernel-type", call, "compute API called from a data-movement kernel");
    return run;
}

const char* dst_state_name(Dst s) {
    switch (s) {
        case Dst::Idle: return "idle (no tile_regs_acquire)";
        case Dst::Acquired: return "acquired by MATH";
        case Dst::Committed: return "committed (waiting for tile_regs_wait)";
        case Dst::Waited: return "held by PACK";
    }
    return "?";
}

const char* fpu_init_name(FpuOp op) {
    switch (op) {
        case FpuOp::Matmul: return "matmul_init";
        case FpuOp::Copy: return "copy_init";
        case FpuOp::Add: return "add_init";
        case FpuOp::Sub: return "sub_init";
        case FpuOp::Mul: return "mul_init";
        case FpuOp::Reduce: return "reduce_init";
        case FpuOp::BcastAdd: return "add_bcast_*_init";
        case FpuOp::BcastSub: return "sub_bcast_*_init";
        case FpuOp::BcastMul: return "mul_bcast_*_init";
        case FpuOp::UnaryBcast: return "unary_bcast_init";
        case FpuOp::Transpose: return "transpose_init (or copy_init with transpose)";
        case FpuOp::Tilize: return "tilize_init";
        case FpuOp::Untilize: return "untilize_init";
        default: return "(none)";
    }
}

// The SFPU function tables (the op registry's, ttemu/sfpu_ops.def): the init call that configures the SFPU for an
// op, and the op whose init that is (mask_posinf_tile runs on mask_tile_init's configuration).
const char* sfpu_init_name(SfpuOp op) {
    switch (op) {
#define TTEMU_SFPU_OP(Op, InitOp, init_call, cost) \
    case SfpuOp::Op: return init_call;
#include "ttemu/sfpu_ops.def"
        default: return "(none)";
    }
}
SfpuOp sfpu_configured_by(SfpuOp op) {
    switch (op) {
#define TTEMU_SFPU_OP(Op, InitOp, init_call, cost) \
    case SfpuOp::Op: return SfpuOp::InitOp;
#include "ttemu/sfpu_ops.def"
        default: return op;
    }
}
bool sfpu_takes_param(SfpuOp op) {
    switch (op) {
#define TTEMU_SFPU_UNARY(Op, param, expr) \
    case SfpuOp::Op: return param;
#define TTEMU_SFPU_INT_UNARY(Op, param, expr) \
    case SfpuOp::Op: return param;
#include "ttemu/sfpu_ops.def"
        default: return false;
    }
}
bool sfpu_integer(SfpuOp op) {  // works on Int32 bit patterns in DST
    switch (op) {
#define TTEMU_SFPU_INT_UNARY(Op, param, expr) \
    case SfpuOp::Op: return true;
#define TTEMU_SFPU_INT_BINARY(Op, expr) \
    case SfpuOp::Op: return true;
#include "ttemu/sfpu_ops.def"
        default: return false;
    }
}

void require_started(KernelRun& run, const std::string& call) {
    if (!run.compute->started)
        kernel_fail("init", call, "compute_kernel_hw_startup(...) must be the first compute API call");
}

void require_math(KernelRun& run, const std::string& call) {
    require_started(run, call);
    if (run.compute->dst_state != Dst::Acquired)
        kernel_fail("dst-protocol", call,
                    std::string("math on DST outside tile_regs_acquire()..tile_regs_commit() (DST is ") +
                        dst_state_name(run.compute->dst_state) + ")");
}

void check_dst_index(KernelRun& run, std::uint32_t idst, const std::string& call) {
    const ComputeState& cs = *run.compute;
    if (idst >= cs.dst_capacity)
        kernel_fail(
            "dst-overflow", call,
            strformat("DST index %u is out of range: %u tiles per acquire (%s DST, %s sync; fp32_dest_acc_en=%s, "
                      "dst_full_sync_en=%s)",
                      idst, cs.dst_capacity, cs.fp32_dest ? "32-bit" : "16-bit",
                      run.kernel->dst_full_sync ? "full" : "half", cs.fp32_dest ? "true" : "false",
                      run.kernel->dst_full_sync ? "true" : "false"));
}

float* dst_tile(KernelRun& run, std::uint32_t idst) { return run.compute->dst.data() + idst * 1024u; }

float to_dst(const ComputeState& cs, float v) {
    if (cs.fp32_dest) return v;
    return cs.dst16_format == fmt::Float16 ? fmt::round_to_fp16(v) : fmt::round_to_bf16(v);
}

std::uint8_t cb_format(KernelRun& run, std::uint32_t cb, const std::string& call) {
    if (cb >= device().arch->num_cbs || !run.core->cbs[cb].configured)
        kernel_fail("cb-unconfigured", call, strformat("CB c_%u is not configured on this core", cb));
    return run.core->cbs[cb].format;
}

// Reads tile `itile` of the consumer window of `cb` into row-major floats.
void unpack_operand(KernelRun& run, std::uint32_t cb, std::uint32_t itile, bool through_src_regs, float* out,
                    const std::string& call) {
    Core& core = *run.core;
    std::uint32_t addr;
    std::uint8_t format;
    {
        std::lock_guard<std::mutex> lk(core.mu);
        std::uint8_t f = cb_format(run, cb, call);
        CircularBuffer& c = core.cbs[cb];
        if (c.consumer != &run)
            kernel_fail("cb-role", call, strformat("reads CB c_%u without cb_wait_front on it", cb));
        if (itile >= c.front_granted)
            kernel_fail("cb-out-of-range", call,
                        strformat("out-of-range CB access: tile index %u of CB c_%u, but only %u page(s) were obtained "
                                  "by cb_wait_front",
                                  itile, cb, c.front_granted));
        if (c.rd_page + itile >= c.num_pages)
            kernel_fail("cb-wrap", call,
                        strformat("tile index %u from read page %u runs past the end of CB c_%u (%u pages): the read "
                                  "pointer wraps only at the end",
                                  itile, c.rd_page, cb, c.num_pages));
        if (!fmt::supported(f) || c.page_size < fmt::tile_bytes(f))
            kernel_fail("cb-format", call,
                        strformat("CB c_%u has format %s and page size %u B: not a %s tile", cb, fmt::name(f),
                                  c.page_size, fmt::name(f)));
        addr = c.base + (c.rd_page + itile) * c.page_size;
        format = f;
    }
    if (timing::math_skipped()) return;  // timing-only: the checks above, no data
    fmt::unpack_tile(core.l1 + addr, format, out);
    if (through_src_regs && format == fmt::Float32)
        for (int i = 0; i < 1024; ++i) out[i] = fmt::round_to_tf32(out[i]);
}

// The unpacker that reads `cb` (0: srcA, 1: srcB) must be configured for its format: the unpacker converts L1 data
// by the source format in its configuration registers, not the CB's ([LLK] cunpack_common.h configure_unpack_AB:
// unpack_src_format[operand] goes to THCON's per-unpacker config; llk_unpack_reconfig_data_format_src* rewrite it),
// so another format's bytes are read as the configured format. Exact format equality is required.
void check_unpacker(KernelRun& run, int src, std::uint32_t cb, const std::string& call) {
    const ComputeState& cs = *run.compute;
    const std::uint8_t f = cb_format(run, cb, call);
    if (f == cs.src_format[src]) return;
    const char* reg = src == 0 ? "srcA" : "srcB";
    kernel_fail("unpack-format", call,
                strformat("CB c_%u is %s but the %s unpacker is configured for %s (c_%u, by %s): reconfigure it "
                          "(reconfig_data_format_%s(c_%u), or reconfig_data_format(...)) before this op",
                          cb, fmt::name(f), reg, fmt::name(cs.src_format[src]), cs.src_cb[src], cs.src_by[src].c_str(),
                          src == 0 ? "srca" : "srcb", cb));
}

void check_fpu(KernelRun& run, FpuOp op, std::uint32_t in0, std::uint32_t in1, const std::string& call) {
    ComputeState& cs = *run.compute;
    if (cs.fpu != op)
        kernel_fail("init", call,
                    strformat("the unpacker/FPU is configured by %s; call %s(...) before this op",
                              fpu_init_name(cs.fpu), fpu_init_name(op)));
    if ((in0 != cs.fpu_in0 && cb_format(run, in0, call) != cb_format(run, cs.fpu_in0, call)) ||
        (in1 != cs.fpu_in1 && cb_format(run, in1, call) != cb_format(run, cs.fpu_in1, call)))
        kernel_fail("init", call,
                    strformat("operand CBs (c_%u, c_%u) have other data formats than the CBs given to %s (c_%u, c_%u)",
                              in0, in1, fpu_init_name(op), cs.fpu_in0, cs.fpu_in1));
}

void count(KernelRun& run, const char* op) { ++run.counters.tile_ops[op]; }

// ---- timing events (timing.h). Each compute call is an LLK call on the TRISC(s) that run it: a fixed cost plus
// the unpacker's bytes, the FPU's or SFPU's cycles, the packer's bytes.
using timing::Ev;
double cb_tile_bytes(const KernelRun& run, std::uint32_t cb) {
    return timing::tile_bytes(cb < kMaxCBs ? run.core->cbs[cb].format : fmt::Float16_b);
}
// What the unpacker fetches of a tile through its datum ports: a block format's 64 shared exponents come through a
// port of their own ([ISA] L1.md, Unpackers: "plus another 128-bit read for BFP exponents"), so only the datums count
// against the unpacker's L1 read rate.
double cb_unpack_bytes(const KernelRun& run, std::uint32_t cb) {
    const std::uint8_t format = cb < kMaxCBs ? run.core->cbs[cb].format : fmt::Float16_b;
    const bool block_format = format == fmt::Bfp8_b || format == fmt::Bfp4_b;
    return timing::tile_bytes(format) - (block_format ? fmt::kTileElems / 16 : 0);
}
// An FPU op: UNPACK reads `loads` tiles totalling `bytes`, MATH spends `math` cycles over `steps` steps.
void fpu_event(KernelRun& run, double bytes, double loads, double math, std::uint32_t steps,
               std::uint32_t products = 0) {
    if (!run.trace) return;
    std::uint32_t f = run.trace->fpu_ops++;
    timing::record(run, timing::kUnpack, Ev::UnpackOp,
                   static_cast<float>(timing::unpack_call() + timing::unpack_cycles(bytes, loads)), f, steps,
                   static_cast<std::uint32_t>(bytes));
    timing::record(run, timing::kMath, Ev::MathOp, static_cast<float>(timing::math_tile() * steps + math), f, steps,
                   products);
}
double fidelity_phases(const KernelRun& run);
// A matmul call of rt x ct output tiles: its unpack and math cycles from the compiler's cost model (timing.h).
void matmul_event(KernelRun& run, std::uint32_t in0, std::uint32_t in1, std::uint32_t rt, std::uint32_t ct,
                  const std::string& call) {
    if (!run.trace) return;
    const double* terms = timing::matmul_block_terms(rt, ct);
    if (!terms)
        kernel_fail(
            "matmul-block", call,
            strformat("the timing model's cost table has no %u x %u matmul call (rt x ct up to 16 tiles)", rt, ct));
    const double unpack = terms[0] + terms[1] * cb_unpack_bytes(run, in0) + terms[2] * cb_unpack_bytes(run, in1);
    const double products = terms[4];
    // the math MOP replays a tile's 16 MVMULs once per fidelity phase ([LLK] llk_math_matmul.h: inner loop = phases),
    // so the math thread's fixed cost per tile (terms[3]: math_tile_cycles x products) is paid per phase
    const double math = terms[3] * fidelity_phases(run) + products * timing::fpu_cycles(run.kernel->math_fidelity);
    std::uint32_t f = run.trace->fpu_ops++;
    // the call's datum bytes, back from the per-byte terms (rounded: (tiles / rate) x bytes x rate need not be whole)
    const double bytes = std::round((terms[1] * cb_unpack_bytes(run, in0) + terms[2] * cb_unpack_bytes(run, in1)) *
                                    timing::costs().unpack_bytes_per_cycle);
    const auto steps = static_cast<std::uint32_t>(products);
    timing::record(run, timing::kUnpack, Ev::UnpackOp, static_cast<float>(unpack), f, steps,
                   static_cast<std::uint32_t>(bytes));
    timing::record(run, timing::kMath, Ev::MathOp, static_cast<float>(math), f, steps, steps);
}
double fidelity_phases(const KernelRun& run) {
    return timing::fpu_cycles(run.kernel->math_fidelity) / timing::fpu_cycles(0);
}
// An SFPU call on the math thread, or on the pack thread (`stream` kPack: its own SFPU instructions on a DST section
// the packer holds, busy time on that thread; the one SFPU serves both, which the model does not arbitrate).
void sfpu_event(KernelRun& run, double instructions, timing::Stream stream = timing::kMath) {
    if (!run.trace) return;
    const timing::Costs& c = timing::costs();
    const double cycles = timing::math_tile() + c.sfpu_rows_per_tile * instructions;
    if (stream == timing::kPack)
        timing::busy(run, timing::kPack, cycles);
    else
        timing::record(run, timing::kMath, Ev::MathOp, static_cast<float>(cycles), timing::kNone, 1);
}
// the approximate exp's SFPU instruction slots per 32-datum row: with the -88.5 sanitize pass or without
double exp_approx_instructions(bool clamp_negative) {
    const timing::Costs& c = timing::costs();
    return clamp_negative ? c.sfpu_instr_exp_approx_clamped : c.sfpu_instr_exp_approx;
}
double sfpu_instructions(dev::SfpuOp op) {
    const timing::Costs& c = timing::costs();
    switch (op) {
#define TTEMU_SFPU_OP(Op, InitOp, init_call, cost) \
    case dev::SfpuOp::Op: return c.cost;
#include "ttemu/sfpu_ops.def"
        default: return c.sfpu_instr_simple;
    }
}
// PACK writes `tiles` tiles of `ocb` (adding into L1 with packer L1 accumulation); `after_fpu_op` = the FPU op
// whose result it packs when the op manages DST itself (tilize / untilize), else kNone.
void pack_event(KernelRun& run, std::uint32_t ocb, double tiles, std::uint32_t after_fpu_op = timing::kNone) {
    if (!run.trace) return;
    const timing::Costs& c = timing::costs();
    double rate = run.compute->pack_l1_acc ? c.pack_l1_acc_bytes_per_cycle : c.pack_bytes_per_cycle;
    timing::record(run, timing::kPack, Ev::PackOp,
                   static_cast<float>(timing::pack_call() + tiles * cb_tile_bytes(run, ocb) / rate), after_fpu_op, 0,
                   static_cast<std::uint32_t>(tiles * cb_tile_bytes(run, ocb)), run.compute->pack_l1_acc ? 1 : 0);
}
// tilize/untilize_block acquire, use and release a DST section themselves: the whole handshake in one call.
void self_managed_dst_event(KernelRun& run, double bytes, double loads, double math, std::uint32_t ocb, double tiles) {
    if (!run.trace) return;
    const float regs = static_cast<float>(timing::costs().tile_regs_cycles);
    timing::Trace& t = *run.trace;
    timing::record(run, timing::kMath, Ev::DstAcquire, regs, ++t.dst_acquires);
    fpu_event(run, bytes, loads, math, static_cast<std::uint32_t>(loads));
    timing::record(run, timing::kMath, Ev::DstCommit, regs, ++t.dst_commits);
    timing::record(run, timing::kPack, Ev::DstWait, regs, ++t.dst_waits);
    pack_event(run, ocb, tiles);
    timing::record(run, timing::kPack, Ev::DstRelease, regs, ++t.dst_releases);
}

void config_event(KernelRun& run, std::initializer_list<timing::Stream> streams, double cycles) {
    if (!run.trace) return;
    for (auto st : streams) timing::busy(run, st, cycles);
}

}  // namespace

std::unique_ptr<ComputeState> make_compute_state(const KernelDef& kernel) {
    auto cs = std::make_unique<ComputeState>();
    cs->fp32_dest = kernel.fp32_dest_acc;
    cs->dst_capacity = (kernel.fp32_dest_acc ? 4u : 8u) * (kernel.dst_full_sync ? 2u : 1u);
    cs->dst.assign(16 * 1024, 0.0f);
    return cs;
}

void compute_finish_checks(KernelRun& run) {
    if (run.compute->dst_state != Dst::Idle)
        kernel_fail("dst-protocol", "kernel_main returned",
                    std::string("DST is still ") + dst_state_name(run.compute->dst_state) +
                        ": every tile_regs_acquire needs commit, wait and release");
}

namespace dev {

void hw_startup(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb, bool reverse, Site site) {
    std::string call = strformat("compute_kernel_hw_startup(%u, %u, %u)", icb0, icb1, ocb);
    KernelRun& run = compute_run(Api::ComputeInit, site, "compute_kernel_hw_startup");
    ComputeState& cs = *run.compute;
    if (cs.started) add_warning(run.who() + ": " + call + ": called more than once (call it once, first)");
    std::uint8_t f0 = cb_format(run, icb0, call);
    cb_format(run, icb1, call);
    cb_format(run, ocb, call);
    cs.started = true;
    cs.reverse = reverse;
    cs.start_cbs[0] = icb0;
    cs.start_cbs[1] = icb1;
    cs.start_cbs[2] = ocb;
    cs.pack_cb = ocb;
    // SrcOrder::Reverse (matmul): in0 (icb0) lands in srcB, in1 (icb1) in srcA (compute_kernel_hw_startup.h)
    cs.src_cb[0] = reverse ? icb1 : icb0;
    cs.src_cb[1] = reverse ? icb0 : icb1;
    for (int s = 0; s < 2; ++s) {
        cs.src_format[s] = cb_format(run, cs.src_cb[s], call);
        cs.src_by[s] = call;
    }
    cs.dst16_format = f0 == fmt::Float16 ? fmt::Float16 : fmt::Float16_b;
    config_event(run, {timing::kUnpack, timing::kMath, timing::kPack}, timing::costs().init_hw_startup_cycles);
}

void fpu_init(FpuOp op, std::uint32_t icb0, std::uint32_t icb1, std::uint32_t transpose, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeInit, site, name);
    std::string call = strformat("%s(%u, %u)", name, icb0, icb1);
    require_started(run, call);
    cb_format(run, icb0, call);
    cb_format(run, icb1, call);
    ComputeState& cs = *run.compute;
    if (op == FpuOp::Matmul && !cs.reverse)
        add_warning(run.who() + ": " + call +
                    ": matmul after compute_kernel_hw_startup without SrcOrder::Reverse (in0 feeds SrcB on hardware)");
    cs.fpu = op;
    cs.fpu_in0 = icb0;
    cs.fpu_in1 = icb1;
    cs.transpose = transpose;
    cs.face_transpose = false;
    if (op != FpuOp::Reduce) cs.pack_mask_cb = -1;  // any non-reduce init restores the default packer mask
    config_event(run, {timing::kUnpack, timing::kMath}, timing::costs().init_fpu_cycles);
}

void sfpu_init(SfpuOp op, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeInit, site, name);
    require_started(run, std::string(name) + "()");
    run.compute->sfpu = sfpu_configured_by(op);  // the configuration it makes (mul_binary_tile_init: add's too)
    run.compute->exp_scale = 1.0f;
    run.compute->exp_scale_bits = 0x3F800000u;
    run.compute->exp_approx = false;
    config_event(run, {timing::kMath}, timing::costs().init_sfpu_cycles);
}

void sfpu_exp_init(std::uint32_t scale_bits, bool approx, bool clamp_negative, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeInit, site, name);
    require_started(run, std::string(name) + "()");
    run.compute->sfpu = SfpuOp::Exp;
    run.compute->exp_scale = fmt::float_of(scale_bits);
    run.compute->exp_scale_bits = scale_bits;
    run.compute->exp_approx = approx;
    run.compute->exp_clamp_negative = clamp_negative;
    config_event(run, {timing::kMath}, timing::costs().init_sfpu_cycles);
}

void copy_face_transpose_init(std::uint32_t cb, const char* name, Site site) {
    fpu_init(FpuOp::Copy, cb, cb, 0, name, site);
    current_run()->compute->face_transpose = true;
}

void matmul_tiles(std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst,
                  Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "matmul_tiles");
    std::string call = strformat("matmul_tiles(in0=%u, in1=%u, i0=%u, i1=%u, dst=%u)", in0, in1, i0, i1, idst);
    require_math(run, call);
    check_fpu(run, FpuOp::Matmul, in0, in1, call);
    check_dst_index(run, idst, call);
    float a[1024], b[1024];
    check_unpacker(run, 1, in0, call);  // matmul: in0 feeds srcB, in1 srcA ([LLK] llk_unpack_AB_matmul)
    check_unpacker(run, 0, in1, call);
    unpack_operand(run, in0, i0, true, a, call);
    unpack_operand(run, in1, i1, true, b, call);
    matmul_event(run, in0, in1, 1, 1, call);
    if (timing::math_skipped()) {
        count(run, "matmul_tiles");
        return;
    }
    if (run.compute->transpose) {
        float t[1024];
        for (int r = 0; r < 32; ++r)
            for (int c = 0; c < 32; ++c) t[c * 32 + r] = b[r * 32 + c];
        std::memcpy(b, t, sizeof t);
    }
    float acc[1024] = {};
    for (int i = 0; i < 32; ++i)
        for (int k = 0; k < 32; ++k) {
            float av = a[i * 32 + k];
            const float* brow = b + k * 32;
            float* crow = acc + i * 32;
            for (int j = 0; j < 32; ++j) crow[j] += av * brow[j];
        }
    float* d = dst_tile(run, idst);
    for (int e = 0; e < 1024; ++e) d[e] = to_dst(*run.compute, d[e] + acc[e]);
    count(run, "matmul_tiles");
}

// DST[idst + r*ct + c] += in0[i0 + r*kt] @ in1[i1 + c*s]: each in0 / in1 tile is unpacked once per call, and every
// output tile sums its 32 products in fp32 before adding to DST, as matmul_tiles does. s: the in1 column stride when
// the unpacker streams in1 (ct >= rt: [LLK] llk_unpack_AB_matmul.h steps SrcA's address by TILE_SIZE_A, which
// matmul_set_in1_column_stride widens), else 1 (in1 reused, its tile address computed per column).
void matmul_block(std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst,
                  bool transpose, std::uint32_t ct_dim, std::uint32_t rt_dim, std::uint32_t kt_dim, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "matmul_block");
    std::string call = strformat("matmul_block(in0=%u, in1=%u, i0=%u, i1=%u, dst=%u, ct_dim=%u, rt_dim=%u, kt_dim=%u)",
                                 in0, in1, i0, i1, idst, ct_dim, rt_dim, kt_dim);
    require_math(run, call);
    check_fpu(run, FpuOp::Matmul, in0, in1, call);
    if (ct_dim == 0 || rt_dim == 0) kernel_fail("matmul-block", call, "ct_dim and rt_dim must be at least 1");
    check_dst_index(run, idst + rt_dim * ct_dim - 1, call);
    std::vector<float> a(static_cast<std::size_t>(rt_dim) * 1024), b(static_cast<std::size_t>(ct_dim) * 1024);
    check_unpacker(run, 1, in0, call);
    check_unpacker(run, 0, in1, call);
    for (std::uint32_t r = 0; r < rt_dim; ++r) unpack_operand(run, in0, i0 + r * kt_dim, true, &a[r * 1024], call);
    for (std::uint32_t c = 0; c < ct_dim; ++c) {
        float* bt = &b[c * 1024];
        const std::uint32_t stride = ct_dim >= rt_dim ? run.compute->in1_column_stride : 1;
        unpack_operand(run, in1, i1 + c * stride, true, bt, call);
        if (!timing::math_skipped() && (transpose || run.compute->transpose)) {
            float t[1024];
            for (int y = 0; y < 32; ++y)
                for (int x = 0; x < 32; ++x) t[x * 32 + y] = bt[y * 32 + x];
            std::memcpy(bt, t, sizeof t);
        }
    }
    // the LLK reuses one operand per step and streams the other ([LLK] llk_unpack_AB_matmul.h): compiler/cost_model.py
    matmul_event(run, in0, in1, rt_dim, ct_dim, call);
    if (timing::math_skipped()) {
        run.counters.tile_ops["matmul_block (tiles)"] += static_cast<std::uint64_t>(rt_dim) * ct_dim;
        return;
    }
    for (std::uint32_t r = 0; r < rt_dim; ++r)
        for (std::uint32_t c = 0; c < ct_dim; ++c) {
            const float* at = &a[r * 1024];
            const float* bt = &b[c * 1024];
            float acc[1024] = {};
            for (int i = 0; i < 32; ++i)
                for (int k = 0; k < 32; ++k) {
                    float av = at[i * 32 + k];
                    const float* brow = bt + k * 32;
                    float* crow = acc + i * 32;
                    for (int j = 0; j < 32; ++j) crow[j] += av * brow[j];
                }
            float* d = dst_tile(run, idst + r * ct_dim + c);
            for (int e = 0; e < 1024; ++e) d[e] = to_dst(*run.compute, d[e] + acc[e]);
        }
    run.counters.tile_ops["matmul_block (tiles)"] += static_cast<std::uint64_t>(rt_dim) * ct_dim;
}

void matmul_in1_column_stride(std::uint32_t in1, std::uint32_t stride_tiles, Site site) {
    KernelRun& run = compute_run(Api::ComputeConfig, site, "matmul_set_in1_column_stride");
    std::string call = strformat("matmul_set_in1_column_stride(cb=%u, stride=%u)", in1, stride_tiles);
    require_started(run, call);
    cb_format(run, in1, call);
    if (stride_tiles == 0) kernel_fail("matmul-block", call, "the column stride must be at least 1 tile");
    run.compute->in1_column_stride = stride_tiles;
    config_event(run, {timing::kUnpack}, timing::costs().reconfig_cycles);
}

void transpose_tile(std::uint32_t cb, std::uint32_t itile, std::uint32_t idst, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "transpose_tile");
    std::string call = strformat("transpose_tile(cb=%u, tile=%u, dst=%u)", cb, itile, idst);
    require_math(run, call);
    check_fpu(run, FpuOp::Transpose, cb, cb, call);
    check_dst_index(run, idst, call);
    float a[1024];
    check_unpacker(run, 0, cb, call);
    unpack_operand(run, cb, itile, false, a, call);
    fpu_event(run, cb_unpack_bytes(run, cb), 1, timing::costs().transpose_cycles_per_tile, 1);
    count(run, "transpose_tile");
    if (timing::math_skipped()) return;
    float* d = dst_tile(run, idst);
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) d[r * 32 + c] = to_dst(*run.compute, a[c * 32 + r]);
}

void binary_tiles(FpuOp op, std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1,
                  std::uint32_t idst, Site site) {
    const char* name = op == FpuOp::Add ? "add_tiles" : op == FpuOp::Sub ? "sub_tiles" : "mul_tiles";
    KernelRun& run = compute_run(Api::ComputeMath, site, name);
    std::string call = strformat("%s(in0=%u, in1=%u, i0=%u, i1=%u, dst=%u)", name, in0, in1, i0, i1, idst);
    require_math(run, call);
    check_fpu(run, op, in0, in1, call);
    check_dst_index(run, idst, call);
    float a[1024], b[1024];
    check_unpacker(run, 0, in0, call);
    check_unpacker(run, 1, in1, call);
    unpack_operand(run, in0, i0, true, a, call);
    unpack_operand(run, in1, i1, true, b, call);
    fpu_event(run, cb_unpack_bytes(run, in0) + cb_unpack_bytes(run, in1), 2,
              timing::costs().eltwise_cycles_per_tile * (op == FpuOp::Mul ? fidelity_phases(run) : 1.0), 1);
    if (timing::math_skipped()) {
        count(run, name);
        return;
    }
    float* d = dst_tile(run, idst);
    const bool acc = op != FpuOp::Mul && run.compute->transpose;  // add/sub_init(..., acc_to_dest = true)
    for (int e = 0; e < 1024; ++e) {
        float v = op == FpuOp::Add ? a[e] + b[e] : op == FpuOp::Sub ? a[e] - b[e] : a[e] * b[e];
        d[e] = to_dst(*run.compute, acc ? d[e] + v : v);
    }
    count(run, name);
}

// DST[idst] = DST[idst] op tile (dst_is_a) or tile op DST[idst]: the DST tile goes back through a source register
// (TF32 when DST holds fp32).
void binary_dest_reuse(FpuOp op, std::uint32_t in, std::uint32_t itile, std::uint32_t idst, bool dst_is_a, Site site) {
    const char* name = op == FpuOp::Add   ? "add_reuse_dest_tiles"
                       : op == FpuOp::Sub ? "sub_reuse_dest_tiles"
                                          : "mul_reuse_dest_tiles";
    KernelRun& run = compute_run(Api::ComputeMath, site, name);
    std::string call = strformat("%s(cb=%u, tile=%u, dst=%u)", name, in, itile, idst);
    require_math(run, call);
    check_fpu(run, op, in, in, call);
    check_dst_index(run, idst, call);
    float t[1024];
    // DEST_TO_SRCA unpacks the CB into srcB, DEST_TO_SRCB into srcA ([LLK] llk_unpack_A.h)
    check_unpacker(run, dst_is_a ? 1 : 0, in, call);
    unpack_operand(run, in, itile, true, t, call);
    fpu_event(run, cb_unpack_bytes(run, in), 1,
              timing::costs().datacopy_cycles_per_tile +
                  timing::costs().eltwise_cycles_per_tile * (op == FpuOp::Mul ? fidelity_phases(run) : 1.0),
              1);
    if (timing::math_skipped()) {
        count(run, name);
        return;
    }
    float* d = dst_tile(run, idst);
    for (int e = 0; e < 1024; ++e) {
        float x = run.compute->fp32_dest ? fmt::round_to_tf32(d[e]) : d[e];
        float a = dst_is_a ? x : t[e], b = dst_is_a ? t[e] : x;
        float v = op == FpuOp::Add ? a + b : op == FpuOp::Sub ? a - b : a * b;
        d[e] = to_dst(*run.compute, v);
    }
    count(run, name);
}

void copy_tile(std::uint32_t cb, std::uint32_t itile, std::uint32_t idst, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "copy_tile");
    std::string call = strformat("copy_tile(cb=%u, tile=%u, dst=%u)", cb, itile, idst);
    require_math(run, call);
    const bool transpose = run.compute->fpu == FpuOp::Transpose;  // copy_init(cb, /*transpose=*/1)
    check_fpu(run, transpose ? FpuOp::Transpose : FpuOp::Copy, cb, cb, call);
    check_dst_index(run, idst, call);
    bool to_dest_fp32 = run.compute->fp32_dest && (run.kernel->unpack_to_dest_fp32 >> cb & 1);
    float a[1024];
    check_unpacker(run, 0, cb, call);
    unpack_operand(run, cb, itile, !to_dest_fp32, a, call);
    fpu_event(run, cb_unpack_bytes(run, cb), 1,
              transpose ? timing::costs().transpose_cycles_per_tile : timing::costs().datacopy_cycles_per_tile, 1);
    count(run, "copy_tile");
    if (timing::math_skipped()) return;
    float* d = dst_tile(run, idst);
    if (run.compute->face_transpose) {  // each 16x16 face transposed where it stands
        for (int r = 0; r < 32; ++r)
            for (int c = 0; c < 32; ++c) {
                const int fr = r & ~15, fc = c & ~15;
                d[r * 32 + c] = to_dst(*run.compute, a[(fr + (c & 15)) * 32 + fc + (r & 15)]);
            }
        return;
    }
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) d[r * 32 + c] = to_dst(*run.compute, transpose ? a[c * 32 + r] : a[r * 32 + c]);
}

namespace {
// SFPSTOCHRND, FP32 -> bounded sign-magnitude integer, rounding to nearest with ties away from zero ([ISA]
// SFPSTOCHRND_FloatInt.md's functional model, the same on both archs): |x| < 0.5 -> 0, |x| >= 2^16 or NaN -> the
// largest magnitude; `keep_sign` false takes the absolute value (the UINT16 mode).
std::uint32_t sfpu_round_to_int(float v, bool keep_sign, std::uint32_t max_magnitude) {
    const std::uint32_t c = fmt::bits_of(v);
    std::uint32_t sign = keep_sign ? c & 0x80000000u : 0u;
    const int exponent = static_cast<int>((c >> 23) & 0xFFu) - 127;
    std::uint64_t magnitude;
    if (exponent < -1) {
        magnitude = 0;
        sign = 0;
    } else if (exponent >= 16) {
        magnitude = max_magnitude;
    } else {
        magnitude = 0x800000u | (c & 0x7FFFFFu);
        magnitude = exponent >= 0 ? magnitude << exponent : magnitude >> -exponent;
        magnitude = (magnitude >> 23) + ((magnitude & 0x7FFFFFu) >= 0x400000u ? 1u : 0u);
        if (magnitude > max_magnitude) magnitude = max_magnitude;
        if (magnitude == 0) sign = 0;
    }
    return sign + static_cast<std::uint32_t>(magnitude);
}

// SFPMAD a * b + c: one rounding to nearest even, denormal inputs read as zero, a denormal result flushed to zero
// ([ISA] SFPMAD.md; the hardware keeps the product in more than fp32 but not infinite precision: a fused
// multiply-add can differ from it in the last bit of rare inputs)
float sfpu_mad(float a, float b, float c) {
    auto flush = [](float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; };
    return flush(std::fma(flush(a), flush(b), flush(c)));
}

// The approximate exp of the LLK (ckernel_sfpu_exp.h, 0.81.1, the same on both archs: exp_init<true, scale,
// clamping> and calculate_exponential<true, ...>), Schraudolph's method: an fp32's bits read as an integer grow
// linearly with log2 of its value, so i = x * scale * 256/ln2 + (127 * 256 - 11.18) rounded to an integer, shifted
// left 15 bits, is exp(x * scale) with the exponent and the top 8 mantissa bits (a linear interpolation of 2^f
// between powers of two, biased down to split its error). Lane for lane what its SFPU instructions compute:
// ClampToNegative first raises x to -88.5 / scale (SFPSWAP min/max, sign-magnitude order), then SFPMAD,
// SFPSTOCHRND to an unsigned 16-bit magnitude and SFPSHFT by 15; without clamping, SFPSTOCHRND keeps the sign
// (int16, sign-magnitude), SFPSHFT2 shifts by 15 and SFPSETSGN restores the sign, so x below about -88 / scale
// gives a negative value (ttnn's kernels clear it with the packer's ReLU). The constants are the init's constexpr
// fp32 arithmetic: A * scale and -88.5 / scale, each rounded once.
float exp_approx_llk(float x, std::uint32_t scale_bits, bool clamp_negative) {
    constexpr float kLn2Recip = 1.4426950408889634f;
    constexpr float kA = 256.0f * kLn2Recip;
    constexpr float kBMinusC = 32500.818359375f;
    const float scale = fmt::float_of(scale_bits);
    const float a = kA * scale;
    if (clamp_negative) {
        const float threshold = -88.5f / scale;
        auto order = [](std::uint32_t u) {  // sign-magnitude -> two's complement order (SFPSWAP's SignMagIsSmaller)
            return static_cast<std::int32_t>(u ^ (static_cast<std::uint32_t>(static_cast<std::int32_t>(u) >> 30) >> 1));
        };
        if (order(fmt::bits_of(x)) < order(fmt::bits_of(threshold))) x = threshold;
        return fmt::float_of(sfpu_round_to_int(sfpu_mad(a, x, kBMinusC), false, 65535u) << 15);
    }
    const std::uint32_t r = sfpu_round_to_int(sfpu_mad(a, x, kBMinusC), true, 32767u);
    return fmt::float_of((r & 0x80000000u) | ((r << 15) & 0x7FFFFFFFu));
}

// An SFPSTORE of the approximate exp's fp32 result to DST: exact in fp32 DST; a bf16 DST keeps the top 16 bits
// (SFPSTORE truncates: ckernel_sfpu_exp.h's note on its bf16 path), float16 has room for its 8 mantissa bits
float exp_approx_to_dst(const ComputeState& cs, float v) {
    if (cs.fp32_dest || cs.dst16_format == fmt::Float16) return to_dst(cs, v);
    return fmt::float_of(fmt::bits_of(v) & 0xFFFF0000u);
}

// `op` runs on the configuration its init makes: its own, or another function's whose init it shares (ceil_tile and
// trunc_tile on floor_tile's rounding_op_tile_init, mask_posinf_tile on mask_tile_init)
// A configuration may serve another init's functions too: the approximate exp with its negative-input clamp serves
// add / sub / mul_binary_tile ([LLK] ttnn 0.81.1, both archs: exp_init starts with what their init does --
// SFPCONFIG(0, 0xF, 1), ADDR_MOD_7 with zero increments, reset_counters; sfpu_binary_init does nothing for them --
// then writes only LREG12-14 and the load-macro registers; its clamped calls change no address modifier, the
// unclamped mode's set ADDR_MOD_7 to a dest increment of 2). The compiler does not rely on it yet: every
// subtract it emits keeps its own init
bool sfpu_serves(const ComputeState& cs, SfpuOp need) {
    if (cs.sfpu == need) return true;
    return cs.sfpu == SfpuOp::Exp && cs.exp_approx && cs.exp_clamp_negative && need == SfpuOp::AddBinary;
}

void check_sfpu(KernelRun& run, SfpuOp op, const std::string& call) {
    require_math(run, call);
    const SfpuOp need = sfpu_configured_by(op);
    if (!sfpu_serves(*run.compute, need))
        kernel_fail("init", call,
                    strformat("the SFPU is configured by %s; call %s() before this op",
                              sfpu_init_name(run.compute->sfpu), sfpu_init_name(need)));
}
// Int32 data needs all 32 bits of each DST element (the compute API's static_asserts and the LLK's INT32 loads)
void require_int32_dst(KernelRun& run, const std::string& call) {
    if (!run.compute->fp32_dest)
        kernel_fail("dst-format", call,
                    "Int32 data in DST needs a 32-bit DST: set fp32_dest_acc_en in the ComputeConfig (DST_ACCUM_MODE)");
}
}  // namespace

void sfpu_unary(SfpuOp op, std::uint32_t idst, std::uint32_t param_bits, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeSfpu, site, name);
    std::string call = sfpu_takes_param(op) ? strformat("%s(dst=%u, %s)", name, idst, hex(param_bits).c_str())
                                            : strformat("%s(dst=%u)", name, idst);
    check_sfpu(run, op, call);
    check_dst_index(run, idst, call);
    const ComputeState& cs = *run.compute;
    const bool approx_exp = op == SfpuOp::Exp && cs.exp_approx;
    sfpu_event(run, approx_exp ? exp_approx_instructions(cs.exp_clamp_negative) : sfpu_instructions(op));
    if (timing::math_skipped()) {
        count(run, name);
        return;
    }
    if (sfpu_integer(op)) {
        require_int32_dst(run, call);
        float* d = dst_tile(run, idst);
        const std::uint32_t p = param_bits;
        for (int e = 0; e < 1024; ++e) {
            std::uint32_t u, r = 0;
            std::memcpy(&u, &d[e], 4);
            switch (op) {
#define TTEMU_SFPU_INT_UNARY(Op, param, expr) \
    case SfpuOp::Op: r = (expr); break;
#include "ttemu/sfpu_ops.def"
                default: break;
            }
            std::memcpy(&d[e], &r, 4);
        }
        (void)p;
        count(run, name);
        return;
    }
    float s = fmt::float_of(param_bits);
    float* d = dst_tile(run, idst);
    if (approx_exp) {
        for (int e = 0; e < 1024; ++e)
            d[e] = exp_approx_to_dst(cs, exp_approx_llk(d[e], cs.exp_scale_bits, cs.exp_clamp_negative));
        count(run, name);
        return;
    }
    const float in_scale = op == SfpuOp::Exp ? run.compute->exp_scale : 1.0f;  // exp_tile_init<true, scale>
    for (int e = 0; e < 1024; ++e) {
        float x = d[e] * in_scale, v = x;
        switch (op) {
#define TTEMU_SFPU_UNARY(Op, param, expr) \
    case SfpuOp::Op: v = (expr); break;
#include "ttemu/sfpu_ops.def"
            default: break;
        }
        d[e] = to_dst(*run.compute, v);
    }
    count(run, name);
}

void sfpu_unary_faces(SfpuOp op, std::uint32_t idst, std::uint32_t param_bits, std::uint32_t faces, bool check_init,
                      bool approx, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeSfpu, site, name);
    std::string call = strformat("%s(dst=%u)", name, idst);
    // the kernels' own routines (no init check) run on whichever thread holds DST: the math thread inside
    // tile_regs_acquire..commit, the pack thread after tile_regs_wait (exp_packthread_tile, ttnn's PACK((...)) calls)
    const bool on_pack = !check_init && run.compute->dst_state == Dst::Waited;
    if (check_init)
        check_sfpu(run, op, call);
    else if (!on_pack)
        require_math(run, call);
    check_dst_index(run, idst, call);
    const int nfaces = __builtin_popcount(faces & 0xF);
    // the SFPU visits 8 rows of 4 lanes per face-quarter: a face costs a quarter of a whole tile's rows
    const ComputeState& cs = *run.compute;
    const bool approx_exp = op == SfpuOp::Exp && (check_init ? cs.exp_approx : approx);
    // exp_tile's approximate exp after its own init is the LLK's algorithm (which never reads scale_en's factor);
    // the kernels' own approximate SFPI routines (exp_tile_first_column) and the pack thread's exp stay libm exp
    const bool llk_approx = approx_exp && check_init;
    sfpu_event(
        run,
        (approx_exp ? exp_approx_instructions(check_init ? cs.exp_clamp_negative : false) : sfpu_instructions(op)) *
            nfaces / 4.0,
        on_pack ? timing::kPack : timing::kMath);
    if (timing::math_skipped()) {
        count(run, name);
        return;
    }
    float s = fmt::float_of(param_bits);
    if (op == SfpuOp::Exp && check_init) s *= cs.exp_scale;  // exp_tile_init<true, scale>'s scale too
    float* d = dst_tile(run, idst);
    for (int f = 0; f < 4; ++f) {
        if (!(faces >> f & 1)) continue;
        for (int r = (f >> 1) * 16; r < (f >> 1) * 16 + 16; ++r)
            for (int c = (f & 1) * 16; c < (f & 1) * 16 + 16; ++c) {
                float x = d[r * 32 + c], v = x;
                if (llk_approx) {
                    d[r * 32 + c] = exp_approx_to_dst(cs, exp_approx_llk(x, cs.exp_scale_bits, cs.exp_clamp_negative));
                    continue;
                }
                if (op == SfpuOp::Exp) {
                    v = std::exp(x * s);
                } else {
                    switch (op) {
#define TTEMU_SFPU_UNARY(Op, param, expr) \
    case SfpuOp::Op: v = (expr); break;
#include "ttemu/sfpu_ops.def"
                        default: break;
                    }
                }
                d[r * 32 + c] = to_dst(*run.compute, v);
            }
    }
    count(run, name);
}

void sfpu_scalar(ScalarOp op, std::uint32_t idst, std::uint32_t param_bits, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeSfpu, site, name);
    std::string call = strformat("%s(dst=%u, %s)", name, idst, hex(param_bits).c_str());
    check_sfpu(run, SfpuOp::BinopScalar, call);
    check_dst_index(run, idst, call);
    sfpu_event(run, timing::costs().sfpu_instr_simple);
    if (timing::math_skipped()) {
        count(run, name);
        return;
    }
    float s = fmt::float_of(param_bits);
    float* d = dst_tile(run, idst);
    for (int e = 0; e < 1024; ++e) {
        float x = d[e], v = x;
        switch (op) {
            case ScalarOp::Add: v = x + s; break;
            case ScalarOp::Sub: v = x - s; break;
            case ScalarOp::Mul: v = x * s; break;
            case ScalarOp::Div: v = x / s; break;
            case ScalarOp::Rsub: v = s - x; break;
        }
        d[e] = to_dst(*run.compute, v);
    }
    count(run, name);
}

void sfpu_binary(SfpuOp op, std::uint32_t i0, std::uint32_t i1, std::uint32_t odst, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeSfpu, site, name);
    std::string call = strformat("%s(%u, %u, %u)", name, i0, i1, odst);
    check_sfpu(run, op, call);
    check_dst_index(run, i0, call);
    check_dst_index(run, i1, call);
    check_dst_index(run, odst, call);
    const bool integer = sfpu_integer(op);
    if (integer) require_int32_dst(run, call);
    // two loads; an Int32 function's own count (its LLK loop) includes them
    sfpu_event(run, integer ? sfpu_instructions(op) : timing::costs().sfpu_instr_simple + 1);
    if (timing::math_skipped()) {
        count(run, name);
        return;
    }
    if (integer) {
        std::uint32_t in0[1024], in1[1024];
        std::memcpy(in0, dst_tile(run, i0), sizeof in0);
        std::memcpy(in1, dst_tile(run, i1), sizeof in1);
        float* d = dst_tile(run, odst);
        for (int e = 0; e < 1024; ++e) {
            const std::uint32_t a = in0[e], b = in1[e];
            std::uint32_t r = 0;
            switch (op) {
#define TTEMU_SFPU_INT_BINARY(Op, expr) \
    case SfpuOp::Op: r = (expr); break;
#include "ttemu/sfpu_ops.def"
                default: break;
            }
            std::memcpy(&d[e], &r, 4);
        }
        count(run, name);
        return;
    }
    float in0[1024], in1[1024];
    std::memcpy(in0, dst_tile(run, i0), sizeof in0);
    std::memcpy(in1, dst_tile(run, i1), sizeof in1);
    float* d = dst_tile(run, odst);
    for (int e = 0; e < 1024; ++e) {
        float a = in0[e], b = in1[e], v = 0;
        switch (op) {
#define TTEMU_SFPU_BINARY(Op, expr) \
    case SfpuOp::Op: v = (expr); break;
#include "ttemu/sfpu_ops.def"
            default: break;
        }
        d[e] = to_dst(*run.compute, v);
    }
    count(run, name);
}

void sfpu_binary_raw(SfpuOp op, std::uint32_t i0, std::uint32_t i1, std::uint32_t odst, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeSfpu, site, name);
    std::string call = strformat("%s(%u, %u, %u)", name, i0, i1, odst);
    require_math(run, call);
    check_dst_index(run, i0, call);
    check_dst_index(run, i1, call);
    check_dst_index(run, odst, call);
    sfpu_event(run, timing::costs().sfpu_instr_simple + 1);  // two loads
    if (timing::math_skipped()) {
        count(run, name);
        return;
    }
    const float* a = dst_tile(run, i0);
    const float* b = dst_tile(run, i1);
    float* d = dst_tile(run, odst);
    for (int e = 0; e < 1024; ++e) {
        float x = a[e], y = b[e], v = 0;
        switch (op) {
            case SfpuOp::MaxBinary: v = y > x ? y : x; break;
            default: dev::unsupported(name, site);
        }
        d[e] = to_dst(*run.compute, v);
    }
    count(run, name);
}

void tile_regs_acquire(Site site) {
    KernelRun& run = compute_run(Api::ComputeDst, site, "tile_regs_acquire");
    require_started(run, "tile_regs_acquire()");
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Idle)
        kernel_fail(
            "dst-protocol", "tile_regs_acquire()",
            std::string("DST is ") + dst_state_name(cs.dst_state) + "; release it with tile_regs_release() first");
    cs.dst_state = Dst::Acquired;
    ++run.counters.dst_acquires;
    if (run.trace)
        timing::record(run, timing::kMath, Ev::DstAcquire, static_cast<float>(timing::costs().tile_regs_cycles),
                       ++run.trace->dst_acquires);
}

void tile_regs_commit(Site site) {
    KernelRun& run = compute_run(Api::ComputeDst, site, "tile_regs_commit");
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Acquired)
        kernel_fail(
            "dst-protocol", "tile_regs_commit()",
            std::string("tile_regs_commit without tile_regs_acquire (DST is ") + dst_state_name(cs.dst_state) + ")");
    cs.dst_state = Dst::Committed;
    if (run.trace)
        timing::record(run, timing::kMath, Ev::DstCommit, static_cast<float>(timing::costs().tile_regs_cycles),
                       ++run.trace->dst_commits);
}

void tile_regs_wait(Site site) {
    KernelRun& run = compute_run(Api::ComputeDst, site, "tile_regs_wait");
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Committed)
        kernel_fail("dst-protocol", "tile_regs_wait()",
                    std::string("tile_regs_wait without a preceding tile_regs_commit (DST is ") +
                        dst_state_name(cs.dst_state) + "): PACK would wait forever");
    cs.dst_state = Dst::Waited;
    if (run.trace)
        timing::record(run, timing::kPack, Ev::DstWait, static_cast<float>(timing::costs().tile_regs_cycles),
                       ++run.trace->dst_waits);
}

void tile_regs_release(Site site) {
    KernelRun& run = compute_run(Api::ComputeDst, site, "tile_regs_release");
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Waited)
        kernel_fail(
            "dst-protocol", "tile_regs_release()",
            std::string("tile_regs_release without tile_regs_wait (DST is ") + dst_state_name(cs.dst_state) + ")");
    if (!timing::math_skipped())
        std::fill(cs.dst.begin(), cs.dst.end(), 0.0f);  // the packer zeroes the section it frees
    cs.dst_state = Dst::Idle;
    if (run.trace)
        timing::record(run, timing::kPack, Ev::DstRelease, static_cast<float>(timing::costs().tile_regs_cycles),
                       ++run.trace->dst_releases);
}

}  // namespace dev

namespace {
// The L1 address of tile position `pos` of `ocb`'s reserved pages for the packer, with the packer's checks (the
// calling kernel produces into ocb, the position is reserved, the format is a tile format the packer is set for).
std::uint8_t* pack_target(KernelRun& run, std::uint32_t ocb, std::uint32_t pos, std::uint8_t& format,
                          const std::string& call) {
    ComputeState& cs = *run.compute;
    Core& core = *run.core;
    std::lock_guard<std::mutex> lk(core.mu);
    format = cb_format(run, ocb, call);
    CircularBuffer& c = core.cbs[ocb];
    // In place: the packer writes at the CB's write pointer whether or not pages are reserved; on a full CB that
    // is the front, so the compute kernel that both produces and consumes a CB may overwrite its produced pages
    // (ttnn's *_inplace helpers and L1-accumulating updates: pack over the full CB, pop, reserve, push).
    // Likewise it may pack into free pages it has not reserved (matmul_reduce: pop, pack, push).
    const bool own = (c.producer == &run || c.consumer == &run) && (!c.consumer || c.consumer == &run) &&
                     (!c.producer || c.producer == &run);
    const bool in_place =
        pos >= c.back_granted && own && c.num_pages && (c.used() == c.num_pages || pos < c.num_pages - c.used());
    if (c.producer != &run && !in_place)
        kernel_fail("cb-role", call, strformat("packs into CB c_%u without cb_reserve_back on it", ocb));
    if (pos >= c.back_granted && !in_place)
        kernel_fail("cb-out-of-range", call,
                    strformat("out-of-range CB access: writes tile position %u of CB c_%u, but only %u page(s) are "
                              "reserved by cb_reserve_back",
                              pos, ocb, c.back_granted));
    if (c.wr_page + pos >= c.num_pages)
        kernel_fail("cb-wrap", call, strformat("tile position %u runs past the end of CB c_%u", pos, ocb));
    if (!fmt::supported(format) || c.page_size < fmt::tile_bytes(format))
        kernel_fail(
            "cb-format", call,
            strformat("CB c_%u has format %s and page size %u B: not a tile", ocb, fmt::name(format), c.page_size));
    if (cb_format(run, cs.pack_cb, call) != format)
        kernel_fail("init", call,
                    strformat("CB c_%u is %s but the packer is configured for c_%u (%s) by compute_kernel_hw_startup "
                              "or pack_reconfig_data_format",
                              ocb, fmt::name(format), cs.pack_cb, fmt::name(cb_format(run, cs.pack_cb, call))));
    const std::uint32_t local = c.base + (c.wr_page + pos) * c.page_size;
    cs.last_pack = local;
    tags_clear(core, local);  // a packed page holds what the packer wrote; dev::page_tag may say which DRAM page
    return core.l1 + local;
}

// The packer's output stage: ReLU, then (with L1 accumulation) the sum with the tile already in L1, in fp32,
// rounded once to the CB format.
void pack_out(ComputeState& cs, const float* tile, std::uint8_t format, std::uint8_t* dst) {
    float out[1024];
    for (int e = 0; e < 1024; ++e) out[e] = cs.pack_relu && tile[e] < 0.0f ? 0.0f : tile[e];
    if (cs.pack_l1_acc) {
        float prev[1024];
        fmt::unpack_tile(dst, format, prev);
        for (int e = 0; e < 1024; ++e) out[e] += prev[e];
    }
    fmt::pack_tile(out, format, dst);
}
}  // namespace

namespace dev {

// One packer call writes `pack_width` DST tiles (llk_pack_init's MOP width, 1 unless a kernel widens it) to
// consecutive tiles of the CB: DST[idst + j] -> position + j.
void pack_tile(std::uint32_t idst, std::uint32_t ocb, std::uint32_t out_index, bool out_of_order, Site site) {
    KernelRun& run = compute_run(Api::ComputePack, site, "pack_tile");
    ComputeState& cs = *run.compute;
    const std::uint32_t width = cs.pack_width;
    std::string call = width == 1 ? strformat("pack_tile(dst=%u, cb=%u, out_index=%u)", idst, ocb, out_index)
                                  : strformat("pack_tile(dst=%u, cb=%u, out_index=%u; %u tiles per pack MOP)", idst,
                                              ocb, out_index, width);
    require_started(run, call);
    if (cs.dst_state != Dst::Waited)
        kernel_fail("dst-protocol", call,
                    std::string("pack_tile outside tile_regs_wait()..tile_regs_release() (DST is ") +
                        dst_state_name(cs.dst_state) + ")");
    check_dst_index(run, idst + width - 1, call);
    std::uint32_t pos;
    {
        std::lock_guard<std::mutex> lk(run.core->mu);
        CircularBuffer& c = run.core->cbs[ocb < kMaxCBs ? ocb : 0];
        pos = out_of_order ? out_index : c.pack_seq;
        if (!out_of_order && out_index != c.pack_seq && !cs.warned_pack_index) {
            cs.warned_pack_index = true;
            add_warning(run.who() + ": " + call +
                        strformat(": output_tile_index is ignored unless pack_tile<true>; the tile goes to position %u",
                                  c.pack_seq));
        }
    }
    std::vector<std::uint8_t*> targets(width);
    std::uint8_t format = 0;
    for (std::uint32_t j = 0; j < width; ++j) targets[j] = pack_target(run, ocb, pos + j, format, call);
    if (!out_of_order) {
        std::lock_guard<std::mutex> lk(run.core->mu);
        run.core->cbs[ocb].pack_seq += width;
    }
    pack_event(run, ocb, width);
    run.counters.tile_ops["pack_tile"] += width;
    if (timing::math_skipped()) return;
    for (std::uint32_t j = 0; j < width; ++j) {
        const float* tile = dst_tile(run, idst + j);
        float masked[1024];
        if (cs.pack_mask_cb == static_cast<int>(ocb)) {  // reduce_init's edge mask: only the reduced datums are packed
            for (int r = 0; r < 32; ++r)
                for (int c = 0; c < 32; ++c) {
                    bool keep = cs.pack_mask_dim == 0 ? c == 0 : cs.pack_mask_dim == 1 ? r == 0 : (r == 0 && c == 0);
                    masked[r * 32 + c] = keep ? tile[r * 32 + c] : 0.0f;
                }
            tile = masked;
        }
        pack_out(cs, tile, format, targets[j]);
    }
}

// llk_pack_init(ocb, num_tiles): the packer MOP packs `num_tiles` tiles per call from then on
void pack_width(std::uint32_t ocb, std::uint32_t num_tiles, Site site) {
    KernelRun& run = compute_run(Api::ComputeConfig, site, "llk_pack_init");
    std::string call = strformat("llk_pack_init(cb=%u, num_tiles=%u)", ocb, num_tiles);
    require_started(run, call);
    cb_format(run, ocb, call);
    if (num_tiles == 0 || num_tiles > run.compute->dst_capacity)
        kernel_fail("init", call, strformat("num_tiles must be 1 to %u (a DST section)", run.compute->dst_capacity));
    run.compute->pack_width = num_tiles;
    config_event(run, {timing::kPack}, timing::costs().reconfig_cycles);
}

void pack_l1_acc(bool enable, Site site) {
    KernelRun& run = compute_run(Api::ComputeConfig, site, "pack_reconfig_l1_acc");
    require_started(run, "pack_reconfig_l1_acc()");
    run.compute->pack_l1_acc = enable;
    config_event(run, {timing::kPack}, timing::costs().pack_l1_acc_config_cycles);
}

void pack_relu(bool enable, Site site) {
    KernelRun& run = compute_run(Api::ComputeConfig, site, "pack_relu_config");
    require_started(run, "pack_relu_config()");
    run.compute->pack_relu = enable;
    config_event(run, {timing::kPack}, timing::costs().pack_relu_config_cycles);
}

// Sets the unpackers' source formats (check_unpacker reads them). The conditional (old, new) forms reconfigure a
// source only when old's format differs from new's ([LLK] llk_unpack_reconfig_data_format_srca/srcb(old, new)), so
// a wrong `old` of new's format leaves the unpacker as it was.
void unpack_reconfig(std::uint32_t old_a, std::uint32_t new_a, std::uint32_t old_b, std::uint32_t new_b, bool a, bool b,
                     bool conditional, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeConfig, site, name);
    std::string call = conditional ? strformat("%s(old=c_%u, new=c_%u%s)", name, a ? old_a : old_b, a ? new_a : new_b,
                                               a && b ? strformat(", old=c_%u, new=c_%u", old_b, new_b).c_str() : "")
                                   : strformat("%s(c_%u%s)", name, a ? new_a : new_b,
                                               a && b ? strformat(", c_%u", new_b).c_str() : "");
    require_started(run, call);
    ComputeState& cs = *run.compute;
    const std::uint32_t olds[2] = {old_a, old_b}, news[2] = {new_a, new_b};
    const bool which[2] = {a, b};
    for (int s = 0; s < 2; ++s) {
        if (!which[s]) continue;
        const std::uint8_t fo = cb_format(run, olds[s], call), fn = cb_format(run, news[s], call);
        if (conditional && fo == fn) continue;
        cs.src_format[s] = fn;
        cs.src_cb[s] = news[s];
        cs.src_by[s] = call;
    }
    config_event(run, {timing::kUnpack, timing::kMath}, timing::costs().reconfig_cycles);
}

namespace {
// The consumer window of `cb` as row-major datums: `pages` pages from the read pointer, checked like an unpack.
std::vector<float> read_rows(KernelRun& run, std::uint32_t cb, std::uint32_t pages, const std::string& call) {
    Core& core = *run.core;
    std::uint32_t addr, bytes;
    std::uint8_t format;
    {
        std::lock_guard<std::mutex> lk(core.mu);
        format = cb_format(run, cb, call);
        CircularBuffer& c = core.cbs[cb];
        if (c.consumer != &run)
            kernel_fail("cb-role", call, strformat("reads CB c_%u without cb_wait_front on it", cb));
        if (pages > c.front_granted)
            kernel_fail("cb-out-of-range", call,
                        strformat("reads %u page(s) of CB c_%u, but only %u page(s) were obtained by cb_wait_front",
                                  pages, cb, c.front_granted));
        addr = c.base + c.rd_page * c.page_size;
        bytes = pages * c.page_size;
    }
    std::vector<float> v(bytes / fmt::datum_bytes(format));
    if (!fmt::unpack_rows(core.l1 + addr, format, v.data(), v.size()))
        kernel_fail("cb-format", call,
                    strformat("CB c_%u holds %s, which has no row-major form", cb, fmt::name(format)));
    return v;
}

// `n` row-major datums into `ocb`'s reserved pages from the write pointer (the packer's untilized output).
void write_rows(KernelRun& run, std::uint32_t ocb, std::uint32_t first_datum, const float* v, std::size_t n,
                std::uint32_t pages_needed, const std::string& call) {
    Core& core = *run.core;
    std::uint8_t format;
    std::uint32_t addr;
    {
        std::lock_guard<std::mutex> lk(core.mu);
        format = cb_format(run, ocb, call);
        CircularBuffer& c = core.cbs[ocb];
        if (c.producer != &run)
            kernel_fail("cb-role", call, strformat("packs into CB c_%u without cb_reserve_back on it", ocb));
        if (pages_needed > c.back_granted)
            kernel_fail("cb-out-of-range", call,
                        strformat("writes %u page(s) of CB c_%u, but only %u page(s) are reserved by cb_reserve_back",
                                  pages_needed, ocb, c.back_granted));
        if (cb_format(run, run.compute->pack_cb, call) != format)
            kernel_fail("init", call,
                        strformat("CB c_%u is %s but the packer is configured for c_%u", ocb, fmt::name(format),
                                  run.compute->pack_cb));
        addr = c.base + c.wr_page * c.page_size + first_datum * fmt::datum_bytes(format);
    }
    float out[1024];
    for (std::size_t done = 0; done < n;) {
        std::size_t chunk = std::min<std::size_t>(1024, n - done);
        for (std::size_t i = 0; i < chunk; ++i) out[i] = run.compute->pack_relu && v[done + i] < 0 ? 0.0f : v[done + i];
        if (!fmt::pack_rows(out, format, core.l1 + addr + done * fmt::datum_bytes(format), chunk))
            kernel_fail("cb-format", call,
                        strformat("CB c_%u holds %s, which has no row-major form", ocb, fmt::name(format)));
        done += chunk;
    }
}
}  // namespace

// `block` tiles' worth of rows (32 rows x block*32 datums) of icb -> `block` tiles of ocb, through DST's rounding.
void tilize_block(std::uint32_t icb, std::uint32_t block, std::uint32_t ocb, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "tilize_block");
    std::string call = strformat("tilize_block(icb=%u, block=%u, ocb=%u)", icb, block, ocb);
    require_started(run, call);
    check_fpu(run, FpuOp::Tilize, icb, icb, call);
    if (run.compute->dst_state != Dst::Idle)
        kernel_fail("dst-protocol", call,
                    "tilize_block acquires DST itself: call it outside tile_regs_acquire..release");
    check_unpacker(run, 0, icb, call);
    std::vector<float> rows = read_rows(run, icb, block, call);
    self_managed_dst_event(run, block * cb_tile_bytes(run, icb), block,
                           block * timing::costs().datacopy_cycles_per_tile, ocb, block);
    const std::uint32_t width = block * 32;
    if (rows.size() < static_cast<std::size_t>(width) * 32)
        kernel_fail("cb-format", call,
                    strformat("%u page(s) of CB c_%u hold fewer than 32 rows of %u datums", block, icb, width));
    std::uint32_t seq;
    {
        std::lock_guard<std::mutex> lk(run.core->mu);
        seq = run.core->cbs[ocb < kMaxCBs ? ocb : 0].pack_seq;
    }
    for (std::uint32_t t = 0; t < block; ++t) {
        std::uint8_t format;
        std::uint8_t* dst = pack_target(run, ocb, seq + t, format, call);
        if (timing::math_skipped()) continue;
        float tile[1024];
        for (int r = 0; r < 32; ++r)
            for (int c = 0; c < 32; ++c) tile[r * 32 + c] = to_dst(*run.compute, rows[r * width + t * 32 + c]);
        pack_out(*run.compute, tile, format, dst);
    }
    {
        std::lock_guard<std::mutex> lk(run.core->mu);
        run.core->cbs[ocb].pack_seq += block;
    }
    run.counters.tile_ops["tilize_block (tiles)"] += block;
}

// `full_ct_dim` tiles of icb -> 32 row-major rows of full_ct_dim*32 datums in ocb.
void untilize_block(std::uint32_t icb, std::uint32_t full_ct_dim, std::uint32_t ocb, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "untilize_block");
    std::string call = strformat("untilize_block(icb=%u, full_ct_dim=%u, ocb=%u)", icb, full_ct_dim, ocb);
    require_started(run, call);
    check_fpu(run, FpuOp::Untilize, icb, icb, call);
    if (run.compute->dst_state != Dst::Idle)
        kernel_fail("dst-protocol", call,
                    "untilize_block acquires DST itself: call it outside tile_regs_acquire..release");
    const std::uint32_t width = full_ct_dim * 32;
    self_managed_dst_event(run, full_ct_dim * cb_tile_bytes(run, icb), full_ct_dim,
                           full_ct_dim * timing::costs().datacopy_cycles_per_tile, ocb, full_ct_dim);
    std::vector<float> rows(static_cast<std::size_t>(width) * 32);
    for (std::uint32_t t = 0; t < full_ct_dim; ++t) {
        float tile[1024];
        check_unpacker(run, 0, icb, call);
        unpack_operand(run, icb, t, true, tile, call);
        if (timing::math_skipped()) continue;
        for (int r = 0; r < 32; ++r)
            for (int c = 0; c < 32; ++c) rows[r * width + t * 32 + c] = to_dst(*run.compute, tile[r * 32 + c]);
    }
    write_rows(run, ocb, 0, rows.data(), rows.size(), full_ct_dim, call);
    run.counters.tile_ops["untilize_block (tiles)"] += full_ct_dim;
}

// DST tiles [0, block_rt_dim * block_ct_dim) -> rows of the output block (block_rt_dim tile rows, full_ct_dim tiles
// wide, row-major from the write pointer); this call fills column chunk block_c_index.
void pack_untilize_dest(std::uint32_t ocb, std::uint32_t block_rt_dim, std::uint32_t block_c_index,
                        std::uint32_t block_ct_dim, std::uint32_t full_ct_dim, Site site) {
    KernelRun& run = compute_run(Api::ComputePack, site, "pack_untilize_dest");
    std::string call = strformat("pack_untilize_dest<%u, %u>(ocb=%u, block_rt_dim=%u, block_c_index=%u)", block_ct_dim,
                                 full_ct_dim, ocb, block_rt_dim, block_c_index);
    require_started(run, call);
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Waited)
        kernel_fail("dst-protocol", call,
                    std::string("pack outside tile_regs_wait()..tile_regs_release() (DST is ") +
                        dst_state_name(cs.dst_state) + ")");
    if ((block_c_index + 1) * block_ct_dim > full_ct_dim)
        kernel_fail("pack-untilize", call, "block_c_index * block_ct_dim runs past full_ct_dim");
    check_dst_index(run, block_rt_dim * block_ct_dim - 1, call);
    pack_event(run, ocb, block_rt_dim * block_ct_dim);
    const std::uint32_t width = full_ct_dim * 32;
    for (std::uint32_t rt = 0; rt < block_rt_dim && !timing::math_skipped(); ++rt)
        for (int r = 0; r < 32; ++r) {
            float row[1024];
            for (std::uint32_t ct = 0; ct < block_ct_dim; ++ct) {
                const float* t = dst_tile(run, rt * block_ct_dim + ct);
                for (int c = 0; c < 32; ++c) row[ct * 32 + c] = t[r * 32 + c];
            }
            std::uint32_t first = (rt * 32 + r) * width + block_c_index * block_ct_dim * 32;
            write_rows(run, ocb, first, row, block_ct_dim * 32, block_rt_dim * full_ct_dim, call);
        }
    run.counters.tile_ops["pack_untilize_dest (tiles)"] += block_rt_dim * block_ct_dim;
}

void pack_reconfig(std::uint32_t ocb, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeConfig, site, name);
    std::string call = strformat("%s(%u)", name, ocb);
    require_started(run, call);
    cb_format(run, ocb, call);
    run.compute->pack_cb = ocb;
    config_event(run, {timing::kPack}, timing::costs().reconfig_cycles);
}

namespace {
const char* pool_name(int pool) { return pool == 0 ? "SUM" : pool == 1 ? "AVG" : pool == 2 ? "MAX" : "MIN"; }
const char* dim_name(int dim) { return dim == 0 ? "REDUCE_ROW" : dim == 1 ? "REDUCE_COL" : "REDUCE_SCALAR"; }
}  // namespace

void reduce_math_init(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, Site site) {
    std::string name = strformat("reduce_init<%s, %s>", pool_name(pool), dim_name(dim));
    fpu_init(FpuOp::Reduce, icb, icb_scaler, 0, name.c_str(), site);
    KernelRun& run = compute_run(Api::ComputeInit, site, "reduce_init");
    if (pool == 3) unsupported("reduce with PoolType::MIN", site);
    run.compute->reduce_pool = pool;
    run.compute->reduce_dim = dim;
}

void pack_reduce_mask(int dim, int ocb, Site site) {
    KernelRun& run =
        compute_run(Api::ComputeInit, site, ocb < 0 ? "llk_pack_reduce_mask_clear" : "llk_pack_reduce_mask_config");
    require_started(run, ocb < 0 ? "llk_pack_reduce_mask_clear()" : "llk_pack_reduce_mask_config()");
    if (ocb >= 0) cb_format(run, static_cast<std::uint32_t>(ocb), "llk_pack_reduce_mask_config(ocb)");
    run.compute->pack_mask_cb = ocb;
    run.compute->pack_mask_dim = dim;
    if (ocb < 0) config_event(run, {timing::kPack}, timing::costs().reconfig_cycles);
}

void reduce_init(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t ocb, Site site) {
    reduce_math_init(pool, dim, icb, icb_scaler, site);
    pack_reduce_mask(dim, static_cast<int>(ocb), site);
}

void reduce_uninit(Site site) { pack_reduce_mask(0, -1, site); }

// DST[idst] op= reduce(A * scaler). The scaler tile's first row of each 16x16 face weights the columns of A
// (rows 0-15 use faces 0/1, rows 16-31 faces 2/3); ttnn fills it with 1.0 (SUM, MAX) or 1/N (AVG). The result
// lands in column 0 (REDUCE_ROW), row 0 (REDUCE_COL) or [0, 0] (REDUCE_SCALAR); the other datums of DST are left
// as they are. SUM/AVG add to DST and MAX takes the maximum with it, so a row of tiles reduced into one DST tile
// accumulates (start from zeros, or -inf for MAX, as acquire's zeroed DST would otherwise cap the maximum at 0).
void reduce_tile(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t itile,
                 std::uint32_t itile_scaler, std::uint32_t idst, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "reduce_tile");
    std::string call = strformat("reduce_tile<%s, %s>(icb=%u, icb_scaler=%u, itile=%u, itile_scaler=%u, dst=%u)",
                                 pool_name(pool), dim_name(dim), icb, icb_scaler, itile, itile_scaler, idst);
    require_math(run, call);
    check_fpu(run, FpuOp::Reduce, icb, icb_scaler, call);
    ComputeState& cs = *run.compute;
    if (cs.reduce_pool != pool || cs.reduce_dim != dim)
        kernel_fail(
            "init", call,
            strformat("reduce_init was called for <%s, %s>", pool_name(cs.reduce_pool), dim_name(cs.reduce_dim)));
    check_dst_index(run, idst, call);
    float a[1024], sc[1024];
    // SUM/AVG REDUCE_ROW swaps the operands: the scaler into srcA, the data into srcB; MAX and the other dims keep
    // data -> srcA ([LLK] llk_unpack_AB_reduce.h, swap_operands; ttnn's reduce kernels reconfigure to match)
    const bool swap = dim == 0 && pool != 2;
    check_unpacker(run, swap ? 1 : 0, icb, call);
    check_unpacker(run, swap ? 0 : 1, icb_scaler, call);
    unpack_operand(run, icb, itile, true, a, call);
    unpack_operand(run, icb_scaler, itile_scaler, true, sc, call);
    fpu_event(run, cb_unpack_bytes(run, icb) + cb_unpack_bytes(run, icb_scaler), 2,
              timing::costs().reduce_cycles_per_tile, 1);
    if (timing::math_skipped()) {
        count(run, "reduce_tile");
        return;
    }
    auto scale = [&](int r, int c) {
        int face_row = r < 16 ? 0 : 16;
        return dim == 1 ? sc[(c < 16 ? 0 : 16) * 32 + r] : sc[face_row * 32 + c];
    };
    const bool is_max = pool == 2;
    float* d = dst_tile(run, idst);
    auto combine = [&](int e, float v) { d[e] = to_dst(cs, is_max ? (d[e] > v ? d[e] : v) : d[e] + v); };
    auto fold = [&](float acc, float v) { return is_max ? (acc > v ? acc : v) : acc + v; };
    const float init = is_max ? -INFINITY : 0.0f;
    if (dim == 0) {
        for (int r = 0; r < 32; ++r) {
            float acc = init;
            for (int c = 0; c < 32; ++c) acc = fold(acc, a[r * 32 + c] * scale(r, c));
            combine(r * 32, acc);
        }
    } else if (dim == 1) {
        for (int c = 0; c < 32; ++c) {
            float acc = init;
            for (int r = 0; r < 32; ++r) acc = fold(acc, a[r * 32 + c] * scale(r, c));
            combine(c, acc);
        }
    } else {
        float acc = init;
        for (int r = 0; r < 32; ++r)
            for (int c = 0; c < 32; ++c) acc = fold(acc, a[r * 32 + c] * scale(r, c));
        combine(0, acc);
    }
    count(run, "reduce_tile");
}

// sfpu_reduce_init<pool, format>: configures the SFPU (its compare-and-swap direction, the replay buffer) for
// sfpu_reduce; the pool and format it was called for are the ones sfpu_reduce may use
void sfpu_reduce_init(int pool, std::uint8_t format, Site site) {
    KernelRun& run = compute_run(Api::ComputeInit, site, "sfpu_reduce_init");
    require_started(run, strformat("sfpu_reduce_init<%s, %s>()", pool_name(pool), fmt::name(format)));
    ComputeState& cs = *run.compute;
    cs.sfpu = SfpuOp::Reduce;
    cs.sfpu_reduce_pool = pool;
    cs.sfpu_reduce_format = format;
    cs.exp_scale = 1.0f;
    cs.exp_scale_bits = 0x3F800000u;
    cs.exp_approx = false;
    config_event(run, {timing::kMath}, timing::costs().init_sfpu_cycles);
}

namespace {
// SFPSWAP's order (tt-isa-documentation SFPSWAP.md): FP32 compared as sign-magnitude integers, the total order
// -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN
std::int64_t swap_order(float v) {
    const std::uint32_t u = fmt::bits_of(v);
    const std::int64_t magnitude = u & 0x7fffffffu;
    return (u >> 31) ? -magnitude - 1 : magnitude;
}
}  // namespace

// sfpu_reduce<MAX|MIN, Float32|Float16_b, REDUCE_ROW>(idst, ct_dim, rt_dim), as ckernel_sfpu_reduce.h computes it
// (0.81.1, both archs): for each of the rt_dim rows of ct_dim tiles from idst, each tile's 32 rows are reduced by
// compare-and-swap (exact: no rounding, SFPSWAP's order), and the SFPSTORE of each 4-row group writes the row's
// extreme to its even columns of the left faces (tile columns 0, 2, ..., 14; the odd ones and faces 1 and 3 keep
// their data); with ct_dim > 1 those columns of the row's first tile then take the extreme across its tiles.
// Column 0 of the first tile of each row of tiles holds the result.
void sfpu_reduce(int pool, int dim, std::uint8_t format, std::uint32_t idst, std::uint32_t ct_dim, std::uint32_t rt_dim,
                 Site site) {
    KernelRun& run = compute_run(Api::ComputeSfpu, site, "sfpu_reduce");
    std::string call = strformat("sfpu_reduce<%s, %s, %s>(dst=%u, ct_dim=%u, rt_dim=%u)", pool_name(pool),
                                 fmt::name(format), dim_name(dim), idst, ct_dim, rt_dim);
    check_sfpu(run, SfpuOp::Reduce, call);
    ComputeState& cs = *run.compute;
    if (cs.sfpu_reduce_pool != pool || cs.sfpu_reduce_format != format)
        kernel_fail("init", call,
                    strformat("sfpu_reduce_init was called for <%s, %s>", pool_name(cs.sfpu_reduce_pool),
                              fmt::name(cs.sfpu_reduce_format)));
    if (dim != 0 || (pool != 2 && pool != 3))
        unsupported(
            strformat("%s: the emulator computes the row MAX and MIN of sfpu_reduce only", call.c_str()).c_str(), site);
    if (format != fmt::Float32 && format != fmt::Float16_b)
        unsupported(strformat("%s: integer formats (the emulator's DST holds floats)", call.c_str()).c_str(), site);
    if (ct_dim == 0 || rt_dim == 0) kernel_fail("sfpu-reduce", call, "ct_dim and rt_dim must be at least 1");
    check_dst_index(run, idst + ct_dim * rt_dim - 1, call);
    // instructions ([LLK] ckernel_sfpu_reduce.h): the registry's per-tile body for each tile; per row of tiles with
    // ct_dim > 1, the cross-tile combine (max_first_columns_across_tiles: 2 batches of 4 loads, 4 loads and 4 swaps
    // per further tile, 4 stores); per call, the direction reset (SFPCONFIG, 3 more to select MIN) and the 16
    // instructions recorded into the replay buffer
    const timing::Costs& c = timing::costs();
    const double per_tile = c.sfpu_instr_reduce_row * c.sfpu_rows_per_tile;
    const double across = ct_dim > 1 ? 2.0 * (8.0 + 8.0 * (ct_dim - 1)) : 0.0;
    const double setup = 1.0 + (pool == 3 ? 3.0 : 0.0) + 16.0;
    sfpu_event(run, (rt_dim * (ct_dim * per_tile + across) + setup) / c.sfpu_rows_per_tile);
    if (timing::math_skipped()) {
        count(run, "sfpu_reduce");
        return;
    }
    const bool is_max = pool == 2;
    auto extreme = [&](float a, float b) {
        return (is_max ? swap_order(b) > swap_order(a) : swap_order(b) < swap_order(a)) ? b : a;
    };
    for (std::uint32_t i = 0; i < rt_dim; ++i) {
        for (std::uint32_t j = 0; j < ct_dim; ++j) {
            float* d = dst_tile(run, idst + i * ct_dim + j);
            for (int r = 0; r < 32; ++r) {
                float m = d[r * 32];
                for (int col = 1; col < 32; ++col) m = extreme(m, d[r * 32 + col]);
                for (int col = 0; col < 16; col += 2) d[r * 32 + col] = m;
            }
        }
        float* first = dst_tile(run, idst + i * ct_dim);
        for (std::uint32_t j = 1; j < ct_dim; ++j) {
            const float* other = dst_tile(run, idst + i * ct_dim + j);
            for (int r = 0; r < 32; ++r)
                for (int col = 0; col < 16; col += 2)
                    first[r * 32 + col] = extreme(first[r * 32 + col], other[r * 32 + col]);
        }
    }
    count(run, "sfpu_reduce");
}

// reduce_block_max_row_init: the unpacker and the math MOP for `block_ct` tiles per call ([LLK]
// llk_math_reduce_custom.h: per tile, GMPOOLs over F0/F1 and F2/F3 into DST row 0 of faces 0 and 2, then one
// transpose of those rows into column 0), the packer's row-reduce mask.
void reduce_block_max_row_init(std::uint32_t ocb, std::uint32_t block_ct, Site site) {
    KernelRun& run = compute_run(Api::ComputeInit, site, "reduce_block_max_row_init");
    std::string call = strformat("reduce_block_max_row_init(ocb=%u, block_ct_dim=%u)", ocb, block_ct);
    require_started(run, call);
    if (block_ct == 0 || block_ct > 127) kernel_fail("init", call, "block_ct_dim must be 1 to 127");
    ComputeState& cs = *run.compute;
    cs.fpu = FpuOp::Reduce;
    cs.reduce_pool = 2;
    cs.reduce_dim = 0;
    cs.reduce_block_ct = block_ct;
    cs.face_transpose = false;
    config_event(run, {timing::kUnpack, timing::kMath}, timing::costs().init_fpu_cycles);
    pack_reduce_mask(0, static_cast<int>(ocb), site);
}

void reduce_block_max_row_uninit(Site site) {
    KernelRun& run = compute_run(Api::ComputeInit, site, "reduce_block_max_row_uninit");
    run.compute->reduce_block_ct = 0;
    pack_reduce_mask(0, -1, site);
}

// DST[idst] column 0, row r = max(running[r], max over the block's tiles t and columns c of A_t[r][c] * scaler), with
// running[r] what a face-transposed copy put in row 0 of face 0 (r < 16) or face 2 (r >= 16); columns 1-15 of faces
// 0 and 2 come from the transpose's other source rows on hardware (not data of this op: zero here), faces 1 and 3
// are left as they are. The scaler's face 0 row 0 weights the columns (ttnn fills it with 1.0).
void reduce_block_max_row(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t row_start, std::uint32_t idst,
                          bool respect_trigger, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "reduce_block_max_row");
    ComputeState& cs = *run.compute;
    const std::uint32_t ct = cs.reduce_block_ct;
    std::string call = strformat("reduce_block_max_row(icb=%u, icb_scaler=%u, row_start=%u, dst=%u, block_ct_dim=%u)",
                                 icb, icb_scaler, row_start, idst, ct);
    require_math(run, call);
    if (cs.fpu != FpuOp::Reduce || ct == 0)
        kernel_fail("init", call,
                    "reduce_block_max_row_init must be in effect (the unpacker/FPU is configured by " +
                        std::string(fpu_init_name(cs.fpu)) + ")");
    check_dst_index(run, idst, call);
    // api/compute/reduce_custom.h: "Operand and scaler data format is bfloat16_b" (its unpack MOP and the math's
    // pooling assume 16-bit source rows; an fp32 row max goes through reduce_tile)
    for (std::uint32_t cb : {icb, icb_scaler}) {
        const std::uint8_t f = cb_format(run, cb, call);
        if (f != fmt::Float16_b)
            kernel_fail("cb-format", call,
                        strformat("CB c_%u holds %s tiles: reduce_block_max_row takes bfloat16_b operand and scaler "
                                  "tiles only (api/compute/reduce_custom.h); reduce a row of other tiles with "
                                  "reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>",
                                  cb, fmt::name(f)));
    }
    std::vector<float> a(static_cast<std::size_t>(ct) * 1024);
    float sc[1024];
    if (respect_trigger) {
        // the unpacker reads pages the packer has pushed (cb_push_back_hold_wr_ptr) once the packer's semaphore
        // post, which follows that push, lets it: the tiles must be pushed, not waited for
        std::uint64_t needed;
        {
            Core& core = *run.core;
            std::lock_guard<std::mutex> lk(core.mu);
            cb_format(run, icb, call);
            CircularBuffer& c = core.cbs[icb];
            if (c.used() < row_start + ct)
                kernel_fail("cb-out-of-range", call,
                            strformat("reads tiles [%u, %u) of CB c_%u but only %u page(s) are pushed", row_start,
                                      row_start + ct, icb, c.used()));
            if (!c.consumer) c.consumer = &run;
            needed = c.acked + row_start + ct;
            c.front_granted = std::max(c.front_granted, row_start + ct);
        }
        if (run.trace)
            timing::record(run, timing::kUnpack, Ev::CbWaitFront, static_cast<float>(timing::costs().sem_cycles),
                           static_cast<std::uint32_t>(needed), icb);
    }
    check_unpacker(run, 0, icb, call);
    check_unpacker(run, 1, icb_scaler, call);
    for (std::uint32_t t = 0; t < ct; ++t) unpack_operand(run, icb, row_start + t, true, &a[t * 1024], call);
    unpack_operand(run, icb_scaler, 0, true, sc, call);
    // one unpack call streams the block and the scaler; one math MOP pools every tile, then one transpose
    fpu_event(run, ct * cb_unpack_bytes(run, icb) + cb_unpack_bytes(run, icb_scaler), ct + 1.0,
              timing::costs().reduce_cycles_per_tile * ct, 1);
    count(run, "reduce_block_max_row");
    if (timing::math_skipped()) return;
    float* d = dst_tile(run, idst);
    float running[32];
    for (int r = 0; r < 32; ++r) running[r] = r < 16 ? d[r] : d[16 * 32 + (r - 16)];
    for (int r = 0; r < 32; ++r) {
        float acc = running[r];
        for (std::uint32_t t = 0; t < ct; ++t)
            for (int c = 0; c < 32; ++c) {
                float v = a[t * 1024 + r * 32 + c] * sc[c & 15];
                acc = v > acc ? v : acc;
            }
        d[r * 32] = to_dst(cs, acc);
        for (int c = 1; c < 16; ++c) d[r * 32 + c] = 0.0f;
    }
}

void bcast_init(FpuOp op, int bcast, std::uint32_t icb0, std::uint32_t icb1, const char* name, Site site) {
    fpu_init(op, icb0, icb1, 0, name, site);
    compute_run(Api::ComputeInit, site, name).compute->bcast = bcast;
}

namespace {
// the element of a broadcast operand tile seen at (r, c)
float bcast_at(const float* b, int bcast, int r, int c) {
    switch (bcast) {
        case 1: return b[r * 32];  // COL: column 0 of each row
        case 2: return b[c];       // ROW: row 0 of each column
        case 3: return b[0];       // SCALAR
        default: return b[r * 32 + c];
    }
}
// The faces of a broadcast operand the unpacker reads, of a tile's four ([LLK] llk_unpack_AB.h mop config: COL
// unpacks B once per face row, faces 0 and 2, whose first columns hold column 0; SCALAR face 0 once; ROW the first
// face row once per face of A. llk_unpack_A.h, unary broadcasts: COL faces 0 and 2, SCALAR face 0, ROW faces 0 and 1
// twice through SrcB or once each when a 32-bit tile goes straight to DST).
double bcast_faces(int bcast, bool unary, bool to_dest) {
    switch (bcast) {
        case 1: return 2.0;
        case 2: return unary && to_dest ? 2.0 : 4.0;
        case 3: return 1.0;
        default: return 4.0;
    }
}
// What the unpacker fetches of a broadcast operand: its faces' share of the tile's datums (cb_unpack_bytes).
double bcast_unpack_bytes(const KernelRun& run, std::uint32_t cb, int bcast, bool unary = false) {
    const bool to_dest = unary && cb_tile_bytes(run, cb) == timing::tile_bytes(fmt::Float32);
    return cb_unpack_bytes(run, cb) * bcast_faces(bcast, unary, to_dest) / 4.0;
}
void check_bcast(KernelRun& run, int bcast, const std::string& call) {
    if (run.compute->bcast != bcast)
        kernel_fail("init", call,
                    strformat("the broadcast init in effect is for dimension %d, not %d", run.compute->bcast, bcast));
}
}  // namespace

void bcast_tiles(FpuOp op, int bcast, std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1,
                 std::uint32_t idst, const char* name, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, name);
    std::string call = strformat("%s(in0=%u, in1=%u, i0=%u, i1=%u, dst=%u)", name, in0, in1, i0, i1, idst);
    require_math(run, call);
    check_fpu(run, op, in0, in1, call);
    check_bcast(run, bcast, call);
    check_dst_index(run, idst, call);
    float a[1024], b[1024];
    check_unpacker(run, 0, in0, call);
    check_unpacker(run, 1, in1, call);
    unpack_operand(run, in0, i0, true, a, call);
    unpack_operand(run, in1, i1, true, b, call);
    fpu_event(run, cb_unpack_bytes(run, in0) + bcast_unpack_bytes(run, in1, bcast), 2,
              timing::costs().eltwise_cycles_per_tile * (op == FpuOp::BcastMul ? fidelity_phases(run) : 1.0), 1);
    if (timing::math_skipped()) {
        count(run, name);
        return;
    }
    float* d = dst_tile(run, idst);
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) {
            float x = a[r * 32 + c], y = bcast_at(b, bcast, r, c);
            float v = op == FpuOp::BcastAdd ? x + y : op == FpuOp::BcastSub ? x - y : x * y;
            d[r * 32 + c] = to_dst(*run.compute, v);
        }
    count(run, name);
}

void sub_bcast_cols_block(std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst,
                          std::uint32_t ct_dim, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "sub_tiles_bcast_cols_custom");
    std::string call = strformat("sub_tiles_bcast_cols_custom(in0=%u, in1=%u, i0=%u, i1=%u, dst=%u, ct_dim=%u)", in0,
                                 in1, i0, i1, idst, ct_dim);
    require_math(run, call);
    check_fpu(run, FpuOp::BcastSub, in0, in1, call);
    check_bcast(run, 1, call);
    if (ct_dim == 0) kernel_fail("init", call, "ct_dim must be at least 1");
    check_dst_index(run, idst + ct_dim - 1, call);
    std::vector<float> a(static_cast<std::size_t>(ct_dim) * 1024);
    float b[1024];
    check_unpacker(run, 0, in0, call);
    check_unpacker(run, 1, in1, call);
    for (std::uint32_t j = 0; j < ct_dim; ++j) unpack_operand(run, in0, i0 + j, true, &a[j * 1024], call);
    unpack_operand(run, in1, i1, true, b, call);
    fpu_event(run, ct_dim * cb_unpack_bytes(run, in0) + bcast_unpack_bytes(run, in1, 1), ct_dim + 1.0,
              timing::costs().eltwise_cycles_per_tile * ct_dim, ct_dim);
    run.counters.tile_ops["sub_tiles_bcast_cols_custom (tiles)"] += ct_dim;
    if (timing::math_skipped()) return;
    for (std::uint32_t j = 0; j < ct_dim; ++j) {
        float* d = dst_tile(run, idst + j);
        for (int r = 0; r < 32; ++r)
            for (int c = 0; c < 32; ++c) d[r * 32 + c] = to_dst(*run.compute, a[j * 1024 + r * 32 + c] - b[r * 32]);
    }
}

// DST[idst] = the tile broadcast along `bcast`. 32-bit CBs unpack straight to DST (no TF32 rounding), as the
// 0.81.1 header does for Float32 operands; 16-bit formats are exact either way.
void unary_bcast(int bcast, std::uint32_t cb, std::uint32_t itile, std::uint32_t idst, Site site) {
    KernelRun& run = compute_run(Api::ComputeMath, site, "unary_bcast");
    std::string call = strformat("unary_bcast<%d>(cb=%u, tile=%u, dst=%u)", bcast, cb, itile, idst);
    require_math(run, call);
    check_fpu(run, FpuOp::UnaryBcast, cb, cb, call);
    check_bcast(run, bcast, call);
    check_dst_index(run, idst, call);
    float b[1024];
    check_unpacker(run, 1, cb, call);  // a broadcast unpacks into srcB ([LLK] llk_unpack_A.h)
    unpack_operand(run, cb, itile, false, b, call);
    fpu_event(run, bcast_unpack_bytes(run, cb, bcast, true), 1, timing::costs().datacopy_cycles_per_tile, 1);
    count(run, "unary_bcast");
    if (timing::math_skipped()) return;
    float* d = dst_tile(run, idst);
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) d[r * 32 + c] = to_dst(*run.compute, bcast_at(b, bcast, r, c));
}

}  // namespace dev
}  // namespace ttemu
