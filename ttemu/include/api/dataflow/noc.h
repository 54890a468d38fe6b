// The object NoC API of TT-Metalium 0.81.1 (api/dataflow/noc.h): `Noc noc; noc.async_read(src, dst, size,
// src_args, dst_args)`. Sources and destinations are any type with a noc_traits_t specialisation (TensorAccessor,
// DataflowBuffer, CoreLocalMem, UnicastEndpoint, MulticastEndpoint, ...), which turns its args into a NoC or local
// L1 address; the transfer itself is the classic call. Stateful (`*_with_state`) calls issue complete transfers.
#pragma once
#include <cstdint>
#include <type_traits>
#include "api/dataflow/dataflow_api.h"

template <typename T>
struct noc_traits_t {
    static_assert(sizeof(T) == 0, "NoC transactions are not supported for this type");
};

struct DataflowBufferArgs {
    std::uint32_t offset_bytes{};
};

enum class NocOptions : std::uint32_t {
    DEFAULT = 0,
    TXN_ID = 1u << 0,
    POSTED = 1u << 1,
    CUSTOM_VC = 1u << 2,
    MCAST_INCL_SRC = 1u << 3,
    INLINE_L1 = 1u << 4,
    INLINE_REG = 1u << 5,
};
constexpr NocOptions operator|(NocOptions a, NocOptions b) noexcept {
    return static_cast<NocOptions>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}
constexpr bool has_flag(NocOptions opts, NocOptions flag) noexcept {
    return (static_cast<std::uint32_t>(opts) & static_cast<std::uint32_t>(flag)) != 0;
}

struct NocOptVals {
    std::uint32_t vc = NOC_UNICAST_WRITE_VC;
    std::uint32_t trid = 0;
};

class Noc {
public:
    enum class AddressType { NOC, LOCAL_L1 };
    static constexpr std::uint32_t INVALID_TXN_ID = 0xFFFFFFFF;

private:
    template <typename T>
    using src_args_t = typename noc_traits_t<T>::src_args_type;
    template <typename T>
    using dst_args_t = typename noc_traits_t<T>::dst_args_type;
    template <typename T>
    using dst_args_mcast_t = typename noc_traits_t<T>::dst_args_mcast_type;

    template <AddressType address_type, typename Src>
    auto src_ptr(const Src& src, const src_args_t<Src>& args) const {
        return noc_traits_t<Src>::template src_addr<address_type>(src, *this, args);
    }
    template <AddressType address_type, typename Dst>
    auto dst_ptr(const Dst& dst, const dst_args_t<Dst>& args) const {
        return noc_traits_t<Dst>::template dst_addr<address_type>(dst, *this, args);
    }

public:
    static std::uint32_t l1_cached_view(std::uint32_t addr) { return addr; }

    Noc() : noc_id_(noc_index) {}
    explicit Noc(std::uint8_t noc_id) : noc_id_(noc_id) {}

    std::uint8_t get_noc_id() const { return noc_id_; }
    bool is_local_bank(std::uint32_t virtual_x, std::uint32_t virtual_y) const {
        return virtual_x == my_x[noc_id_] && virtual_y == my_y[noc_id_];
    }

    template <NocOptions opts = NocOptions::DEFAULT, std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1,
              bool enable_noc_tracing = true, typename Src, typename Dst>
    void async_read(const Src& src, const Dst& dst, std::uint32_t size_bytes, const src_args_t<Src>& src_args,
                    const dst_args_t<Dst>& dst_args, const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        ttemu::dev::at(ttemu_site);
        const std::uint32_t dst_addr = static_cast<std::uint32_t>(dst_ptr<AddressType::LOCAL_L1>(dst, dst_args));
        ttemu::dev::noc_read(src_ptr<AddressType::NOC>(src, src_args), dst_addr, size_bytes, noc_id_, "Noc::async_read",
                             ttemu_site);
    }
    template <NocOptions opts = NocOptions::DEFAULT, std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, typename Src>
    void set_async_read_state(const Src& src, std::uint32_t size_bytes, const src_args_t<Src>& src_args,
                              const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        ttemu::dev::at(ttemu_site);
        (void)src_ptr<AddressType::NOC>(src, src_args);
    }
    template <NocOptions opts = NocOptions::DEFAULT, std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, typename Src,
              typename Dst>
    void async_read_with_state(const Src& src, const Dst& dst, std::uint32_t size_bytes,
                               const src_args_t<Src>& src_args, const dst_args_t<Dst>& dst_args,
                               const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        async_read<opts, max_page_size>(src, dst, size_bytes, src_args, dst_args, noc_opts, TTEMU_FWD);
    }

    template <NocOptions opts = NocOptions::DEFAULT, std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1,
              bool enable_noc_tracing = true, typename Src, typename Dst>
    void async_write(const Src& src, const Dst& dst, std::uint32_t size_bytes, const src_args_t<Src>& src_args,
                     const dst_args_t<Dst>& dst_args, const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        ttemu::dev::at(ttemu_site);
        const std::uint32_t src_addr = static_cast<std::uint32_t>(src_ptr<AddressType::LOCAL_L1>(src, src_args));
        ttemu::dev::noc_write(src_addr, dst_ptr<AddressType::NOC>(dst, dst_args), size_bytes, noc_id_,
                              "Noc::async_write", ttemu_site);
    }
    template <NocOptions opts = NocOptions::DEFAULT, std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1,
              bool enable_noc_tracing = true, typename Src, typename Dst>
    void async_write_multicast(const Src& src, const Dst& dst, std::uint32_t size_bytes, std::uint32_t num_dsts,
                               const src_args_t<Src>& src_args, const dst_args_mcast_t<Dst>& dst_args,
                               bool linked = false, TTEMU_SITE) const {
        static_assert(!has_flag(opts, NocOptions::TXN_ID), "Mcasts with transaction id are not supported yet");
        static_assert(!has_flag(opts, NocOptions::POSTED), "Mcasts with posted transactions are not supported");
        ttemu::dev::at(ttemu_site);
        const std::uint32_t src_addr = static_cast<std::uint32_t>(src_ptr<AddressType::LOCAL_L1>(src, src_args));
        const std::uint64_t dst_addr =
            noc_traits_t<Dst>::template dst_addr_mcast<AddressType::NOC>(dst, *this, dst_args);
        constexpr bool loopback = has_flag(opts, NocOptions::MCAST_INCL_SRC);
        ttemu::dev::noc_write_multicast(
            src_addr, dst_addr, size_bytes, num_dsts, loopback, noc_id_,
            loopback ? "Noc::async_write_multicast<MCAST_INCL_SRC>" : "Noc::async_write_multicast", ttemu_site);
    }
    template <NocOptions opts = NocOptions::DEFAULT, std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, typename Dst>
    void set_async_write_state(const Dst& dst, std::uint32_t size_bytes, const dst_args_t<Dst>& dst_args,
                               const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        ttemu::dev::at(ttemu_site);
        (void)dst_ptr<AddressType::NOC>(dst, dst_args);
    }
    template <NocOptions opts = NocOptions::DEFAULT, std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, typename Src,
              typename Dst>
    void async_write_with_state(const Src& src, const Dst& dst, std::uint32_t size_bytes,
                                const src_args_t<Src>& src_args, const dst_args_t<Dst>& dst_args,
                                const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        async_write<opts, max_page_size>(src, dst, size_bytes, src_args, dst_args, noc_opts, TTEMU_FWD);
    }

    template <NocOptions opts = NocOptions::DEFAULT, typename Dst>
    void inline_dw_write(const Dst& dst, std::uint32_t val, const dst_args_t<Dst>& dst_args, std::uint8_t be = 0xF,
                         const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        ttemu::dev::at(ttemu_site);
        ttemu::dev::inline_dw_write(dst_ptr<AddressType::NOC>(dst, dst_args), val, be, noc_id_, ttemu_site);
    }

    bool is_read_trid_flushed(std::uint32_t) const { return true; }  // reads land at issue time here

    template <NocOptions opts = NocOptions::DEFAULT>
    void async_read_barrier(const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        ttemu::dev::noc_read_barrier(ttemu_site);
    }
    template <NocOptions opts = NocOptions::DEFAULT>
    void async_write_barrier(const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        ttemu::dev::noc_write_barrier(ttemu_site);
    }
    template <NocOptions opts = NocOptions::DEFAULT>
    void async_writes_flushed(const NocOptVals& noc_opts = {}, TTEMU_SITE) const {
        ttemu::dev::noc_writes_flushed(ttemu_site);
    }
    // Zero `size_bytes` of local L1 at a destination: reads from the core's MEM_ZEROS region, 512 B at a time, as the
    // firmware's zeroing does; write_zeros_l1_barrier waits for them.
    template <typename Dst>
    void async_write_zeros(const Dst& dst, std::uint32_t size_bytes, const dst_args_t<Dst>& args = {},
                           TTEMU_SITE) const {
        std::uint32_t addr = dst_ptr<AddressType::LOCAL_L1>(dst, args);
        const std::uint64_t zeros = ::get_noc_addr(MEM_ZEROS_BASE, noc_id_, TTEMU_FWD);
        for (std::uint32_t done = 0; done < size_bytes;) {
            std::uint32_t n = size_bytes - done < MEM_ZEROS_SIZE ? size_bytes - done : MEM_ZEROS_SIZE;
            ttemu::dev::noc_read(zeros, addr + done, n, noc_id_, "async_write_zeros", ttemu_site);
            done += n;
        }
    }
    void write_zeros_l1_barrier(TTEMU_SITE) const { ttemu::dev::noc_read_barrier(ttemu_site); }
    void async_atomic_barrier(TTEMU_SITE) const { ttemu::dev::noc_atomic_barrier(ttemu_site); }
    void async_full_barrier(TTEMU_SITE) const {
        ttemu::dev::noc_read_barrier(ttemu_site);
        ttemu::dev::noc_write_barrier(ttemu_site);
    }

private:
    std::uint8_t noc_id_;
};

#include "api/core_local_mem.h"
#include "api/dataflow/endpoints.h"
#include "api/tensor/noc_traits.h"
