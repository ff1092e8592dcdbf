// host_memory: sparse storage, address errors, DMI, atomics and write watches.
#include <gtest/gtest.h>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <vector>

#include "model/core/param.h"
#include "model/host/host_memory.h"
#include "sim_fork.h"
#include "tlm_if/tlm_ext.h"

using namespace sc_core;
using hcasim::host_memory;

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

/// Initiator on both memory sockets; `body` runs in an SC_THREAD.
struct bench : sc_module {
    tlm_utils::simple_initiator_socket<bench> cpu{"cpu"}, dma{"dma"};
    host_memory mem{"mem"};
    std::function<void(bench&)> body;
    SC_HAS_PROCESS(bench);
    explicit bench(sc_module_name n, std::function<void(bench&)> b = {}) : sc_module(n), body(std::move(b)) {
        cpu.bind(mem.cpu);
        dma.bind(mem.dma);
        SC_THREAD(thread);
    }
    void thread() {
        if (body) body(*this);
    }
    /// Sets up `gp` for `len` bytes at `addr`.
    static void prepare(tlm::tlm_generic_payload& gp, tlm::tlm_command cmd, uint64_t addr, const void* data,
                        unsigned len) {
        gp.set_command(cmd);
        gp.set_address(addr);
        gp.set_data_ptr(static_cast<unsigned char*>(const_cast<void*>(data)));
        gp.set_data_length(len);
        gp.set_streaming_width(len);
    }
    tlm::tlm_response_status access(tlm::tlm_command cmd, uint64_t addr, void* data, unsigned len,
                                    sc_time& delay, bool use_dma = false) {
        tlm::tlm_generic_payload gp;
        prepare(gp, cmd, addr, data, len);
        (use_dma ? dma : cpu)->b_transport(gp, delay);
        return gp.get_response_status();
    }
    /// A posted write on the dma socket (as the PCIe link makes them), landing `delay` from now.
    tlm::tlm_response_status post(uint64_t addr, const void* data, unsigned len, sc_time delay) {
        tlm::tlm_generic_payload gp;
        prepare(gp, tlm::TLM_WRITE_COMMAND, addr, data, len);
        gp.set_extension(hcasim::posted_write_ext::instance());
        dma->b_transport(gp, delay);
        gp.clear_extension(hcasim::posted_write_ext::instance());
        return gp.get_response_status();
    }
};

}  // namespace

SIM_TEST(HostMemory, sparse_pages_zero_fill_and_page_crossing) {
    bench b("node0");
    sc_start(SC_ZERO_TIME);  // completes binding
    host_memory& m = b.mem;
    EXPECT_EQ(m.size_bytes.get(), uint64_t(64) << 30);
    std::vector<uint8_t> out(10000, 0xee);
    m.read(0x123456789, out.data(), out.size());  // never written: zeros, nothing allocated
    for (uint8_t v : out) ASSERT_EQ(v, 0);
    EXPECT_EQ(m.allocated_pages(), 0u);

    std::vector<uint8_t> in(10000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 7 + 3);
    const uint64_t addr = (uint64_t(1) << 30) - 100;  // spans 4 pages
    m.write(addr, in.data(), in.size());
    EXPECT_EQ(m.allocated_pages(), 4u);
    m.read(addr, out.data(), out.size());
    EXPECT_EQ(in, out);
    uint8_t edge[2];
    m.read(addr - 1, edge, 1);
    m.read(addr + in.size(), edge + 1, 1);
    EXPECT_EQ(edge[0], 0);
    EXPECT_EQ(edge[1], 0);
    EXPECT_EQ(*m.page_ptr(addr + 5000), in[5000]);

    // Top of memory through b_transport, spanning a page boundary.
    sc_time d = SC_ZERO_TIME;
    uint32_t v = 0xdeadbeef, r = 0;
    const uint64_t top = (uint64_t(64) << 30) - 4096 - 2;
    EXPECT_EQ(b.access(tlm::TLM_WRITE_COMMAND, top, &v, 4, d), tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(b.access(tlm::TLM_READ_COMMAND, top, &r, 4, d, true), tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(r, v);
    EXPECT_EQ(d, SC_ZERO_TIME);  // access_latency_ns defaults to 0
    EXPECT_EQ(m.reads.value(), 1u);
    EXPECT_EQ(m.writes.value(), 1u);
    EXPECT_EQ(m.bytes_written.value(), 4u);
}

SIM_TEST(HostMemory, zeros_written_into_a_page_never_written_back_nothing) {
    bench b("node0");
    sc_start(SC_ZERO_TIME);
    host_memory& m = b.mem;
    std::vector<uint8_t> zeros(3 * 4096, 0);
    m.write(0x10000, zeros.data(), zeros.size());  // an OS zeroing a ring it hands out
    EXPECT_EQ(m.allocated_pages(), 0u);
    const uint8_t one = 1;
    m.write(0x11000 + 7, &one, 1);
    EXPECT_EQ(m.allocated_pages(), 1u);
    m.write(0x11000, zeros.data(), 4096);  // zeros into a backed page land like any bytes
    uint8_t r = 0xee;
    m.read(0x11000 + 7, &r, 1);
    EXPECT_EQ(r, 0);
    EXPECT_EQ(m.allocated_pages(), 1u);
    // A write that starts in zeros and ends in a non-zero byte backs only the page it reaches.
    std::vector<uint8_t> tail(2 * 4096, 0);
    tail.back() = 9;
    m.write(0x20000, tail.data(), tail.size());
    EXPECT_EQ(m.allocated_pages(), 2u);
    m.read(0x20000 + 2 * 4096 - 1, &r, 1);
    EXPECT_EQ(r, 9);
}

namespace {
/// Touches 1,100 pages (three slabs) in a scattered order, one distinct pattern each, and
/// reads them back; returns the host address of the first page touched.
uintptr_t fill_and_check_scattered_pages(host_memory& m) {
    std::vector<uint64_t> addrs;
    for (uint64_t i = 0; i < 1100; ++i) addrs.push_back(((i * 7919) % 1100) * 0x10000 + (i % 4096));
    for (uint64_t i = 0; i < addrs.size(); ++i) {
        const uint64_t v = (addrs[i] + 1) * 0x9E3779B97F4A7C15ull;  // never 0: zeros back no page
        m.write(addrs[i], &v, sizeof v);
    }
    EXPECT_EQ(m.allocated_pages(), 1100u);  // 8 bytes at in-page offsets below 4089: one page each
    for (uint64_t a : addrs) {
        uint64_t v = 0, z = 1;
        m.read(a, &v, sizeof v);
        EXPECT_EQ(v, (a + 1) * 0x9E3779B97F4A7C15ull);
        m.read(a + 0x8000, &z, sizeof z);  // pages never written read as zero
        EXPECT_EQ(z, 0u);
    }
    return reinterpret_cast<uintptr_t>(m.page_ptr(addrs[0] & ~uint64_t(4095)));
}
}  // namespace

SIM_TEST(HostMemory, huge_page_slabs_are_aligned_and_hold_the_same_bytes) {
    bench b("node0");
    sc_start(SC_ZERO_TIME);
    ASSERT_TRUE(b.mem.huge_pages.get());  // the default
    const uintptr_t first = fill_and_check_scattered_pages(b.mem);
    EXPECT_EQ(first % (uintptr_t(2) << 20), 0u);  // the first page opens a 2 MiB aligned slab
}

SIM_TEST(HostMemory, small_page_slabs_hold_the_same_bytes) {
    hcasim::broker::instance().set("node0.mem.huge_pages", "false", "test");
    bench b("node0");
    sc_start(SC_ZERO_TIME);
    ASSERT_FALSE(b.mem.huge_pages.get());
    fill_and_check_scattered_pages(b.mem);
}

SIM_TEST(HostMemory, out_of_range_and_byte_enables_are_errors) {
    hcasim::broker::instance().set("mem.size_bytes", "1048576", "test");
    hcasim::broker::instance().set("mem.access_latency_ns", "50", "test");
    bench b("node0");
    sc_start(SC_ZERO_TIME);
    sc_time d = SC_ZERO_TIME;
    uint64_t v = 1;
    EXPECT_EQ(b.access(tlm::TLM_WRITE_COMMAND, (1 << 20) - 8, &v, 8, d), tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(d, sc_time(50, SC_NS));
    EXPECT_EQ(b.access(tlm::TLM_WRITE_COMMAND, (1 << 20) - 4, &v, 8, d), tlm::TLM_ADDRESS_ERROR_RESPONSE);
    EXPECT_EQ(b.access(tlm::TLM_READ_COMMAND, 1 << 20, &v, 1, d, true), tlm::TLM_ADDRESS_ERROR_RESPONSE);
    EXPECT_EQ(b.access(tlm::TLM_READ_COMMAND, ~uint64_t(0) - 2, &v, 8, d), tlm::TLM_ADDRESS_ERROR_RESPONSE);

    tlm::tlm_generic_payload gp;
    unsigned char be[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    gp.set_command(tlm::TLM_WRITE_COMMAND);
    gp.set_address(0);
    gp.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
    gp.set_data_length(8);
    gp.set_streaming_width(8);
    gp.set_byte_enable_ptr(be);
    gp.set_byte_enable_length(8);
    b.cpu->b_transport(gp, d);
    EXPECT_EQ(gp.get_response_status(), tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);

    uint8_t buf[4];
    EXPECT_THROW(b.mem.read((1 << 20) - 2, buf, 4), sc_report);
}

// Issue 27: the address in "beyond memory size" messages is hex after "0x", not decimal.
SIM_TEST(HostMemory, an_access_beyond_memory_names_its_address_in_hex) {
    hcasim::broker::instance().set("mem.size_bytes", "1048576", "test");
    bench b("node0");
    sc_start(SC_ZERO_TIME);
    uint8_t buf[4] = {};
    auto message = [](const std::function<void()>& f) {
        try {
            f();
        } catch (const sc_report& r) {
            return std::string(r.get_msg());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message([&] { b.mem.write(0x100000, buf, 4); }), "write beyond memory size at 0x100000");
    EXPECT_EQ(message([&] { b.mem.read(0x17448300544ull, buf, 4); }),
              "read beyond memory size at 0x17448300544");
}

SIM_TEST(HostMemory, dmi_pointer_per_page_and_debug_transport) {
    bench b("node0");
    sc_start(SC_ZERO_TIME);
    tlm::tlm_generic_payload gp;
    tlm::tlm_dmi dmi;
    gp.set_address(0x5000 + 123);
    ASSERT_TRUE(b.cpu->get_direct_mem_ptr(gp, dmi));
    EXPECT_EQ(dmi.get_start_address(), 0x5000u);
    EXPECT_EQ(dmi.get_end_address(), 0x5fffu);
    EXPECT_TRUE(dmi.is_read_write_allowed());
    dmi.get_dmi_ptr()[0x10] = 0xab;  // store through DMI, visible to every path
    uint8_t v = 0;
    b.mem.read(0x5010, &v, 1);
    EXPECT_EQ(v, 0xab);
    EXPECT_EQ(b.mem.page_ptr(0x5010), dmi.get_dmi_ptr() + 0x10);

    uint8_t data[16] = {};
    tlm::tlm_generic_payload dbg;
    dbg.set_command(tlm::TLM_READ_COMMAND);
    dbg.set_address(0x5008);
    dbg.set_data_ptr(data);
    dbg.set_data_length(16);
    dbg.set_streaming_width(16);
    EXPECT_EQ(b.dma->transport_dbg(dbg), 16u);
    EXPECT_EQ(data[8], 0xab);
    EXPECT_EQ(b.mem.reads.value(), 0u);  // debug accesses are not counted

    // A watched page is only granted read access (stores must be seen by the watch).
    sc_event ev;
    b.mem.watch(0x5ff8, 16, &ev);  // covers pages 0x5000 and 0x6000
    gp.set_address(0x6004);
    ASSERT_TRUE(b.dma->get_direct_mem_ptr(gp, dmi));
    EXPECT_TRUE(dmi.is_read_allowed());
    EXPECT_FALSE(dmi.is_write_allowed());

    gp.set_address(uint64_t(64) << 30);
    EXPECT_FALSE(b.cpu->get_direct_mem_ptr(gp, dmi));
}

SIM_TEST(HostMemory, atomics_execute_at_memory) {
    bench b("node0", [](bench& t) {
        uint64_t init = 40;
        t.mem.write(0x1000, &init, 8);
        tlm::tlm_generic_payload gp;
        hcasim::atomic_ext ext(hcasim::atomic_ext::fetch_add, 0, 2);
        uint64_t ret = 0;
        gp.set_command(tlm::TLM_READ_COMMAND);
        gp.set_address(0x1000);
        gp.set_data_ptr(reinterpret_cast<unsigned char*>(&ret));
        gp.set_data_length(8);
        gp.set_streaming_width(8);
        gp.set_extension(&ext);
        sc_time d = SC_ZERO_TIME;
        t.dma->b_transport(gp, d);
        EXPECT_EQ(gp.get_response_status(), tlm::TLM_OK_RESPONSE);
        EXPECT_EQ(ext.result, 40u);
        EXPECT_EQ(ret, 40u);
        uint64_t now = 0;
        t.mem.read(0x1000, &now, 8);
        EXPECT_EQ(now, 42u);

        ext.op = hcasim::atomic_ext::compare_swap;
        ext.compare = 41;  // mismatch: unchanged
        ext.swap_or_add = 7;
        t.dma->b_transport(gp, d);
        EXPECT_EQ(ext.result, 42u);
        t.mem.read(0x1000, &now, 8);
        EXPECT_EQ(now, 42u);
        ext.compare = 42;  // match: swapped
        t.dma->b_transport(gp, d);
        EXPECT_EQ(ext.result, 42u);
        t.mem.read(0x1000, &now, 8);
        EXPECT_EQ(now, 7u);

        gp.set_address(0x1004);  // misaligned
        t.dma->b_transport(gp, d);
        EXPECT_EQ(gp.get_response_status(), tlm::TLM_ADDRESS_ERROR_RESPONSE);
        EXPECT_EQ(t.mem.atomics.value(), 3u);
        gp.clear_extension(&ext);
    });
    sc_start();
}

SIM_TEST(HostMemory, watch_fires_at_annotated_write_time_and_unwatch_stops_it) {
    static std::vector<sc_time> fired;
    static sc_event ev;
    struct waiter : sc_module {
        SC_HAS_PROCESS(waiter);
        explicit waiter(sc_module_name n) : sc_module(n) {
            SC_METHOD(on_write);
            sensitive << ev;
            dont_initialize();
        }
        void on_write() { fired.push_back(sc_time_stamp()); }
    };
    waiter w("waiter");
    bench b("node0", [](bench& t) {
        const int h = t.mem.watch(0x2000, 8, &ev);
        uint64_t v = 1;
        sc_time d(100, SC_NS);
        t.access(tlm::TLM_WRITE_COMMAND, 0x1ffc, &v, 8, d);  // overlaps the watched range
        EXPECT_EQ(d, sc_time(100, SC_NS));
        wait(1, SC_US);
        d = sc_time(30, SC_NS);
        t.access(tlm::TLM_WRITE_COMMAND, 0x2008, &v, 8, d, true);  // adjacent, not overlapping
        t.access(tlm::TLM_READ_COMMAND, 0x2000, &v, 8, d);         // reads never fire
        wait(1, SC_US);
        t.mem.write(0x2004, &v, 1);  // helper write: fires now (next delta)
        wait(1, SC_US);
        t.mem.unwatch(h);
        d = sc_time(5, SC_NS);
        t.access(tlm::TLM_WRITE_COMMAND, 0x2000, &v, 8, d);
        wait(1, SC_US);
        // A second watch reuses the slot.
        EXPECT_EQ(t.mem.watch(0x3000, 4, &ev), h);
    });
    sc_start();
    ASSERT_EQ(fired.size(), 2u);
    EXPECT_EQ(fired[0], sc_time(100, SC_NS));
    EXPECT_EQ(fired[1], sc_time(2, SC_US));
}

SIM_TEST(HostMemory, shared_memory_is_the_same_bytes_in_another_mapping) {
    // hcasim serve: a client process maps the node's memory file and sees the model's writes
    // (DMA, CPU) and the model sees the client's stores, at offset = physical address.
    bench b("node0");
    host_memory& m = b.mem;
    const int fd = m.share();
    ASSERT_GE(fd, 0);
    EXPECT_EQ(m.share(), fd);  // once
    EXPECT_EQ(m.shared_fd(), fd);
    sc_start(SC_ZERO_TIME);
    const size_t span = 3 * 4096;
    const uint64_t pa = 0x12345000;
    auto* other =
        static_cast<uint8_t*>(mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(pa)));
    ASSERT_NE(other, MAP_FAILED);
    std::vector<uint8_t> in(5000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 13 + 1);
    sc_time d = SC_ZERO_TIME;
    ASSERT_EQ(b.access(tlm::TLM_WRITE_COMMAND, pa + 100, in.data(), unsigned(in.size()), d, true),
              tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(std::memcmp(other + 100, in.data(), in.size()), 0);
    // A page the model never touched: the other process's store is what the model reads.
    other[span - 1] = 0x5a;
    std::memcpy(other + 2 * 4096, "wqe", 4);
    uint8_t got[4] = {};
    m.read(pa + 2 * 4096, got, 4);
    EXPECT_STREQ(reinterpret_cast<char*>(got), "wqe");
    EXPECT_EQ(*m.page_ptr(pa + span - 1), 0x5a);
    // Shared memory is read without asking: a posted write lands at its time by itself.
    std::memset(in.data(), 0x77, 64);
    ASSERT_EQ(b.post(pa + 64, in.data(), 64, sc_time(300, SC_NS)), tlm::TLM_OK_RESPONSE);
    EXPECT_NE(other[64], 0x77);
    sc_start(sc_time(299, SC_NS));
    EXPECT_NE(other[64], 0x77);
    sc_start(sc_time(2, SC_NS));  // past 300 ns: the landing event has run
    EXPECT_EQ(other[64 + 63], 0x77);
    munmap(other, span);
}

SIM_TEST(HostMemory, share_after_the_first_touch_is_refused) {
    bench b("node0");
    uint8_t v = 1;
    b.mem.write(0x1000, &v, 1);
    EXPECT_THROW(b.mem.share(), hcasim::config_error);
}

// Posted writes (a dma-socket write marked posted, annotated with a delay) take effect at now + delay: nobody
// sees them before, every access sees them after, without an event of their own.
SIM_TEST(HostMemory, posted_dma_write_is_invisible_until_its_time_then_every_access_sees_it) {
    bench b("node0", [](bench& t) {
        uint64_t v = 0x1122334455667788ull, r = 0;
        sc_time d(100, SC_NS);
        ASSERT_EQ(t.post(0x5000, &v, 8, d), tlm::TLM_OK_RESPONSE);
        // Counted (and its page backed) when posted.
        EXPECT_EQ(t.mem.writes.value(), 1u);
        EXPECT_EQ(t.mem.bytes_written.value(), 8u);
        EXPECT_EQ(t.mem.allocated_pages(), 1u);
        EXPECT_EQ(t.mem.writes_in_flight(), 1u);
        t.mem.read(0x5000, &r, 8);
        EXPECT_EQ(r, 0u);
        wait(99, SC_NS);
        sc_time z = SC_ZERO_TIME;
        t.access(tlm::TLM_READ_COMMAND, 0x5000, &r, 8, z);  // CPU socket: not yet
        EXPECT_EQ(r, 0u);
        wait(1, SC_NS);
        t.mem.read(0x5000, &r, 8);
        EXPECT_EQ(r, v);
        EXPECT_EQ(t.mem.writes_in_flight(), 0u);
        // A CPU store after the landing is not overwritten by it; one before it is.
        uint64_t w = 7;
        d = sc_time(50, SC_NS);
        t.post(0x5008, &v, 8, d);
        t.mem.write(0x5008, &w, 8);  // before the landing: the DMA data wins
        wait(60, SC_NS);
        t.mem.read(0x5008, &r, 8);
        EXPECT_EQ(r, v);
        t.mem.write(0x5008, &w, 8);
        t.mem.read(0x5008, &r, 8);
        EXPECT_EQ(r, w);
        // Debug transport lands due writes too.
        d = sc_time(10, SC_NS);
        t.post(0x5010, &v, 8, d);
        wait(10, SC_NS);
        tlm::tlm_generic_payload gp;
        bench::prepare(gp, tlm::TLM_READ_COMMAND, 0x5010, &r, 8);
        r = 0;
        EXPECT_EQ(t.cpu->transport_dbg(gp), 8u);
        EXPECT_EQ(r, v);
    });
    sc_start();
}

SIM_TEST(HostMemory, posted_writes_land_in_time_then_posting_order_and_dma_reads_do_not_pass_them) {
    bench b("node0", [](bench& t) {
        uint8_t a[16], c[16], r[16];
        std::memset(a, 0xaa, sizeof a);
        std::memset(c, 0xcc, sizeof c);
        sc_time d1(200, SC_NS), d2(200, SC_NS);
        t.post(0x8000, a, 16, d1);
        t.post(0x8000, c, 16, d2);  // same time: posted later, lands later
        wait(200, SC_NS);
        t.mem.read(0x8000, r, 16);
        EXPECT_EQ(std::memcmp(r, c, 16), 0);
        // An earlier landing time posted later goes first: the later time's data stays.
        d1 = sc_time(300, SC_NS);
        d2 = sc_time(100, SC_NS);
        t.post(0x8000, a, 16, d1);
        t.post(0x8000, c, 16, d2);
        wait(300, SC_NS);
        t.mem.read(0x8000, r, 16);
        EXPECT_EQ(std::memcmp(r, a, 16), 0);
        // A DMA read overlapping a pending write lands it first; the CPU still does not see
        // a write the read did not overlap.
        sc_time d(1, SC_US);
        t.post(0x9000, c, 16, d);
        d = sc_time(1, SC_US);
        t.post(0xa000, c, 16, d);
        sc_time z = SC_ZERO_TIME;
        std::memset(r, 0, sizeof r);
        t.access(tlm::TLM_READ_COMMAND, 0x9008, r, 8, z, true);
        EXPECT_EQ(std::memcmp(r, c, 8), 0);
        t.mem.read(0xa000, r, 16);
        EXPECT_EQ(r[0], 0);
        EXPECT_EQ(t.mem.writes_in_flight(), 1u);
        // So does an atomic.
        uint64_t old = 0;
        d = sc_time(1, SC_US);
        t.post(0xb000, c, 8, d);
        hcasim::atomic_ext at;
        at.op = hcasim::atomic_ext::fetch_add;
        at.swap_or_add = 1;
        tlm::tlm_generic_payload gp;
        bench::prepare(gp, tlm::TLM_READ_COMMAND, 0xb000, &old, 8);
        gp.set_extension(&at);
        z = SC_ZERO_TIME;
        t.dma->b_transport(gp, z);
        EXPECT_EQ(old, 0xccccccccccccccccull);
        gp.clear_extension(&at);
    });
    sc_start();
}

SIM_TEST(HostMemory, dma_reads_land_exactly_the_pending_writes_of_their_pages_among_thousands) {
    // 3000 pending writes on 3000 pages (the per-page count table grows several times), some
    // pages written twice; reads land the writes they overlap, no others, and pages whose
    // writes landed count zero again (the table shrinks back as they go).
    bench b("node0", [](bench& t) {
        const uint64_t base = 0x100000;
        auto page = [&](unsigned i) { return base + uint64_t(i) * 4096 * 3; };  // spread out
        for (unsigned i = 0; i < 3000; ++i) {
            uint64_t v = 0x1000 + i;
            sc_time d(5, SC_US);  // sooner than the backstop (10 us after the oldest)
            t.post(page(i) + 8 * (i % 5), &v, 8, d);
            if (i % 10 == 0) {
                v = 0x2000 + i;
                d = sc_time(5, SC_US);
                t.post(page(i) + 8 * (i % 5), &v, 8, d);  // same place, posted later: wins
            }
        }
        EXPECT_EQ(t.mem.writes_in_flight(), 3300u);
        unsigned landed = 0;
        for (unsigned i = 0; i < 3000; i += 3) {
            uint64_t r = 0;
            sc_time z = SC_ZERO_TIME;
            t.access(tlm::TLM_READ_COMMAND, page(i) + 8 * (i % 5), &r, 8, z, true);
            EXPECT_EQ(r, i % 10 == 0 ? 0x2000u + i : 0x1000u + i) << i;
            landed += i % 10 == 0 ? 2 : 1;
            // A neighbour's page is untouched by the read: its write is still pending.
            uint64_t n = 0;
            t.mem.read(page(i + 1) + 8 * ((i + 1) % 5), &n, 8);
            EXPECT_EQ(n, 0u) << i + 1;
        }
        EXPECT_EQ(t.mem.writes_in_flight(), 3300u - landed);
        wait(5, SC_US);
        EXPECT_EQ(t.mem.writes_in_flight(), 0u);
        for (unsigned i = 0; i < 3000; ++i) {
            uint64_t r = 0;
            t.mem.read(page(i) + 8 * (i % 5), &r, 8);
            ASSERT_EQ(r, i % 10 == 0 ? 0x2000u + i : 0x1000u + i) << i;
        }
        // Nothing pending: a read of a page written before scans nothing and sees memory.
        uint64_t v = 7;
        sc_time d(1, SC_US);
        t.post(page(3), &v, 8, d);
        uint64_t r = 0;
        sc_time z = SC_ZERO_TIME;
        t.access(tlm::TLM_READ_COMMAND, page(4) + 32, &r, 8, z, true);
        EXPECT_EQ(r, 0x1000u + 4);
        EXPECT_EQ(t.mem.writes_in_flight(), 1u);
    });
    sc_start();
}

SIM_TEST(HostMemory, a_watch_set_after_posting_wakes_when_the_write_lands) {
    static sc_time woke;
    static uint64_t seen = 0;
    bench b("node0", [](bench& t) {
        uint64_t v = 42;
        sc_time d(500, SC_NS);
        t.post(0x6000, &v, 8, d);
        wait(100, SC_NS);
        sc_event ev;
        const int h = t.mem.watch(0x6000, 8, &ev);
        wait(ev);
        woke = sc_time_stamp();
        t.mem.read(0x6000, &seen, 8);
        t.mem.unwatch(h);
    });
    sc_start();
    EXPECT_EQ(woke, sc_time(500, SC_NS));
    EXPECT_EQ(seen, 42u);
}

SIM_TEST(HostMemory, unwatched_posted_writes_are_in_memory_when_the_events_run_out) {
    bench b("node0", [](bench& t) {
        std::vector<uint8_t> v(4096, 0x5a);
        sc_time d(250, SC_NS);
        t.post(0x7000, v.data(), 4096, d);
    });
    sc_start();
    // The backstop landed it: no later than 10 us after its time.
    EXPECT_GE(sc_time_stamp(), sc_time(250, SC_NS));
    EXPECT_LE(sc_time_stamp(), sc_time(250, SC_NS) + sc_time(10, SC_US));
    EXPECT_EQ(b.mem.writes_in_flight(), 0u);
    uint8_t r[2] = {0, 0};
    b.mem.read(0x7000 + 4094, r, 2);
    EXPECT_EQ(r[0], 0x5a);
    EXPECT_EQ(r[1], 0x5a);
}

SIM_TEST(HostMemory, a_watch_set_after_a_posted_write_came_due_lands_it_first_and_does_not_fire) {
    static int fired = 0;
    bench b("node0", [](bench& t) {
        uint64_t v = 9, r = 0;
        t.post(0x6100, &v, 8, sc_time(100, SC_NS));
        wait(200, SC_NS);  // due, and nobody has looked
        sc_event ev;
        const int h = t.mem.watch(0x6100, 8, &ev);
        EXPECT_EQ(t.mem.writes_in_flight(), 0u);
        wait(1, SC_US, ev);
        fired += ev.triggered() ? 1 : 0;
        EXPECT_EQ(sc_time_stamp(), sc_time(1200, SC_NS));  // the watch timed out
        t.mem.read(0x6100, &r, 8);
        EXPECT_EQ(r, v);
        t.mem.unwatch(h);
    });
    sc_start();
    EXPECT_EQ(fired, 0);
}
