/*
 * A JACK client's own real-time threads and their scheduling, as the kernel
 * reports it (sched_getattr, no library in between):
 *  - a thread created with jack_client_create_thread(realtime = 1), which
 *    works (about 20 % of its time, for RUN_MS) so that a server may measure it;
 *  - a plain thread raised with jack_acquire_real_time_scheduling, then
 *    dropped with jack_drop_real_time_scheduling.
 *
 * Usage: rtthread [RUN_MS]
 * Prints "CREATED tid=<tid> policy=<p>", "ACQUIRED policy=<p>",
 * "DROPPED policy=<p>" (p: 0 SCHED_OTHER, 1 SCHED_FIFO, 6 SCHED_DEADLINE)
 * and "DONE".
 */
#define _GNU_SOURCE
#include <jack/jack.h>
#include <jack/thread.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct attr {
    uint32_t size;
    uint32_t policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

static int policy_of_self(void) {
    struct attr a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0)
        return -1;
    return (int)a.policy;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int run_ms = 1500;

static void *worker(void *arg) {
    (void)arg;
    printf("CREATED tid=%ld policy=%d\n", (long)syscall(SYS_gettid), policy_of_self());
    double end = now_ms() + run_ms;
    while (now_ms() < end) {
        double spin = now_ms() + 0.4;
        while (now_ms() < spin) {
        }
        usleep(1600);
    }
    return NULL;
}

static int jack_prio;

static void *plain(void *arg) {
    (void)arg;
    int r = jack_acquire_real_time_scheduling(pthread_self(), jack_prio > 1 ? jack_prio - 1 : 1);
    printf("ACQUIRED r=%d policy=%d\n", r, policy_of_self());
    r = jack_drop_real_time_scheduling(pthread_self());
    printf("DROPPED r=%d policy=%d\n", r, policy_of_self());
    return NULL;
}

static int process(jack_nframes_t n, void *arg) {
    (void)n;
    (void)arg;
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1)
        run_ms = atoi(argv[1]);
    jack_client_t *c = jack_client_open("rtthread", JackNoStartServer, NULL);
    if (!c) {
        printf("cannot open client\n");
        return 1;
    }
    jack_set_process_callback(c, process, NULL);
    jack_activate(c);
    jack_prio = jack_client_real_time_priority(c);
    pthread_t t;
    int r = jack_client_create_thread(c, &t, jack_prio > 1 ? jack_prio - 1 : 1, 1, worker, NULL);
    if (r != 0) {
        printf("jack_client_create_thread failed: %d\n", r);
        return 1;
    }
    pthread_join(t, NULL);
    pthread_t p;
    pthread_create(&p, NULL, plain, NULL);
    pthread_join(p, NULL);
    jack_deactivate(c);
    jack_client_close(c);
    printf("DONE\n");
    return 0;
}
