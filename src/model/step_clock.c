/* step_clock.c — a step's clock and trace (include/acg/trace.h): the phases acg_model_step
 * (generate.c) passes through, timed on the trace clock, so the step report's phases and the
 * trace's spans are the same intervals, and the step counted into the model's stats. */
#include "model-impl.h"

static uint64_t now_ns(void) { return acg__trace_now(); }

static double ms_between(uint64_t from, uint64_t to) { return (double)(to - from) / 1e6; }

static const char *const phase_names[STEP_END] = {
    [PHASE_ADMIT] = "admit",   [PHASE_PLAN] = "plan", [PHASE_UPLOAD] = "upload",
    [PHASE_LAUNCH] = "launch", [PHASE_WAIT] = "wait", [PHASE_RETIRE] = "retire",
};

/* Moves the step into `next` now, and is all of its trace: the open phase's span ends (saying
 * what it did when it ends into the phase after it), next's begins, and STEP_END ends the step's
 * own span, saying how it went (st). */
void acg__model_step_enter(acg__step_clock *c, acg__step_phase next, const acg_step_report *rep,
                           acg_status st) {
    const uint64_t now = now_ns();
    const acg__step_phase was = c->open;
    c->at[next] = now;
    c->open = next;
    if (!c->traced) {
        return;
    }
    if (was == STEP_START) {
        acg_trace_arg args[] = {ACG__TRACE_U("step", c->step)};
        acg__trace_emit(ACG_TRACE_MODEL, ACG_TRACE_BEGIN, "step", now, 0, 0, args,
                        ACG__TRACE_N(args));
    } else {
        /* A phase that ends into the one after it says what it did; one cut short, nothing. */
        const acg_trace_arg admitted[] = {
            ACG__TRACE_U("admitted", rep->admitted), ACG__TRACE_U("rows", rep->rows),
            ACG__TRACE_U("tokens", rep->tokens), ACG__TRACE_U("bucket", rep->bucket)};
        const acg_trace_arg launched[] = {ACG__TRACE_B("graphed", rep->graphed)};
        const acg_trace_arg retired[] = {ACG__TRACE_U("generated", rep->generated),
                                         ACG__TRACE_U("finished", rep->finished)};
        const acg_trace_arg *args = NULL;
        uint32_t n = 0;
        if (next == was + 1 && was == PHASE_ADMIT) {
            args = admitted;
            n = ACG__TRACE_N(admitted);
        } else if (next == was + 1 && was == PHASE_LAUNCH) {
            args = launched;
            n = ACG__TRACE_N(launched);
        } else if (next == was + 1 && was == PHASE_RETIRE) {
            args = retired;
            n = ACG__TRACE_N(retired);
        }
        acg__trace_emit(ACG_TRACE_MODEL, ACG_TRACE_END, phase_names[was], now, 0, 0, args, n);
    }
    if (next != STEP_END) {
        acg__trace_emit(ACG_TRACE_MODEL, ACG_TRACE_BEGIN, phase_names[next], now, 0, 0, NULL, 0);
        return;
    }
    const acg_bucket_key *key = c->bucket;
    acg_trace_arg args[] = {ACG__TRACE_B("ok", st == ACG_OK),
                            ACG__TRACE_U("rows", rep->rows),
                            ACG__TRACE_U("tokens", rep->tokens),
                            ACG__TRACE_U("generated", rep->generated),
                            ACG__TRACE_U("finished", rep->finished),
                            ACG__TRACE_U("steps", rep->steps),
                            ACG__TRACE_B("graphed", rep->graphed),
                            ACG__TRACE_U("bucket", rep->bucket),
                            ACG__TRACE_S("label", key != NULL ? key->label : ""),
                            ACG__TRACE_U("batch", key != NULL ? key->batch : 0),
                            ACG__TRACE_U("bucket_tokens", key != NULL ? key->tokens : 0)};
    acg__trace_emit(ACG_TRACE_MODEL, ACG_TRACE_END, "step", now, 0, 0, args, ACG__TRACE_N(args));
}

/* Counts a step that ran into the model's stats, with its phases' times into its report: they
 * add up to its whole time. */
void acg__model_count_step(acg_model *m, acg_step_report *rep, const uint64_t *at) {
    rep->admit_ms = ms_between(at[PHASE_ADMIT], at[PHASE_PLAN]);
    rep->plan_ms = ms_between(at[PHASE_PLAN], at[PHASE_UPLOAD]);
    rep->upload_ms = ms_between(at[PHASE_UPLOAD], at[PHASE_LAUNCH]);
    rep->launch_ms = ms_between(at[PHASE_LAUNCH], at[PHASE_WAIT]);
    rep->wait_ms = ms_between(at[PHASE_WAIT], at[PHASE_RETIRE]);
    rep->submit_ms = ms_between(at[PHASE_ADMIT], at[PHASE_WAIT]);
    rep->ms = ms_between(at[PHASE_ADMIT], at[STEP_END]);
    rep->retire_ms = rep->ms - ms_between(at[PHASE_ADMIT], at[PHASE_RETIRE]);
    m->stats.steps++;
    m->stats.graphed_steps += rep->graphed;
    m->stats.generated_tokens += rep->generated;
    m->stats.step_ms += rep->ms;
}
