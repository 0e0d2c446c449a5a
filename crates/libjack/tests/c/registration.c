/*
 * When port registrations are announced, as jackd does it: a client's
 * ports are announced when it activates (to every active client, itself
 * included) and withdrawn when it deactivates; a port registered or
 * unregistered while its client is inactive is not announced; in the
 * unregistration callback jack_port_by_id still names the port removed.
 *
 * Client A (active) watches client B go through these steps. After each
 * step the callbacks' lines are printed, A's then B's, without port ids
 * (they differ between servers), so the output is the same on jackd and
 * on resound and the test compares them.
 *
 * Usage: registration
 */
#include <jack/jack.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static jack_client_t *A, *B;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char seen[2][4096];

static void note(int who, jack_client_t *c, jack_port_id_t id, int reg) {
    jack_port_t *p = jack_port_by_id(c, id);
    const char *name = p ? jack_port_name(p) : NULL;
    char line[512];
    snprintf(line, sizeof line, "%c: port %s %s\n", who ? 'B' : 'A', reg ? "registered" : "unregistered",
             name ? name : "(null)");
    pthread_mutex_lock(&lock);
    strncat(seen[who], line, sizeof seen[who] - strlen(seen[who]) - 1);
    pthread_mutex_unlock(&lock);
}

static void on_a(jack_port_id_t id, int reg, void *arg) {
    (void)arg;
    note(0, A, id, reg);
}

static void on_b(jack_port_id_t id, int reg, void *arg) {
    (void)arg;
    note(1, B, id, reg);
}

static void step(const char *what) {
    usleep(250000);
    pthread_mutex_lock(&lock);
    printf("%s%s", seen[0], seen[1]);
    seen[0][0] = seen[1][0] = 0;
    pthread_mutex_unlock(&lock);
    printf("-- %s\n", what);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    A = jack_client_open("watcher", JackNoStartServer, NULL);
    B = jack_client_open("subject", JackNoStartServer, NULL);
    if (!A || !B) {
        printf("cannot open clients\n");
        return 1;
    }
    jack_set_port_registration_callback(A, on_a, NULL);
    jack_set_port_registration_callback(B, on_b, NULL);
    jack_activate(A);
    step("start");
    jack_port_t *p = jack_port_register(B, "p", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    step("subject registers p while inactive");
    jack_activate(B);
    step("subject activates");
    jack_port_t *q = jack_port_register(B, "q", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    step("subject registers q while active");
    jack_port_unregister(B, q);
    step("subject unregisters q while active");
    jack_deactivate(B);
    step("subject deactivates");
    jack_port_unregister(B, p);
    step("subject unregisters p while inactive");
    jack_port_register(B, "r", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    step("subject registers r while inactive");
    jack_activate(B);
    step("subject activates again");
    jack_client_close(B);
    step("subject closes while active");
    jack_client_close(A);
    printf("DONE\n");
    return 0;
}
