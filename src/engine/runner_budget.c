/* runner_budget.c — the capture budget: each bucket's eager peak, measured by running its step
 * once; the largest-first order by it, agreed over the ranks; and whether a bucket's capture
 * fits under the memory limit and what the driver has free, keeping the largest eager step's
 * peak free for serving. */
#include <stdio.h>

#include <acg/engine.h>

#include "runner-impl.h"

/* ---- the budget: eager peaks, then what capture may take ---------------------------------- */

/* Runs each bucket's step once, eagerly, in slot 0, and keeps the peak of the device's memory
 * accounting above what was in use before: the bucket's eager peak (its temporaries). Each run
 * is waited for, so its stream-ordered frees are reclaimed before the next one measures. The
 * run is also slot 0's first warm-up. */
acg_status acg__runner_measure_peaks(acg_runner *r, uint64_t *largest) {
    acg_status st = ACG_OK;
    *largest = 0;
    for (uint32_t b = 0; b < r->n_buckets && st == ACG_OK; b++) {
        acg_memory_stats m = ACG_MEMORY_STATS_INIT;
        acg__trace_span span;
        acg__runner_trace_bucket_begin(&span, "measure", r, b, 0);
        st = acg_stream_synchronize(r->stream);
        if (st == ACG_OK) {
            st = acg_device_reset_peak_memory(r->dev);
        }
        if (st == ACG_OK) {
            st = acg_device_get_memory_stats(r->dev, &m);
        }
        uint64_t base = m.bytes_in_use;
        if (st == ACG_OK) {
            st = acg__runner_run_eager(r, b, 0, r->stream);
        }
        if (st == ACG_OK) {
            st = acg_stream_synchronize(r->stream);
        }
        if (st == ACG_OK) {
            st = acg_device_get_memory_stats(r->dev, &m);
        }
        if (st == ACG_OK) {
            uint64_t peak = m.peak_bytes - base;
            r->buckets[b].report.eager_peak = peak;
            *largest = peak > *largest ? peak : *largest;
        }
        acg_trace_arg done[] = {ACG__TRACE_B("ok", st == ACG_OK),
                                ACG__TRACE_U("eager_peak", r->buckets[b].report.eager_peak)};
        acg__trace_end(&span, done, ACG__TRACE_N(done));
    }
    return st;
}

/* Largest first, by memory: the buckets in decreasing eager peak, every rank's largest (KiB,
 * agreed with a min-reduction of their negatives) so that every rank captures in the same
 * order; ties keep the order by shape (batch, then tokens). The first capture sizes the pool
 * and the smaller ones lay their scratch out in it; in order of shape alone, a bucket of fewer
 * rows but more tokens could come later, need more, and grow the pool past what any one bucket
 * needs. */
acg_status acg__runner_order_by_peak(acg_runner *r, const acg_comm *comm) {
    int32_t *kib = acg__calloc(r->n_buckets, sizeof *kib);
    if (kib == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_runner_create: out of memory");
    }
    for (uint32_t b = 0; b < r->n_buckets; b++) {
        uint64_t k = (r->buckets[b].report.eager_peak + 1023) / 1024;
        kib[b] = -(int32_t)(k < INT32_MAX ? k : INT32_MAX);
    }
    acg_status st = comm != NULL ? acg__runner_agree_min(comm, kib, r->n_buckets) : ACG_OK;
    /* Insertion sort, stable: r->order is by shape already. */
    for (uint32_t i = 1; st == ACG_OK && i < r->n_buckets; i++) {
        uint32_t b = r->order[i], at = i;
        while (at > 0 && kib[b] < kib[r->order[at - 1]]) {
            r->order[at] = r->order[at - 1];
            at--;
        }
        r->order[at] = b;
    }
    acg__free(kib);
    return st;
}

/* Whether capturing bucket b keeps `reserve` bytes free under limit; the pool grows by at most
 * what the bucket's eager step allocated, less what the pool already holds. */
bool acg__runner_fits(acg_runner *r, uint32_t b, uint64_t limit, uint64_t reserve, char *why,
                      size_t why_size) {
    acg_memory_stats m = ACG_MEMORY_STATS_INIT;
    size_t pool = 0;
    acg_device_get_memory_stats(r->dev, &m);
    acg_graph_pool_get_bytes(r->pool, &pool);
    uint64_t need = r->buckets[b].report.eager_peak;
    if (!r->piecewise) {
        for (uint32_t i = 0; i < r->recipe.n_outputs; i++) {
            need += acg_buffer_get_size(r->buckets[b].outputs[i]);
        }
    }
    uint64_t growth = need > pool ? need - pool : 0;
    /* Where the driver can tell, what it has free now bounds the capture too: other processes
     * (and other engines in this one) share the device. */
    uint64_t free_now = 0, total = 0;
    if (acg_device_get_memory_info(r->dev, &free_now, &total) == ACG_OK &&
        growth + reserve > free_now) {
        snprintf(why, why_size,
                 "budget: capture needs ~%llu more bytes and %llu kept free for the largest "
                 "eager step, but the driver has %llu bytes free",
                 (unsigned long long)growth, (unsigned long long)reserve,
                 (unsigned long long)free_now);
        return false;
    }
    if (m.bytes_in_use + growth + reserve <= limit) {
        return true;
    }
    snprintf(why, why_size,
             "budget: capture needs ~%llu more bytes; %llu in use and %llu kept free for the "
             "largest eager step exceed the limit of %llu",
             (unsigned long long)growth, (unsigned long long)m.bytes_in_use,
             (unsigned long long)reserve, (unsigned long long)limit);
    return false;
}
