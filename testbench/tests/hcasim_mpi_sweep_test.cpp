// placeholder
#include <gtest/gtest.h>
extern "C" int sc_main(int, char*[]) { return 0; }
