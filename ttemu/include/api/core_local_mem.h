// CoreLocalMem<T>: a typed address in this core's L1 (api/core_local_mem.h of TT-Metalium 0.81.1). L1 addresses
// are host pointers into the core's L1 window here, so dereferencing works as on the RISC-V cores.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include "ttemu/kernel_common.h"

template <typename T, typename AddressType = std::uintptr_t>
class CoreLocalMem {
    using difference_type = std::ptrdiff_t;
    static_assert(std::is_integral<AddressType>::value && std::is_unsigned<AddressType>::value,
                  "AddressType must be an unsigned integral type");

public:
    CoreLocalMem(AddressType address) : address_(address) {}
    CoreLocalMem(T* ptr) : address_(reinterpret_cast<AddressType>(ptr)) {}
    CoreLocalMem(const CoreLocalMem&) = default;
    CoreLocalMem& operator=(const CoreLocalMem&) = default;

    tt_l1_ptr T* get_unsafe_ptr() const { return reinterpret_cast<tt_l1_ptr T*>(address_); }
    AddressType get_address() const { return address_; }

    T& operator[](std::uint32_t index) const { return get_unsafe_ptr()[index]; }
    T& operator*() const { return get_unsafe_ptr()[0]; }
    tt_l1_ptr T* operator->() const { return get_unsafe_ptr(); }

    CoreLocalMem& operator+=(difference_type offset) {
        address_ += offset * sizeof(T);
        return *this;
    }
    CoreLocalMem& operator-=(difference_type offset) {
        address_ -= offset * sizeof(T);
        return *this;
    }
    CoreLocalMem& operator++() {
        address_ += sizeof(T);
        return *this;
    }
    CoreLocalMem& operator--() {
        address_ -= sizeof(T);
        return *this;
    }
    CoreLocalMem operator++(int) {
        CoreLocalMem tmp = *this;
        ++*this;
        return tmp;
    }
    CoreLocalMem operator--(int) {
        CoreLocalMem tmp = *this;
        --*this;
        return tmp;
    }
    CoreLocalMem operator+(difference_type offset) const { return CoreLocalMem(address_ + offset * sizeof(T)); }
    CoreLocalMem operator-(difference_type offset) const { return CoreLocalMem(address_ - offset * sizeof(T)); }
    difference_type operator-(const CoreLocalMem& other) const {
        return (static_cast<difference_type>(address_) - static_cast<difference_type>(other.address_)) /
               static_cast<difference_type>(sizeof(T));
    }
    bool operator==(const CoreLocalMem& other) const { return address_ == other.address_; }
    bool operator!=(const CoreLocalMem& other) const { return address_ != other.address_; }
    bool operator<(const CoreLocalMem& other) const { return address_ < other.address_; }
    bool operator<=(const CoreLocalMem& other) const { return address_ <= other.address_; }
    bool operator>(const CoreLocalMem& other) const { return address_ > other.address_; }
    bool operator>=(const CoreLocalMem& other) const { return address_ >= other.address_; }
    explicit operator bool() const { return address_ != 0; }

private:
    AddressType address_;
};

#if !defined(TTEMU_COMPUTE_KERNEL)
#include "api/dataflow/noc.h"
template <typename T, typename AddressType>
struct noc_traits_t<CoreLocalMem<T, AddressType>> {
    struct src_args_type {
        AddressType offset_bytes = 0;
    };
    struct dst_args_type {
        AddressType offset_bytes = 0;
    };
    struct dst_args_mcast_type {};
    template <Noc::AddressType address_type>
    static auto src_addr(const CoreLocalMem<T, AddressType>& src, const Noc&, const src_args_type& args) {
        static_assert(address_type == Noc::AddressType::LOCAL_L1, "CoreLocalMem can only be used as local L1 source");
        return src.get_address() + args.offset_bytes;
    }
    template <Noc::AddressType address_type>
    static auto dst_addr(const CoreLocalMem<T, AddressType>& dst, const Noc&, const dst_args_type& args) {
        static_assert(address_type == Noc::AddressType::LOCAL_L1, "CoreLocalMem can only be used as local L1 dest");
        return dst.get_address() + args.offset_bytes;
    }
};
#endif
