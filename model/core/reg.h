// A memory-mapped register: name, offset, width, reset value, access, and read/write
// callbacks — so a unit's register map reads like a datasheet table.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace hcasim {

enum class reg_access : uint8_t { ro, wo, rw };

class reg {
public:
    using read_fn = std::function<uint64_t()>;
    using write_fn = std::function<void(uint64_t)>;

    reg(std::string name, uint64_t offset, unsigned bytes, uint64_t reset, reg_access access,
        read_fn on_read = nullptr, write_fn on_write = nullptr)
        : name_(std::move(name)),
          offset_(offset),
          bytes_(bytes),
          reset_(reset),
          value_(reset),
          access_(access),
          on_read_(std::move(on_read)),
          on_write_(std::move(on_write)) {}

    const std::string& name() const { return name_; }
    uint64_t offset() const { return offset_; }
    unsigned bytes() const { return bytes_; }
    reg_access access() const { return access_; }
    uint64_t value() const { return value_; }
    void reset() { value_ = reset_; }

    /// Bus read: RO/RW return the callback's value (or the stored one); WO reads as zero.
    uint64_t read() const {
        if (access_ == reg_access::wo) return 0;
        return on_read_ ? on_read_() : value_;
    }
    /// Bus write: stored and passed to the callback; writes to RO registers are ignored
    /// (returns false so the caller can count them).
    bool write(uint64_t v) {
        if (access_ == reg_access::ro) return false;
        value_ = v;
        if (on_write_) on_write_(v);
        return true;
    }

private:
    std::string name_;
    uint64_t offset_;
    unsigned bytes_;
    uint64_t reset_, value_;
    reg_access access_;
    read_fn on_read_;
    write_fn on_write_;
};

}  // namespace hcasim
