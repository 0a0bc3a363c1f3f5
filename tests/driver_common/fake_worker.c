/* fake_worker.c — the test drivers' workers: host threads running jobs in order (see
 * fake_common.h). */
#include "fake_common.h"

static void *worker_main(void *arg) {
    struct fake_worker *w = arg;
    pthread_mutex_lock(w->lock);
    for (;;) {
        while (w->head == NULL && !w->quit) {
            pthread_cond_wait(&w->work, w->lock);
        }
        if (w->head == NULL) {
            break; /* told to quit, and drained */
        }
        struct fake_job *job = w->head;
        w->run(w, job);
        w->head = job->next;
        if (w->head == NULL) {
            w->tail = NULL;
        }
        w->done(w, job);
        w->completed++;
        pthread_cond_broadcast(w->progress);
    }
    w->exited = 1;
    pthread_cond_broadcast(w->progress);
    pthread_mutex_unlock(w->lock);
    return NULL;
}

int fake__worker_start(struct fake_worker *w) {
    if (pthread_cond_init(&w->work, NULL) != 0) {
        return -1;
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->work);
        return -1;
    }
    return 0;
}

uint64_t fake__worker_push(struct fake_worker *w, struct fake_job *job) {
    job->next = NULL;
    if (w->tail != NULL) {
        w->tail->next = job;
    } else {
        w->head = job;
    }
    w->tail = job;
    pthread_cond_signal(&w->work);
    return ++w->submitted;
}

void fake__worker_quit(struct fake_worker *w) {
    w->quit = 1;
    pthread_cond_signal(&w->work);
}
