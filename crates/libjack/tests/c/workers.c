/*
 * A program that sets up its own real-time worker threads from its JACK
 * process thread's scheduling, as convolution engines and ALSA bridges do:
 * it reads the process thread's policy and priority (pthread_getschedparam,
 * from outside and from inside the process callback), creates a worker one
 * priority below with that policy (explicit scheduling), and another with
 * jack_client_create_thread. Both workers must really run SCHED_FIFO at the
 * asked priority (SCHED_RR on Debian's jackd for the second; resound under
 * --sched deadline gives the second a SCHED_DEADLINE reservation), whatever
 * the server does with the process thread.
 *
 * Usage: workers
 * Prints "CHECK <what> ok|FAIL ..." lines and "DONE failed=<n>".
 */
#include <jack/jack.h>
#include <jack/thread.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int failed;
static atomic_int inside_policy = -1, inside_prio = -1;

static void check(const char *what, int ok, int a, int b) {
    if (ok) {
        printf("CHECK %s ok\n", what);
    } else {
        printf("CHECK %s FAIL (%d, %d)\n", what, a, b);
        failed++;
    }
}

static int process(jack_nframes_t n, void *arg) {
    (void)n;
    (void)arg;
    if (atomic_load(&inside_policy) < 0) {
        int pol;
        struct sched_param sp;
        if (pthread_getschedparam(pthread_self(), &pol, &sp) == 0) {
            atomic_store(&inside_prio, sp.sched_priority);
            atomic_store(&inside_policy, pol);
        }
    }
    return 0;
}

/* What a worker finds itself running as, read from the kernel. */
static int worker_policy = -1, worker_prio = -1;

static void *worker(void *arg) {
    (void)arg;
    struct sched_param sp;
    /* jackd sets a jack_client_create_thread thread's scheduling after it
       has started: look a little later. */
    usleep(100000);
    worker_policy = (int)syscall(SYS_sched_getscheduler, 0) & ~0x40000000;
    syscall(SYS_sched_getparam, 0, &sp);
    worker_prio = sp.sched_priority;
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    jack_client_t *c = jack_client_open("workers", JackNoStartServer, NULL);
    if (!c) {
        printf("cannot open client\nDONE failed=1\n");
        return 1;
    }
    jack_set_process_callback(c, process, NULL);
    jack_activate(c);
    usleep(300000);
    int jack_prio = jack_client_real_time_priority(c);
    check("the client is real-time", jack_is_realtime(c) && jack_prio > 1, jack_prio, 0);

    /* The process thread's scheduling, as the program sees it. */
    int pol;
    struct sched_param sp;
    int r = pthread_getschedparam(jack_client_thread_id(c), &pol, &sp);
    check("process thread reads as SCHED_FIFO", r == 0 && pol == SCHED_FIFO, r, pol);
    check("at jack_client_real_time_priority", sp.sched_priority == jack_prio, sp.sched_priority,
          jack_prio);
    check("the same from inside the process callback",
          atomic_load(&inside_policy) == SCHED_FIFO && atomic_load(&inside_prio) == jack_prio,
          atomic_load(&inside_policy), atomic_load(&inside_prio));

    /* A worker one below, with the policy just read (explicit scheduling). */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&attr, pol);
    struct sched_param wp = {.sched_priority = sp.sched_priority - 1};
    pthread_attr_setschedparam(&attr, &wp);
    pthread_t t;
    r = pthread_create(&t, &attr, worker, NULL);
    check("a worker with the copied policy starts", r == 0, r, 0);
    if (r == 0) {
        pthread_join(t, NULL);
        check("and runs SCHED_FIFO one below", worker_policy == SCHED_FIFO && worker_prio == jack_prio - 1,
              worker_policy, worker_prio);
    }
    pthread_attr_destroy(&attr);

    /* The JACK way. */
    worker_policy = worker_prio = -1;
    r = jack_client_create_thread(c, &t, jack_prio - 1, 1, worker, NULL);
    check("jack_client_create_thread starts a real-time worker", r == 0, r, 0);
    if (r == 0) {
        pthread_join(t, NULL);
        /* jackd (Debian's) uses SCHED_RR for these threads, resound SCHED_FIFO,
           or under --sched deadline a SCHED_DEADLINE (6) reservation of its own. */
        check("which runs real-time at the asked priority",
              ((worker_policy == SCHED_FIFO || worker_policy == SCHED_RR) &&
               worker_prio == jack_prio - 1) ||
                  worker_policy == 6,
              worker_policy, worker_prio);
    }
    jack_deactivate(c);
    jack_client_close(c);
    printf("DONE failed=%d\n", failed);
    return failed != 0;
}
