/*
 * The rest of the API: ringbuffer across a real-time thread from
 * jack_client_create_thread, uuids, versions, frame time, statistics,
 * aliases, monitoring, latencies, port queries, ties, metadata.
 *
 * Usage: misc NAME
 * Prints "CHECK <what> ok|FAIL ..." lines and "DONE failed=<n>".
 */
#include <jack/jack.h>
#include <jack/metadata.h>
#include <jack/ringbuffer.h>
#include <jack/session.h>
#include <jack/statistics.h>
#include <jack/thread.h>
#include <jack/transport.h>
#include <jack/uuid.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failed;
static jack_client_t *client;
static jack_port_t *in, *out, *tied_out, *cap1;

static void check(const char *what, int ok, long detail) {
    if (ok) {
        printf("CHECK %s ok\n", what);
    } else {
        printf("CHECK %s FAIL (%ld)\n", what, detail);
        failed++;
    }
}

/* ---- ringbuffer between a JACK-created thread and main ---- */
#define WORDS 400000
static jack_ringbuffer_t *rb;
static atomic_int writer_policy = -1, writer_prio = -1;

static void *writer(void *arg) {
    (void)arg;
    struct sched_param sp;
    int pol;
    pthread_getschedparam(pthread_self(), &pol, &sp);
    atomic_store(&writer_policy, pol);
    atomic_store(&writer_prio, sp.sched_priority);
    uint32_t next = 0;
    unsigned seed = 1;
    while (next < WORDS) {
        unsigned chunk = 1 + (rand_r(&seed) % 37);
        if (next % 2) {
            /* plain write */
            uint32_t buf[37];
            unsigned n = 0;
            while (n < chunk && next + n < WORDS) {
                buf[n] = next + n;
                n++;
            }
            size_t bytes = n * sizeof(uint32_t);
            if (jack_ringbuffer_write_space(rb) < bytes) {
                sched_yield();
                continue;
            }
            jack_ringbuffer_write(rb, (const char *)buf, bytes);
            next += n;
        } else {
            /* zero-copy write through the write vector */
            jack_ringbuffer_data_t v[2];
            jack_ringbuffer_get_write_vector(rb, v);
            size_t space = v[0].len + v[1].len;
            if (space < sizeof(uint32_t)) {
                sched_yield();
                continue;
            }
            uint32_t word = next;
            const char *src = (const char *)&word;
            for (size_t k = 0; k < sizeof word; k++) {
                if (k < v[0].len)
                    v[0].buf[k] = src[k];
                else
                    v[1].buf[k - v[0].len] = src[k];
            }
            jack_ringbuffer_write_advance(rb, sizeof word);
            next++;
        }
    }
    return NULL;
}

static int ring_test(void) {
    rb = jack_ringbuffer_create(1000); /* rounded up to 1024 */
    check("ringbuffer size rounded to a power of two", rb && rb->size == 1024 && rb->size_mask == 1023,
          rb ? (long)rb->size : -1);
    check("ringbuffer empty", jack_ringbuffer_read_space(rb) == 0 && jack_ringbuffer_write_space(rb) == 1023, 0);
    jack_ringbuffer_mlock(rb);
    pthread_t t;
    int prio = jack_client_real_time_priority(client);
    int r = jack_client_create_thread(client, &t, prio > 0 ? prio : 1, jack_is_realtime(client), writer, NULL);
    check("client_create_thread", r == 0, r);
    uint32_t expect = 0, bad = 0;
    while (expect < WORDS) {
        uint32_t w;
        if (jack_ringbuffer_read_space(rb) < sizeof w) {
            sched_yield();
            continue;
        }
        if (expect % 3 == 0) {
            jack_ringbuffer_peek(rb, (char *)&w, sizeof w);
            jack_ringbuffer_read_advance(rb, sizeof w);
        } else if (expect % 3 == 1) {
            jack_ringbuffer_data_t v[2];
            jack_ringbuffer_get_read_vector(rb, v);
            char *dst = (char *)&w;
            for (size_t k = 0; k < sizeof w; k++)
                dst[k] = k < v[0].len ? v[0].buf[k] : v[1].buf[k - v[0].len];
            jack_ringbuffer_read_advance(rb, sizeof w);
        } else {
            jack_ringbuffer_read(rb, (char *)&w, sizeof w);
        }
        if (w != expect)
            bad++;
        expect++;
    }
    check("ringbuffer: 400000 words in order across threads", bad == 0, bad);
    check("client_stop_thread", jack_client_stop_thread(client, t) == 0, 0);
    if (jack_is_realtime(client))
        check("created thread runs SCHED_FIFO at the client priority",
              atomic_load(&writer_policy) == SCHED_FIFO && atomic_load(&writer_prio) == prio,
              atomic_load(&writer_policy) * 1000 + atomic_load(&writer_prio));
    jack_ringbuffer_reset(rb);
    check("ringbuffer reset", jack_ringbuffer_read_space(rb) == 0, 0);
    jack_ringbuffer_free(rb);
    return 0;
}

/* ---- process: times and buffers ---- */
static atomic_uint last_ft, bad_times, skipped, tie_ok, cycles;
static atomic_uint since_bad, zero_copy, zero_copy_bad;

/* jack_frames_since_cycle_start, checked against the clock read just
 * before and after it (a thread stalled in between widens the bracket,
 * it cannot fail the check); skipped when the cycle moved on meanwhile. */
static void check_frames_since(jack_nframes_t n, jack_time_t cu, float pu) {
    jack_time_t before = jack_get_time();
    jack_nframes_t since = jack_frames_since_cycle_start(client);
    jack_time_t after = jack_get_time();
    jack_nframes_t cur2;
    jack_time_t cu2, nu2;
    float pu2;
    if (jack_get_cycle_times(client, &cur2, &cu2, &nu2, &pu2) != 0 || cu2 != cu || pu <= 0)
        return;
    double lo = ((double)before - (double)cu) * n / pu - 2;
    double hi = ((double)after - (double)cu) * n / pu + 2;
    if ((double)since < lo || (double)since > hi)
        atomic_fetch_add(&since_bad, 1);
}

static int process(jack_nframes_t n, void *arg) {
    (void)arg;
    jack_nframes_t lft = jack_last_frame_time(client);
    unsigned prev = atomic_load(&last_ft);
    /* The frame time moves by whole periods: one, or more when the driver
     * skipped cycles after waking late (the machine stalled). */
    unsigned step = lft - prev;
    if (atomic_load(&cycles) > 0) {
        if (step == 0 || step % n != 0)
            atomic_fetch_add(&bad_times, 1);
        else if (step != n)
            atomic_fetch_add(&skipped, 1);
    }
    atomic_store(&last_ft, lft);
    jack_nframes_t cur;
    jack_time_t cu, nu;
    float pu;
    if (jack_get_cycle_times(client, &cur, &cu, &nu, &pu) != 0 || cur != lft || nu <= cu)
        atomic_fetch_add(&bad_times, 1);
    else
        check_frames_since(n, cu, pu);
    float *i = jack_port_get_buffer(in, n);
    float *t = jack_port_get_buffer(tied_out, n);
    /* The test connects only system:capture_1 to "in": one source, no copy. */
    if (jack_port_connected(in) == 1) {
        if (i == jack_port_get_buffer(cap1, n))
            atomic_fetch_add(&zero_copy, 1);
        else
            atomic_fetch_add(&zero_copy_bad, 1);
    }
    if (t == i)
        atomic_fetch_add(&tie_ok, 1);
    memset(jack_port_get_buffer(out, n), 0, n * sizeof(float));
    atomic_fetch_add(&cycles, 1);
    return 0;
}

static int count(const char **l) {
    int n = 0;
    while (l && l[n])
        n++;
    return n;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *name = argc > 1 ? argv[1] : "misc";
    client = jack_client_open(name, JackNoStartServer | JackUseExactName, NULL);
    if (!client) {
        printf("FAIL open\n");
        return 1;
    }
    in = jack_port_register(client, "in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    out = jack_port_register(client, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    tied_out = jack_port_register(client, "tied", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    jack_port_t *mport = jack_port_register(client, "midi", JACK_DEFAULT_MIDI_TYPE, JackPortIsInput, 0);
    check("ports", in && out && tied_out && mport, 0);
    check("port_tie", jack_port_tie(in, tied_out) == 0, 0);
    cap1 = jack_port_by_name(client, "system:capture_1");
    jack_set_process_callback(client, process, NULL);
    check("activate", jack_activate(client) == 0, 0);
    check("client thread id", jack_client_thread_id(client) != 0 &&
                                  !pthread_equal(jack_client_thread_id(client), pthread_self()), 0);

    /* versions */
    int maj = 0, min_ = 0, mic = 0, proto = 0;
    jack_get_version(&maj, &min_, &mic, &proto);
    check("get_version", maj == 1 && jack_get_version_string() && strlen(jack_get_version_string()) > 0, maj);

    /* uuids */
    char *us = jack_client_get_uuid(client);
    jack_uuid_t cu = 0;
    check("client uuid parses", us && jack_uuid_parse(us, &cu) == 0 && !jack_uuid_empty(cu), 0);
    char *us2 = jack_get_uuid_for_client_name(client, name);
    check("uuid for client name", us2 && strcmp(us, us2) == 0, 0);
    char *nm = jack_get_client_name_by_uuid(client, us);
    check("client name by uuid", nm && strcmp(nm, name) == 0, 0);
    check("unknown client name -> NULL", jack_get_uuid_for_client_name(client, "no-such-client") == NULL, 0);
    jack_free(us);
    jack_free(us2);
    jack_free(nm);
    jack_uuid_t pu = jack_port_uuid(in), po = jack_port_uuid(out);
    check("port uuids distinct and set", pu && po && jack_uuid_compare(pu, po) != 0, 0);
    char ubuf[JACK_UUID_STRING_SIZE];
    jack_uuid_unparse(pu, ubuf);
    jack_uuid_t back;
    jack_uuid_copy(&back, 0);
    check("uuid unparse/parse round trip", jack_uuid_parse(ubuf, &back) == 0 && back == pu, 0);
    jack_uuid_clear(&back);
    check("uuid clear/empty", jack_uuid_empty(back), 0);
    check("port uuid generate/index", jack_uuid_to_index(jack_port_uuid_generate(41)) == 41, 0);
    check("client_get_pid", jack_get_client_pid(name) == getpid(), jack_get_client_pid(name));

    /* ports and queries */
    check("port_type / type_id", strcmp(jack_port_type(mport), JACK_DEFAULT_MIDI_TYPE) == 0 &&
                                     jack_port_type_id(in) != jack_port_type_id(mport),
          0);
    check("port short name", strcmp(jack_port_short_name(in), "in") == 0, 0);
    check("port_is_mine", jack_port_is_mine(client, in) &&
                              !jack_port_is_mine(client, jack_port_by_name(client, "system:capture_1")),
          0);
    check("port buffer sizes", jack_port_type_get_buffer_size(client, JACK_DEFAULT_AUDIO_TYPE) ==
                                   jack_get_buffer_size(client) * sizeof(float) &&
                                   jack_port_type_get_buffer_size(client, JACK_DEFAULT_MIDI_TYPE) > 0,
          0);
    const char **phys = jack_get_ports(client, "system:.*", NULL, JackPortIsPhysical | JackPortIsOutput);
    check("get_ports(regex, flags)", count(phys) == 2 && strstr(phys[0], "capture"), count(phys));
    jack_free(phys);
    const char **midi = jack_get_ports(client, NULL, "midi", 0);
    check("get_ports(type regex)", count(midi) == 1, count(midi));
    jack_free(midi);
    check("connect", jack_connect(client, "system:capture_1", jack_port_name(in)) == 0, 0);
    check("port_connected / connected_to", jack_port_connected(in) == 1 &&
                                               jack_port_connected_to(in, "system:capture_1"),
          jack_port_connected(in));
    const char **conns = jack_port_get_connections(in);
    check("port_get_connections", count(conns) == 1 && strcmp(conns[0], "system:capture_1") == 0, count(conns));
    jack_free(conns);
    const char **all =
        jack_port_get_all_connections(client, jack_port_by_name(client, "system:capture_1"));
    check("port_get_all_connections", count(all) == 1, count(all));
    jack_free(all);

    /* latencies (JACK's default rule: outputs follow inputs) */
    jack_nframes_t bs = jack_get_buffer_size(client);
    usleep(100000);
    jack_latency_range_t r;
    jack_port_get_latency_range(in, JackCaptureLatency, &r);
    check("input capture latency from system:capture", r.min == bs && r.max == bs, r.max);
    jack_port_get_latency_range(out, JackCaptureLatency, &r);
    /* Union over all inputs: the unconnected MIDI input contributes [0, 0]. */
    check("output capture latency by the default rule", r.min == 0 && r.max == bs, r.max);
    check("port_get_latency (old API)", jack_port_get_latency(out) == bs, jack_port_get_latency(out));
    check("recompute_total_latencies", jack_recompute_total_latencies(client) == 0, 0);

    /* aliases */
    char a1[320], a2[320];
    char *al[2] = {a1, a2};
    check("set_alias", jack_port_set_alias(out, "misc-alias:left") == 0, 0);
    check("get_aliases", jack_port_get_aliases(out, al) == 1 && strcmp(a1, "misc-alias:left") == 0, 0);
    check("port_by_name finds an alias", jack_port_by_name(client, "misc-alias:left") == out, 0);
    check("unset_alias", jack_port_unset_alias(out, "misc-alias:left") == 0 && jack_port_get_aliases(out, al) == 0,
          0);

    /* monitoring */
    jack_port_request_monitor(in, 1);
    jack_port_request_monitor(in, 1);
    jack_port_request_monitor(in, 0);
    check("request_monitor counts", jack_port_monitoring_input(in) == 1, 0);
    jack_port_ensure_monitor(in, 0);
    check("ensure_monitor off", jack_port_monitoring_input(in) == 0, 0);
    check("request_monitor_by_name",
          jack_port_request_monitor_by_name(client, jack_port_name(in), 1) == 0 && jack_port_monitoring_input(in),
          0);

    /* metadata */
    check("set_property", jack_set_property(client, pu, JACK_METADATA_PRETTY_NAME, "Input", NULL) == 0 &&
                              jack_set_property(client, pu, "urn:x", "1", "text/plain") == 0,
          0);
    char *v = NULL, *ty = NULL;
    check("get_property", jack_get_property(pu, JACK_METADATA_PRETTY_NAME, &v, &ty) == 0 && v &&
                              strcmp(v, "Input") == 0 && ty == NULL,
          0);
    jack_free(v);
    jack_description_t d;
    check("get_properties", jack_get_properties(pu, &d) == 2 && d.subject == pu && d.property_cnt == 2, 0);
    jack_free_description(&d, 0);
    jack_description_t *ds = NULL;
    int nd = jack_get_all_properties(&ds);
    check("get_all_properties", nd >= 1 && ds, nd);
    for (int i = 0; i < nd; i++)
        jack_free_description(&ds[i], 0);
    jack_free(ds);
    check("remove_property", jack_remove_property(client, pu, "urn:x") == 0 &&
                                 jack_get_property(pu, "urn:x", &v, &ty) != 0,
          0);
    check("remove_properties", jack_remove_properties(client, pu) == 1, 0);
    check("remove_all_properties", jack_remove_all_properties(client) == 0, 0);

    /* ringbuffer + thread */
    ring_test();

    /* times and statistics, after a second of cycles */
    sleep(1);
    check("process ran", atomic_load(&cycles) > 50, atomic_load(&cycles));
    check("last_frame_time advances by whole periods; cycle times consistent",
          atomic_load(&bad_times) <= 2, atomic_load(&bad_times));
    printf("NOTE cycles after a driver skip-ahead: %u\n", atomic_load(&skipped));
    check("frames_since_cycle_start agrees with the clock", atomic_load(&since_bad) == 0,
          atomic_load(&since_bad));
    check("one connection: the input's buffer is the source's (zero copy)",
          atomic_load(&zero_copy) > 50 && atomic_load(&zero_copy_bad) == 0, atomic_load(&zero_copy_bad));
    check("tied output's buffer is the input's", atomic_load(&tie_ok) == atomic_load(&cycles), atomic_load(&tie_ok));
    jack_nframes_t f1 = jack_frame_time(client);
    usleep(50000);
    jack_nframes_t f2 = jack_frame_time(client);
    long df = (long)(f2 - f1);
    long expect = (long)jack_get_sample_rate(client) / 20;
    check("frame_time advances with the clock", df > expect / 2 && df < expect * 3, df);
    jack_time_t now = jack_get_time();
    jack_nframes_t fn = jack_time_to_frames(client, now);
    jack_time_t back_t = jack_frames_to_time(client, fn);
    long dt = (long)back_t - (long)now;
    check("time_to_frames / frames_to_time round trip", dt > -100 && dt < 100, dt);
    float load = jack_cpu_load(client);
    check("cpu_load in range", load >= 0 && load <= 100, (long)load);
    check("max delayed usecs", jack_get_max_delayed_usecs(client) >= 0, 0);
    jack_reset_max_delayed_usecs(client);
    check("xrun delayed usecs", jack_get_xrun_delayed_usecs(client) >= 0, 0);
    check("untie", jack_port_untie(tied_out) == 0 && jack_port_untie(tied_out) != 0, 0);
    check("port_disconnect", jack_port_disconnect(client, in) == 0 && jack_port_connected(in) == 0, 0);
    check("port_unregister", jack_port_unregister(client, mport) == 0 &&
                                 jack_port_by_name(client, "misc:midi") == NULL,
          0);

    /* A tie ends with its input: once the input is unregistered and its id
       reused by another client, the output must give its own buffer, never
       the other client's. */
    jack_port_t *tin = jack_port_register(client, "tie_in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    jack_port_t *tout = jack_port_register(client, "tie_out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    float *own = tout ? jack_port_get_buffer(tout, bs) : NULL;
    check("tie a second pair", tin && tout && jack_port_tie(tin, tout) == 0 &&
                                   jack_port_get_buffer(tout, bs) == jack_port_get_buffer(tin, bs) &&
                                   own != jack_port_get_buffer(tin, bs),
          0);
    int tin_id = -1;
    for (int k = 0; k < 4096 && tin_id < 0; k++)
        if (tin && jack_port_by_id(client, k) == tin)
            tin_id = k;
    check("unregister the tied input", tin_id >= 0 && jack_port_unregister(client, tin) == 0, tin_id);
    jack_client_t *other = jack_client_open("misc-other", JackNoStartServer | JackUseExactName, NULL);
    jack_port_t *reused = NULL;
    for (int k = 0; k < 8 && other && !reused; k++) {
        char pn[16];
        snprintf(pn, sizeof pn, "r%d", k);
        jack_port_t *q = jack_port_register(other, pn, JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
        if (q && jack_port_by_id(client, tin_id) != NULL)
            reused = q;
    }
    check("another client reuses the input's id", reused != NULL, 0);
    if (reused) {
        /* Each client maps the shared memory itself: compare contents. */
        float *theirs = jack_port_get_buffer(reused, bs);
        theirs[0] = 12345.0f;
        float *mine = jack_port_get_buffer(tout, bs);
        check("the tied output gives its own buffer, not the other client's",
              mine == own && mine && mine[0] != 12345.0f, (long)(mine && mine[0] == 12345.0f));
    }
    check("the output was untied with its input", tout && jack_port_untie(tout) != 0, 0);
    check("close the other client", other && jack_client_close(other) == 0, 0);
    check("close", jack_client_close(client) == 0, 0);
    printf("DONE failed=%d\n", failed);
    return failed ? 1 : 0;
}
