/*
 * stereo: what a stereo player does when it starts. One client with two
 * outputs (L, R) that always write 1.0 and two inputs that note the first
 * cycle (jack_last_frame_time) in which they see a non-zero sample. It
 * connects out_L -> in_L and out_R -> in_R back to back with two
 * jack_connect calls, waits, and reports how many cycles apart the two
 * channels started, and whether both calls were made within one cycle
 * (jack_last_frame_time the same before the first and after the second);
 * then disconnects both and repeats, ROUNDS times.
 *
 * Output: "round K: same_cycle S apart N (connects took A and B us)" per
 * round, then "DONE together=T same_cycle=C split=X rounds=R", where split
 * counts rounds made within one cycle whose channels started apart.
 */
#define _GNU_SOURCE
#include <jack/jack.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

#define ROUNDS 20

static jack_client_t *client;
static jack_port_t *out[2], *in[2];
static atomic_uint first[2];   /* frame time of the first non-zero block + 1; 0 = none yet */
static atomic_int armed;

static int process(jack_nframes_t n, void *arg)
{
    (void)arg;
    jack_nframes_t now = jack_last_frame_time(client);
    for (int c = 0; c < 2; c++) {
        float *o = jack_port_get_buffer(out[c], n);
        for (jack_nframes_t i = 0; i < n; i++)
            o[i] = 1.0f;
        const float *x = jack_port_get_buffer(in[c], n);
        if (atomic_load(&armed) && atomic_load(&first[c]) == 0 && x[0] != 0.0f)
            atomic_store(&first[c], now + 1);
    }
    return 0;
}

int main(void)
{
    jack_status_t st;
    client = jack_client_open("stereo", JackNoStartServer, &st);
    if (!client) {
        fprintf(stderr, "stereo: cannot open a client (0x%x)\n", st);
        return 1;
    }
    const char *names[4] = {"out_L", "out_R", "in_L", "in_R"};
    for (int c = 0; c < 2; c++) {
        out[c] = jack_port_register(client, names[c], JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
        in[c] = jack_port_register(client, names[2 + c], JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    }
    if (!out[0] || !out[1] || !in[0] || !in[1] || jack_set_process_callback(client, process, NULL) ||
        jack_activate(client)) {
        fprintf(stderr, "stereo: cannot set up the client\n");
        return 1;
    }
    jack_nframes_t period = jack_get_buffer_size(client);
    int together = 0, same_cycle = 0, split = 0;
    for (int r = 0; r < ROUNDS; r++) {
        atomic_store(&first[0], 0);
        atomic_store(&first[1], 0);
        usleep(20000);
        atomic_store(&armed, 1);
        /* Back to back, as a player connects its two channels. */
        jack_nframes_t f0 = jack_last_frame_time(client);
        long t0 = now_us();
        int e1 = jack_connect(client, jack_port_name(out[0]), jack_port_name(in[0]));
        long t1 = now_us();
        int e2 = jack_connect(client, jack_port_name(out[1]), jack_port_name(in[1]));
        long t2 = now_us();
        int same = jack_last_frame_time(client) == f0;
        if (e1 || e2) {
            fprintf(stderr, "stereo: jack_connect failed (%d, %d)\n", e1, e2);
            return 1;
        }
        for (int w = 0; w < 200 && (!atomic_load(&first[0]) || !atomic_load(&first[1])); w++)
            usleep(5000);
        unsigned a = atomic_load(&first[0]), b = atomic_load(&first[1]);
        if (!a || !b) {
            fprintf(stderr, "stereo: a channel never started (%u, %u)\n", a, b);
            return 1;
        }
        long apart = ((long)b - (long)a) / (long)period;
        printf("round %d: same_cycle %d apart %ld (connects took %ld and %ld us)\n", r, same, apart,
               t1 - t0, t2 - t1);
        together += apart == 0;
        same_cycle += same;
        split += same && apart != 0;
        atomic_store(&armed, 0);
        jack_disconnect(client, jack_port_name(out[0]), jack_port_name(in[0]));
        jack_disconnect(client, jack_port_name(out[1]), jack_port_name(in[1]));
        usleep(20000);
    }
    printf("DONE together=%d same_cycle=%d split=%d rounds=%d\n", together, same_cycle, split,
           ROUNDS);
    fflush(stdout);
    jack_client_close(client);
    return 0;
}
