// BAR0 register map of the hcasim HCA (interface version 2).
//
// BAR0 holds the global registers (identification, command interface, interrupt/EQ) in its
// first 64 KiB and then one 4 KiB UAR (user access region) page per user context. Each UAR
// page carries the SQ/RQ/CQ doorbells and the inline-WQE write window. All registers are
// little-endian, naturally aligned; 64-bit registers are written with one 8-byte access.
// See docs/hw-sw-interface.md for the full table.
#pragma once
#include <cstdint>

namespace hcasim::hw {

/// Version of the HW/SW interface described in tlm_if/ (reported in REG_HCA_ID).
constexpr uint32_t INTERFACE_VERSION = 2;
/// Value of REG_HCA_ID: "HCA" magic in the upper bytes, interface version in the low byte.
constexpr uint32_t HCA_ID_VALUE = 0x48434100u | INTERFACE_VERSION;

/// Global registers (offsets in BAR0).
enum reg : uint64_t {
    REG_HCA_ID = 0x0000,        ///< RO 32: HCA_ID_VALUE
    REG_CMD_MAILBOX = 0x0008,   ///< RW 64: host physical address of the command mailbox
    REG_CMD_DOORBELL = 0x0010,  ///< WO 32: write the command token to start the command
    REG_CMD_STATUS = 0x0018,    ///< RO 32: bit 0 busy, bits 31..8 token of the last command
    REG_INT_MSI_ADDR = 0x0020,  ///< RW 64: host address the HCA writes for an interrupt (MSI)
    REG_INT_MSI_DATA = 0x0028,  ///< RW 32: value written to REG_INT_MSI_ADDR
    REG_EQ_CONSUMER = 0x0030,   ///< WO 32: bits 7..0 EQN, 31..8 consumer index; rearms the EQ
};

/// First UAR page and the stride between UAR pages.
constexpr uint64_t UAR_BASE = 0x10000;
constexpr uint64_t UAR_STRIDE = 0x1000;
constexpr uint32_t MAX_UARS = 256;
/// BAR0 size.
constexpr uint64_t BAR0_BYTES = UAR_BASE + UAR_STRIDE * MAX_UARS;

/// Registers inside each UAR page (offsets from the page start).
enum uar_reg : uint64_t {
    UAR_SQ_DOORBELL = 0x00,   ///< WO 64: sq_doorbell word
    UAR_RQ_DOORBELL = 0x08,   ///< WO 64: rq_doorbell word
    UAR_CQ_DOORBELL = 0x10,   ///< WO 64: cq_doorbell word
    UAR_SRQ_DOORBELL = 0x18,  ///< WO 64: srq_doorbell word
    UAR_INLINE_WQE = 0x100,   ///< WO 64..256 bytes: a whole WQE (inline window, skips the fetch)
};
/// Largest WQE accepted through the inline window.
constexpr uint32_t INLINE_WINDOW_BYTES = 256;

/// SQ doorbell: bits 23..0 QPN, bits 47..32 new SQ producer counter (WQEs posted, mod 2^16).
constexpr uint64_t sq_doorbell(uint32_t qpn, uint16_t producer) {
    return (uint64_t(producer) << 32) | (qpn & 0xFFFFFFu);
}
/// RQ doorbell: same layout as the SQ doorbell, for the receive queue.
constexpr uint64_t rq_doorbell(uint32_t qpn, uint16_t producer) { return sq_doorbell(qpn, producer); }
/// SRQ doorbell: bits 23..0 SRQN, bits 47..32 new SRQ producer counter (WQEs posted, mod 2^16).
constexpr uint64_t srq_doorbell(uint32_t srqn, uint16_t producer) { return sq_doorbell(srqn, producer); }
constexpr uint32_t doorbell_qpn(uint64_t v) { return uint32_t(v & 0xFFFFFFu); }
constexpr uint16_t doorbell_producer(uint64_t v) { return uint16_t(v >> 32); }

/// CQ doorbell arm modes (bits 57..56).
enum cq_arm : uint8_t {
    CQ_ARM_NONE = 0,       ///< only update the consumer index
    CQ_ARM_NEXT = 1,       ///< event on the next completion
    CQ_ARM_SOLICITED = 2,  ///< event on the next solicited (or error) completion
};
/// CQ doorbell: bits 23..0 CQN, bits 55..32 consumer index (mod 2^24), bits 57..56 cq_arm.
constexpr uint64_t cq_doorbell(uint32_t cqn, uint32_t consumer, cq_arm arm) {
    return (uint64_t(arm & 3) << 56) | (uint64_t(consumer & 0xFFFFFFu) << 32) | (cqn & 0xFFFFFFu);
}
constexpr uint32_t cq_doorbell_cqn(uint64_t v) { return uint32_t(v & 0xFFFFFFu); }
constexpr uint32_t cq_doorbell_consumer(uint64_t v) { return uint32_t((v >> 32) & 0xFFFFFFu); }
constexpr cq_arm cq_doorbell_arm(uint64_t v) { return cq_arm((v >> 56) & 3); }

}  // namespace hcasim::hw
