// A registry of live objects in the order they were added: counters (stats.h) and params
// (param.h) register themselves when built and leave when destroyed. Leaving nulls the slot
// (a hash finds it) and the list is compacted when asked for or half empty, so destroying a
// machine of a thousand nodes, hundreds of thousands of objects, stays linear.
#pragma once
#include <cstddef>
#include <unordered_map>
#include <vector>

namespace hcasim {

template <typename T>
class slot_registry {
public:
    void add(T* p) {
        where_[p] = items_.size();
        items_.push_back(p);
    }
    void remove(T* p) {
        const auto it = where_.find(p);
        if (it == where_.end()) return;
        items_[it->second] = nullptr;
        where_.erase(it);
        if (++holes_ > items_.size() / 2) compact();
    }
    /// The live objects, in the order they were added.
    const std::vector<T*>& items() const {
        if (holes_) compact();
        return items_;
    }
    void clear() {
        items_.clear();
        where_.clear();
        holes_ = 0;
    }

private:
    void compact() const {
        size_t n = 0;
        for (T* p : items_)
            if (p) {
                where_[p] = n;
                items_[n++] = p;
            }
        items_.resize(n);
        holes_ = 0;
    }
    mutable std::vector<T*> items_;
    mutable std::unordered_map<const T*, size_t> where_;
    mutable size_t holes_ = 0;
};

}  // namespace hcasim
