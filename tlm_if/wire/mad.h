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
constexpr uint16_t SMP_ATTR_PKEY_TABLE = 0x0016;
constexpr unsigned PKEYS_PER_BLOCK = 32;

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

/// A LID-routed SMP.
struct smp {
    mad_header h;
    uint64_t m_key = 0;
    std::array<uint8_t, SMP_DATA_BYTES> data{};
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

/// The one packet shape of subnet management here: LRH (VL15, LNH local), BTH UD SEND ONLY
/// (P_Key 0xFFFF, DestQP 0), DETH (Q_Key 0, SrcQP 0) and the 256-byte MAD. Writes the packet
/// up to the ICRC into `out` and returns that length (seal_packet appends ICRC and VCRC).
size_t encode_smp_packet(uint16_t dlid, uint16_t slid, uint8_t sl, const smp& s, uint8_t* out);

}  // namespace hcasim::wire
