/*
 * Every JACK callback, with its arguments and the thread it runs on.
 *
 * Usage: callbacks NAME
 * Registers all callbacks, two audio and two MIDI ports, activates, prints
 * "READY", then obeys commands on stdin, one per line:
 *   rename     rename port "out" to "renamed"
 *   stall      make the next process callback overrun its period (an xrun)
 *   dump       print what the real-time callbacks recorded
 *   exit       close the client and exit
 * Notification callbacks print "CB <name> <args...> <thread>" as they come;
 * <thread> is "rt" (jack_client_thread_id), "main", or "notify<N>" (the N-th
 * other thread seen). Real-time callbacks only record (no stdio on the
 * process thread); "dump" prints the record. On shutdown the program prints
 * the shutdown line and exits 0.
 */
#include <jack/jack.h>
#include <jack/metadata.h>
#include <jack/midiport.h>
#include <jack/session.h>
#include <jack/uuid.h>
#include <jack/transport.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static jack_client_t *client;
static jack_port_t *in, *out, *min, *mout;
static pthread_t main_thread;
static pthread_t others[8];
static int n_others;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const char *who(void) {
    static __thread char buf[32];
    pthread_t me = pthread_self();
    if (pthread_equal(me, main_thread))
        return "main";
    jack_native_thread_t rt = jack_client_thread_id(client);
    if (rt && pthread_equal(me, rt))
        return "rt";
    pthread_mutex_lock(&lock);
    int i;
    for (i = 0; i < n_others; i++)
        if (pthread_equal(others[i], me))
            break;
    if (i == n_others && n_others < 8)
        others[n_others++] = me;
    pthread_mutex_unlock(&lock);
    snprintf(buf, sizeof buf, "notify%d", i + 1);
    return buf;
}

/* Real-time records. */
static atomic_int rt_process_calls, rt_process_on_rt, rt_bad_nframes, rt_init_calls, rt_init_on_rt;
static atomic_int rt_sync_calls, rt_sync_on_rt, rt_sync_state = -1;
static atomic_int rt_tb_calls, rt_tb_on_rt, rt_tb_newpos;
static atomic_int rt_bufsize_on_rt, rt_first_bufsize;
static atomic_uint announced, last_nframes, gbs_mismatch;
static atomic_int stall;

static int is_rt(void) {
    jack_native_thread_t rt = jack_client_thread_id(client);
    return rt && pthread_equal(pthread_self(), rt);
}

static int process(jack_nframes_t n, void *arg) {
    (void)arg;
    atomic_fetch_add(&rt_process_calls, 1);
    if (is_rt())
        atomic_fetch_add(&rt_process_on_rt, 1);
    if (n != atomic_load(&announced))
        atomic_fetch_add(&rt_bad_nframes, 1);
    if (n != jack_get_buffer_size(client))
        atomic_fetch_add(&gbs_mismatch, 1);
    atomic_store(&last_nframes, n);
    float *o = jack_port_get_buffer(out, n);
    float *i = jack_port_get_buffer(in, n);
    memcpy(o, i, n * sizeof(float));
    void *mo = jack_port_get_buffer(mout, n);
    jack_midi_clear_buffer(mo);
    (void)jack_port_get_buffer(min, n);
    if (atomic_exchange(&stall, 0)) {
        /* Overrun: three periods of busy waiting. */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        double limit = 3.0 * n / jack_get_sample_rate(client);
        do {
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < limit);
    }
    return 0;
}

static void thread_init(void *arg) {
    (void)arg;
    atomic_fetch_add(&rt_init_calls, 1);
    if (is_rt())
        atomic_fetch_add(&rt_init_on_rt, 1);
}

static int bufsize(jack_nframes_t n, void *arg) {
    (void)arg;
    if (is_rt()) {
        /* jackd calls it once on the process thread before the first cycle. */
        atomic_fetch_add(&rt_bufsize_on_rt, 1);
        atomic_store(&rt_first_bufsize, (int)n);
    } else {
        printf("CB bufsize %u %s\n", n, who());
    }
    atomic_store(&announced, n);
    return 0;
}

static int srate(jack_nframes_t n, void *arg) {
    (void)arg;
    printf("CB srate %u %s\n", n, who());
    return 0;
}

static void client_reg(const char *name, int reg, void *arg) {
    (void)arg;
    printf("CB client_registration %s %d %s\n", name, reg, who());
}

static void port_reg(jack_port_id_t id, int reg, void *arg) {
    (void)arg;
    jack_port_t *p = jack_port_by_id(client, id);
    printf("CB port_registration %s %d %s\n", reg && p ? jack_port_name(p) : "-", reg, who());
}

static void port_connect(jack_port_id_t a, jack_port_id_t b, int c, void *arg) {
    (void)arg;
    jack_port_t *pa = jack_port_by_id(client, a), *pb = jack_port_by_id(client, b);
    printf("CB port_connect %s %s %d %s\n", pa ? jack_port_name(pa) : "-", pb ? jack_port_name(pb) : "-",
           c, who());
}

static void port_rename(jack_port_id_t id, const char *old, const char *new_, void *arg) {
    (void)arg;
    (void)id;
    printf("CB port_rename %s %s %s\n", old, new_, who());
}

static int graph_order(void *arg) {
    (void)arg;
    printf("CB graph_order %s\n", who());
    return 0;
}

static int xrun(void *arg) {
    (void)arg;
    printf("CB xrun %s\n", who());
    return 0;
}

static void latency(jack_latency_callback_mode_t mode, void *arg) {
    (void)arg;
    /* As a real client would: pass the input range through to the output. */
    jack_latency_range_t r;
    if (mode == JackCaptureLatency) {
        jack_port_get_latency_range(in, mode, &r);
        r.min += 32;
        r.max += 32;
        jack_port_set_latency_range(out, mode, &r);
    } else {
        jack_port_get_latency_range(out, mode, &r);
        r.min += 32;
        r.max += 32;
        jack_port_set_latency_range(in, mode, &r);
    }
    printf("CB latency %d %s\n", (int)mode, who());
}

static void freewheel(int starting, void *arg) {
    (void)arg;
    printf("CB freewheel %d %s\n", starting, who());
}

static void property(jack_uuid_t subject, const char *key, jack_property_change_t change, void *arg) {
    (void)arg;
    char u[JACK_UUID_STRING_SIZE];
    jack_uuid_unparse(subject, u);
    jack_uuid_t me;
    char *mine = jack_client_get_uuid(client);
    jack_uuid_parse(mine, &me);
    jack_free(mine);
    printf("CB property %s %s %d %s\n", jack_uuid_compare(subject, me) == 0 ? "self" : u,
           key ? key : "(null)", (int)change, who());
}

static atomic_int shut;

static void shutdown_cb(void *arg) {
    (void)arg;
    printf("CB shutdown %s\n", who());
    atomic_store(&shut, 1);
}

static void info_shutdown(jack_status_t code, const char *reason, void *arg) {
    (void)arg;
    printf("CB info_shutdown %d %s [%s]\n", (int)code, who(), reason);
    atomic_store(&shut, 1);
}

static int sync_cb(jack_transport_state_t state, jack_position_t *pos, void *arg) {
    (void)arg;
    (void)pos;
    atomic_fetch_add(&rt_sync_calls, 1);
    if (is_rt())
        atomic_fetch_add(&rt_sync_on_rt, 1);
    atomic_store(&rt_sync_state, (int)state);
    return 1;
}

static void timebase(jack_transport_state_t state, jack_nframes_t n, jack_position_t *pos, int new_pos,
                     void *arg) {
    (void)arg;
    (void)state;
    (void)n;
    atomic_fetch_add(&rt_tb_calls, 1);
    if (is_rt())
        atomic_fetch_add(&rt_tb_on_rt, 1);
    if (new_pos)
        atomic_fetch_add(&rt_tb_newpos, 1);
    pos->valid = JackPositionBBT;
    pos->bar = 1;
    pos->beat = 1;
    pos->tick = 0;
    pos->beats_per_bar = 4;
    pos->beat_type = 4;
    pos->ticks_per_beat = 1920;
    pos->beats_per_minute = 120;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    main_thread = pthread_self();
    const char *name = argc > 1 ? argv[1] : "cbtest";
    jack_status_t st;
    client = jack_client_open(name, JackNoStartServer | JackUseExactName, &st);
    if (!client) {
        printf("FAIL open status=0x%x\n", st);
        return 1;
    }
    int r = 0;
    r |= jack_set_process_callback(client, process, NULL);
    r |= jack_set_thread_init_callback(client, thread_init, NULL);
    r |= jack_set_buffer_size_callback(client, bufsize, NULL);
    r |= jack_set_sample_rate_callback(client, srate, NULL);
    r |= jack_set_client_registration_callback(client, client_reg, NULL);
    r |= jack_set_port_registration_callback(client, port_reg, NULL);
    r |= jack_set_port_connect_callback(client, port_connect, NULL);
    r |= jack_set_port_rename_callback(client, port_rename, NULL);
    r |= jack_set_graph_order_callback(client, graph_order, NULL);
    r |= jack_set_xrun_callback(client, xrun, NULL);
    r |= jack_set_latency_callback(client, latency, NULL);
    r |= jack_set_freewheel_callback(client, freewheel, NULL);
    r |= jack_set_property_change_callback(client, property, NULL);
    jack_on_shutdown(client, shutdown_cb, NULL);
    jack_on_info_shutdown(client, info_shutdown, NULL);
    r |= jack_set_sync_callback(client, sync_cb, NULL);
    if (r) {
        printf("FAIL setting callbacks\n");
        return 1;
    }
    in = jack_port_register(client, "in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    out = jack_port_register(client, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    min = jack_port_register(client, "midi_in", JACK_DEFAULT_MIDI_TYPE, JackPortIsInput, 0);
    mout = jack_port_register(client, "midi_out", JACK_DEFAULT_MIDI_TYPE, JackPortIsOutput, 0);
    if (!in || !out || !min || !mout) {
        printf("FAIL ports\n");
        return 1;
    }
    if (jack_activate(client)) {
        printf("FAIL activate\n");
        return 1;
    }
    /* Callbacks cannot change on an active client (jackd's rule). */
    if (jack_set_process_callback(client, process, NULL) == 0)
        printf("FAIL callback accepted while active\n");
    if (jack_set_timebase_callback(client, 0, timebase, NULL) != 0)
        printf("FAIL timebase\n");
    printf("READY %s\n", jack_get_client_name(client));
    char line[256];
    while (!atomic_load(&shut) && fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "rename", 6) == 0) {
            if (jack_port_rename(client, out, "renamed") != 0)
                printf("FAIL rename\n");
        } else if (strncmp(line, "stall", 5) == 0) {
            atomic_store(&stall, 1);
        } else if (strncmp(line, "dump", 4) == 0) {
            printf("RT process=%d on_rt=%d bad_nframes=%d gbs_mismatch=%u last_nframes=%u "
                   "init=%d init_on_rt=%d bufsize_on_rt=%d first_bufsize=%d sync=%d sync_on_rt=%d "
                   "sync_state=%d timebase=%d tb_on_rt=%d tb_newpos=%d\n",
                   rt_process_calls, rt_process_on_rt, rt_bad_nframes, gbs_mismatch, last_nframes,
                   rt_init_calls, rt_init_on_rt, rt_bufsize_on_rt, rt_first_bufsize, rt_sync_calls,
                   rt_sync_on_rt, rt_sync_state, rt_tb_calls, rt_tb_on_rt, rt_tb_newpos);
        } else if (strncmp(line, "exit", 4) == 0) {
            break;
        }
    }
    /* Also after a shutdown: closing a client whose server is gone must work. */
    int rc = jack_client_close(client);
    printf("DONE close=%d\n", rc);
    return 0;
}
