/*
 * Transport as clients see it.
 *
 * Usage: transport MODE NAME [K]
 *   observer  only watches
 *   slowsync  also a slow-sync client: its sync callback says "ready" only
 *             on the K-th call after each position or state change
 *   master    also the timebase master: 120 bpm, 4/4, 1920 ticks per beat,
 *             bar/beat/tick computed from the frame
 * Every mode's process callback pushes what it sees through a
 * jack_ringbuffer (no stdio on the process thread); the main thread prints:
 *   T <state> <frame> <bbt 0/1> <bar> <beat> <tick>   when the state or the
 *       BBT validity changes, or the frame does not continue the last cycle
 *   S <state> <frame> <ready>   each sync callback call (slowsync)
 *   N <state> <frame>           each timebase call with new_pos (master)
 * It prints "READY" once active and exits on SIGTERM/SIGINT.
 */
#include <jack/jack.h>
#include <jack/ringbuffer.h>
#include <jack/transport.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char kind;
    int state;
    jack_nframes_t frame;
    int bbt, bar, beat, tick, ready;
} rec_t;

static jack_client_t *client;
static jack_ringbuffer_t *rb;
static int k_ready = 1;
static volatile sig_atomic_t quit;
static int last_state = -1, last_bbt = -1;
static jack_nframes_t expect_frame;
static int sync_calls;

static void push(rec_t r) {
    if (jack_ringbuffer_write_space(rb) >= sizeof r)
        jack_ringbuffer_write(rb, (const char *)&r, sizeof r);
}

static int process(jack_nframes_t n, void *arg) {
    (void)arg;
    jack_position_t pos;
    jack_transport_state_t st = jack_transport_query(client, &pos);
    int bbt = (pos.valid & JackPositionBBT) != 0;
    int jumped = st == JackTransportRolling && last_state == JackTransportRolling && pos.frame != expect_frame;
    if ((int)st != last_state || bbt != last_bbt || jumped) {
        rec_t r = {'T', (int)st, pos.frame, bbt, pos.bar, pos.beat, pos.tick, 0};
        push(r);
    }
    last_state = (int)st;
    last_bbt = bbt;
    expect_frame = pos.frame + (st == JackTransportRolling ? n : 0);
    return 0;
}

static int sync_cb(jack_transport_state_t st, jack_position_t *pos, void *arg) {
    (void)arg;
    sync_calls++;
    int ready = sync_calls >= k_ready;
    rec_t r = {'S', (int)st, pos->frame, 0, 0, 0, 0, ready};
    push(r);
    if (ready)
        sync_calls = 0;
    return ready;
}

static void timebase(jack_transport_state_t st, jack_nframes_t n, jack_position_t *pos, int new_pos,
                     void *arg) {
    (void)arg;
    (void)n;
    double rate = pos->frame_rate ? pos->frame_rate : 48000;
    double beats = pos->frame / rate * 2.0; /* 120 bpm */
    long b = (long)beats;
    pos->valid = JackPositionBBT;
    pos->beats_per_bar = 4;
    pos->beat_type = 4;
    pos->ticks_per_beat = 1920;
    pos->beats_per_minute = 120;
    pos->bar = (int)(b / 4) + 1;
    pos->beat = (int)(b % 4) + 1;
    pos->tick = (int)((beats - b) * 1920);
    pos->bar_start_tick = (pos->bar - 1) * 4 * 1920.0;
    if (new_pos) {
        rec_t r = {'N', (int)st, pos->frame, 1, pos->bar, pos->beat, pos->tick, 0};
        push(r);
    }
}

static void on_signal(int s) {
    (void)s;
    quit = 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: transport observer|slowsync|master NAME [K]\n");
        return 2;
    }
    const char *mode = argv[1];
    if (argc > 3)
        k_ready = atoi(argv[3]);
    client = jack_client_open(argv[2], JackNoStartServer | JackUseExactName, NULL);
    if (!client) {
        printf("FAIL open\n");
        return 1;
    }
    rb = jack_ringbuffer_create(64 * 1024);
    jack_ringbuffer_mlock(rb);
    jack_set_process_callback(client, process, NULL);
    if (strcmp(mode, "slowsync") == 0)
        jack_set_sync_callback(client, sync_cb, NULL);
    if (jack_activate(client)) {
        printf("FAIL activate\n");
        return 1;
    }
    if (strcmp(mode, "master") == 0) {
        int r = jack_set_timebase_callback(client, 1, timebase, NULL);
        if (r) {
            printf("FAIL timebase %d\n", r);
            return 1;
        }
        /* A second conditional request from the same client is fine; the
           tests check another client gets EBUSY. */
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    printf("READY\n");
    while (!quit) {
        rec_t r;
        while (jack_ringbuffer_read_space(rb) >= sizeof r) {
            jack_ringbuffer_read(rb, (char *)&r, sizeof r);
            if (r.kind == 'T')
                printf("T %d %u %d %d %d %d\n", r.state, r.frame, r.bbt, r.bar, r.beat, r.tick);
            else if (r.kind == 'S')
                printf("S %d %u %d\n", r.state, r.frame, r.ready);
            else
                printf("N %d %u %d %d\n", r.state, r.frame, r.bar, r.beat);
        }
        usleep(5000);
    }
    jack_client_close(client);
    jack_ringbuffer_free(rb);
    printf("DONE\n");
    return 0;
}
