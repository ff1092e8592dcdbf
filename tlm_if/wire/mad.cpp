#include "tlm_if/wire/mad.h"

#include <cstring>

namespace hcasim::wire {

void encode(const smp& s, uint8_t* out) {
    std::memset(out, 0, MAD_BYTES);
    out[0] = s.h.base_version;
    out[1] = s.h.mgmt_class;
    out[2] = s.h.class_version;
    out[3] = s.h.method;
    put_be16(out + 4, s.h.status);
    put_be16(out + 6, s.h.class_specific);
    put_be64(out + 8, s.h.tid);
    put_be16(out + 16, s.h.attr_id);
    put_be32(out + 20, s.h.attr_mod);
    put_be64(out + 24, s.m_key);
    std::memcpy(out + SMP_DATA_OFFSET, s.data.data(), SMP_DATA_BYTES);
    if (!s.directed()) return;
    put_be16(out + 32, s.dr_slid);
    put_be16(out + 34, s.dr_dlid);
    std::memcpy(out + 128, s.initial_path.data(), 64);
    std::memcpy(out + 192, s.return_path.data(), 64);
}

mad_header decode_mad_header(const uint8_t* in) {
    mad_header h;
    h.base_version = in[0];
    h.mgmt_class = in[1];
    h.class_version = in[2];
    h.method = in[3];
    h.status = get_be16(in + 4);
    h.class_specific = get_be16(in + 6);
    h.tid = get_be64(in + 8);
    h.attr_id = get_be16(in + 16);
    h.attr_mod = get_be32(in + 20);
    return h;
}

smp decode_smp(const uint8_t* in) {
    smp s;
    s.h = decode_mad_header(in);
    s.m_key = get_be64(in + 24);
    std::memcpy(s.data.data(), in + SMP_DATA_OFFSET, SMP_DATA_BYTES);
    if (!s.directed()) return s;
    s.dr_slid = get_be16(in + 32);
    s.dr_dlid = get_be16(in + 34);
    std::memcpy(s.initial_path.data(), in + 128, 64);
    std::memcpy(s.return_path.data(), in + 192, 64);
    return s;
}

void encode(const node_info& n, uint8_t* d) {
    std::memset(d, 0, SMP_DATA_BYTES);
    d[0] = n.base_version;
    d[1] = n.class_version;
    d[2] = n.node_type;
    d[3] = n.num_ports;
    put_be64(d + 4, n.system_image_guid);
    put_be64(d + 12, n.node_guid);
    put_be64(d + 20, n.port_guid);
    put_be16(d + 28, n.partition_cap);
    put_be16(d + 30, n.device_id);
    put_be32(d + 32, n.revision);
    put_be32(d + 36, uint32_t(n.local_port) << 24 | (n.vendor_id & 0xFFFFFF));
}

node_info decode_node_info(const uint8_t* d) {
    node_info n;
    n.base_version = d[0];
    n.class_version = d[1];
    n.node_type = d[2];
    n.num_ports = d[3];
    n.system_image_guid = get_be64(d + 4);
    n.node_guid = get_be64(d + 12);
    n.port_guid = get_be64(d + 20);
    n.partition_cap = get_be16(d + 28);
    n.device_id = get_be16(d + 30);
    n.revision = get_be32(d + 32);
    n.local_port = d[36];
    n.vendor_id = get_be32(d + 36) & 0xFFFFFF;
    return n;
}

void encode(const switch_info& s, uint8_t* d) {
    std::memset(d, 0, SMP_DATA_BYTES);
    put_be16(d + 0, s.linear_fdb_cap);
    put_be16(d + 2, s.random_fdb_cap);
    put_be16(d + 4, s.mcast_fdb_cap);
    put_be16(d + 6, s.linear_fdb_top);
    d[8] = s.default_port;
    put_be16(d + 12, s.lids_per_port);
    put_be16(d + 14, s.partition_enforcement_cap);
    d[16] = s.enhanced_port0 ? 0x08 : 0;
}

switch_info decode_switch_info(const uint8_t* d) {
    switch_info s;
    s.linear_fdb_cap = get_be16(d + 0);
    s.random_fdb_cap = get_be16(d + 2);
    s.mcast_fdb_cap = get_be16(d + 4);
    s.linear_fdb_top = get_be16(d + 6);
    s.default_port = d[8];
    s.lids_per_port = get_be16(d + 12);
    s.partition_enforcement_cap = get_be16(d + 14);
    s.enhanced_port0 = (d[16] & 0x08) != 0;
    return s;
}

void encode_lft_block(const uint8_t* ports, uint8_t* data) { std::memcpy(data, ports, LFT_LIDS_PER_BLOCK); }

void decode_lft_block(const uint8_t* data, uint8_t* ports) { std::memcpy(ports, data, LFT_LIDS_PER_BLOCK); }

void encode_sl2vl(const uint8_t* vls, uint8_t* data) {
    std::memset(data, 0, SMP_DATA_BYTES);
    for (unsigned i = 0; i < 8; ++i) data[i] = uint8_t((vls[2 * i] & 0xF) << 4 | (vls[2 * i + 1] & 0xF));
}

void decode_sl2vl(const uint8_t* data, uint8_t* vls) {
    for (unsigned i = 0; i < 8; ++i) {
        vls[2 * i] = data[i] >> 4;
        vls[2 * i + 1] = data[i] & 0xF;
    }
}

void encode_vlarb_block(const vlarb_pair* e, uint8_t* data) {
    for (unsigned i = 0; i < VLARB_ENTRIES_PER_BLOCK; ++i) {
        data[2 * i] = e[i].vl & 0xF;
        data[2 * i + 1] = e[i].weight;
    }
}

void decode_vlarb_block(const uint8_t* data, vlarb_pair* e) {
    for (unsigned i = 0; i < VLARB_ENTRIES_PER_BLOCK; ++i) {
        e[i].vl = data[2 * i] & 0xF;
        e[i].weight = data[2 * i + 1];
    }
}

void encode_pkey_block(const uint16_t* keys, uint8_t* data) {
    for (unsigned i = 0; i < PKEYS_PER_BLOCK; ++i) put_be16(data + 2 * i, keys[i]);
}

void decode_pkey_block(const uint8_t* data, uint16_t* keys) {
    for (unsigned i = 0; i < PKEYS_PER_BLOCK; ++i) keys[i] = get_be16(data + 2 * i);
}

void encode(const notice_bad_pkey& n, uint8_t* d) {
    std::memset(d, 0, SMP_DATA_BYTES);
    d[0] = uint8_t(0x80 | NOTICE_TYPE_SECURITY);  // IsGeneric, Type
    d[1] = uint8_t(NOTICE_PRODUCER_CA >> 16);
    put_be16(d + 2, uint16_t(NOTICE_PRODUCER_CA));
    put_be16(d + 4, TRAP_BAD_PKEY);
    put_be16(d + 6, n.issuer_lid);
    put_be16(d + 8, n.toggle_count);
    put_be16(d + 12, n.lid1);
    put_be16(d + 14, n.lid2);
    put_be32(d + 16, n.pkey);
    put_be32(d + 20, (uint32_t(n.sl & 0xF) << 28) | (n.qp1 & 0xFFFFFF));
    put_be32(d + 24, n.qp2 & 0xFFFFFF);
    std::memcpy(d + 28, n.gid1.data(), 16);
    std::memcpy(d + 44, n.gid2.data(), 16);
}

bool decode_notice_bad_pkey(const uint8_t* d, notice_bad_pkey& n) {
    if (d[0] != (0x80 | NOTICE_TYPE_SECURITY) ||
        ((uint32_t(d[1]) << 16) | get_be16(d + 2)) != NOTICE_PRODUCER_CA || get_be16(d + 4) != TRAP_BAD_PKEY)
        return false;
    n.issuer_lid = get_be16(d + 6);
    n.toggle_count = get_be16(d + 8);
    n.lid1 = get_be16(d + 12);
    n.lid2 = get_be16(d + 14);
    n.pkey = uint16_t(get_be32(d + 16));
    const uint32_t sl_qp1 = get_be32(d + 20);
    n.sl = uint8_t(sl_qp1 >> 28);
    n.qp1 = sl_qp1 & 0xFFFFFF;
    n.qp2 = get_be32(d + 24) & 0xFFFFFF;
    std::memcpy(n.gid1.data(), d + 28, 16);
    std::memcpy(n.gid2.data(), d + 44, 16);
    return true;
}

size_t encode_smp_packet(uint16_t dlid, uint16_t slid, uint8_t sl, const smp& s, uint8_t* out) {
    headers h;
    h.l.vl = SMP_VL;
    h.l.sl = sl;
    h.l.dlid = dlid;
    h.l.slid = slid;
    h.b.opcode = op::UD_SEND_ONLY;
    h.b.pkey = SMP_PKEY;
    h.b.dest_qp = 0;
    h.d.qkey = SMP_QKEY;
    h.d.src_qp = 0;
    const size_t hdr = encode_headers(h, MAD_BYTES, out);
    if (!hdr) return 0;
    encode(s, out + hdr);
    return hdr + MAD_BYTES;  // 256 is a multiple of 4: no pad
}

}  // namespace hcasim::wire
