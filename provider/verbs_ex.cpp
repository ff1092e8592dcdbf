// The extended verbs of the hcasim provider: see objects.h (add_extended_ops).
#include "provider/objects.h"

namespace hcasim::provider {

void add_extended_ops(verbs_context_ops&) {}

}  // namespace hcasim::provider
