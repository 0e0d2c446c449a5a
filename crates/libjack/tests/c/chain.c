/*
 * Audio and MIDI through chains of JACK clients.
 *
 * Usage: chain MODE NAME [ARG]
 *   pass        audio in -> out and MIDI midi_in -> midi_out, unchanged
 *   threadpass  the same with jack_set_process_thread + jack_cycle_wait/_signal
 *   midigen ID  MIDI out: every cycle a 3-byte note (inline storage) at
 *               frame 1 and 8-byte sysex messages (out-of-line storage) at
 *               frames 0, 17, n/2 and n-1, each encoding the absolute frame
 *               (jack_last_frame_time + offset) and the generator's ID
 *   midicheck N MIDI in from N generators: every cycle must hold exactly N
 *               notes and 4N sysex messages, in time order, each sysex at the
 *               offset its encoded frame says (sample exact)
 *   quit N      process returns non-zero in its N-th cycle (jackd then
 *               deactivates the client); prints "QUIT" and "CYCLES n" later
 * Prints "READY" once active; SIGUSR1 restarts the counts (and the count of
 * xrun callbacks); on SIGTERM prints a summary line and exits.
 */
#include <jack/jack.h>
#include <jack/midiport.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static jack_client_t *client;
static jack_port_t *ain, *aout, *min, *mout;
static volatile sig_atomic_t quit;
static int gen_id, n_sources, quit_at;
static atomic_long cycles, ok_cycles, bad_cycles, events, lost, max_size_bad;
static atomic_int first_bad_reason;
static atomic_long xruns;

static void pass_cycle(jack_nframes_t n) {
    float *i = jack_port_get_buffer(ain, n);
    float *o = jack_port_get_buffer(aout, n);
    memcpy(o, i, n * sizeof(float));
    void *mi = jack_port_get_buffer(min, n);
    void *mo = jack_port_get_buffer(mout, n);
    jack_midi_clear_buffer(mo);
    uint32_t c = jack_midi_get_event_count(mi);
    for (uint32_t k = 0; k < c; k++) {
        jack_midi_event_t e;
        if (jack_midi_event_get(&e, mi, k) == 0) {
            jack_midi_data_t *d = jack_midi_event_reserve(mo, e.time, e.size);
            if (d)
                memcpy(d, e.buffer, e.size);
            else
                atomic_fetch_add(&lost, 1);
        }
    }
    atomic_fetch_add(&cycles, 1);
}

static int pass_process(jack_nframes_t n, void *arg) {
    (void)arg;
    pass_cycle(n);
    return 0;
}

static void *pass_thread(void *arg) {
    (void)arg;
    for (;;) {
        jack_nframes_t n = jack_cycle_wait(client);
        pass_cycle(n);
        jack_cycle_signal(client, 0);
    }
    return NULL;
}

static void encode(jack_midi_data_t *d, unsigned frame, int id) {
    d[0] = 0xf0;
    d[1] = (jack_midi_data_t)id;
    d[2] = frame & 0x7f;
    d[3] = (frame >> 7) & 0x7f;
    d[4] = (frame >> 14) & 0x7f;
    d[5] = (frame >> 21) & 0x7f;
    d[6] = 0x55;
    d[7] = 0xf7;
}

static int gen_process(jack_nframes_t n, void *arg) {
    (void)arg;
    void *mo = jack_port_get_buffer(mout, n);
    jack_midi_clear_buffer(mo);
    jack_nframes_t base = jack_last_frame_time(client);
    jack_nframes_t at[] = {0, 1, 17, n / 2, n - 1};
    for (int k = 0; k < 5; k++) {
        if (k == 1) {
            jack_midi_data_t note[3] = {0x90, (jack_midi_data_t)gen_id, (base + 1) & 0x7f};
            if (jack_midi_event_write(mo, 1, note, 3) != 0)
                atomic_fetch_add(&lost, 1);
            continue;
        }
        jack_midi_data_t *d = jack_midi_event_reserve(mo, at[k], 8);
        if (!d) {
            atomic_fetch_add(&lost, 1);
            continue;
        }
        encode(d, base + at[k], gen_id);
    }
    if (jack_midi_max_event_size(mo) < 8)
        atomic_fetch_add(&max_size_bad, 1);
    atomic_fetch_add(&cycles, 1);
    return 0;
}

static int check_process(jack_nframes_t n, void *arg) {
    (void)arg;
    void *mi = jack_port_get_buffer(min, n);
    jack_nframes_t base = jack_last_frame_time(client);
    uint32_t c = jack_midi_get_event_count(mi);
    int notes = 0, sysex = 0, bad = 0;
    jack_nframes_t prev = 0;
    for (uint32_t k = 0; k < c; k++) {
        jack_midi_event_t e;
        if (jack_midi_event_get(&e, mi, k) != 0) {
            bad = 1;
            continue;
        }
        if (e.time < prev || e.time >= n)
            bad = 2;
        prev = e.time;
        if (e.size == 3 && e.buffer[0] == 0x90) {
            notes++;
            if (e.time != 1 || e.buffer[2] != ((base + 1) & 0x7f))
                bad = 3;
        } else if (e.size == 8 && e.buffer[0] == 0xf0 && e.buffer[7] == 0xf7) {
            sysex++;
            unsigned f = e.buffer[2] | (e.buffer[3] << 7) | (e.buffer[4] << 14) | ((unsigned)e.buffer[5] << 21);
            if (f != ((base + e.time) & 0xfffffff))
                bad = 4;
        } else {
            bad = 5;
        }
    }
    atomic_fetch_add(&events, c);
    atomic_fetch_add(&cycles, 1);
    if (c == 0) {
        /* Nothing connected yet (or a generator not running). */
    } else if (bad || notes != n_sources || sysex != 4 * n_sources) {
        if (!atomic_load(&first_bad_reason))
            atomic_store(&first_bad_reason, bad ? bad : 10 + notes * 100 + sysex);
        atomic_fetch_add(&bad_cycles, 1);
    } else {
        atomic_fetch_add(&ok_cycles, 1);
    }
    return 0;
}

static int quit_process(jack_nframes_t n, void *arg) {
    (void)arg;
    (void)n;
    long c = atomic_fetch_add(&cycles, 1) + 1;
    return c >= quit_at ? 1 : 0;
}

static void on_signal(int s) {
    (void)s;
    quit = 1;
}

/* SIGUSR1: start counting afresh (the graph is complete now). */
static void on_reset(int s) {
    (void)s;
    atomic_store(&ok_cycles, 0);
    atomic_store(&bad_cycles, 0);
    atomic_store(&first_bad_reason, 0);
    atomic_store(&xruns, 0);
}

static int on_xrun(void *arg) {
    (void)arg;
    atomic_fetch_add(&xruns, 1);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: chain MODE NAME [ARG]\n");
        return 2;
    }
    const char *mode = argv[1];
    int arg = argc > 3 ? atoi(argv[3]) : 0;
    jack_status_t st;
    client = jack_client_open(argv[2], JackNoStartServer | JackUseExactName, &st);
    if (!client) {
        printf("FAIL open 0x%x\n", st);
        return 1;
    }
    ain = jack_port_register(client, "in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    aout = jack_port_register(client, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    min = jack_port_register(client, "midi_in", JACK_DEFAULT_MIDI_TYPE, JackPortIsInput, 0);
    mout = jack_port_register(client, "midi_out", JACK_DEFAULT_MIDI_TYPE, JackPortIsOutput, 0);
    if (!ain || !aout || !min || !mout) {
        printf("FAIL ports\n");
        return 1;
    }
    int r;
    if (strcmp(mode, "pass") == 0) {
        r = jack_set_process_callback(client, pass_process, NULL);
    } else if (strcmp(mode, "threadpass") == 0) {
        r = jack_set_process_thread(client, pass_thread, NULL);
        /* Both models at once are refused. */
        if (jack_set_process_callback(client, pass_process, NULL) == 0)
            printf("FAIL both models accepted\n");
    } else if (strcmp(mode, "midigen") == 0) {
        gen_id = arg;
        r = jack_set_process_callback(client, gen_process, NULL);
    } else if (strcmp(mode, "midicheck") == 0) {
        n_sources = arg;
        r = jack_set_process_callback(client, check_process, NULL);
    } else if (strcmp(mode, "quit") == 0) {
        quit_at = arg;
        r = jack_set_process_callback(client, quit_process, NULL);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    jack_set_xrun_callback(client, on_xrun, NULL);
    if (r || jack_activate(client)) {
        printf("FAIL activate\n");
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGUSR1, on_reset);
    printf("READY\n");
    int said_quit = 0;
    while (!quit) {
        usleep(10000);
        if (quit_at && !said_quit && atomic_load(&cycles) >= quit_at) {
            said_quit = 1;
            printf("QUIT\n");
        }
    }
    printf("SUMMARY cycles=%ld ok=%ld bad=%ld events=%ld lost=%ld max_size_bad=%ld reason=%d xruns=%ld\n",
           atomic_load(&cycles), atomic_load(&ok_cycles), atomic_load(&bad_cycles),
           atomic_load(&events), atomic_load(&lost), atomic_load(&max_size_bad),
           atomic_load(&first_bad_reason), atomic_load(&xruns));
    int rc = jack_client_close(client);
    printf("DONE close=%d\n", rc);
    return 0;
}
