// Page identity: every hand-off of a tile through a core's L1 is checked against what its producer meant.
//
// With TTEMU_PAGE_TAGS=1 each L1 page carries a tag: a NoC read from DRAM tags the pages it fills with the DRAM page
// they came from (Source); a pack clears the tag of the page it writes, and a kernel that knows which DRAM page a
// packed tile is for says so (dev::page_tag, right after the pack: Destination). L1-to-L1 transfers (multicast,
// forwarding) carry the tags along. Then
//   - a NoC write of a Destination page to DRAM must write the page it was packed for;
//   - a consumer that knows which DRAM page it expects at a CB position (dev::page_expect) must find it there.
// A mismatch is a kernel error naming both sides (core, kernel, source line): a writer that takes an output CB's
// pages in another order than compute packed them, a reader whose pages arrive in another order than compute reads
// them. Kernels that say nothing (ttnn's, hand-written ones) are only checked where they move tagged pages.
#include <cstdlib>
#include <cstring>

#include "runtime.h"

namespace ttemu {
namespace {

std::string page_name(std::uint32_t buffer, std::uint32_t page) {
    const Device& dev = device();
    std::string what = buffer < dev.buffers.size() ? dev.buffers[buffer]->describe() : strformat("buffer #%u", buffer);
    return page == kNoPage ? strformat("no page of %s (padding)", what.c_str())
                           : strformat("page %u of %s", page, what.c_str());
}

std::string origin(const PageTag& t) {
    if (!t.run) return "the host";
    const char* file = t.site.file ? t.site.file : "?";
    if (const char* slash = std::strrchr(file, '/')) file = slash + 1;  // as the kernel's other errors name it
    return strformat("%s at %s:%u", t.run->who().c_str(), file, t.site.line);
}

void put(Core& core, std::uint32_t local, PageTag tag) {
    std::lock_guard<std::mutex> lk(core.tag_mu);
    core.page_tags[local] = tag;
}

}  // namespace

bool page_tags_on() {
    static const bool on = [] {
        const char* env = std::getenv("TTEMU_PAGE_TAGS");
        return env && *env && std::strcmp(env, "0") != 0;
    }();
    return on;
}

void tags_dram_read(KernelRun& run, std::uint32_t local, const DeviceBuffer& buf, std::uint32_t page) {
    if (!page_tags_on()) return;
    put(*run.core, local, PageTag{PageTag::Kind::Source, buf.id, page, &run, run.site});
}

void tags_dram_write(KernelRun& run, std::uint32_t local, const DeviceBuffer& buf, std::uint32_t page,
                     const std::string& call) {
    if (!page_tags_on()) return;
    PageTag tag;
    {
        std::lock_guard<std::mutex> lk(run.core->tag_mu);
        auto it = run.core->page_tags.find(local);
        if (it == run.core->page_tags.end() || it->second.kind != PageTag::Kind::Destination) return;
        tag = it->second;
    }
    if (tag.buffer == buf.id && tag.page == page) return;
    kernel_fail("page-mismatch", call,
                strformat("writes the L1 page at %s to %s, but %s packed it for %s: the writer takes the CB's pages "
                          "in another order than compute packs them",
                          hex(local).c_str(), page_name(buf.id, page).c_str(), origin(tag).c_str(),
                          page_name(tag.buffer, tag.page).c_str()));
}

void tags_copy(const Core& from, std::uint32_t from_addr, Core& to, std::uint32_t to_addr, std::uint32_t bytes) {
    if (!page_tags_on()) return;
    std::vector<std::pair<std::uint32_t, PageTag>> moved;
    {
        std::lock_guard<std::mutex> lk(const_cast<Core&>(from).tag_mu);
        // ordered by address: only the transfer's range is visited (a multicast per K step stays cheap)
        for (auto it = from.page_tags.lower_bound(from_addr);
             it != from.page_tags.end() && it->first < from_addr + bytes; ++it)
            moved.emplace_back(it->first - from_addr + to_addr, it->second);
    }
    std::lock_guard<std::mutex> lk(to.tag_mu);
    to.page_tags.erase(to.page_tags.lower_bound(to_addr), to.page_tags.lower_bound(to_addr + bytes));
    for (auto& [addr, tag] : moved) to.page_tags[addr] = tag;
}

void tags_clear(Core& core, std::uint32_t local) {
    if (!page_tags_on()) return;
    std::lock_guard<std::mutex> lk(core.tag_mu);
    core.page_tags.erase(local);
}

namespace dev {

void page_tag(std::uint32_t buffer, std::uint32_t page, Site site) {
    KernelRun& run = enter(Api::None, site);
    if (!page_tags_on() || !run.compute || run.compute->last_pack < 0) return;
    put(*run.core, static_cast<std::uint32_t>(run.compute->last_pack),
        PageTag{PageTag::Kind::Destination, buffer, page, &run, site});
}

void page_expect(std::uint32_t cb, std::uint32_t index, std::uint32_t buffer, std::uint32_t page, Site site) {
    KernelRun& run = enter(Api::None, site);
    if (!page_tags_on() || cb >= kMaxCBs) return;
    std::uint32_t local;
    {
        std::lock_guard<std::mutex> lk(run.core->mu);
        const CircularBuffer& c = run.core->cbs[cb];
        if (!c.configured || c.num_pages == 0) return;
        local = c.base + ((c.rd_page + index) % c.num_pages) * c.page_size;
    }
    PageTag tag;
    {
        std::lock_guard<std::mutex> lk(run.core->tag_mu);
        auto it = run.core->page_tags.find(local);
        if (it == run.core->page_tags.end() || it->second.kind != PageTag::Kind::Source) return;
        tag = it->second;
    }
    if (tag.buffer == buffer && tag.page == page) return;
    kernel_fail("page-mismatch", strformat("page_expect(cb=%u, index=%u)", cb, index),
                strformat("expects %s at position %u of %s, but %s read %s there: the reader pushes the CB's pages "
                          "in another order than compute takes them",
                          page_name(buffer, page).c_str(), index, cb_name(cb).c_str(), origin(tag).c_str(),
                          page_name(tag.buffer, tag.page).c_str()));
}

}  // namespace dev
}  // namespace ttemu
