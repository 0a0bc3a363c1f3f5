/* library.c — the layers built into libacg, listed once.
 *
 * The core learns what the backends beside it and the layers above it contribute through this
 * list alone, without naming them: today, each one's ACG_* environment variables, so that a
 * renamed or mistyped switch of any of them is reported. A layer with variables adds its table
 * here; the backends' come from the build's list of backends. */
#include "acg-backends.h" /* the build's backends, which CMakeLists.txt writes */
#include "acg-layer.h"
#include "engine-impl.h"
#include "model-impl.h"

/* Each backend's table of variables is acg__<name>_env, beside its acg_backend_i. */
#define ACG__BACKEND_ENV_DECLARE(name) extern const acg__env_table acg__##name##_env;
ACG__BACKENDS(ACG__BACKEND_ENV_DECLARE)
#undef ACG__BACKEND_ENV_DECLARE

#define ACG__BACKEND_ENV(name) &acg__##name##_env,
/* The core's table, the backends', then the layers'. */
/* clang-format off */
const acg__env_table *const acg__env_tables[] = {
    &acg__core_env,
    ACG__BACKENDS(ACG__BACKEND_ENV)
    &acg__engine_env,
    &acg__model_env,
};
/* clang-format on */
#undef ACG__BACKEND_ENV
const size_t acg__n_env_tables = sizeof acg__env_tables / sizeof acg__env_tables[0];
