// The one main() of every test executable: doctest's, with its command line
// (e.g. `build/tests/engine/test_engine -tc="stream*"` runs matching cases only).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
