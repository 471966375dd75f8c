#include "ops/ops_testing.h"
