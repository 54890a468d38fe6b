// The compute engine of one Tensix core: unpack (CB -> source operands), math (FPU / SFPU into DST) and pack
// (DST -> CB). The three TRISC threads of the hardware run here as one thread in program order.
//
// Numerics modelled:
//  * CB data is converted exactly from its format (Float32, Float16_b, Float16, Bfp8_b approximately).
//  * FPU operands (matmul_tiles, add/sub/mul_tiles, copy_tile without UnpackToDestFp32) pass through the 19-bit
//    source registers: Float32 CB data is rounded to TF32 (RNE); 16-bit formats are exact.
//  * Math is done in fp32; a matmul tile accumulates its 32 products in fp32 in k order, then adds to DST.
//  * DST holds fp32 with fp32_dest_acc_en, otherwise every value written to DST is rounded to the 16-bit DST
//    format: Float16 when compute_kernel_hw_startup's first input CB is Float16, else bf16 (RNE).
//  * SFPU functions use libm (exp, sqrt, 1/x) in fp32, then the DST rounding above; math fidelity and
//    approximation modes are not modelled (HiFi4, precise behaviour).
//  * pack_tile converts DST to the CB format with round-to-nearest-even.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats.h"
#include "runtime.h"

namespace ttemu {
namespace {
using dev::FpuOp;
using dev::SfpuOp;
using Dst = ComputeState::Dst;

KernelRun& compute_run(const char* call) {
    KernelRun* run = current_run();
    if (!run) host_fail("device-api", std::string(call) + " called outside a running kernel");
    if (run->kernel->role != Role::Compute || !run->compute)
        kernel_fail("wrong-kernel-type", call, "compute API called from a data-movement kernel");
    return *run;
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
        default: return "(none)";
    }
}

const char* sfpu_init_name(SfpuOp op) {
    switch (op) {
        case SfpuOp::Exp: return "exp_tile_init";
        case SfpuOp::Sqrt: return "sqrt_tile_init";
        case SfpuOp::Recip: return "recip_tile_init";
        case SfpuOp::Fill: return "fill_tile_init";
        case SfpuOp::BinopScalar: return "binop_with_scalar_tile_init";
        case SfpuOp::AddBinary: return "add_binary_tile_init";
        case SfpuOp::SubBinary: return "sub_binary_tile_init";
        case SfpuOp::MulBinary: return "mul_binary_tile_init";
        case SfpuOp::MaxBinary: return "binary_max_tile_init";
        case SfpuOp::MinBinary: return "binary_min_tile_init";
        case SfpuOp::UnaryMax: return "unary_max_tile_init";
        case SfpuOp::UnaryMin: return "unary_min_tile_init";
        case SfpuOp::CopyDest: return "copy_dest_values_init";
        default: return "(none)";
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
        kernel_fail("dst-overflow", call,
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
                        strformat("CB c_%u has format %s and page size %u B: not a %s tile", cb, fmt::name(f), c.page_size,
                                  fmt::name(f)));
        addr = c.base + (c.rd_page + itile) * c.page_size;
        format = f;
    }
    fmt::unpack_tile(core.l1 + addr, format, out);
    if (through_src_regs && format == fmt::Float32)
        for (int i = 0; i < 1024; ++i) out[i] = fmt::round_to_tf32(out[i]);
}

void check_fpu(KernelRun& run, FpuOp op, std::uint32_t in0, std::uint32_t in1, const std::string& call) {
    ComputeState& cs = *run.compute;
    if (cs.fpu != op)
        kernel_fail("init", call,
                    strformat("the unpacker/FPU is configured by %s; call %s(...) before this op", fpu_init_name(cs.fpu),
                              fpu_init_name(op)));
    if ((in0 != cs.fpu_in0 && cb_format(run, in0, call) != cb_format(run, cs.fpu_in0, call)) ||
        (in1 != cs.fpu_in1 && cb_format(run, in1, call) != cb_format(run, cs.fpu_in1, call)))
        kernel_fail("init", call,
                    strformat("operand CBs (c_%u, c_%u) have other data formats than the CBs given to %s (c_%u, c_%u)", in0,
                              in1, fpu_init_name(op), cs.fpu_in0, cs.fpu_in1));
}

void count(KernelRun& run, const char* op) { ++run.counters.tile_ops[op]; }

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

void hw_startup(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb, bool reverse) {
    std::string call = strformat("compute_kernel_hw_startup(%u, %u, %u)", icb0, icb1, ocb);
    KernelRun& run = compute_run("compute_kernel_hw_startup");
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
    cs.dst16_format = f0 == fmt::Float16 ? fmt::Float16 : fmt::Float16_b;
}

void fpu_init(FpuOp op, std::uint32_t icb0, std::uint32_t icb1, std::uint32_t transpose, const char* name) {
    KernelRun& run = compute_run(name);
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
    if (op != FpuOp::Reduce) cs.pack_mask_cb = -1;  // any non-reduce init restores the default packer mask
}

void sfpu_init(SfpuOp op, const char* name) {
    KernelRun& run = compute_run(name);
    require_started(run, std::string(name) + "()");
    run.compute->sfpu = op;
}

void matmul_tiles(std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst) {
    KernelRun& run = compute_run("matmul_tiles");
    std::string call = strformat("matmul_tiles(in0=%u, in1=%u, i0=%u, i1=%u, dst=%u)", in0, in1, i0, i1, idst);
    require_math(run, call);
    check_fpu(run, FpuOp::Matmul, in0, in1, call);
    check_dst_index(run, idst, call);
    float a[1024], b[1024];
    unpack_operand(run, in0, i0, true, a, call);
    unpack_operand(run, in1, i1, true, b, call);
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

void binary_tiles(FpuOp op, std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1, std::uint32_t idst) {
    const char* name = op == FpuOp::Add ? "add_tiles" : op == FpuOp::Sub ? "sub_tiles" : "mul_tiles";
    KernelRun& run = compute_run(name);
    std::string call = strformat("%s(in0=%u, in1=%u, i0=%u, i1=%u, dst=%u)", name, in0, in1, i0, i1, idst);
    require_math(run, call);
    check_fpu(run, op, in0, in1, call);
    check_dst_index(run, idst, call);
    float a[1024], b[1024];
    unpack_operand(run, in0, i0, true, a, call);
    unpack_operand(run, in1, i1, true, b, call);
    float* d = dst_tile(run, idst);
    for (int e = 0; e < 1024; ++e) {
        float v = op == FpuOp::Add ? a[e] + b[e] : op == FpuOp::Sub ? a[e] - b[e] : a[e] * b[e];
        d[e] = to_dst(*run.compute, v);
    }
    count(run, name);
}

void copy_tile(std::uint32_t cb, std::uint32_t itile, std::uint32_t idst) {
    KernelRun& run = compute_run("copy_tile");
    std::string call = strformat("copy_tile(cb=%u, tile=%u, dst=%u)", cb, itile, idst);
    require_math(run, call);
    check_fpu(run, FpuOp::Copy, cb, cb, call);
    check_dst_index(run, idst, call);
    bool to_dest_fp32 = run.compute->fp32_dest && (run.kernel->unpack_to_dest_fp32 >> cb & 1);
    float a[1024];
    unpack_operand(run, cb, itile, !to_dest_fp32, a, call);
    float* d = dst_tile(run, idst);
    for (int e = 0; e < 1024; ++e) d[e] = to_dst(*run.compute, a[e]);
    count(run, "copy_tile");
}

namespace {
void check_sfpu(KernelRun& run, SfpuOp op, const std::string& call) {
    require_math(run, call);
    if (run.compute->sfpu != op)
        kernel_fail("init", call,
                    strformat("the SFPU is configured by %s; call %s() before this op", sfpu_init_name(run.compute->sfpu),
                              sfpu_init_name(op)));
}
}  // namespace

void sfpu_unary(SfpuOp op, std::uint32_t idst, std::uint32_t param_bits, const char* name) {
    KernelRun& run = compute_run(name);
    std::string call = op == SfpuOp::Fill || op == SfpuOp::UnaryMax || op == SfpuOp::UnaryMin
                           ? strformat("%s(dst=%u, %s)", name, idst, hex(param_bits).c_str())
                           : strformat("%s(dst=%u)", name, idst);
    check_sfpu(run, op, call);
    check_dst_index(run, idst, call);
    float s = fmt::float_of(param_bits);
    float* d = dst_tile(run, idst);
    for (int e = 0; e < 1024; ++e) {
        float x = d[e], v = x;
        switch (op) {
            case SfpuOp::Exp: v = std::exp(x); break;
            case SfpuOp::Sqrt: v = std::sqrt(x); break;
            case SfpuOp::Recip: v = 1.0f / x; break;
            case SfpuOp::Fill: v = s; break;
            case SfpuOp::UnaryMax: v = x > s ? x : s; break;
            case SfpuOp::UnaryMin: v = x < s ? x : s; break;
            default: break;
        }
        d[e] = to_dst(*run.compute, v);
    }
    count(run, name);
}

void sfpu_scalar(ScalarOp op, std::uint32_t idst, std::uint32_t param_bits, const char* name) {
    KernelRun& run = compute_run(name);
    std::string call = strformat("%s(dst=%u, %s)", name, idst, hex(param_bits).c_str());
    check_sfpu(run, SfpuOp::BinopScalar, call);
    check_dst_index(run, idst, call);
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

void sfpu_binary(SfpuOp op, std::uint32_t i0, std::uint32_t i1, std::uint32_t odst, const char* name) {
    KernelRun& run = compute_run(name);
    std::string call = strformat("%s(%u, %u, %u)", name, i0, i1, odst);
    check_sfpu(run, op, call);
    check_dst_index(run, i0, call);
    check_dst_index(run, i1, call);
    check_dst_index(run, odst, call);
    float a[1024], b[1024];
    std::memcpy(a, dst_tile(run, i0), sizeof a);
    std::memcpy(b, dst_tile(run, i1), sizeof b);
    float* d = dst_tile(run, odst);
    for (int e = 0; e < 1024; ++e) {
        float v = 0;
        switch (op) {
            case SfpuOp::AddBinary: v = a[e] + b[e]; break;
            case SfpuOp::SubBinary: v = a[e] - b[e]; break;
            case SfpuOp::MulBinary: v = a[e] * b[e]; break;
            case SfpuOp::MaxBinary: v = a[e] > b[e] ? a[e] : b[e]; break;
            case SfpuOp::MinBinary: v = a[e] < b[e] ? a[e] : b[e]; break;
            case SfpuOp::CopyDest: v = a[e]; break;
            default: break;
        }
        d[e] = to_dst(*run.compute, v);
    }
    count(run, name);
}

void tile_regs_acquire() {
    KernelRun& run = compute_run("tile_regs_acquire");
    require_started(run, "tile_regs_acquire()");
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Idle)
        kernel_fail("dst-protocol", "tile_regs_acquire()",
                    std::string("DST is ") + dst_state_name(cs.dst_state) + "; release it with tile_regs_release() first");
    cs.dst_state = Dst::Acquired;
    ++run.counters.dst_acquires;
}

void tile_regs_commit() {
    KernelRun& run = compute_run("tile_regs_commit");
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Acquired)
        kernel_fail("dst-protocol", "tile_regs_commit()",
                    std::string("tile_regs_commit without tile_regs_acquire (DST is ") + dst_state_name(cs.dst_state) + ")");
    cs.dst_state = Dst::Committed;
}

void tile_regs_wait() {
    KernelRun& run = compute_run("tile_regs_wait");
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Committed)
        kernel_fail("dst-protocol", "tile_regs_wait()",
                    std::string("tile_regs_wait without a preceding tile_regs_commit (DST is ") +
                        dst_state_name(cs.dst_state) + "): PACK would wait forever");
    cs.dst_state = Dst::Waited;
}

void tile_regs_release() {
    KernelRun& run = compute_run("tile_regs_release");
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Waited)
        kernel_fail("dst-protocol", "tile_regs_release()",
                    std::string("tile_regs_release without tile_regs_wait (DST is ") + dst_state_name(cs.dst_state) + ")");
    std::fill(cs.dst.begin(), cs.dst.end(), 0.0f);  // the packer zeroes the section it frees
    cs.dst_state = Dst::Idle;
}

void pack_tile(std::uint32_t idst, std::uint32_t ocb, std::uint32_t out_index, bool out_of_order) {
    KernelRun& run = compute_run("pack_tile");
    std::string call = strformat("pack_tile(dst=%u, cb=%u, out_index=%u)", idst, ocb, out_index);
    require_started(run, call);
    ComputeState& cs = *run.compute;
    if (cs.dst_state != Dst::Waited)
        kernel_fail("dst-protocol", call,
                    std::string("pack_tile outside tile_regs_wait()..tile_regs_release() (DST is ") +
                        dst_state_name(cs.dst_state) + ")");
    check_dst_index(run, idst, call);
    Core& core = *run.core;
    std::uint32_t addr;
    std::uint8_t format;
    {
        std::lock_guard<std::mutex> lk(core.mu);
        format = cb_format(run, ocb, call);
        CircularBuffer& c = core.cbs[ocb];
        if (c.producer != &run)
            kernel_fail("cb-role", call, strformat("packs into CB c_%u without cb_reserve_back on it", ocb));
        std::uint32_t pos = out_of_order ? out_index : c.pack_seq;
        if (!out_of_order && out_index != c.pack_seq && !cs.warned_pack_index) {
            cs.warned_pack_index = true;
            add_warning(run.who() + ": " + call +
                        strformat(": output_tile_index is ignored unless pack_tile<true>; the tile goes to position %u",
                                  c.pack_seq));
        }
        if (pos >= c.back_granted)
            kernel_fail("cb-out-of-range", call,
                        strformat("out-of-range CB access: writes tile position %u of CB c_%u, but only %u page(s) are "
                                  "reserved by cb_reserve_back",
                                  pos, ocb, c.back_granted));
        if (c.wr_page + pos >= c.num_pages)
            kernel_fail("cb-wrap", call, strformat("tile position %u runs past the end of CB c_%u", pos, ocb));
        if (!fmt::supported(format) || c.page_size < fmt::tile_bytes(format))
            kernel_fail("cb-format", call,
                        strformat("CB c_%u has format %s and page size %u B: not a tile", ocb, fmt::name(format), c.page_size));
        if (cb_format(run, cs.pack_cb, call) != format)
            kernel_fail("init", call,
                        strformat("CB c_%u is %s but the packer is configured for c_%u (%s) by compute_kernel_hw_startup "
                                  "or pack_reconfig_data_format",
                                  ocb, fmt::name(format), cs.pack_cb, fmt::name(cb_format(run, cs.pack_cb, call))));
        addr = c.base + (c.wr_page + pos) * c.page_size;
        if (!out_of_order) ++c.pack_seq;
    }
    const float* tile = dst_tile(run, idst);
    float masked[1024];
    if (cs.pack_mask_cb == static_cast<int>(ocb)) {  // reduce_init's edge mask: only the reduced datums are packed
        for (int r = 0; r < 32; ++r)
            for (int c = 0; c < 32; ++c) {
                bool keep = cs.pack_mask_dim == 0 ? c == 0 : cs.pack_mask_dim == 1 ? r == 0 : (r == 0 && c == 0);
                masked[r * 32 + c] = keep ? tile[r * 32 + c] : 0.0f;
            }
        tile = masked;
    }
    fmt::pack_tile(tile, format, core.l1 + addr);
    count(run, "pack_tile");
}

void pack_reconfig(std::uint32_t ocb, const char* name) {
    KernelRun& run = compute_run(name);
    std::string call = strformat("%s(%u)", name, ocb);
    require_started(run, call);
    cb_format(run, ocb, call);
    run.compute->pack_cb = ocb;
}

void pack_reconfig_check(std::uint32_t icb0, std::uint32_t icb1) {
    KernelRun& run = compute_run("reconfig_data_format");
    std::string call = strformat("reconfig_data_format(%u, %u)", icb0, icb1);
    require_started(run, call);
    cb_format(run, icb0, call);
    cb_format(run, icb1, call);
}

namespace {
const char* pool_name(int pool) { return pool == 0 ? "SUM" : pool == 1 ? "AVG" : pool == 2 ? "MAX" : "MIN"; }
const char* dim_name(int dim) { return dim == 0 ? "REDUCE_ROW" : dim == 1 ? "REDUCE_COL" : "REDUCE_SCALAR"; }
}  // namespace

void reduce_init(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t ocb) {
    std::string name = strformat("reduce_init<%s, %s>", pool_name(pool), dim_name(dim));
    fpu_init(FpuOp::Reduce, icb, icb_scaler, 0, name.c_str());
    KernelRun& run = compute_run("reduce_init");
    cb_format(run, ocb, name + "(ocb)");
    if (pool == 3) unsupported("reduce with PoolType::MIN");
    ComputeState& cs = *run.compute;
    cs.reduce_pool = pool;
    cs.reduce_dim = dim;
    cs.pack_mask_cb = static_cast<int>(ocb);
    cs.pack_mask_dim = dim;
}

void reduce_uninit() {
    KernelRun& run = compute_run("reduce_uninit");
    require_started(run, "reduce_uninit()");
    run.compute->pack_mask_cb = -1;
}

// DST[idst] op= reduce(A * scaler). The scaler tile's first row of each 16x16 face weights the columns of A
// (rows 0-15 use faces 0/1, rows 16-31 faces 2/3); ttnn fills it with 1.0 (SUM, MAX) or 1/N (AVG). The result
// lands in column 0 (REDUCE_ROW), row 0 (REDUCE_COL) or [0, 0] (REDUCE_SCALAR); the other datums of DST are left
// as they are. SUM/AVG add to DST and MAX takes the maximum with it, so a row of tiles reduced into one DST tile
// accumulates (start from zeros, or -inf for MAX, as acquire's zeroed DST would otherwise cap the maximum at 0).
void reduce_tile(int pool, int dim, std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t itile,
                 std::uint32_t itile_scaler, std::uint32_t idst) {
    KernelRun& run = compute_run("reduce_tile");
    std::string call = strformat("reduce_tile<%s, %s>(icb=%u, icb_scaler=%u, itile=%u, itile_scaler=%u, dst=%u)",
                                 pool_name(pool), dim_name(dim), icb, icb_scaler, itile, itile_scaler, idst);
    require_math(run, call);
    check_fpu(run, FpuOp::Reduce, icb, icb_scaler, call);
    ComputeState& cs = *run.compute;
    if (cs.reduce_pool != pool || cs.reduce_dim != dim)
        kernel_fail("init", call,
                    strformat("reduce_init was called for <%s, %s>", pool_name(cs.reduce_pool), dim_name(cs.reduce_dim)));
    check_dst_index(run, idst, call);
    float a[1024], sc[1024];
    unpack_operand(run, icb, itile, true, a, call);
    unpack_operand(run, icb_scaler, itile_scaler, true, sc, call);
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

void bcast_init(FpuOp op, int bcast, std::uint32_t icb0, std::uint32_t icb1, const char* name) {
    fpu_init(op, icb0, icb1, 0, name);
    compute_run(name).compute->bcast = bcast;
}

namespace {
// the element of a broadcast operand tile seen at (r, c)
float bcast_at(const float* b, int bcast, int r, int c) {
    switch (bcast) {
        case 1: return b[r * 32];      // COL: column 0 of each row
        case 2: return b[c];           // ROW: row 0 of each column
        case 3: return b[0];           // SCALAR
        default: return b[r * 32 + c];
    }
}
void check_bcast(KernelRun& run, int bcast, const std::string& call) {
    if (run.compute->bcast != bcast)
        kernel_fail("init", call, strformat("the broadcast init in effect is for dimension %d, not %d",
                                            run.compute->bcast, bcast));
}
}  // namespace

void bcast_tiles(FpuOp op, int bcast, std::uint32_t in0, std::uint32_t in1, std::uint32_t i0, std::uint32_t i1,
                 std::uint32_t idst, const char* name) {
    KernelRun& run = compute_run(name);
    std::string call = strformat("%s(in0=%u, in1=%u, i0=%u, i1=%u, dst=%u)", name, in0, in1, i0, i1, idst);
    require_math(run, call);
    check_fpu(run, op, in0, in1, call);
    check_bcast(run, bcast, call);
    check_dst_index(run, idst, call);
    float a[1024], b[1024];
    unpack_operand(run, in0, i0, true, a, call);
    unpack_operand(run, in1, i1, true, b, call);
    float* d = dst_tile(run, idst);
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) {
            float x = a[r * 32 + c], y = bcast_at(b, bcast, r, c);
            float v = op == FpuOp::BcastAdd ? x + y : op == FpuOp::BcastSub ? x - y : x * y;
            d[r * 32 + c] = to_dst(*run.compute, v);
        }
    count(run, name);
}

// DST[idst] = the tile broadcast along `bcast`. 32-bit CBs unpack straight to DST (no TF32 rounding), as the
// 0.81.1 header does for Float32 operands; 16-bit formats are exact either way.
void unary_bcast(int bcast, std::uint32_t cb, std::uint32_t itile, std::uint32_t idst) {
    KernelRun& run = compute_run("unary_bcast");
    std::string call = strformat("unary_bcast<%d>(cb=%u, tile=%u, dst=%u)", bcast, cb, itile, idst);
    require_math(run, call);
    check_fpu(run, FpuOp::UnaryBcast, cb, cb, call);
    check_bcast(run, bcast, call);
    check_dst_index(run, idst, call);
    float b[1024];
    unpack_operand(run, cb, itile, false, b, call);
    float* d = dst_tile(run, idst);
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) d[r * 32 + c] = to_dst(*run.compute, bcast_at(b, bcast, r, c));
    count(run, "unary_bcast");
}

}  // namespace dev
}  // namespace ttemu
