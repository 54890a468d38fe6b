// CircularBuffer: the object API over a CB by id (api/dataflow/circular_buffer.h of TT-Metalium 0.81.1). The same
// calls as DataflowBuffer's (every one is the classic CB call on the id), plus get_cb_id() and the tile geometry.
#pragma once
#include <cstdint>
#include "api/dataflow/dataflow_buffer.h"

class CircularBuffer : public DataflowBuffer {
public:
    enum class AddrSelector { WRITE_PTR, READ_PTR };
    explicit CircularBuffer(std::uint32_t cb_id) : DataflowBuffer(static_cast<std::uint16_t>(cb_id)) {}
    std::uint32_t get_cb_id() const { return get_id(); }
    void reserve_back(std::int32_t num_pages, TTEMU_SITE) {
        DataflowBuffer::reserve_back(static_cast<std::uint16_t>(num_pages), TTEMU_FWD);
    }
    void push_back(std::int32_t num_pages, TTEMU_SITE) {
        DataflowBuffer::push_back(static_cast<std::uint16_t>(num_pages), TTEMU_FWD);
    }
    void wait_front(std::int32_t num_pages, TTEMU_SITE) {
        DataflowBuffer::wait_front(static_cast<std::uint16_t>(num_pages), TTEMU_FWD);
    }
    void pop_front(std::int32_t num_pages, TTEMU_SITE) {
        DataflowBuffer::pop_front(static_cast<std::uint16_t>(num_pages), TTEMU_FWD);
    }
};

#if !defined(TTEMU_COMPUTE_KERNEL)
template <>
struct noc_traits_t<CircularBuffer> : noc_traits_t<DataflowBuffer> {};
#endif
