// Management datagram codec: the MAD common header (IBA 13.4.3), LID-routed subnet management
// packets (SMPs, IBA 14.2.1.1), the P_KeyTable attribute (14.2.5.7) and the Notice attribute of
// a Bad P_Key trap (Trap 257, 14.2.5.1, 14.3.8), plus the one packet shape they travel in: a UD
// SEND ONLY to or from QP0 on VL15 with P_Key 0xFFFF and Q_Key 0.
//
// MAD (256 B), offsets in bytes, big-endian:
//   0 BaseVersion (1) | 1 MgmtClass | 2 ClassVersion (1) | 3 R(1) Method(7) | 4-5 Status |
//   6-7 ClassSpecific (directed route: hop pointer, hop count) | 8-15 TransactionID |
//   16-17 AttributeID | 18-19 reserved | 20-23 AttributeModifier | 24.. class data
// LID-routed SMP: 24-31 M_Key | 32-63 reserved | 64-127 SMP data (64 B) | 128-255 reserved
// Directed-route SMP (class 0x81, 14.2.1.2): Status bit 15 is D (direction, 1 on the way
//   back), byte 6 HopPointer, byte 7 HopCount | 24-31 M_Key | 32-33 DrSLID | 34-35 DrDLID |
//   36-63 reserved | 64-127 SMP data | 128-191 InitialPath | 192-255 ReturnPath (byte i: the
//   port of hop i; byte 0 unused).
// Switch attributes in the SMP data (14.2.5):
//   NodeInfo (0x0011): 0 BaseVersion | 1 ClassVersion | 2 NodeType (1 CA, 2 switch) |
//     3 NumPorts | 4-11 SystemImageGUID | 12-19 NodeGUID | 20-27 PortGUID | 28-29 PartitionCap |
//     30-31 DeviceID | 32-35 Revision | 36 LocalPortNum | 37-39 VendorID.
//   SwitchInfo (0x0012): 0-1 LinearFDBCap | 2-3 RandomFDBCap | 4-5 MulticastFDBCap |
//     6-7 LinearFDBTop | 8 DefaultPort | 9 DefaultMulticastPrimaryPort | 10 ..NotPrimaryPort |
//     11 LifeTimeValue(5) PortStateChange(1) OptimizedSLtoVLMappingProgramming(2) |
//     12-13 LIDsPerPort | 14-15 PartitionEnforcementCap | 16 InboundEnforcementCap(1)
//     OutboundEnforcementCap(1) FilterRawInboundCap(1) FilterRawOutboundCap(1) EnhancedPort0(1).
//   SLtoVLMappingTable (0x0017): 16 4-bit VLs, SL 2i in the high nibble of byte i; on a switch
//     the attribute modifier is input port << 8 | output port.
//   VLArbitrationTable (0x0018): 32 entries of (reserved(4) VL(4), Weight(8)); the attribute
//     modifier is block << 16 | port, block 1/2 the low table's entries 0-31/32-63, 3/4 the
//     high table's.
//   LinearForwardingTable (0x0019): 64 output ports, one byte per LID; the attribute modifier is
//     the block (LIDs 64 x block .. 64 x block + 63).
// P_KeyTable (attribute 0x0016): 32 P_Keys, 2 bytes each, in the SMP data; the attribute
//   modifier is the block number (entries 32 x block .. 32 x block + 31).
// Notice (attribute 0x0002) in the SMP data (its first 64 bytes; IssuerGID does not fit):
//   0 IsGeneric(1) Type(7) | 1-3 ProducerType (24) | 4-5 TrapNumber | 6-7 IssuerLID |
//   8-9 NoticeToggle(1) NoticeCount(15) | 10-63 DataDetails; Trap 257 details (offsets in the
//   Notice): 10-11 reserved | 12-13 LID1 (SLID) | 14-15 LID2 (DLID) | 16-19 Key (P_Key in the
//   low 16 bits) | 20 SL(4) reserved(4) | 21-23 QP1 (source QP) | 24 reserved | 25-27 QP2
//   (destination QP) | 28-43 GID1 (SGID) | 44-59 GID2 (DGID) | 60-63 reserved.
//
// No function here allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tlm_if/wire/ib_headers.h"

namespace hcasim::wire {

constexpr size_t MAD_BYTES = 256;
constexpr size_t MAD_HEADER_BYTES = 24;
constexpr size_t SMP_DATA_OFFSET = 64;
constexpr size_t SMP_DATA_BYTES = 64;

constexpr uint8_t MAD_BASE_VERSION = 1;
constexpr uint8_t MGMT_CLASS_SUBN_LID_ROUTED = 0x01;
constexpr uint8_t MGMT_CLASS_SUBN_DIRECTED_ROUTE = 0x81;
constexpr uint8_t SMP_CLASS_VERSION = 1;

constexpr uint8_t MAD_METHOD_GET = 0x01;
constexpr uint8_t MAD_METHOD_SET = 0x02;
constexpr uint8_t MAD_METHOD_TRAP = 0x05;
constexpr uint8_t MAD_METHOD_TRAP_REPRESS = 0x07;
constexpr uint8_t MAD_METHOD_GET_RESP = 0x81;

/// MAD Status (IBA Table 132): bits 4..2 are the invalid-field code.
constexpr uint16_t MAD_STATUS_OK = 0x0000;
constexpr uint16_t MAD_STATUS_BAD_VERSION = 0x0004;
constexpr uint16_t MAD_STATUS_UNSUPPORTED_METHOD = 0x0008;
constexpr uint16_t MAD_STATUS_UNSUPPORTED_ATTRIBUTE = 0x000C;
constexpr uint16_t MAD_STATUS_INVALID_FIELD = 0x001C;

constexpr uint16_t SMP_ATTR_NOTICE = 0x0002;
constexpr uint16_t SMP_ATTR_NODE_INFO = 0x0011;
constexpr uint16_t SMP_ATTR_SWITCH_INFO = 0x0012;
constexpr uint16_t SMP_ATTR_PKEY_TABLE = 0x0016;
constexpr uint16_t SMP_ATTR_SL2VL_TABLE = 0x0017;
constexpr uint16_t SMP_ATTR_VLARB_TABLE = 0x0018;
constexpr uint16_t SMP_ATTR_LINEAR_FDB = 0x0019;
constexpr uint16_t SMP_ATTR_MCAST_FDB = 0x001B;
/// MulticastForwardingTable: a block is 32 MLIDs (modifier bits 8:0), each a 16-bit port mask
/// of the 16 ports the position (modifier bits 31:28) selects: position p, bit j is port 16p + j.
constexpr unsigned MFT_MLIDS_PER_BLOCK = 32;
constexpr unsigned MFT_PORTS_PER_MASK = 16;
constexpr unsigned PKEYS_PER_BLOCK = 32;
constexpr unsigned LFT_LIDS_PER_BLOCK = 64;
constexpr unsigned VLARB_ENTRIES_PER_BLOCK = 32;

/// Directed route: the D bit of the Status field, the longest path (IBA C14-6: HopCount 0..63).
constexpr uint16_t SMP_DIRECTION = 0x8000;
constexpr unsigned SMP_MAX_HOPS = 63;
constexpr uint8_t NODE_TYPE_CA = 1;
constexpr uint8_t NODE_TYPE_SWITCH = 2;

constexpr uint16_t TRAP_BAD_PKEY = 257;
constexpr uint8_t NOTICE_TYPE_SECURITY = 2;
constexpr uint32_t NOTICE_PRODUCER_CA = 1;

/// SMPs: QP0, VL15, the default P_Key, Q_Key 0. QP1's well-known Q_Key (IBA 10.2.4.x).
constexpr uint8_t SMP_VL = 15;
constexpr uint16_t SMP_PKEY = 0xFFFF;
constexpr uint32_t SMP_QKEY = 0;
constexpr uint32_t QP1_QKEY = 0x80010000u;

/// MAD common header (host-order values).
struct mad_header {
    uint8_t base_version = MAD_BASE_VERSION;
    uint8_t mgmt_class = MGMT_CLASS_SUBN_LID_ROUTED;
    uint8_t class_version = SMP_CLASS_VERSION;
    uint8_t method = 0;  ///< with the R bit (0x80) for responses
    uint16_t status = 0;
    uint16_t class_specific = 0;
    uint64_t tid = 0;
    uint16_t attr_id = 0;
    uint32_t attr_mod = 0;
};

/// An SMP, LID routed or directed route (mgmt_class 0x81: the fields below the data are on
/// the wire only then).
struct smp {
    mad_header h;
    uint64_t m_key = 0;
    std::array<uint8_t, SMP_DATA_BYTES> data{};
    uint16_t dr_slid = PERMISSIVE_LID;
    uint16_t dr_dlid = PERMISSIVE_LID;
    std::array<uint8_t, 64> initial_path{};
    std::array<uint8_t, 64> return_path{};

    bool directed() const { return h.mgmt_class == MGMT_CLASS_SUBN_DIRECTED_ROUTE; }
    uint8_t hop_pointer() const { return uint8_t(h.class_specific >> 8); }
    uint8_t hop_count() const { return uint8_t(h.class_specific); }
    void set_hops(uint8_t pointer, uint8_t count) { h.class_specific = uint16_t(pointer << 8 | count); }
    /// D: the SMP goes back along the return path.
    bool returning() const { return (h.status & SMP_DIRECTION) != 0; }
};

/// Writes the 256-byte MAD (reserved bytes zero).
void encode(const smp& s, uint8_t* out);
mad_header decode_mad_header(const uint8_t* in);
smp decode_smp(const uint8_t* in);

/// True if `payload` holds a subnet management MAD (class 0x01 or 0x81).
inline bool is_subn_mgmt(const uint8_t* payload, size_t len) {
    return len >= MAD_HEADER_BYTES &&
           (payload[1] == MGMT_CLASS_SUBN_LID_ROUTED || payload[1] == MGMT_CLASS_SUBN_DIRECTED_ROUTE);
}

/// P_KeyTable block <-> SMP data (32 big-endian P_Keys).
void encode_pkey_block(const uint16_t* keys, uint8_t* data);
void decode_pkey_block(const uint8_t* data, uint16_t* keys);

/// NodeInfo (the fields a switch or CA reports).
struct node_info {
    uint8_t base_version = MAD_BASE_VERSION;
    uint8_t class_version = SMP_CLASS_VERSION;
    uint8_t node_type = NODE_TYPE_SWITCH;
    uint8_t num_ports = 0;
    uint64_t system_image_guid = 0, node_guid = 0, port_guid = 0;
    uint16_t partition_cap = 0, device_id = 0;
    uint32_t revision = 0;
    uint8_t local_port = 0;
    uint32_t vendor_id = 0;  ///< 24 bits
};
void encode(const node_info& n, uint8_t* data);
node_info decode_node_info(const uint8_t* data);

/// SwitchInfo (the fields this model reports or sets; the rest are zero).
struct switch_info {
    uint16_t linear_fdb_cap = 0, random_fdb_cap = 0, mcast_fdb_cap = 0, linear_fdb_top = 0;
    uint8_t default_port = 0;
    uint16_t lids_per_port = 0, partition_enforcement_cap = 0;
    bool enhanced_port0 = false;
};
void encode(const switch_info& s, uint8_t* data);
switch_info decode_switch_info(const uint8_t* data);

/// LinearForwardingTable block <-> SMP data (64 ports, one byte per LID).
void encode_lft_block(const uint8_t* ports, uint8_t* data);
void decode_lft_block(const uint8_t* data, uint8_t* ports);
/// SLtoVLMappingTable <-> SMP data (16 VLs, two per byte, SL 0 in the high nibble of byte 0).
void encode_sl2vl(const uint8_t* vls, uint8_t* data);
void decode_sl2vl(const uint8_t* data, uint8_t* vls);
/// VLArbitrationTable block <-> SMP data: 32 (VL, weight) pairs.
struct vlarb_pair {
    uint8_t vl = 0, weight = 0;
};
void encode_vlarb_block(const vlarb_pair* e, uint8_t* data);
void decode_vlarb_block(const uint8_t* data, vlarb_pair* e);

/// Trap 257 (Bad P_Key) as a generic security Notice from a CA.
struct notice_bad_pkey {
    uint16_t issuer_lid = 0;
    uint16_t toggle_count = 0;       ///< NoticeToggle (bit 15) and NoticeCount
    uint16_t lid1 = 0;               ///< SLID of the offending packet
    uint16_t lid2 = 0;               ///< its DLID
    uint16_t pkey = 0;               ///< its P_Key
    uint8_t sl = 0;                  ///< its SL
    uint32_t qp1 = 0;                ///< its source QP (DETH), 0 without a DETH
    uint32_t qp2 = 0;                ///< its destination QP (BTH)
    std::array<uint8_t, 16> gid1{};  ///< its SGID (zero without a GRH)
    std::array<uint8_t, 16> gid2{};  ///< its DGID (zero without a GRH)
};
void encode(const notice_bad_pkey& n, uint8_t* data);
/// False unless the data is a generic security notice from a CA with trap number 257.
bool decode_notice_bad_pkey(const uint8_t* data, notice_bad_pkey& n);

/// The one packet shape of subnet management here (LID routed and directed route): LRH (VL15, LNH local), BTH UD SEND ONLY
/// (P_Key 0xFFFF, DestQP 0), DETH (Q_Key 0, SrcQP 0) and the 256-byte MAD. Writes the packet
/// up to the ICRC into `out` and returns that length (seal_packet appends ICRC and VCRC).
size_t encode_smp_packet(uint16_t dlid, uint16_t slid, uint8_t sl, const smp& s, uint8_t* out);

}  // namespace hcasim::wire
