/*
 * Activation and the end of a process callback, as jackd's libjack does them.
 *
 * Usage: lifecycle MODE NAME [ARG]
 *   semthread  jack_set_process_thread with a thread function that, before
 *              its first jack_cycle_wait, calls the library (a callback
 *              setter, refused once the client is active) and then blocks
 *              on a semaphore that main posts only after jack_activate has
 *              returned (jackd's jack_activate waits for thread start and
 *              thread init only). Copies audio in -> out. Prints
 *              "RUNNING cycles=N early_rc=R" once it has run 20 cycles,
 *              then deactivates and closes: "DONE deactivate=D close=C".
 *   quitpass N audio in -> out; once armed, the process callback returns
 *              non-zero N cycles later. It is armed by the registration of a
 *              client named "z", in the client-registration callback, which
 *              then blocks the notification thread for 1.5 s (so the
 *              automatic deactivation waits that long). Prints "READY";
 *              on SIGTERM "SUMMARY cycles=N quit_at=Q", then calls
 *              jack_deactivate (already deactivated: must return 0) and
 *              closes: "DONE deactivate=D close=C".
 */
#include <jack/jack.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static jack_client_t *client;
static jack_port_t *ain, *aout;
static volatile sig_atomic_t quit;
static atomic_long cycles, quit_at;
static atomic_int early_rc = 99;
static int quit_after;
static sem_t go;

static void pass(jack_nframes_t n) {
    float *i = jack_port_get_buffer(ain, n);
    float *o = jack_port_get_buffer(aout, n);
    memcpy(o, i, n * sizeof(float));
}

static int on_xrun(void *arg) {
    (void)arg;
    return 0;
}

static void *sem_thread(void *arg) {
    (void)arg;
    /* The library, before the first cycle: must not deadlock. */
    atomic_store(&early_rc, jack_set_xrun_callback(client, on_xrun, NULL));
    /* Something the application does after jack_activate returned. */
    sem_wait(&go);
    for (;;) {
        jack_nframes_t n = jack_cycle_wait(client);
        pass(n);
        atomic_fetch_add(&cycles, 1);
        jack_cycle_signal(client, 0);
    }
    return NULL;
}

static int quit_process(jack_nframes_t n, void *arg) {
    (void)arg;
    pass(n);
    long c = atomic_fetch_add(&cycles, 1) + 1;
    long q = atomic_load(&quit_at);
    return q && c >= q ? 1 : 0;
}

static void on_client(const char *name, int registered, void *arg) {
    (void)arg;
    if (registered && strcmp(name, "z") == 0 && !atomic_load(&quit_at)) {
        atomic_store(&quit_at, atomic_load(&cycles) + quit_after);
        /* Keep the notification thread busy while the client quits. */
        usleep(1500000);
    }
}

static void on_signal(int s) {
    (void)s;
    quit = 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: lifecycle MODE NAME [ARG]\n");
        return 2;
    }
    const char *mode = argv[1];
    client = jack_client_open(argv[2], JackNoStartServer | JackUseExactName, NULL);
    if (!client) {
        printf("FAIL open\n");
        return 1;
    }
    ain = jack_port_register(client, "in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    aout = jack_port_register(client, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    if (!ain || !aout) {
        printf("FAIL ports\n");
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    if (strcmp(mode, "semthread") == 0) {
        sem_init(&go, 0, 0);
        if (jack_set_process_thread(client, sem_thread, NULL) != 0) {
            printf("FAIL set_process_thread\n");
            return 1;
        }
        int r = jack_activate(client);
        sem_post(&go);
        printf("ACTIVATED %d\n", r);
        for (int k = 0; k < 1000 && atomic_load(&cycles) < 20; k++)
            usleep(10000);
        printf("RUNNING cycles=%ld early_rc=%d\n", atomic_load(&cycles), atomic_load(&early_rc));
    } else if (strcmp(mode, "quitpass") == 0) {
        quit_after = argc > 3 ? atoi(argv[3]) : 5;
        if (jack_set_process_callback(client, quit_process, NULL) != 0 ||
            jack_set_client_registration_callback(client, on_client, NULL) != 0 ||
            jack_activate(client) != 0) {
            printf("FAIL activate\n");
            return 1;
        }
        printf("READY\n");
        while (!quit)
            usleep(10000);
        printf("SUMMARY cycles=%ld quit_at=%ld\n", atomic_load(&cycles), atomic_load(&quit_at));
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    int d = jack_deactivate(client);
    int c = jack_client_close(client);
    printf("DONE deactivate=%d close=%d\n", d, c);
    return 0;
}
