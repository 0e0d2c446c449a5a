/*
 * A JACK internal client object (loaded into the server with jack_load) that
 * tells whether its process callback still runs once jack_finish has been
 * called. jackd closes an internal client (deactivating it: its process
 * thread stops) before it calls jack_finish, and objects rely on it:
 * jack_finish frees what the process callback uses (the distribution's
 * inprocess.so frees its port pair there).
 *
 * Load: jack_load -i REPORT_PATH NAME finish_order
 *   jack_initialize registers in/out, copies in -> out every cycle and
 *   activates. jack_finish marks itself called, waits 50 ms (about ten
 *   cycles of a 5.33 ms period, were the process thread still running),
 *   then writes "arg=set|null cycles=N after_finish=M" to REPORT_PATH and
 *   frees its process argument.
 */
#include <jack/jack.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    jack_port_t *in, *out;
} port_pair;

static atomic_int finish_called;
static atomic_int cycles;
static atomic_int after_finish;
static char report_path[1024];

static int process(jack_nframes_t n, void *arg)
{
    port_pair *pp = arg;
    if (atomic_load(&finish_called))
        atomic_fetch_add(&after_finish, 1);
    atomic_fetch_add(&cycles, 1);
    float *in = jack_port_get_buffer(pp->in, n);
    float *out = jack_port_get_buffer(pp->out, n);
    if (in && out)
        memcpy(out, in, n * sizeof(float));
    return 0;
}

int jack_initialize(jack_client_t *client, const char *init)
{
    snprintf(report_path, sizeof report_path, "%s", init ? init : "");
    port_pair *pp = calloc(1, sizeof *pp);
    if (!pp)
        return 1;
    pp->in = jack_port_register(client, "in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    pp->out = jack_port_register(client, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    if (!pp->in || !pp->out)
        return 2;
    if (jack_set_process_callback(client, process, pp))
        return 3;
    return jack_activate(client) ? 4 : 0;
}

void jack_finish(void *arg)
{
    atomic_store(&finish_called, 1);
    usleep(50000);
    FILE *f = fopen(report_path, "w");
    if (f) {
        fprintf(f, "arg=%s cycles=%d after_finish=%d\n", arg ? "set" : "null",
                atomic_load(&cycles), atomic_load(&after_finish));
        fclose(f);
    }
    free(arg);
}
