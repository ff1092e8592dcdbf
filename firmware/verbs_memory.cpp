// Verbs on memory: regions (register, reregister, share, query, deregister, Allocate L_Key,
// page mapping), windows (allocate, deallocate, bind) and the memory management work requests
// (bind, fast register, local invalidate) that ibv_post_send checks and builds through this file.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "firmware/verbs.h"
#include "firmware/verbs_internal.h"

namespace hcasim::verbs {

using fw::hca_driver;
using namespace detail;

// ---------------------------------------------------------------- memory regions

namespace {

bool zero_based(int access) { return access & IBV_ACCESS_ZERO_BASED; }

/// Rights of a registration (region or fast register); 0 or EINVAL.
int check_mr_access(const hw::hca_caps& caps, int access) {
    if (access & ~0x3F) return EINVAL;
    // C10-48: remote write / remote atomic need local write.
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
        return EINVAL;
    if ((access & IBV_ACCESS_REMOTE_ATOMIC) && !(caps.flags & hw::CAP_ATOMIC)) return EINVAL;
    if ((access & IBV_ACCESS_MW_BIND) && !(caps.flags & hw::CAP_MW)) return EINVAL;
    if (zero_based(access) && !(caps.flags & hw::CAP_ZBVA)) return EINVAL;
    return 0;
}

/// A region length the HCA accepts; 0 or EINVAL.
int check_mr_length(const hw::hca_caps& caps, uint64_t length) {
    if (length == 0 || (caps.max_mr_size && length > caps.max_mr_size)) return EINVAL;
    return 0;
}

/// True when [start, start + length) wraps around the 64-bit address space.
bool wraps(uint64_t start, uint64_t length) { return length && start + (length - 1) < start; }

/// Writes MTT entries first.. with values[i] | MTT_PRESENT, WRITE_MTT_MAX per command.
hw::cmd_status write_mtt(hca_driver& drv, uint64_t first, const std::vector<uint64_t>& values) {
    uint8_t buf[hw::CMD_IN_BYTES];
    for (size_t done = 0; done < values.size();) {
        uint32_t n = uint32_t(std::min<size_t>(hw::WRITE_MTT_MAX, values.size() - done));
        hw::write_mtt_in h{};
        h.first_index = first + done;
        h.count = n;
        std::memcpy(buf, &h, sizeof h);
        for (uint32_t i = 0; i < n; ++i) {
            hw::mtt_entry m{values[done + i] | hw::MTT_PRESENT};
            std::memcpy(buf + sizeof h + i * sizeof m, &m, sizeof m);
        }
        hw::cmd_status st = drv.exec(hw::CMD_WRITE_MTT, 0, 0, buf, sizeof h + n * sizeof(hw::mtt_entry));
        if (st != hw::CMD_OK) return st;
        done += n;
    }
    return hw::CMD_OK;
}

/// Pins [addr, addr+length) of the context's process, allocates and writes its MTT run; 0 or
/// errno, nothing left behind on failure.
int build_va_translation(ibv_context* ctx, uint64_t addr, uint64_t length, uint64_t* first, uint64_t* n) {
    hca_driver& drv = *ctx->driver;
    std::vector<uint64_t> pages;
    if (int e = ctx->as->pin(addr, length, &pages)) return e;  // C10-52.2.1
    if (!drv.alloc_mtt(pages.size(), first)) {
        (void)ctx->as->unpin(addr, length);  // cannot fail: the pin just above succeeded
        return ENOMEM;
    }
    hw::cmd_status st = write_mtt(drv, *first, pages);
    if (st != hw::CMD_OK) {
        drv.free_mtt(*first, pages.size());
        (void)ctx->as->unpin(addr, length);  // cannot fail: the pin just above succeeded
        return fw::cmd_errno(st);
    }
    *n = pages.size();
    return 0;
}

/// Drops an MR's use of its MTT run: the last user frees it and unpins its pages.
void drop_translation(hca_driver& drv, fw::address_space* as, uint64_t first, uint64_t n, uint64_t pin_addr,
                      uint64_t pin_len) {
    // Cannot fail: the registration pinned exactly this range, and only its last user unpins it.
    if (drv.release_mtt(first, n) && as && pin_len) (void)as->unpin(pin_addr, pin_len);
}

/// MPT entry of a Valid memory region.
hw::mpt_entry region_entry(uint32_t key, const ibv_pd* pd, int access, uint64_t iova, uint64_t length) {
    hw::mpt_entry m{};
    m.key = key;
    m.pd = pd->handle;
    m.access = uint32_t(access);
    m.state = hw::MPT_STATE_VALID;
    m.type = hw::MPT_TYPE_MR;
    m.log_page_size = fw::PAGE_SHIFT;
    m.start_va = zero_based(access) ? 0 : iova;  // ZBVA: requests name offsets from 0
    m.length = length;
    return m;
}

/// The ibv_mr of an MPT entry the HCA now holds; counts it on its PD and context.
ibv_mr* new_mr(ibv_pd* pd, const hw::mpt_entry& m, uint64_t addr, uint64_t length, int access) {
    auto* mr = new ibv_mr{};
    mr->context = pd->context;
    mr->pd = pd;
    mr->addr = addr;
    mr->length = length;
    mr->handle = hw::key_index(m.key);
    mr->lkey = mr->rkey = m.key;
    mr->access = access;
    mr->mtt_first = m.mtt_base;
    mr->mtt_count = m.mtt_reserved;
    mr->hw_mpt = m;
    ++pd->refs;
    ++pd->context->mrs;
    return mr;
}

/// HCA-maintained fields of an entry, copied into one software is about to write back.
void keep_hca_fields(hw::mpt_entry* m, const hw::mpt_entry& held) {
    m->bound_mws = held.bound_mws;
    m->mr_index = held.mr_index;
    m->qpn = held.qpn;
    m->mr_va = held.mr_va;
}

/// After the HCA took a reregistration: the ibv_mr follows (PD counts, address, length, rights, keys).
void commit_rereg(ibv_mr* mr, const hw::mpt_entry& m, ibv_pd* new_pd, uint64_t new_addr, uint64_t new_len,
                  int new_access) {
    if (new_pd != mr->pd) {
        --mr->pd->refs;
        ++new_pd->refs;
        mr->pd = new_pd;
    }
    mr->addr = new_addr;
    mr->length = new_len;
    mr->access = new_access;
    mr->lkey = mr->rkey = m.key;
    mr->hw_mpt = m;
}

/// The checks of Register / Reregister Physical MR on a page or block list; 0 or EINVAL.
int check_phys_attr(const hw::hca_caps& caps, const ibv_phys_mr_attr& a) {
    if (int e = check_mr_access(caps, a.access)) return e;
    if (check_mr_length(caps, a.length) || !a.list || a.count == 0) return EINVAL;
    if (a.key_byte < -1 || a.key_byte > 255) return EINVAL;
    if (!zero_based(a.access) && wraps(a.iova, a.length)) return EINVAL;
    if (a.block_list) {
        // o10-37.2.9: equal blocks of any size and alignment.
        if (!(caps.flags & hw::CAP_BLOCK_LIST) || a.size == 0 || a.size > UINT32_MAX) return EINVAL;
    } else {
        if (a.size < fw::PAGE_BYTES || (a.size & (a.size - 1)) || !(caps.page_size_cap & a.size))
            return EINVAL;
        for (uint32_t i = 0; i < a.count; ++i)
            if (a.list[i] & (a.size - 1)) return EINVAL;  // C10-53.2.1
    }
    for (uint32_t i = 0; i < a.count; ++i)
        if (a.list[i] & hw::MTT_PRESENT) return EINVAL;  // not a host physical address
    // The region [first_offset, first_offset + length) must lie in the listed pages / blocks.
    if (a.size * a.count / a.count != a.size || a.first_offset >= a.size ||
        a.length > a.size * a.count - a.first_offset)
        return EINVAL;
    return 0;
}

/// Allocates and writes the MTT run of a checked physical list; 0 or errno, nothing left behind.
int build_phys_translation(hca_driver& drv, const ibv_phys_mr_attr& a, uint64_t* first) {
    if (!drv.alloc_mtt(a.count, first)) return ENOMEM;
    hw::cmd_status st = write_mtt(drv, *first, std::vector<uint64_t>(a.list, a.list + a.count));
    if (st != hw::CMD_OK) {
        drv.free_mtt(*first, a.count);
        return fw::cmd_errno(st);
    }
    return 0;
}

/// The translation fields of an MPT entry over a physical list written at MTT index `first`.
void set_phys_translation(hw::mpt_entry* m, const ibv_phys_mr_attr& a, uint64_t first) {
    m->flags = uint8_t((m->flags & ~(hw::MPT_PHYS | hw::MPT_BLOCK_LIST | hw::MPT_SHARED)) | hw::MPT_PHYS |
                       (a.block_list ? hw::MPT_BLOCK_LIST : 0));
    uint8_t log_size = 0;
    while ((1ull << log_size) < a.size) ++log_size;
    m->log_page_size = a.block_list ? fw::PAGE_SHIFT : log_size;  // unused with a block list
    m->block_size = a.block_list ? uint32_t(a.size) : 0;
    m->mtt_base = first;
    m->mtt_count = m->mtt_reserved = a.count;
    m->page_offset = a.first_offset;
}

}  // namespace

ibv_mr* ibv_reg_mr(ibv_pd* pd, uint64_t addr, size_t length, int access) {
    if (!pd) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    if (int e = check_mr_access(drv.caps(), access)) return fail<ibv_mr>(e);
    if (check_mr_length(drv.caps(), length) || wraps(addr, length)) return fail<ibv_mr>(EINVAL);
    // C10-45: all or nothing, so every failure below rolls back what was done.
    uint64_t first = 0, n = 0;
    if (int e = build_va_translation(ctx, addr, length, &first, &n)) return fail<ibv_mr>(e);
    uint32_t index;
    uint8_t key_byte;  // CI-owned (o10-37.2.2, o10-37.2.4)
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drop_translation(drv, ctx->as, first, n, addr, length);
        return fail<ibv_mr>(ENOMEM);
    }
    hw::mpt_entry m = region_entry(hw::make_key(index, key_byte), pd, access, addr, length);
    m.mtt_base = first;
    m.mtt_count = m.mtt_reserved = uint32_t(n);
    m.page_offset = uint32_t(addr % fw::PAGE_BYTES);
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        drop_translation(drv, ctx->as, first, n, addr, length);
        return fail<ibv_mr>(fw::cmd_errno(st));
    }
    ibv_mr* mr = new_mr(pd, m, addr, length, access);
    mr->pin_as = ctx->as;
    mr->pin_addr = addr;
    mr->pin_len = length;
    return mr;
}

ibv_mr* ibv_reg_phys_mr(ibv_pd* pd, const ibv_phys_mr_attr* a) {
    if (!pd || !a) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    if (int e = check_phys_attr(caps, *a)) return fail<ibv_mr>(e);
    uint64_t first;
    if (int e = build_phys_translation(drv, *a, &first)) return fail<ibv_mr>(e);
    uint32_t index;
    uint8_t key_byte;
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drv.free_mtt(first, a->count);
        return fail<ibv_mr>(ENOMEM);
    }
    if (a->key_byte >= 0) key_byte = uint8_t(a->key_byte);  // the consumer's choice (o10-37.2.2)
    hw::mpt_entry m = region_entry(hw::make_key(index, key_byte), pd, a->access, a->iova, a->length);
    set_phys_translation(&m, *a, first);
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        drv.free_mtt(first, a->count);
        return fail<ibv_mr>(fw::cmd_errno(st));
    }
    ibv_mr* mr = new_mr(pd, m, a->iova, a->length, a->access);
    mr->page_list_max = a->count;  // o10-37.2.10
    return mr;
}

ibv_mr* ibv_reg_shared_mr(ibv_mr* src, ibv_pd* pd, int access, uint64_t iova) {
    if (!src || !pd) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    if (src->context->driver != &drv) return fail<ibv_mr>(EINVAL);  // another HCA's region
    // An Allocate L_Key region has no fixed pages to share (they change with each Fast Register).
    if (src->hw_mpt.flags & hw::MPT_FAST_REG) return fail<ibv_mr>(EINVAL);
    if (int e = check_mr_access(drv.caps(), access)) return fail<ibv_mr>(e);
    if (!zero_based(access) && wraps(iova, src->length)) return fail<ibv_mr>(EINVAL);
    uint32_t index;
    uint8_t key_byte;  // CI-owned (o10-37.2.2)
    if (!drv.alloc_mpt(&index, &key_byte)) return fail<ibv_mr>(ENOMEM);
    const hw::mpt_entry& s = src->hw_mpt;
    hw::mpt_entry m = region_entry(hw::make_key(index, key_byte), pd, access, iova, src->length);
    m.flags = uint8_t((s.flags & (hw::MPT_PHYS | hw::MPT_BLOCK_LIST)) | hw::MPT_SHARED);
    m.log_page_size = s.log_page_size;
    m.block_size = s.block_size;
    m.mtt_base = s.mtt_base;  // the same translation entries as the source
    m.mtt_count = s.mtt_count;
    m.mtt_reserved = s.mtt_reserved;
    m.page_offset = s.page_offset;
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        return fail<ibv_mr>(fw::cmd_errno(st));
    }
    if (!(s.flags & hw::MPT_SHARE_SRC)) {
        // Mark the source: it cannot be invalidated or fast-registered any more (o10-37.2.13).
        hw::mpt_entry held{};
        st = drv.exec(hw::CMD_QUERY_MPT, src->handle, 0, nullptr, 0, &held, sizeof held);
        if (st == hw::CMD_OK) {
            held.flags |= hw::MPT_SHARE_SRC;
            st = drv.exec(hw::CMD_CREATE_MPT, src->handle, hw::MPT_MODIFY, &held, sizeof held);
        }
        if (st != hw::CMD_OK) {
            // The index goes back only once the HCA dropped the new entry: a later region must not
            // get an index the HCA still holds Valid.
            if (drv.exec(hw::CMD_DESTROY_MPT, index, 0, nullptr, 0) == hw::CMD_OK) drv.free_mpt(index);
            return fail<ibv_mr>(st == hw::CMD_BAD_STATE ? EBUSY : fw::cmd_errno(st));
        }
        src->hw_mpt = held;
    }
    drv.retain_mtt(src->mtt_first);
    ibv_mr* mr = new_mr(pd, m, iova, src->length, access);
    mr->page_list_max = src->page_list_max;
    mr->pin_as = src->pin_as;  // the pages stay pinned while either region uses them
    mr->pin_addr = src->pin_addr;
    mr->pin_len = src->pin_len;
    return mr;
}

int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, uint64_t addr, size_t length, int access) {
    if (!mr) return EINVAL;
    ibv_context* ctx = mr->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    const int all = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    if (flags == 0 || (flags & ~all)) return EINVAL;
    if (mr->hw_mpt.flags & hw::MPT_FAST_REG) return EINVAL;  // Allocate L_Key regions: Fast Register
    bool translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
    ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
    if (!new_pd || new_pd->context != ctx) return EINVAL;
    int new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? access : mr->access;
    if (int e = check_mr_access(drv.caps(), new_access)) return e;
    uint64_t new_addr = translate ? addr : mr->addr, new_len = translate ? length : mr->length;
    if (translate && (check_mr_length(drv.caps(), length) || wraps(addr, length))) return EINVAL;
    if (!zero_based(new_access) && wraps(new_addr, new_len)) return EINVAL;
    // Atomic (C10-45): build everything new first; the old registration goes only after the HCA
    // took the new one in one MPT_MODIFY.
    uint64_t first = 0, n = 0;
    if (translate) {
        if (int e = build_va_translation(ctx, addr, length, &first, &n)) return e;
    }
    auto undo = [&](int e) {
        if (translate) drop_translation(drv, ctx->as, first, n, addr, length);
        return e;
    };
    hw::mpt_entry held{};
    hw::cmd_status st = drv.exec(hw::CMD_QUERY_MPT, mr->handle, 0, nullptr, 0, &held, sizeof held);
    if (st != hw::CMD_OK) return undo(fw::cmd_errno(st));
    hw::mpt_entry m = mr->hw_mpt;
    keep_hca_fields(&m, held);
    m.flags = uint8_t(m.flags | (held.flags & hw::MPT_SHARE_SRC));
    // CI-owned (o10-37.2.2): fresh, or the region's own with driver_options::rereg_keeps_keys.
    m.key =
        drv.options().rereg_keeps_keys ? mr->lkey : hw::make_key(mr->handle, drv.next_key_byte(mr->handle));
    m.pd = new_pd->handle;
    m.access = uint32_t(new_access);
    m.state = hw::MPT_STATE_VALID;
    m.start_va = zero_based(new_access) ? 0 : new_addr;
    m.length = new_len;
    if (translate) {  // now a virtual registration of its own pages
        m.flags &= uint8_t(~(hw::MPT_PHYS | hw::MPT_BLOCK_LIST | hw::MPT_SHARED));
        m.log_page_size = fw::PAGE_SHIFT;
        m.block_size = 0;
        m.mtt_base = first;
        m.mtt_count = m.mtt_reserved = uint32_t(n);
        m.page_offset = uint32_t(addr % fw::PAGE_BYTES);
    }
    st = drv.exec(hw::CMD_CREATE_MPT, mr->handle, hw::MPT_MODIFY, &m, sizeof m);
    if (st != hw::CMD_OK) return undo(st == hw::CMD_BAD_STATE ? EBUSY : fw::cmd_errno(st));
    if (translate) {
        drop_translation(drv, mr->pin_as, mr->mtt_first, mr->mtt_count, mr->pin_addr, mr->pin_len);
        mr->mtt_first = first;
        mr->mtt_count = n;
        mr->pin_as = ctx->as;
        mr->pin_addr = addr;
        mr->pin_len = length;
        mr->page_list_max = 0;
    }
    commit_rereg(mr, m, new_pd, new_addr, new_len, new_access);
    return 0;
}

int ibv_rereg_phys_mr(ibv_mr* mr, int flags, ibv_pd* pd, const ibv_phys_mr_attr* a) {
    if (!mr) return EINVAL;
    ibv_context* ctx = mr->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    const int all = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    if (flags == 0 || (flags & ~all)) return EINVAL;
    if (mr->hw_mpt.flags & hw::MPT_FAST_REG) return EINVAL;  // Allocate L_Key regions: Fast Register
    const bool translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
    if (!a && (translate || (flags & IBV_REREG_MR_CHANGE_ACCESS))) return EINVAL;
    if (a && (a->key_byte < -1 || a->key_byte > 255)) return EINVAL;
    ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
    if (!new_pd || new_pd->context != ctx) return EINVAL;
    const int new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? a->access : mr->access;
    if (int e = check_mr_access(drv.caps(), new_access)) return e;
    if (translate) {
        ibv_phys_mr_attr t = *a;
        t.access = new_access;
        if (int e = check_phys_attr(drv.caps(), t)) return e;
    }
    const uint64_t new_addr = translate ? a->iova : mr->addr, new_len = translate ? a->length : mr->length;
    if (!zero_based(new_access) && wraps(new_addr, new_len)) return EINVAL;
    // Atomic (C10-45): the new list is written first; the old translation goes only after the HCA
    // took the new entry in one MPT_MODIFY.
    uint64_t first = 0;
    if (translate) {
        if (int e = build_phys_translation(drv, *a, &first)) return e;
    }
    auto undo = [&](int e) {
        if (translate) drv.free_mtt(first, a->count);
        return e;
    };
    hw::mpt_entry held{};
    hw::cmd_status st = drv.exec(hw::CMD_QUERY_MPT, mr->handle, 0, nullptr, 0, &held, sizeof held);
    if (st != hw::CMD_OK) return undo(fw::cmd_errno(st));
    hw::mpt_entry m = mr->hw_mpt;
    keep_hca_fields(&m, held);
    m.flags = uint8_t(m.flags | (held.flags & hw::MPT_SHARE_SRC));
    // The consumer's key byte, or a fresh one of the driver's (o10-37.2.2, o10-37.2.4).
    const uint8_t key_byte = (a && a->key_byte >= 0) ? uint8_t(a->key_byte) : drv.next_key_byte(mr->handle);
    m.key = hw::make_key(mr->handle, key_byte);
    m.pd = new_pd->handle;
    m.access = uint32_t(new_access);
    m.state = hw::MPT_STATE_VALID;
    m.start_va = zero_based(new_access) ? 0 : new_addr;
    m.length = new_len;
    if (translate) set_phys_translation(&m, *a, first);
    st = drv.exec(hw::CMD_CREATE_MPT, mr->handle, hw::MPT_MODIFY, &m, sizeof m);
    if (st != hw::CMD_OK) return undo(st == hw::CMD_BAD_STATE ? EBUSY : fw::cmd_errno(st));
    if (translate) {  // now a physical registration: nothing of the process stays pinned for it
        drop_translation(drv, mr->pin_as, mr->mtt_first, mr->mtt_count, mr->pin_addr, mr->pin_len);
        mr->mtt_first = first;
        mr->mtt_count = a->count;
        mr->pin_as = nullptr;
        mr->pin_addr = mr->pin_len = 0;
        mr->page_list_max = a->count;
    }
    commit_rereg(mr, m, new_pd, new_addr, new_len, new_access);
    return 0;
}

int ibv_query_mr(ibv_mr* mr, ibv_mr_attr* attr) {
    if (!mr || !attr) return EINVAL;
    verb_cost(mr->context);
    hw::mpt_entry m{};
    hw::cmd_status st = mr->context->driver->exec(hw::CMD_QUERY_MPT, mr->handle, 0, nullptr, 0, &m, sizeof m);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    *attr = ibv_mr_attr{};
    attr->pd = mr->pd;
    attr->addr = m.start_va;
    attr->length = m.length;
    attr->access = int(m.access);
    attr->lkey = attr->rkey = m.key;
    attr->state = m.state <= hw::MPT_STATE_VALID ? ibv_mr_state(m.state) : IBV_MR_STATE_INVALID;
    attr->page_list_max = m.mtt_reserved;  // o10-37.2.10
    attr->is_shared = m.flags & hw::MPT_SHARED;
    return 0;
}

ibv_mr* ibv_alloc_lkey(ibv_pd* pd, uint32_t max_pages) {
    if (!pd) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    if (!(caps.flags & hw::CAP_SEND_INV) || max_pages == 0 || max_pages > caps.max_fast_reg_pages)
        return fail<ibv_mr>(EINVAL);
    uint64_t first, list_pa;
    if (!drv.alloc_mtt(max_pages, &first)) return fail<ibv_mr>(ENOMEM);
    if (!drv.os().alloc_contiguous(size_t(max_pages) * sizeof(uint64_t), 64, &list_pa)) {
        drv.free_mtt(first, max_pages);
        return fail<ibv_mr>(ENOMEM);
    }
    uint32_t index;
    uint8_t key_byte;
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drv.os().free(list_pa);
        drv.free_mtt(first, max_pages);
        return fail<ibv_mr>(ENOMEM);
    }
    hw::mpt_entry m{};
    m.key = hw::make_key(index, key_byte);  // the consumer picks the byte at Fast Register time
    m.pd = pd->handle;
    m.state = hw::MPT_STATE_FREE;
    m.type = hw::MPT_TYPE_MR;
    m.flags = hw::MPT_FAST_REG;
    m.log_page_size = fw::PAGE_SHIFT;
    m.mtt_base = first;
    m.mtt_reserved = max_pages;
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        drv.os().free(list_pa);
        drv.free_mtt(first, max_pages);
        return fail<ibv_mr>(fw::cmd_errno(st));
    }
    ibv_mr* mr = new_mr(pd, m, 0, 0, 0);
    mr->page_list_max = max_pages;  // o10-37.2.10
    mr->page_list_pa = list_pa;
    return mr;
}

int ibv_dereg_mr(ibv_mr* mr) {
    if (!mr) return EINVAL;
    ibv_context* ctx = mr->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    hw::cmd_status st = drv.exec(hw::CMD_DESTROY_MPT, mr->handle, 0, nullptr, 0);
    if (st == hw::CMD_BAD_STATE) return EBUSY;  // windows are bound to it: it stays registered
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    drv.free_mpt(mr->handle);
    drop_translation(drv, mr->pin_as, mr->mtt_first, mr->mtt_count, mr->pin_addr, mr->pin_len);
    if (mr->page_list_pa) drv.os().free(mr->page_list_pa);
    --mr->pd->refs;
    --ctx->mrs;
    delete mr;
    return 0;
}

int ibv_map_pages(ibv_context* ctx, uint64_t va, size_t len, std::vector<uint64_t>* pages) {
    if (!ctx || !pages || len == 0) return EINVAL;
    verb_cost(ctx);
    if (int e = ctx->as->pin(va, len, pages)) return e;
    ctx->mapped.emplace_back(va, len);
    return 0;
}

int ibv_unmap_pages(ibv_context* ctx, uint64_t va, size_t len) {
    if (!ctx) return EINVAL;
    auto it = std::find(ctx->mapped.begin(), ctx->mapped.end(), std::make_pair(va, uint64_t(len)));
    if (it == ctx->mapped.end()) return EINVAL;
    (void)ctx->as->unpin(va, len);  // cannot fail: ibv_map_pages pinned exactly this range
    ctx->mapped.erase(it);
    return 0;
}

// ---------------------------------------------------------------- memory windows

ibv_mw* ibv_alloc_mw(ibv_pd* pd, ibv_mw_type type) {
    if (!pd) return fail<ibv_mw>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    if (!(caps.flags & hw::CAP_MW)) return fail<ibv_mw>(EINVAL);
    uint8_t hw_type;
    if (type == IBV_MW_TYPE_1) {
        hw_type = hw::MPT_TYPE_MW1;
    } else if (type == IBV_MW_TYPE_2) {
        bool a = caps.flags & hw::CAP_MW_TYPE2A, b = caps.flags & hw::CAP_MW_TYPE2B;
        if (a == b) return fail<ibv_mw>(EINVAL);  // o10-37.2.31: exactly one of 2A / 2B
        hw_type = a ? hw::MPT_TYPE_MW2A : hw::MPT_TYPE_MW2B;
    } else {
        return fail<ibv_mw>(EINVAL);
    }
    if (!drv.reserve_mw()) return fail<ibv_mw>(ENOMEM);
    uint32_t index;
    uint8_t key_byte;
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drv.release_mw();
        return fail<ibv_mw>(ENOMEM);
    }
    hw::mpt_entry m{};
    m.key = hw::make_key(index, key_byte);
    m.pd = pd->handle;
    m.state = hw::MPT_STATE_FREE;
    m.type = hw_type;
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        drv.release_mw();
        return fail<ibv_mw>(fw::cmd_errno(st));
    }
    ++pd->refs;
    ++ctx->mws;
    return new ibv_mw{ctx, pd, m.key, index, type};
}

int ibv_dealloc_mw(ibv_mw* mw) {
    if (!mw) return EINVAL;
    ibv_context* ctx = mw->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    hw::cmd_status st = drv.exec(hw::CMD_DESTROY_MPT, mw->handle, 0, nullptr, 0);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    drv.free_mpt(mw->handle);
    drv.release_mw();
    --mw->pd->refs;
    --ctx->mws;
    delete mw;
    return 0;
}

// ---------------------------------------------------------------- memory management work requests

namespace {

constexpr unsigned MW_ACCESS_BITS =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;

/// Shape of a bind (verb or WR): QP type, flags, rights bits, length field; 0 or EINVAL. The
/// region's rights, PD and bounds are the HCA's to check (completion errors).
int check_bind_shape(const ibv_qp* qp, const ibv_mw_bind_info& b, unsigned send_flags) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    if (qp->qp_type == IBV_QPT_UD) return EINVAL;  // C10-89: binds on RC and UC
    if (send_flags & ~unsigned(IBV_SEND_SIGNALED | IBV_SEND_FENCE)) return EINVAL;
    if (b.mw_access_flags & ~MW_ACCESS_BITS) return EINVAL;
    if ((b.mw_access_flags & IBV_ACCESS_ZERO_BASED) && !(caps.flags & hw::CAP_ZBVA)) return EINVAL;
    if (b.length > UINT32_MAX) return EINVAL;  // wqe_bind_seg::length is 32 bits
    if (b.length && !b.mr) return EINVAL;
    if (b.mr && b.mr->context->driver != qp->context->driver) return EINVAL;
    return 0;
}

}  // namespace

namespace detail {

/// Immediate errors of a memory management WR (LOCAL_INV, BIND_MW, FAST_REG_MR).
int check_mem_mgmt_wr(const ibv_qp* qp, const ibv_send_wr* wr) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    if (wr->send_flags & IBV_SEND_INLINE) return EINVAL;  // no data to inline
    if (wr->opcode == IBV_WR_BIND_MW) {
        const ibv_mw* mw = wr->bind_mw.mw;
        if (!mw || mw->context != qp->context) return EINVAL;
        if (mw->type != IBV_MW_TYPE_2) return EINVAL;          // o10-37.2.34: type 1 binds by the verb
        if (wr->bind_mw.bind_info.length == 0) return EINVAL;  // o10-37.2.40: no zero-length type 2 bind
        return check_bind_shape(qp, wr->bind_mw.bind_info, wr->send_flags & ~unsigned(IBV_SEND_SOLICITED));
    }
    if (wr->opcode == IBV_WR_FAST_REG_MR) {
        const auto& f = wr->fast_reg;
        // Only an ibv_alloc_lkey region has the page-list buffer the WQE points the HCA at.
        if (!f.mr || !f.mr->page_list_pa || f.mr->context->driver != qp->context->driver) return EINVAL;
        if (f.page_count == 0 || f.page_count > f.mr->page_list_max || !f.page_list) return EINVAL;
        if (f.length == 0) return EINVAL;
        if (int e = check_mr_access(caps, f.access)) return e;
    }
    return 0;
}

/// Bind WQE (verb or WR) into buf; returns its size.
uint32_t build_bind_wqe(const ibv_qp* qp, uint64_t wr_id, unsigned send_flags, uint32_t mw_key,
                        uint32_t new_key, const ibv_mw_bind_info& b, uint32_t bind_flags, uint8_t* buf) {
    uint32_t off = 0;
    put(buf, &off, make_ctrl(qp, hw::WQE_OP_BIND_MW, send_flags, wr_id));
    hw::wqe_bind_seg s{};
    s.mw_key = mw_key;
    s.new_key = new_key;
    s.mr_lkey = b.mr ? b.mr->lkey : 0;
    s.access = b.mw_access_flags;
    s.addr = b.addr;
    s.length = uint32_t(b.length);
    s.bind_flags = bind_flags;
    put(buf, &off, s);
    return finish_wqe(buf, off);
}

/// Fast register WQE into buf (copies the page list to the L_Key's buffer first); returns its size.
uint32_t build_fast_reg_wqe(const ibv_qp* qp, const ibv_send_wr* wr, uint8_t* buf) {
    const auto& f = wr->fast_reg;
    host_bus& bus = qp->context->driver->bus();
    bus.mem_write(f.mr->page_list_pa, f.page_list, size_t(f.page_count) * sizeof(uint64_t));
    bus.cpu_cost(cpu_op::memcpy_64b, uint32_t((uint64_t(f.page_count) * sizeof(uint64_t) + 63) / 64));
    uint32_t off = 0;
    put(buf, &off, make_ctrl(qp, hw::WQE_OP_FAST_REG, wr->send_flags, wr->wr_id));
    hw::wqe_fast_reg_seg s{};
    s.lkey = hw::make_key(f.mr->handle, f.key_byte);
    s.access = uint32_t(f.access);
    s.iova = f.iova;
    s.length = f.length;
    s.page_list_pa = f.mr->page_list_pa;
    s.page_count = f.page_count;
    s.page_offset = f.page_offset;
    s.log_page_size = f.log_page_size;
    put(buf, &off, s);
    return finish_wqe(buf, off);
}

/// Key a type 2 bind WR gives its window: the window's index, the consumer's key byte.
uint32_t bind_wr_key(const ibv_send_wr* wr) {
    return hw::make_key(hw::key_index(wr->bind_mw.mw->rkey), hw::key_byte(wr->bind_mw.rkey));
}

/// Software state a posted WR changes: the keys a bind or fast register WR gives.
void after_post(const ibv_send_wr* wr) {
    if (wr->opcode == IBV_WR_BIND_MW) {
        wr->bind_mw.mw->rkey = bind_wr_key(wr);
    } else if (wr->opcode == IBV_WR_FAST_REG_MR) {
        ibv_mr* mr = wr->fast_reg.mr;
        mr->lkey = mr->rkey = hw::make_key(mr->handle, wr->fast_reg.key_byte);
    }
}

}  // namespace detail

int ibv_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
    if (!qp || !mw || !mw_bind) return EINVAL;
    ibv_context* ctx = qp->context;
    verb_cost(ctx);
    if (mw->type != IBV_MW_TYPE_1) return EINVAL;  // o10-37.2.35: type 2 windows bind by a WR
    if (mw->context != ctx) return EINVAL;
    if (int e = check_bind_shape(qp, mw_bind->bind_info, mw_bind->send_flags)) return e;
    if (int e = check_sq_post(qp)) return e;
    uint8_t buf[4096];
    std::memset(buf, 0, 1u << qp->sq.log_stride);
    // C10-66.2.2: a new R_Key on every bind, from the driver's per-index key generation so a
    // key handed out for this index before (a region or window that had it) never comes back.
    hca_driver& drv = *ctx->driver;
    const uint32_t index = hw::key_index(mw->rkey);
    uint32_t new_key = hw::make_key(index, drv.next_key_byte(index));
    uint32_t bytes = build_bind_wqe(qp, mw_bind->wr_id, mw_bind->send_flags, mw->rkey, new_key,
                                    mw_bind->bind_info, hw::BIND_FROM_VERB, buf);
    put_send_wqe(qp, buf, bytes);
    ring_send(qp, 1, buf, bytes);
    mw->rkey = new_key;
    return 0;
}

}  // namespace hcasim::verbs
