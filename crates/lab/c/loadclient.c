/*
 * loadclient: the one JACK load client of `resound bench jackd`.
 *
 * Compiled against the distribution's JACK headers and linked with -ljack,
 * so the same binary runs on Debian's jackd2 (with the distribution's
 * libjack) and on resound (with resound's libjack.so.0 first in the loader
 * path). One client of a chain capture -> c1 -> ... -> cN -> playback.
 *
 * Usage: loadclient -n NAME -b BUSY_PERCENT -p first|middle|last
 *                   [-f FROM_PORT] [-O] [-s SECONDS_OF_RECORDS] -o OUT.csv
 * (-O: also connect the output to the first playback port whatever the
 * position, for graphs where several clients feed the output.)
 *
 * The process thread is the application's own loop (jack_set_process_thread
 * with jack_cycle_wait / jack_cycle_signal, what libjack's callback loop does
 * inside), so the client sees libjack's two halves apart:
 *   wake_ns    return from jack_cycle_wait (CLOCK_MONOTONIC)
 *   wait_cpu   thread CPU time spent inside jack_cycle_wait: libjack's work
 *              after the wake-up (plus the short way into the sleep)
 *   ret_ns     end of the body (the "callback return")
 *   sig_ns     return from jack_cycle_signal (waking the downstream)
 *   xruns      the server's xruns so far (the xrun callback's count)
 *   start_ns   the cycle start jack_get_cycle_times reports (server's own,
 *              carried over to CLOCK_MONOTONIC by its age on jack_get_time)
 * The body copies `in` to `out` and burns the thread CPU clock until BUSY
 * percent of the period is used. The first client writes its wake_ns into
 * the first samples of its output (a stamp: three floats of 22 bits each,
 * integers, hence exact, and a marker); every client copies it on; the last
 * reports ret_ns - stamp (the server-independent end-to-end time); each
 * client flags a block whose stamp is missing or repeated (stale) as lost.
 * The bench joins the clients' records of one cycle by the stamp.
 *
 * Records go to a preallocated array (no allocation, no I/O on the process
 * thread). SIGTERM/SIGINT: the client deactivates, closes and writes OUT.csv
 * (one row per cycle, then "#xruns N" and "#full 0|1" lines), prints
 * {"event":"done","cycles":N} and exits 0. After activation (and
 * connection) it prints {"event":"ready"} on stdout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jack/jack.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MARKER 12345.0f
#define STAMP_BITS 22
#define STAMP_MASK ((1u << STAMP_BITS) - 1)

enum position { FIRST, MIDDLE, LAST };

/* One cycle as this client saw it. */
struct record {
    uint64_t start_ns;  /* cycle start (jack_get_cycle_times), ns */
    uint64_t wake_ns;   /* return from jack_cycle_wait */
    uint64_t wait_cpu;  /* thread CPU spent inside jack_cycle_wait */
    uint64_t ret_ns;    /* end of the body */
    uint64_t sig_ns;    /* return from jack_cycle_signal */
    uint64_t stamp_ns;  /* the stamp read from the input (0: none) */
    int32_t lost;       /* stamp missing, or the previous block's (stale) */
    int32_t xruns;      /* xruns the xrun callback has seen so far */
};

static jack_client_t *client;
static jack_port_t *in_port, *out_port;
static enum position pos = MIDDLE;
static double busy_pct;
static struct record *recs;
static size_t cap;
static atomic_size_t count;
static atomic_int stopping;
static atomic_int xruns;
static volatile sig_atomic_t got_signal;
static uint64_t last_stamp; /* process thread only */

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Packs a u64 into three floats of 22 bits each (exact: < 2^24) and a marker. */
static void stamp_write(float *buf, uint64_t v)
{
    buf[0] = (float)(v & STAMP_MASK);
    buf[1] = (float)((v >> STAMP_BITS) & STAMP_MASK);
    buf[2] = (float)((v >> (2 * STAMP_BITS)) & STAMP_MASK);
    buf[3] = MARKER;
}

/* The stamp in buf, or 0 when there is none. */
static uint64_t stamp_read(const float *buf)
{
    if (buf[3] != MARKER)
        return 0;
    uint64_t v = 0;
    for (int i = 2; i >= 0; i--) {
        float f = buf[i];
        if (!(f >= 0.0f && f <= (float)STAMP_MASK) || f != floorf(f))
            return 0;
        v = (v << STAMP_BITS) | (uint64_t)f;
    }
    return v;
}

/* The body: copy, stamp, burn. Real-time safe. */
static void body(jack_nframes_t n, uint64_t wake, uint64_t cpu0, struct record *r)
{
    float *in = jack_port_get_buffer(in_port, n);
    float *out = jack_port_get_buffer(out_port, n);
    jack_nframes_t cur_frames;
    jack_time_t cur_us, next_us;
    float period_us;
    if (jack_get_cycle_times(client, &cur_frames, &cur_us, &next_us, &period_us) == 0) {
        /* JACK's clock need not be CLOCK_MONOTONIC (jackd2 may use
         * CLOCK_MONOTONIC_RAW): carry the start over by its age now. */
        jack_time_t jack_now = jack_get_time();
        uint64_t mono_now = clock_ns(CLOCK_MONOTONIC);
        r->start_ns = mono_now - (uint64_t)(jack_now - cur_us) * 1000;
    } else {
        r->start_ns = 0;
        period_us = (float)n * 1e6f / (float)jack_get_sample_rate(client);
    }
    memcpy(out, in, sizeof(float) * n);
    r->stamp_ns = 0;
    r->lost = 0;
    if (n >= 4) {
        if (pos == FIRST) {
            stamp_write(out, wake);
            r->stamp_ns = wake;
        } else {
            r->stamp_ns = stamp_read(in);
        }
        /* Stale: the block of the cycle before, again. */
        if (r->stamp_ns == 0 || r->stamp_ns == last_stamp)
            r->lost = 1;
        last_stamp = r->stamp_ns;
    }
    uint64_t budget = (uint64_t)(busy_pct / 100.0 * period_us * 1000.0);
    while (clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0 < budget)
        ;
}

/* The process thread: the application's own cycle loop. */
static void *process_thread(void *arg)
{
    (void)arg;
    uint64_t cpu_before_wait = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (;;) {
        jack_nframes_t n = jack_cycle_wait(client);
        uint64_t wake = clock_ns(CLOCK_MONOTONIC);
        uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        if (n == 0)
            return NULL;
        struct record scratch;
        size_t i = atomic_load_explicit(&count, memory_order_relaxed);
        int keep = i < cap && !atomic_load_explicit(&stopping, memory_order_relaxed);
        struct record *r = keep ? &recs[i] : &scratch;
        r->wake_ns = wake;
        r->xruns = atomic_load_explicit(&xruns, memory_order_relaxed);
        r->wait_cpu = cpu0 - cpu_before_wait;
        body(n, wake, cpu0, r);
        r->ret_ns = clock_ns(CLOCK_MONOTONIC);
        jack_cycle_signal(client, 0);
        r->sig_ns = clock_ns(CLOCK_MONOTONIC);
        cpu_before_wait = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        if (keep)
            atomic_store_explicit(&count, i + 1, memory_order_release);
    }
}

static int on_xrun(void *arg)
{
    (void)arg;
    atomic_fetch_add(&xruns, 1);
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    got_signal = 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: loadclient -n NAME -b BUSY_PERCENT -p first|middle|last "
                    "[-f FROM_PORT] [-O] [-s SECONDS_OF_RECORDS] -o OUT.csv\n");
    exit(2);
}

/* Connects FROM (or the first physical capture port) to our input, and,
 * for the last client or with -O, our output to the first physical
 * playback port. */
static int connect_ports(const char *from, int to_playback)
{
    const char **phys = NULL;
    if (!from) {
        phys = jack_get_ports(client, NULL, JACK_DEFAULT_AUDIO_TYPE,
                              JackPortIsPhysical | JackPortIsOutput);
        if (!phys || !phys[0]) {
            fprintf(stderr, "loadclient: the server has no physical capture port\n");
            return -1;
        }
        from = phys[0];
    }
    int e = jack_connect(client, from, jack_port_name(in_port));
    if (e && e != EEXIST) {
        fprintf(stderr, "loadclient: cannot connect %s to %s (%d)\n", from,
                jack_port_name(in_port), e);
        return -1;
    }
    jack_free(phys);
    if (pos != LAST && !to_playback)
        return 0;
    phys = jack_get_ports(client, NULL, JACK_DEFAULT_AUDIO_TYPE,
                          JackPortIsPhysical | JackPortIsInput);
    if (!phys || !phys[0]) {
        fprintf(stderr, "loadclient: the server has no physical playback port\n");
        return -1;
    }
    e = jack_connect(client, jack_port_name(out_port), phys[0]);
    jack_free(phys);
    if (e && e != EEXIST) {
        fprintf(stderr, "loadclient: cannot connect to playback (%d)\n", e);
        return -1;
    }
    return 0;
}

static int write_records(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "loadclient: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "start_ns,wake_ns,wait_cpu_ns,ret_ns,sig_ns,stamp_ns,lost,xruns\n");
    size_t n = atomic_load_explicit(&count, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        const struct record *r = &recs[i];
        fprintf(f, "%llu,%llu,%llu,%llu,%llu,%llu,%d,%d\n", (unsigned long long)r->start_ns,
                (unsigned long long)r->wake_ns, (unsigned long long)r->wait_cpu,
                (unsigned long long)r->ret_ns, (unsigned long long)r->sig_ns,
                (unsigned long long)r->stamp_ns, r->lost, r->xruns);
    }
    fprintf(f, "#xruns %d\n", atomic_load(&xruns));
    fprintf(f, "#full %d\n", n >= cap);
    return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *name = NULL, *from = NULL, *out = NULL;
    double seconds = 120.0;
    int opt, to_playback = 0;
    while ((opt = getopt(argc, argv, "n:b:p:f:s:o:O")) != -1) {
        switch (opt) {
        case 'n': name = optarg; break;
        case 'b': busy_pct = atof(optarg); break;
        case 'f': from = optarg; break;
        case 's': seconds = atof(optarg); break;
        case 'o': out = optarg; break;
        case 'O': to_playback = 1; break;
        case 'p':
            if (!strcmp(optarg, "first")) pos = FIRST;
            else if (!strcmp(optarg, "middle")) pos = MIDDLE;
            else if (!strcmp(optarg, "last")) pos = LAST;
            else usage();
            break;
        default: usage();
        }
    }
    if (!name || !out || busy_pct < 0 || busy_pct > 95 || seconds <= 0)
        usage();
    if (pos != FIRST && !from) {
        fprintf(stderr, "loadclient: -f FROM_PORT is needed unless -p first\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    jack_status_t st;
    client = jack_client_open(name, JackNoStartServer | JackUseExactName, &st);
    if (!client) {
        fprintf(stderr, "loadclient: cannot open client %s (status 0x%x)\n", name, st);
        return 1;
    }
    double rate = jack_get_sample_rate(client);
    double frames = jack_get_buffer_size(client);
    cap = (size_t)(seconds * rate / frames) + 16;
    recs = calloc(cap, sizeof *recs);
    if (!recs) {
        fprintf(stderr, "loadclient: cannot allocate %zu records\n", cap);
        return 1;
    }
    /* Touch the records now so no page fault lands on the process thread. */
    memset(recs, 0xff, cap * sizeof *recs);
    in_port = jack_port_register(client, "in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    out_port = jack_port_register(client, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    if (!in_port || !out_port) {
        fprintf(stderr, "loadclient: cannot register ports\n");
        return 1;
    }
    jack_set_xrun_callback(client, on_xrun, NULL);
    if (jack_set_process_thread(client, process_thread, NULL) || jack_activate(client)) {
        fprintf(stderr, "loadclient: cannot activate\n");
        return 1;
    }
    if (connect_ports(from, to_playback))
        return 1;
    printf("{\"event\":\"ready\"}\n");
    fflush(stdout);
    while (!got_signal)
        usleep(20000);
    atomic_store(&stopping, 1);
    jack_deactivate(client);
    jack_client_close(client);
    if (write_records(out))
        return 1;
    printf("{\"event\":\"done\",\"cycles\":%zu}\n", (size_t)atomic_load(&count));
    fflush(stdout);
    return 0;
}
