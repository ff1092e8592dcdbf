// Byte-exact tests of the management datagram codec (tlm_if/wire/mad.h): the MAD common header
// offsets (IBA 13.4.3), the LID-routed SMP layout (14.2.1.1), the P_KeyTable block (14.2.5.7),
// the Trap 257 Notice (14.2.5.1, 14.3.8) and the SMP packet (VL15, QP0, P_Key 0xFFFF, Q_Key 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tlm_if/wire/mad.h"

using namespace hcasim::wire;

namespace {

std::vector<uint8_t> bytes_of(const smp& s) {
    std::vector<uint8_t> v(MAD_BYTES, 0xEE);
    encode(s, v.data());
    return v;
}

}  // namespace

TEST(WireMad, smp_header_fields_sit_at_their_iba_byte_offsets) {
    smp s;
    s.h.method = MAD_METHOD_SET;
    s.h.status = 0x001C;
    s.h.class_specific = 0xA1B2;
    s.h.tid = 0x0123456789ABCDEFull;
    s.h.attr_id = SMP_ATTR_PKEY_TABLE;
    s.h.attr_mod = 0x00000003;
    s.m_key = 0x1122334455667788ull;
    for (unsigned i = 0; i < SMP_DATA_BYTES; ++i) s.data[i] = uint8_t(0x40 + i);
    const auto b = bytes_of(s);
    EXPECT_EQ(b[0], 0x01) << "BaseVersion";
    EXPECT_EQ(b[1], 0x01) << "MgmtClass: SubnMgmt, LID routed";
    EXPECT_EQ(b[2], 0x01) << "ClassVersion";
    EXPECT_EQ(b[3], 0x02) << "Method: Set";
    EXPECT_EQ(b[4], 0x00);
    EXPECT_EQ(b[5], 0x1C) << "Status";
    EXPECT_EQ(b[6], 0xA1);
    EXPECT_EQ(b[7], 0xB2) << "ClassSpecific";
    const uint8_t tid[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
    for (int i = 0; i < 8; ++i) EXPECT_EQ(b[8 + i], tid[i]) << "TransactionID byte " << i;
    EXPECT_EQ(b[16], 0x00);
    EXPECT_EQ(b[17], 0x16) << "AttributeID P_KeyTable";
    EXPECT_EQ(b[18], 0x00);
    EXPECT_EQ(b[19], 0x00) << "reserved";
    EXPECT_EQ(b[20], 0x00);
    EXPECT_EQ(b[21], 0x00);
    EXPECT_EQ(b[22], 0x00);
    EXPECT_EQ(b[23], 0x03) << "AttributeModifier";
    const uint8_t mkey[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
    for (int i = 0; i < 8; ++i) EXPECT_EQ(b[24 + i], mkey[i]) << "M_Key byte " << i;
    for (int i = 32; i < 64; ++i) EXPECT_EQ(b[i], 0) << "reserved byte " << i;
    for (int i = 0; i < 64; ++i) EXPECT_EQ(b[64 + i], 0x40 + i) << "SMP data byte " << i;
    for (int i = 128; i < 256; ++i) EXPECT_EQ(b[i], 0) << "reserved byte " << i;

    const smp d = decode_smp(b.data());
    EXPECT_EQ(d.h.base_version, 1);
    EXPECT_EQ(d.h.mgmt_class, MGMT_CLASS_SUBN_LID_ROUTED);
    EXPECT_EQ(d.h.class_version, 1);
    EXPECT_EQ(d.h.method, MAD_METHOD_SET);
    EXPECT_EQ(d.h.status, 0x001C);
    EXPECT_EQ(d.h.class_specific, 0xA1B2);
    EXPECT_EQ(d.h.tid, s.h.tid);
    EXPECT_EQ(d.h.attr_id, SMP_ATTR_PKEY_TABLE);
    EXPECT_EQ(d.h.attr_mod, 3u);
    EXPECT_EQ(d.m_key, s.m_key);
    EXPECT_EQ(d.data, s.data);
    EXPECT_TRUE(is_subn_mgmt(b.data(), b.size()));
}

TEST(WireMad, getresp_and_trap_methods_and_directed_route_class) {
    smp s;
    s.h.method = MAD_METHOD_GET_RESP;
    EXPECT_EQ(bytes_of(s)[3], 0x81) << "GetResp: R bit + Get";
    s.h.method = MAD_METHOD_TRAP;
    EXPECT_EQ(bytes_of(s)[3], 0x05);
    s.h.mgmt_class = MGMT_CLASS_SUBN_DIRECTED_ROUTE;
    const auto b = bytes_of(s);
    EXPECT_TRUE(is_subn_mgmt(b.data(), b.size())) << "0x81 is SubnMgmt too";
    s.h.mgmt_class = 0x04;  // performance management
    const auto pm = bytes_of(s);
    EXPECT_FALSE(is_subn_mgmt(pm.data(), pm.size()));
    EXPECT_FALSE(is_subn_mgmt(b.data(), MAD_HEADER_BYTES - 1)) << "shorter than a MAD header";
}

TEST(WireMad, pkey_table_block_is_32_big_endian_keys) {
    uint16_t keys[PKEYS_PER_BLOCK];
    for (unsigned i = 0; i < PKEYS_PER_BLOCK; ++i) keys[i] = uint16_t(0x8000 | (i * 0x0101));
    uint8_t data[SMP_DATA_BYTES] = {};
    encode_pkey_block(keys, data);
    for (unsigned i = 0; i < PKEYS_PER_BLOCK; ++i) {
        EXPECT_EQ(data[2 * i], uint8_t(keys[i] >> 8)) << i;
        EXPECT_EQ(data[2 * i + 1], uint8_t(keys[i])) << i;
    }
    uint16_t back[PKEYS_PER_BLOCK] = {};
    decode_pkey_block(data, back);
    for (unsigned i = 0; i < PKEYS_PER_BLOCK; ++i) EXPECT_EQ(back[i], keys[i]) << i;
}

TEST(WireMad, o10_55_1_1_trap_257_notice_carries_the_offending_header_fields) {
    notice_bad_pkey n;
    n.issuer_lid = 0x0002;
    n.toggle_count = 0x8000;
    n.lid1 = 0x0001;
    n.lid2 = 0x0002;
    n.pkey = 0x8005;
    n.sl = 0x9;
    n.qp1 = 0x00ABCD;
    n.qp2 = 0x123456;
    for (int i = 0; i < 16; ++i) {
        n.gid1[i] = uint8_t(0x10 + i);
        n.gid2[i] = uint8_t(0x30 + i);
    }
    uint8_t d[SMP_DATA_BYTES];
    for (auto& x : d) x = 0xEE;
    encode(n, d);
    EXPECT_EQ(d[0], 0x82) << "IsGeneric, Type 2 (security)";
    EXPECT_EQ(d[1], 0x00);
    EXPECT_EQ(d[2], 0x00);
    EXPECT_EQ(d[3], 0x01) << "ProducerType: CA";
    EXPECT_EQ(d[4], 0x01);
    EXPECT_EQ(d[5], 0x01) << "TrapNumber 257";
    EXPECT_EQ(d[6], 0x00);
    EXPECT_EQ(d[7], 0x02) << "IssuerLID";
    EXPECT_EQ(d[8], 0x80);
    EXPECT_EQ(d[9], 0x00) << "NoticeToggle";
    EXPECT_EQ(d[10], 0x00);
    EXPECT_EQ(d[11], 0x00) << "reserved";
    EXPECT_EQ(d[12], 0x00);
    EXPECT_EQ(d[13], 0x01) << "LID1 (SLID)";
    EXPECT_EQ(d[14], 0x00);
    EXPECT_EQ(d[15], 0x02) << "LID2 (DLID)";
    const uint8_t key[4] = {0x00, 0x00, 0x80, 0x05};
    for (int i = 0; i < 4; ++i) EXPECT_EQ(d[16 + i], key[i]) << "Key byte " << i;
    const uint8_t sl_qp1[4] = {0x90, 0x00, 0xAB, 0xCD};
    for (int i = 0; i < 4; ++i) EXPECT_EQ(d[20 + i], sl_qp1[i]) << "SL/QP1 byte " << i;
    const uint8_t qp2[4] = {0x00, 0x12, 0x34, 0x56};
    for (int i = 0; i < 4; ++i) EXPECT_EQ(d[24 + i], qp2[i]) << "QP2 byte " << i;
    for (int i = 0; i < 16; ++i) {
        EXPECT_EQ(d[28 + i], 0x10 + i) << "GID1 byte " << i;
        EXPECT_EQ(d[44 + i], 0x30 + i) << "GID2 byte " << i;
    }
    for (int i = 60; i < 64; ++i) EXPECT_EQ(d[i], 0) << "reserved byte " << i;

    notice_bad_pkey m;
    ASSERT_TRUE(decode_notice_bad_pkey(d, m));
    EXPECT_EQ(m.issuer_lid, n.issuer_lid);
    EXPECT_EQ(m.toggle_count, n.toggle_count);
    EXPECT_EQ(m.lid1, n.lid1);
    EXPECT_EQ(m.lid2, n.lid2);
    EXPECT_EQ(m.pkey, n.pkey);
    EXPECT_EQ(m.sl, n.sl);
    EXPECT_EQ(m.qp1, n.qp1);
    EXPECT_EQ(m.qp2, n.qp2);
    EXPECT_EQ(m.gid1, n.gid1);
    EXPECT_EQ(m.gid2, n.gid2);
    d[5] = 0x02;  // Trap 258 (Bad Q_Key) is not a Bad P_Key notice
    EXPECT_FALSE(decode_notice_bad_pkey(d, m));
}

TEST(WireMad, smp_packet_is_ud_send_only_on_vl15_to_qp0_with_pkey_ffff_and_qkey_0) {
    smp s;
    s.h.method = MAD_METHOD_GET;
    s.h.tid = 7;
    s.h.attr_id = SMP_ATTR_PKEY_TABLE;
    uint8_t pkt[512] = {};
    const size_t before = encode_smp_packet(0x0002, 0x0004, 0x3, s, pkt);
    ASSERT_EQ(before, LRH_BYTES + BTH_BYTES + DETH_BYTES + MAD_BYTES);
    const size_t len = seal_packet(pkt, before);
    ASSERT_EQ(len, before + ICRC_BYTES + VCRC_BYTES);
    EXPECT_EQ(pkt[0], 0xF0) << "LRH: VL 15, LVer 0";
    EXPECT_EQ(pkt[1], 0x32) << "LRH: SL 3, LNH 2 (IBA local)";
    EXPECT_EQ(pkt[2], 0x00);
    EXPECT_EQ(pkt[3], 0x02) << "DLID";
    EXPECT_EQ(get_be16(pkt + 4) & 0x7FF, (before + ICRC_BYTES) / 4) << "PktLen words";
    EXPECT_EQ(pkt[6], 0x00);
    EXPECT_EQ(pkt[7], 0x04) << "SLID";
    EXPECT_EQ(pkt[8], 0x64) << "BTH: UD SEND ONLY";
    EXPECT_EQ(pkt[10], 0xFF);
    EXPECT_EQ(pkt[11], 0xFF) << "P_Key 0xFFFF";
    EXPECT_EQ(pkt[13] | pkt[14] | pkt[15], 0) << "DestQP 0";
    for (int i = 20; i < 24; ++i) EXPECT_EQ(pkt[i], 0) << "DETH Q_Key 0, byte " << i;
    EXPECT_EQ(pkt[25] | pkt[26] | pkt[27], 0) << "DETH SrcQP 0";
    EXPECT_EQ(pkt[28], 1);
    EXPECT_EQ(pkt[29], 1) << "the MAD follows the DETH";

    headers h;
    size_t off = 0, plen = 0;
    ASSERT_EQ(parse_packet(pkt, len, h, off, plen), parse_status::ok);
    EXPECT_EQ(h.l.vl, 15);
    EXPECT_EQ(h.b.dest_qp, 0u);
    EXPECT_EQ(h.d.qkey, 0u);
    EXPECT_EQ(h.d.src_qp, 0u);
    EXPECT_EQ(off, 28u);
    EXPECT_EQ(plen, MAD_BYTES);
    EXPECT_EQ(decode_smp(pkt + off).h.tid, 7u);
}

// libsystemc (linked through tlm_if) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"

TEST(WireMad, directed_route_smp_carries_d_bit_hops_dr_lids_and_both_paths_at_their_offsets) {
    smp s;
    s.h.mgmt_class = MGMT_CLASS_SUBN_DIRECTED_ROUTE;
    s.h.method = MAD_METHOD_GET_RESP;
    s.h.status = SMP_DIRECTION | MAD_STATUS_INVALID_FIELD;
    s.set_hops(2, 3);
    s.h.attr_id = SMP_ATTR_LINEAR_FDB;
    s.dr_slid = 0xFFFF;
    s.dr_dlid = 0x1234;
    s.initial_path[1] = 1;
    s.initial_path[2] = 7;
    s.initial_path[3] = 36;
    s.return_path[1] = 5;
    s.return_path[2] = 9;
    s.data[0] = 0xAB;
    const auto b = bytes_of(s);
    EXPECT_EQ(b[1], 0x81) << "MgmtClass: SubnMgmt, directed route";
    EXPECT_EQ(b[4], 0x80) << "D bit: status bit 15";
    EXPECT_EQ(b[5], 0x1C) << "Status";
    EXPECT_EQ(b[6], 2) << "HopPointer";
    EXPECT_EQ(b[7], 3) << "HopCount";
    EXPECT_EQ(b[17], 0x19) << "AttributeID LinearForwardingTable";
    EXPECT_EQ(b[32], 0xFF);
    EXPECT_EQ(b[33], 0xFF) << "DrSLID";
    EXPECT_EQ(b[34], 0x12);
    EXPECT_EQ(b[35], 0x34) << "DrDLID";
    for (int i = 36; i < 64; ++i) EXPECT_EQ(b[i], 0) << "reserved byte " << i;
    EXPECT_EQ(b[64], 0xAB) << "SMP data";
    EXPECT_EQ(b[128], 0) << "InitialPath[0] unused";
    EXPECT_EQ(b[129], 1);
    EXPECT_EQ(b[130], 7);
    EXPECT_EQ(b[131], 36) << "InitialPath";
    EXPECT_EQ(b[193], 5);
    EXPECT_EQ(b[194], 9) << "ReturnPath";
    EXPECT_EQ(b[255], 0);

    const smp d = decode_smp(b.data());
    EXPECT_TRUE(d.directed());
    EXPECT_TRUE(d.returning());
    EXPECT_EQ(d.hop_pointer(), 2);
    EXPECT_EQ(d.hop_count(), 3);
    EXPECT_EQ(d.dr_slid, 0xFFFF);
    EXPECT_EQ(d.dr_dlid, 0x1234);
    EXPECT_EQ(d.initial_path, s.initial_path);
    EXPECT_EQ(d.return_path, s.return_path);

    // A LID-routed SMP keeps bytes 32-63 and 128-255 reserved whatever the DR fields hold.
    s.h.mgmt_class = MGMT_CLASS_SUBN_LID_ROUTED;
    const auto lr = bytes_of(s);
    for (int i = 32; i < 64; ++i) EXPECT_EQ(lr[i], 0) << "LID routed, reserved byte " << i;
    for (int i = 128; i < 256; ++i) EXPECT_EQ(lr[i], 0) << "LID routed, reserved byte " << i;
}

TEST(WireMad, linear_forwarding_table_block_is_64_ports_one_byte_per_lid) {
    uint8_t ports[LFT_LIDS_PER_BLOCK];
    for (unsigned i = 0; i < LFT_LIDS_PER_BLOCK; ++i) ports[i] = uint8_t(i % 5 == 0 ? 0xFF : i);
    smp s;
    encode_lft_block(ports, s.data.data());
    const auto b = bytes_of(s);
    for (unsigned i = 0; i < LFT_LIDS_PER_BLOCK; ++i) EXPECT_EQ(b[64 + i], ports[i]) << "LID 64b + " << i;
    uint8_t back[LFT_LIDS_PER_BLOCK] = {};
    decode_lft_block(decode_smp(b.data()).data.data(), back);
    for (unsigned i = 0; i < LFT_LIDS_PER_BLOCK; ++i) EXPECT_EQ(back[i], ports[i]) << i;
}

TEST(WireMad, sl2vl_table_packs_two_sls_per_byte_sl0_in_the_high_nibble) {
    const uint8_t vls[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    uint8_t d[SMP_DATA_BYTES];
    std::fill(d, d + SMP_DATA_BYTES, 0xEE);
    encode_sl2vl(vls, d);
    const uint8_t want[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
    for (int i = 0; i < 8; ++i) EXPECT_EQ(d[i], want[i]) << "byte " << i;
    for (int i = 8; i < 64; ++i) EXPECT_EQ(d[i], 0) << "reserved byte " << i;
    uint8_t back[16] = {};
    decode_sl2vl(d, back);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], vls[i]) << "SL " << i;
}

TEST(WireMad, vlarb_block_is_32_vl_weight_pairs_vl_in_the_low_nibble) {
    vlarb_pair e[VLARB_ENTRIES_PER_BLOCK];
    for (unsigned i = 0; i < VLARB_ENTRIES_PER_BLOCK; ++i) e[i] = {uint8_t(i % 15), uint8_t(4 * i)};
    uint8_t d[SMP_DATA_BYTES] = {};
    encode_vlarb_block(e, d);
    EXPECT_EQ(d[0], 0);
    EXPECT_EQ(d[1], 0);
    EXPECT_EQ(d[2], 1);
    EXPECT_EQ(d[3], 4);
    EXPECT_EQ(d[62], 31 % 15);
    EXPECT_EQ(d[63], 124);
    d[2] = 0xF1;  // the upper 4 bits are reserved
    vlarb_pair back[VLARB_ENTRIES_PER_BLOCK];
    decode_vlarb_block(d, back);
    EXPECT_EQ(back[1].vl, 1);
    EXPECT_EQ(back[1].weight, 4);
    EXPECT_EQ(back[31].weight, 124);
}

TEST(WireMad, node_info_and_switch_info_fields_sit_at_their_offsets) {
    node_info n;
    n.num_ports = 36;
    n.system_image_guid = 0x0102030405060708ull;
    n.node_guid = 0x1112131415161718ull;
    n.port_guid = 0x2122232425262728ull;
    n.partition_cap = 0x0080;
    n.local_port = 0;
    n.vendor_id = 0x0002C9;
    uint8_t d[SMP_DATA_BYTES];
    encode(n, d);
    EXPECT_EQ(d[0], 1);
    EXPECT_EQ(d[1], 1);
    EXPECT_EQ(d[2], NODE_TYPE_SWITCH);
    EXPECT_EQ(d[3], 36);
    EXPECT_EQ(d[4], 0x01);
    EXPECT_EQ(d[12], 0x11);
    EXPECT_EQ(d[19], 0x18);
    EXPECT_EQ(d[20], 0x21);
    EXPECT_EQ(d[29], 0x80);
    EXPECT_EQ(d[36], 0) << "LocalPortNum";
    EXPECT_EQ(d[37], 0x00);
    EXPECT_EQ(d[38], 0x02);
    EXPECT_EQ(d[39], 0xC9) << "VendorID";
    const node_info nb = decode_node_info(d);
    EXPECT_EQ(nb.node_guid, n.node_guid);
    EXPECT_EQ(nb.num_ports, 36);
    EXPECT_EQ(nb.vendor_id, 0x0002C9u);

    switch_info s;
    s.linear_fdb_cap = 0xC000;
    s.mcast_fdb_cap = 0x3FFF;
    s.linear_fdb_top = 0x0041;
    s.lids_per_port = 1;
    s.enhanced_port0 = true;
    encode(s, d);
    EXPECT_EQ(d[0], 0xC0);
    EXPECT_EQ(d[1], 0x00) << "LinearFDBCap";
    EXPECT_EQ(d[4], 0x3F);
    EXPECT_EQ(d[6], 0x00);
    EXPECT_EQ(d[7], 0x41) << "LinearFDBTop";
    EXPECT_EQ(d[13], 1) << "LIDsPerPort";
    EXPECT_EQ(d[16], 0x08) << "EnhancedPort0";
    const switch_info sb = decode_switch_info(d);
    EXPECT_EQ(sb.linear_fdb_top, 0x41);
    EXPECT_TRUE(sb.enhanced_port0);
}
