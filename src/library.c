/* library.c — the layers built into libacg, listed once.
 *
 * The core learns what the layers above it contribute through this list alone, without naming
 * them: today, each layer's ACG_* environment variables, so that a renamed or mistyped switch of
 * any layer is reported. A layer with variables adds its table here. */
#include "acg-layer.h"
#include "engine-impl.h"
#include "model-impl.h"

const acg__env_table *const acg__env_tables[] = {&acg__core_env, &acg__engine_env, &acg__model_env};
const size_t acg__n_env_tables = sizeof acg__env_tables / sizeof acg__env_tables[0];
