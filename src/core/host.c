/* host.c — work that acg does not launch: host functions ordered on a stream, the driver's
 * object behind a stream, and foreign work declared so that the capture ledger covers it. */
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

acg_status acg_stream_get_native(acg_stream *s, acg_native_handle *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_get_native";
    ACG__TRY(acg__check_stream_usable(s, fn));
    ACG__TRY(acg__output_check(out, sizeof *out, "acg_native_handle", fn));
    acg_status (*get)(acg__bk_stream *, acg_native_handle *) =
        ACG__SLOT(s->dev->vt, stream_get_native, 2);
    acg_native_handle h = {sizeof h, ACG_NATIVE_NONE, NULL};
    if (get != NULL) {
        /* Under the stream's lock: the backend may change how it orders later work. */
        acg__capture *c = acg__stream_enter(s);
        acg_status st = get(s->impl, &h);
        acg__stream_leave(s, c);
        ACG__TRY(st);
    }
    return acg__output_write(out, &h, sizeof h, "acg_native_handle", fn);
}

/* Checks the declared accesses and fills the node's buffer list with them (held until the
 * calling function returns). */
static acg_status check_accesses(acg_stream *s, const acg_access *acc, size_t n, acg__node *node,
                                 const char *fn) {
    if (n > ACG_MAX_ACCESSES || (acc == NULL && n > 0)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          acc == NULL ? "accesses is NULL with n_accesses > 0"
                                      : "more than ACG_MAX_ACCESSES accesses");
    }
    for (size_t i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "access %zu", i);
        ACG__TRY(acg__check_buffer(acc[i].buffer, s->dev, fn, what));
        if (acc[i].mode < ACG_ACCESS_READ || acc[i].mode > ACG_ACCESS_READ_WRITE) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s has no mode (read, write or both)",
                              fn, what);
        }
        size_t size = acc[i].size;
        if (size == 0 && acc[i].offset <= acc[i].buffer->size) {
            size = acc[i].buffer->size - acc[i].offset;
        }
        ACG__TRY(acg__check_range(acc[i].buffer, acc[i].offset, size, fn, what));
        /* The ledger keeps the mode, so a picture of the graph can say read or write. */
        uint32_t bit = 1u << node->n_buffers;
        node->reads |= (acc[i].mode & ACG_ACCESS_READ) ? bit : 0;
        node->writes |= (acc[i].mode & ACG_ACCESS_WRITE) ? bit : 0;
        node->buffers[node->n_buffers++] = acc[i].buffer;
    }
    return ACG_OK;
}

static acg_status host_eager(acg_stream *s, const acg__node *n) {
    acg_status (*launch)(acg__bk_stream *, acg_host_fn, void *) =
        ACG__SLOT(s->dev->vt, host_launch, 2);
    if (launch != NULL) {
        return launch(s->impl, n->host_fn, n->host_user);
    }
    /* No way to queue host work: drain the stream, then call it here, which keeps the order. */
    acg_status st = acg__device_fault(s->dev, s->dev->vt->stream_synchronize(s->impl));
    if (st == ACG_OK) {
        n->host_fn(n->host_user);
    }
    return st;
}

acg_status acg_stream_launch_host(acg_stream *s, acg_host_fn fn_host, void *user,
                                  const acg_access *accesses, size_t n_accesses) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_launch_host";
    ACG__TRY(acg__check_stream(s, fn));
    if (fn_host == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: fn is NULL", fn);
    }
    acg__node node = {.kind = ACG_NODE_HOST, .host_fn = fn_host, .host_user = user};
    ACG__TRY(check_accesses(s, accesses, n_accesses, &node, fn));
    return acg__submit(s, fn, &node, host_eager);
}

acg_status acg_stream_declare_foreign(acg_stream *s, const char *name, const acg_access *accesses,
                                      size_t n_accesses) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_declare_foreign";
    ACG__TRY(acg__check_stream_usable(s, fn));
    if (name == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: name is NULL", fn);
    }
    /* The caller's name, whole: a capture's description copies it. */
    acg__node node = {.kind = ACG_NODE_FOREIGN, .label = (char *)name};
    ACG__TRY(check_accesses(s, accesses, n_accesses, &node, fn));
    acg__capture *c = acg__stream_enter(s);
    acg_status st = acg__loop_gate(s, c, false, fn);
    if (c == NULL) {
        if (st == ACG_OK) {
            /* Eager foreign work: freeing its buffers now waits for this stream. */
            acg__buffers_mark_use(s, node.buffers, node.n_buffers);
        }
        acg__stream_leave(s, c);
        return st;
    }
    if (st == ACG_OK) {
        st = acg__capture_check(c, fn);
    }
    if (st == ACG_OK && c->rec == NULL) {
        st = acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                     "%s (%s) during capture invalidated the capture: %s builds "
                                     "graphs from acg's description, so work issued on the "
                                     "native object would run once now and never at replay",
                                     fn, node.label, s->dev->spec);
    } else if (st == ACG_OK) {
        /* The driver recorded the work; the ledger gains a node that holds its buffers. */
        st = acg__capture_add(s, c, &node);
    }
    acg__stream_leave(s, c);
    return st;
}
