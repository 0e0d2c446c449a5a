/*
 * The C part of resound's libjack.so.0: what Rust cannot express on stable.
 *
 *  - The variadic entry points (jack_client_open, jack_internal_client_load):
 *    they read their optional arguments with va_arg, in jackd's order
 *    (server name, load name, load init, session id), and call the
 *    non-variadic Rust implementation.
 *  - The exported data symbols (jack_error_callback, jack_info_callback,
 *    JACK_METADATA_*). Defined here so programs that assign them directly
 *    (copy relocations) and our own code see the same variable: C code
 *    compiled as PIC reaches them through the GOT.
 *  - jack_cycle_wait / jack_thread_wait: a process thread started with
 *    jack_set_process_thread leaves through longjmp back to lj_run_thread
 *    when the client is deactivated (jackd ends that thread with
 *    pthread_exit); no Rust frame lies between the two, so no Rust code is
 *    unwound or skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct _jack_client jack_client_t;
typedef uint32_t jack_nframes_t;
typedef uint64_t jack_intclient_t;

/* JackOptions bits used here. */
#define LJ_SERVER_NAME 0x04
#define LJ_LOAD_NAME 0x08
#define LJ_LOAD_INIT 0x10
#define LJ_SESSION_ID 0x20

/* Rust side. */
extern jack_client_t *lj_client_open(const char *name, int options, int *status,
                                     const char *server_name);
extern jack_intclient_t lj_internal_client_load(jack_client_t *client, const char *name,
                                                int options, int *status,
                                                const char *load_name,
                                                const char *load_init);
extern jack_nframes_t lj_cycle_wait(jack_client_t *client, int *thread_must_exit);
extern void lj_cycle_signal(jack_client_t *client, int status);

static void lj_default_error(const char *msg) { fprintf(stderr, "%s\n", msg); }
static void lj_default_info(const char *msg) { fprintf(stderr, "%s\n", msg); }

void (*jack_error_callback)(const char *msg) = lj_default_error;
void (*jack_info_callback)(const char *msg) = lj_default_info;

void jack_set_error_function(void (*func)(const char *)) {
    jack_error_callback = func ? func : lj_default_error;
}

void jack_set_info_function(void (*func)(const char *)) {
    jack_info_callback = func ? func : lj_default_info;
}

/* Called by the Rust side for every error and info message. */
void lj_report_error(const char *msg) {
    void (*f)(const char *) = jack_error_callback;
    if (f && msg)
        f(msg);
}

void lj_report_info(const char *msg) {
    void (*f)(const char *) = jack_info_callback;
    if (f && msg)
        f(msg);
}

const char *JACK_METADATA_CONNECTED = "http://jackaudio.org/metadata/connected";
const char *JACK_METADATA_EVENT_TYPES = "http://jackaudio.org/metadata/event-types";
const char *JACK_METADATA_HARDWARE = "http://jackaudio.org/metadata/hardware";
const char *JACK_METADATA_ICON_LARGE = "http://jackaudio.org/metadata/icon-large";
const char *JACK_METADATA_ICON_NAME = "http://jackaudio.org/metadata/icon-name";
const char *JACK_METADATA_ICON_SMALL = "http://jackaudio.org/metadata/icon-small";
const char *JACK_METADATA_ORDER = "http://jackaudio.org/metadata/order";
const char *JACK_METADATA_PRETTY_NAME = "http://jackaudio.org/metadata/pretty-name";
const char *JACK_METADATA_PORT_GROUP = "http://jackaudio.org/metadata/port-group";
const char *JACK_METADATA_SIGNAL_TYPE = "http://jackaudio.org/metadata/signal-type";

jack_client_t *jack_client_open(const char *client_name, int options, int *status, ...) {
    const char *server_name = NULL;
    if (options & LJ_SERVER_NAME) {
        va_list ap;
        va_start(ap, status);
        server_name = va_arg(ap, const char *);
        va_end(ap);
    }
    /* A session id (JackSessionID) would follow; sessions are not supported
       and the option is simply ignored, as jackd does for unknown ids. */
    return lj_client_open(client_name, options, status, server_name);
}

jack_intclient_t jack_internal_client_load(jack_client_t *client, const char *client_name,
                                           int options, int *status, ...) {
    const char *load_name = NULL;
    const char *load_init = NULL;
    va_list ap;
    va_start(ap, status);
    if (options & LJ_SERVER_NAME)
        (void)va_arg(ap, const char *);
    if (options & LJ_LOAD_NAME)
        load_name = va_arg(ap, const char *);
    if (options & LJ_LOAD_INIT)
        load_init = va_arg(ap, const char *);
    va_end(ap);
    return lj_internal_client_load(client, client_name, options, status, load_name, load_init);
}

/* The jmp_buf of the process thread running a jack_set_process_thread
   function, or NULL on any other thread. */
static __thread jmp_buf *lj_exit_jmp;

/* Runs a JackThreadCallback on the calling (process) thread; returns when it
   returns or when the client is deactivated under it. */
void lj_run_thread(void *(*fun)(void *), void *arg) {
    jmp_buf env;
    jmp_buf *volatile prev = lj_exit_jmp;
    lj_exit_jmp = &env;
    if (setjmp(env) == 0)
        fun(arg);
    lj_exit_jmp = prev;
}

jack_nframes_t jack_cycle_wait(jack_client_t *client) {
    int must_exit = 0;
    jack_nframes_t n = lj_cycle_wait(client, &must_exit);
    if (must_exit && lj_exit_jmp)
        longjmp(*lj_exit_jmp, 1);
    return n;
}

void jack_cycle_signal(jack_client_t *client, int status) {
    lj_cycle_signal(client, status);
    if (status != 0 && lj_exit_jmp)
        longjmp(*lj_exit_jmp, 1);
}

/* Deprecated: ends the current cycle with `status` and waits for the next. */
jack_nframes_t jack_thread_wait(jack_client_t *client, int status) {
    lj_cycle_signal(client, status);
    if (status != 0 && lj_exit_jmp)
        longjmp(*lj_exit_jmp, 1);
    return jack_cycle_wait(client);
}

/* ---- thread.h ---------------------------------------------------------- */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

typedef int (*jack_thread_creator_t)(pthread_t *, const pthread_attr_t *,
                                     void *(*function)(void *), void *arg);

static jack_thread_creator_t lj_thread_creator;

void jack_set_thread_creator(jack_thread_creator_t creator) { lj_thread_creator = creator; }

static int lj_spawn(pthread_t *thread, const pthread_attr_t *attr, void *(*fun)(void *),
                    void *arg) {
    if (lj_thread_creator)
        return lj_thread_creator(thread, attr, fun, arg);
    return pthread_create(thread, attr, fun, arg);
}

/* Creates a thread, under SCHED_FIFO at `priority` when `realtime`; if the
   system refuses real-time scheduling the thread is created without it and
   the caller is told through jack_info_callback. Returns 0 or an errno. */
int lj_create_thread(pthread_t *thread, int priority, int realtime, void *(*fun)(void *),
                     void *arg) {
    pthread_attr_t attr;
    int r;
    if (realtime) {
        struct sched_param p;
        memset(&p, 0, sizeof p);
        p.sched_priority = priority;
        pthread_attr_init(&attr);
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
        pthread_attr_setschedparam(&attr, &p);
        pthread_attr_setscope(&attr, PTHREAD_SCOPE_SYSTEM);
        r = lj_spawn(thread, &attr, fun, arg);
        pthread_attr_destroy(&attr);
        if (r == 0)
            return 0;
        if (r != EPERM && r != EINVAL)
            return r;
        char msg[160];
        snprintf(msg, sizeof msg,
                 "resound libjack: cannot create a SCHED_FIFO %d thread (%s); creating it "
                 "without real-time scheduling",
                 priority, strerror(r));
        lj_report_info(msg);
    }
    pthread_attr_init(&attr);
    r = lj_spawn(thread, &attr, fun, arg);
    pthread_attr_destroy(&attr);
    return r;
}

/* Tells the server a thread starts (on = 1) or stops being real-time, when
   its kernel thread id is known (thread_reserve.rs). */
extern int lj_thread_realtime(pthread_t thread, int on);

/* SCHED_FIFO at `priority`, then the server is told, which under --sched
   deadline gives the thread a SCHED_DEADLINE reservation. */
int jack_acquire_real_time_scheduling(pthread_t thread, int priority) {
    struct sched_param p;
    memset(&p, 0, sizeof p);
    p.sched_priority = priority;
    int r = pthread_setschedparam(thread, SCHED_FIFO, &p);
    if (r != 0) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "resound libjack: cannot use real-time scheduling (FIFO/%d) (%d: %s)", priority,
                 r, strerror(r));
        lj_report_error(msg);
        return -1;
    }
    lj_thread_realtime(thread, 1);
    return 0;
}

int jack_drop_real_time_scheduling(pthread_t thread) {
    lj_thread_realtime(thread, 0);
    struct sched_param p;
    memset(&p, 0, sizeof p);
    int r = pthread_setschedparam(thread, SCHED_OTHER, &p);
    if (r != 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "resound libjack: cannot switch to normal scheduling (%s)",
                 strerror(r));
        lj_report_error(msg);
        return -1;
    }
    return 0;
}

int jack_client_stop_thread(jack_client_t *client, pthread_t thread) {
    (void)client;
    void *status;
    return pthread_join(thread, &status) == 0 ? 0 : -1;
}

int jack_client_kill_thread(jack_client_t *client, pthread_t thread) {
    (void)client;
    void *status;
    pthread_cancel(thread);
    return pthread_join(thread, &status) == 0 ? 0 : -1;
}

/*
 * Reserved threads seen as SCHED_FIFO. Under resound's reservations a JACK
 * process thread runs under SCHED_DEADLINE, with no priority. Programs that
 * copy their process thread's policy and priority to their own worker
 * threads (convolution engines, ALSA bridges: pthread_getschedparam, then
 * pthread_attr_setschedpolicy/pthread_setschedparam) would get a policy they
 * cannot set and run their workers as ordinary threads. These three queries,
 * exported by libjack.so.0 and so found before the C library's by the
 * programs linked with it, report a SCHED_DEADLINE thread as SCHED_FIFO at
 * the priority jackd would have given it (jack_client_real_time_priority),
 * which the program can then set on its workers; every other answer is the
 * C library's, with the reset-on-fork flag left out of the policy.
 */
#include <dlfcn.h>

extern int lj_fifo_equivalent_priority(void);

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

/* The C library's function `name` (NULL if it has none). */
static void *lj_next(const char *name) { return dlsym(RTLD_NEXT, name); }

/* Rewrites a SCHED_DEADLINE policy as SCHED_FIFO at the JACK priority. */
static void lj_as_fifo(int *policy, int *priority) {
    *policy &= ~SCHED_RESET_ON_FORK;
    if (*policy != SCHED_DEADLINE)
        return;
    int p = lj_fifo_equivalent_priority();
    if (p > 0) {
        *policy = SCHED_FIFO;
        if (priority)
            *priority = p;
    }
}

int pthread_getschedparam(pthread_t th, int *policy, struct sched_param *param) {
    int (*real)(pthread_t, int *, struct sched_param *) =
        (int (*)(pthread_t, int *, struct sched_param *))lj_next("pthread_getschedparam");
    if (!real)
        return ENOSYS;
    int r = real(th, policy, param);
    if (r == 0)
        lj_as_fifo(policy, &param->sched_priority);
    return r;
}

int sched_getscheduler(pid_t pid) {
    int (*real)(pid_t) = (int (*)(pid_t))lj_next("sched_getscheduler");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    int policy = real(pid);
    if (policy >= 0)
        lj_as_fifo(&policy, NULL);
    return policy;
}

int sched_getparam(pid_t pid, struct sched_param *param) {
    int (*real)(pid_t, struct sched_param *) =
        (int (*)(pid_t, struct sched_param *))lj_next("sched_getparam");
    int (*getsched)(pid_t) = (int (*)(pid_t))lj_next("sched_getscheduler");
    if (!real || !getsched) {
        errno = ENOSYS;
        return -1;
    }
    int r = real(pid, param);
    int policy = getsched(pid);
    if (r == 0 && param && policy >= 0)
        lj_as_fifo(&policy, &param->sched_priority);
    return r;
}
